/* cli_codex.c: `switchyard codex attach|detach|status`: the options, the
 * Codex home and the gateway's address (the gateway serving this database,
 * found through admin/gateway_find.h, and whether it answers, serves this
 * database and takes the key attach wrote); what
 * attaching means to config.toml and auth.json is codex/codex_attach.c's. */
#include "admin/cli_internal.h"
#include "admin/gateway_find.h"
#include "base/sbuf.h"
#include "codex/codex_attach.h"
#include "core/config.h"
#include "store/store.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

void cli_usage_codex(FILE *f)
{
    fputs("usage: switchyard codex attach [--codex-home DIR [--create]] [--gateway HOST:PORT|URL] [--offline]\n"
          "                               [--websockets] [--db PATH]\n"
          "       switchyard codex detach [--codex-home DIR] [--force] [--db PATH]\n"
          "       switchyard codex status [--codex-home DIR] [--db PATH]\n"
          "  the Codex home defaults to $CODEX_HOME, else ~/.codex; attach refuses one that does not\n"
          "  exist unless --create. The gateway defaults to the one serving this database (the address\n"
          "  it recorded beside the database), else the configured listen address ($SWITCHYARD_LISTEN,\n"
          "  else 127.0.0.1:8787); attach checks that it answers (GET /health) and refuses when none\n"
          "  does, unless --offline. attach points Codex at the gateway with a platform key of its own\n"
          "  (--websockets: over the gateway's Responses WebSocket, supports_websockets = true); detach\n"
          "  hands config.toml back; status checks that the gateway at the URL written answers, serves\n"
          "  this database and takes the key, and exits 1 when not (see docs/codex.md)\n",
          f);
}

/* ---------- codex attach / detach / status ---------- */

typedef struct cli_codex_args {
    const char *db, *home, *gateway;
    int force, help, websockets, offline, create;
    char gateway_url[STORE_RUNFILE_URL_MAX]; /* --gateway as a URL */
} cli_codex_args;

/* The Codex home for attach: it must exist (a mistyped --codex-home must
 * not become a new, empty home) unless --create. 0 ok, -1 printed. */
