/* cli_codex.c: `switchyard codex attach|detach|status`: the options, the
 * Codex home and the gateway URL; what attaching means to config.toml and
 * auth.json is codex/codex_attach.c's. */
#include "admin/cli_internal.h"
#include "base/sbuf.h"
#include "codex/codex_attach.h"
#include "core/config.h"
#include "store/store.h"
#include <limits.h>
#include <stdio.h>
#include <string.h>

void cli_usage_codex(FILE *f)
{
    fputs("usage: switchyard codex attach [--codex-home DIR] [--gateway URL] [--websockets] [--db PATH]\n"
          "       switchyard codex detach [--codex-home DIR] [--force] [--db PATH]\n"
          "       switchyard codex status [--codex-home DIR] [--db PATH]\n"
          "  the Codex home defaults to $CODEX_HOME, else ~/.codex; the gateway URL to the listen\n"
          "  address ($SWITCHYARD_LISTEN, else 127.0.0.1:8787). attach points Codex at the gateway\n"
          "  with a platform key of its own (--websockets: over the gateway's Responses WebSocket,\n"
          "  supports_websockets = true); detach hands config.toml back (see docs/codex.md)\n",
          f);
}

/* ---------- codex attach / detach / status ---------- */

typedef struct cli_codex_args {
    const char *db, *home, *gateway;
    int force, help, websockets;
} cli_codex_args;

/* Parses the codex options (force only for detach) and opens the store;
 * NULL with *rc the exit code when the command should stop. */
static store *cli_codex_open(const char *cmd, int argc, char **argv, cli_codex_args *a, int create, char *home,
                             size_t n, int *rc)
{
    int nope = 0, nows = 0;
    const cli_opt opts[] = {{"db", &a->db, NULL},
                            {"codex-home", &a->home, NULL},
                            {"gateway", &a->gateway, NULL},
                            {"force", NULL, strcmp(cmd, "codex detach") == 0 ? &a->force : &nope},
                            {"websockets", NULL, strcmp(cmd, "codex attach") == 0 ? &a->websockets : &nows},
                            {"help", NULL, &a->help},
                            {NULL, NULL, NULL}};
    *rc = cli_parse_or_usage(cmd, argc, argv, opts, &a->help, cli_usage_codex);
    if (*rc >= 0)
        return NULL;
    if (nope || nows || (a->gateway && strcmp(cmd, "codex attach") != 0)) {
        fprintf(stderr, "switchyard %s: %s applies to %s only\n", cmd,
                nope ? "--force" : nows ? "--websockets" : "--gateway", nope ? "detach" : "attach");
        *rc = CLI_EXIT_USAGE;
        return NULL;
    }
    char err[512] = "";
    if (codex_home_resolve(a->home, create, home, n, err, sizeof err) != 0) {
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

int cli_codex_attach(int argc, char **argv)
{
    const char *cmd = "codex attach";
    cli_codex_args a = {0};
    char home[PATH_MAX], err[1024] = "", gw[600];
    int rc;
    store *s = cli_codex_open(cmd, argc, argv, &a, 1, home, sizeof home, &rc);
    if (!s)
        return rc;
    if (a.gateway) {
        snprintf(gw, sizeof gw, "%s", a.gateway);
    } else {
        sy_config c;
        config_defaults(&c);
        if (config_from_env(&c) < 0) {
            store_close(s);
            return CLI_EXIT_USAGE;
        }
        codex_gateway_url(c.listen_host, c.listen_port, gw, sizeof gw);
    }
    if (strncmp(gw, "http://", 7) != 0 && strncmp(gw, "https://", 8) != 0) {
        fprintf(stderr, "switchyard %s: --gateway must start with http:// or https://\n", cmd);
        store_close(s);
        return CLI_EXIT_USAGE;
    }
    sbuf report = SBUF_INIT;
    rc = codex_attach_ws(s, home, gw, a.websockets, &report, err, sizeof err);
    return cli_codex_done(cmd, s, rc, &report, err);
}

/* detach (detach = 1) or status: the same options, the same output. */
static int cli_codex_look(const char *cmd, int argc, char **argv, int detach)
{
    cli_codex_args a = {0};
    char home[PATH_MAX], err[1024] = "";
    int rc;
    store *s = cli_codex_open(cmd, argc, argv, &a, 0, home, sizeof home, &rc);
    if (!s)
        return rc;
    sbuf report = SBUF_INIT;
    rc = detach ? codex_detach(s, home, a.force, &report, err, sizeof err)
                : codex_status(s, home, &report, err, sizeof err);
    return cli_codex_done(cmd, s, rc, &report, err);
}

int cli_codex_detach(int argc, char **argv) { return cli_codex_look("codex detach", argc, argv, 1); }
int cli_codex_status(int argc, char **argv) { return cli_codex_look("codex status", argc, argv, 0); }