static int cli_codex_home_attach(const char *cmd, const cli_codex_args *a, char *home, size_t n)
{
    char err[512] = "";
    if (codex_home_resolve(a->home, 0, home, n, err, sizeof err) != 0) {
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
        return -1;
    }
    struct stat sb;
    if (stat(home, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            return 0;
        fprintf(stderr, "switchyard %s: the Codex home %s is not a directory\n", cmd, home);
        return -1;
    }
    if (errno != ENOENT) {
        fprintf(stderr, "switchyard %s: cannot use the Codex home %s: %s\n", cmd, home, strerror(errno));
        return -1;
    }
    if (!a->create) {
        fprintf(stderr,
                "switchyard %s: the Codex home %s does not exist (mistyped?); pass --create to create it\n", cmd,
                home);
        return -1;
    }
    if (codex_home_resolve(home, 1, home, n, err, sizeof err) != 0) {
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
        return -1;
    }
    return 0;
}

/* Parses the codex options (--force only for detach; --gateway, --offline,
 * --create and --websockets only for attach) and opens the store; NULL
 * with *rc the exit code when the command should stop. */
static store *cli_codex_open(const char *cmd, int argc, char **argv, cli_codex_args *a, char *home, size_t n,
                             int *rc)
{
    int attach = strcmp(cmd, "codex attach") == 0, detach = strcmp(cmd, "codex detach") == 0;
    int f_force = 0, f_ws = 0, f_off = 0, f_create = 0;
    const char *gw = NULL;
    const cli_opt opts[] = {{"db", &a->db, NULL},        {"codex-home", &a->home, NULL},
                            {"gateway", &gw, NULL},      {"force", NULL, &f_force},
                            {"websockets", NULL, &f_ws}, {"offline", NULL, &f_off},
                            {"create", NULL, &f_create}, {"help", NULL, &a->help},
                            {NULL, NULL, NULL}};
    *rc = cli_parse_or_usage(cmd, argc, argv, opts, &a->help, cli_usage_codex);
    if (*rc >= 0)
        return NULL;
    const char *wrong = f_force && !detach ? "--force"
                        : f_ws && !attach  ? "--websockets"
                        : gw && !attach    ? "--gateway"
                        : f_off && !attach ? "--offline"
                        : f_create && !attach ? "--create"
                                              : NULL;
    if (wrong) {
        fprintf(stderr, "switchyard %s: %s applies to %s only\n", cmd, wrong,
                strcmp(wrong, "--force") == 0 ? "detach" : "attach");
        *rc = CLI_EXIT_USAGE;
        return NULL;
    }
    a->force = f_force, a->websockets = f_ws, a->offline = f_off, a->create = f_create, a->gateway = gw;
    char err[512] = "";
    if (gw && gateway_find_url(gw, a->gateway_url, sizeof a->gateway_url, err, sizeof err) != 0) {
        fprintf(stderr, "switchyard %s: --gateway %s\n", cmd, err);
        *rc = CLI_EXIT_USAGE;
        return NULL;
    }
    if (attach ? cli_codex_home_attach(cmd, a, home, n) != 0
               : codex_home_resolve(a->home, 0, home, n, err, sizeof err) != 0) {
        if (err[0])
            fprintf(stderr, "switchyard %s: %s\n", cmd, err);
        *rc = CLI_EXIT_FAIL;
        return NULL;
    }
    store *s = cli_store_open(cmd, a->db);
    *rc = s ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    return s;
}

static int cli_codex_done(const char *cmd, store *s, int rc, sbuf *report, const char *err)
{
    if (report->len)
        fputs(report->p, stdout);
    if (rc < 0)
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    sbuf_free(report);
    store_close(s);
    return rc < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

/* The gateway to attach to: --gateway (host:port or a URL), else the one
 * serving this database, else the configured listen address. -1 printed
 * (the exit code in *rc). */
static int cli_codex_gateway(const char *cmd, const cli_codex_args *a, char *gw, size_t n, int *rc)
{
    (void)cmd;
    if (a->gateway) {
        snprintf(gw, n, "%s", a->gateway_url);
        return 0;
    }
    gateway_found found;
    gateway_find(cli_db_path(a->db), &found);
    if (found.answering) {
        snprintf(gw, n, "%s", found.rf.url);
        return 0;
    }
    sy_config c;
    config_defaults(&c);
    if (config_from_env(&c) < 0) {
        *rc = CLI_EXIT_USAGE;
        return -1;
    }
    codex_gateway_url(c.listen_host, c.listen_port, gw, n);
    return 0;
}

int cli_codex_attach(int argc, char **argv)
{
    const char *cmd = "codex attach";
    cli_codex_args a = {0};
    char home[PATH_MAX], err[1024] = "", gw[STORE_RUNFILE_URL_MAX];
    int rc;
    store *s = cli_codex_open(cmd, argc, argv, &a, home, sizeof home, &rc);
    if (!s)
        return rc;
    if (cli_codex_gateway(cmd, &a, gw, sizeof gw, &rc) != 0) {
        store_close(s);
        return rc;
    }
    char why[300] = "", inst[STORE_RUNFILE_INSTANCE] = "";
    if (!a.offline && gateway_find_probe(gw, GATEWAY_FIND_TIMEOUT_MS, inst, sizeof inst, why, sizeof why) != 0) {
        fprintf(stderr,
                "switchyard %s: no gateway answers at %s (%s); start one (switchyard serve --db %s) or name it with "
                "--gateway HOST:PORT; --offline attaches anyway\n",
                cmd, gw, why, store_path(s));
        store_close(s);
        return CLI_EXIT_FAIL;
    }
    gateway_found found;
    memset(&found, 0, sizeof found);
    if (!a.offline && !a.gateway && inst[0] && (gateway_find(cli_db_path(a.db), &found), !found.answering) &&
        (!found.recorded || strcmp(inst, found.rf.instance) != 0)) {
        /* the listen address, where another database's gateway answers: it
         * would refuse the key minted here, and Codex would see only 401s
         * while `codex status` said attached (issue 34) */
        fprintf(stderr,
                "switchyard %s: a gateway answers at %s, but it does not serve %s (%s), so it would refuse the key "
                "attach makes; nothing was changed. Start this database's gateway (switchyard serve --db %s), or name "
                "that one with --gateway HOST:PORT if it does serve this database\n",
                cmd, gw, store_path(s), found.recorded ? "it is not the gateway this database records"
                                                       : "no gateway has recorded serving it", store_path(s));
        store_close(s);
        return CLI_EXIT_FAIL;
    }
    sbuf report = SBUF_INIT;
    rc = codex_attach_ws(s, home, gw, a.websockets, &report, err, sizeof err);
    if (rc == 0 && a.offline)
        sbuf_printf(&report, "  (--offline: not checked that a gateway answers at %s)\n", gw);
    return cli_codex_done(cmd, s, rc, &report, err);
}

/* What `codex status` checks, for cli_codex_check. */
typedef struct cli_codex_seen {
    const char *db; /* this database's path, as given */
    int bad;        /* set when Codex could not work through what attach wrote */
} cli_codex_seen;

/* codex_answers_fn: what attach checked, again, and the key: a gateway
 * answers GET /health at what attach wrote (without its /v1), it is the
 * one this database's run file names (the instance /health says), and GET
 * /v1/models takes the key the file holds. ud: a cli_codex_seen. */
static void cli_codex_check(const char *base_url, const char *key, void *ud, codex_check *out)
{
    cli_codex_seen *seen = ud;
    char url[STORE_RUNFILE_URL_MAX], why[300] = "", inst[STORE_RUNFILE_INSTANCE] = "";
    size_t n = strlen(base_url);
    while (n && base_url[n - 1] == '/')
        n--;
    if (n >= 3 && !memcmp(base_url + n - 3, "/v1", 3))
        n -= 3;
    snprintf(url, sizeof url, "%.*s", (int)(n < sizeof url ? n : sizeof url - 1), base_url);
    out->ok = 0;
    seen->bad = 1;
    if (gateway_find_probe(url, GATEWAY_FIND_TIMEOUT_MS, inst, sizeof inst, why, sizeof why) != 0) {
        snprintf(out->head, sizeof out->head, "no gateway answers at %.400s", base_url);
        snprintf(out->detail, sizeof out->detail, "(%.700s)", why);
        return;
    }
    store_runfile rf;
    char err[256] = "";
    int recorded = store_runfile_read(seen->db, &rf, err, sizeof err) == 1;
    if (inst[0] && (!recorded || strcmp(inst, rf.instance) != 0)) {
        snprintf(out->head, sizeof out->head, "the gateway at %.200s does not serve %.280s", url, seen->db);
        if (recorded)
            snprintf(out->detail, sizeof out->detail,
                     "another database's gateway answers there (instance %s; this database records instance %s at "
                     "%.200s): start this database's gateway there (switchyard serve --db %.200s), or attach again where it serves",
                     inst, rf.instance, rf.url, seen->db);
        else
            snprintf(out->detail, sizeof out->detail,
                     "another database's gateway answers there (no gateway has recorded serving this database): "
                     "start this database's gateway there (switchyard serve --db %.300s), or attach again where it serves", seen->db);
        return;
    }
    long st = key[0] ? gateway_find_key_check(url, key, why, sizeof why) : 0;
    if (st == 401) { /* a key attach has just minted: the gateway takes it from its next tick (once a second) */
        struct timespec pause = {1, 200000000};
        nanosleep(&pause, NULL);
        st = gateway_find_key_check(url, key, why, sizeof why);
    }
    if (!key[0] || st == 401 || st == 0) {
        snprintf(out->head, sizeof out->head, "the gateway at %.400s does not take the key", url);
        if (!key[0])
            snprintf(out->detail, sizeof out->detail, "(the file no longer holds the key attach wrote)");
        else if (st)
            snprintf(out->detail, sizeof out->detail,
                     "GET /v1/models answered 401: the key is revoked or not this database's; detach and attach "
                     "again for a new one");
        else
            snprintf(out->detail, sizeof out->detail, "GET /v1/models got no answer (%.700s)", why);
        return;
    }
    out->ok = 1;
    seen->bad = 0;
    snprintf(out->detail, sizeof out->detail, "the gateway at %.300s serves %.400s and takes the key", url, seen->db);
}

/* detach (detach = 1) or status: the same options, the same output. */
static int cli_codex_look(const char *cmd, int argc, char **argv, int detach)
{
    cli_codex_args a = {0};
    char home[PATH_MAX], err[1024] = "";
    int rc;
    store *s = cli_codex_open(cmd, argc, argv, &a, home, sizeof home, &rc);
    if (!s)
        return rc;
    sbuf report = SBUF_INIT;
    cli_codex_seen seen = {store_path(s), 0};
    rc = detach ? codex_detach(s, home, a.force, &report, err, sizeof err)
                : codex_status_check(s, home, cli_codex_check, &seen, &report, err, sizeof err);
    rc = cli_codex_done(cmd, s, rc, &report, err);
    /* attached, but Codex would spin on "Reconnecting..." or get 401s: a
     * script checking `codex status` must not take that for working */
    return rc == CLI_EXIT_OK && seen.bad ? CLI_EXIT_FAIL : rc;
}

int cli_codex_detach(int argc, char **argv) { return cli_codex_look("codex detach", argc, argv, 1); }
int cli_codex_status(int argc, char **argv) { return cli_codex_look("codex status", argc, argv, 0); }
