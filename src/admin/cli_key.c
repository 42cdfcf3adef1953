/* cli_key.c: `switchyard key add|update|list|prefer|revoke`, the platform
 * keys clients present. A new key is printed exactly once, by `key add`, as
 * its last line; only its hash is stored. */
#include "admin/cli_internal.h"
#include "base/budget.h"
#include "base/sbuf.h"
#include "store/store.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void cli_usage_key(FILE *f)
{
    fputs("usage: switchyard key add --name N [RULES] [--db PATH]\n"
          "       switchyard key update KEY [RULES] [--db PATH]\n"
          "       switchyard key list [--json] [--db PATH]\n"
          "       switchyard key prefer KEY (--account ACCOUNT | --clear) [--db PATH]\n"
          "       switchyard key revoke KEY [--db PATH]\n"
          "  KEY:   --name NAME | --id ID | --prefix PREFIX (as key list shows it, or more of the key)\n"
          "  RULES: --models LIST    allowed models, comma-separated exact names or patterns ('gpt-5*')\n"
          "         --all-models     allow every model again (update)\n"
          "         --rpm N          requests per minute for this key (0 = unlimited)\n"
          "         --expires WHEN   YYYY-MM-DD (valid through that day, UTC), YYYY-MM-DDTHH:MM:SSZ, or never\n"
          "         --budget USD     spending budget (0 = none); --budget-period month (default) or <N>d\n"
          "  key add prints the new key once, as its last line; only its hash is stored;\n"
          "  names are unique among live keys; a name two old keys share must be chosen by --id\n"
          "  key list shows each key's spend today (UTC) and in its budget's period, and its last request\n"
          "  (from the request log's newest 500 000 rows of the last 90 days)\n",
          f);
}

/* ---------- choosing a key ---------- */

/* The key --name, --id or --prefix names (exactly one of them): opens the
 * store and returns it with *id set; NULL with *rc the exit code, the
 * reason printed. */
static store *cli_key_open_selected(const char *cmd, const char *db, const char *name, const char *idtext,
                                    const char *prefix, int64_t *id, int *rc)
{
    int given = !!name + !!idtext + !!prefix;
    if (given != 1) {
        fprintf(stderr, "switchyard %s: name the key with one of --name, --id or --prefix\n", cmd);
        *rc = CLI_EXIT_USAGE;
        return NULL;
    }
    if ((name && !*name) || (prefix && !*prefix)) {
        fprintf(stderr, "switchyard %s: --%s needs a value\n", cmd, name ? "name" : "prefix");
        *rc = CLI_EXIT_USAGE;
        return NULL;
    }
    int64_t want = 0;
    if (idtext) {
        int v = 0;
        if (cli_parse_int(cmd, "id", idtext, 1, &v) != 0) {
            *rc = CLI_EXIT_USAGE;
            return NULL;
        }
        want = v;
    }
    store *s = cli_store_open(cmd, db);
    if (!s) {
        *rc = CLI_EXIT_FAIL;
        return NULL;
    }
    char err[512] = "";
    int found = store_key_select(s, want, prefix, name, id, err, sizeof err);
    if (found != 1) {
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
        store_close(s);
        *rc = CLI_EXIT_FAIL;
        return NULL;
    }
    return s;
}

/* ---------- key add / update / list ---------- */

/* The rule flags `key add` and `key update` share. */
typedef struct cli_key_rules {
    const char *models, *rpm, *expires, *budget, *period;
    int all_models;
} cli_key_rules;


/* "YYYY-MM-DD" (valid through that day: expires at the next midnight UTC),
 * "YYYY-MM-DDTHH:MM:SSZ", or "never" (0). -1 if unreadable. */
static int cli_parse_expiry(const char *text, int64_t *out)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (strcmp(text, "never") == 0) {
        *out = 0;
        return 0;
    }
    const char *end = strptime(text, "%Y-%m-%d", &tm);
    int day = end && !*end;
    if (!day) {
        memset(&tm, 0, sizeof tm);
        end = strptime(text, "%Y-%m-%dT%H:%M:%SZ", &tm);
        if (!end || *end)
            return -1;
    }
    int64_t t = (int64_t)timegm(&tm);
    *out = day ? t + 86400 : t;
    return 0;
}

/* Turns the rule flags into a key_update; prints the error and returns -1. */
static int cli_key_rules_parse(const char *cmd, const cli_key_rules *r, key_update *u)
{
    memset(u, 0, sizeof *u);
    if (r->models && r->all_models) {
        fprintf(stderr, "switchyard %s: give --models or --all-models, not both\n", cmd);
        return -1;
    }
    if (r->models && !*r->models) {
        fprintf(stderr, "switchyard %s: --models needs at least one model name or pattern\n", cmd);
        return -1;
    }
    u->set_models = r->models || r->all_models;
    u->allowed_models = r->models;
    if (r->rpm) {
        if (cli_parse_int(cmd, "rpm", r->rpm, 0, &u->max_rpm) != 0)
            return -1;
        u->set_rpm = 1;
    }
    if (r->expires) {
        if (cli_parse_expiry(r->expires, &u->expires_at) != 0) {
            fprintf(stderr, "switchyard %s: --expires must be YYYY-MM-DD, YYYY-MM-DDTHH:MM:SSZ or never, got '%s'\n",
                    cmd, r->expires);
            return -1;
        }
        u->set_expires = 1;
    }
    if (cli_budget_parse(cmd, r->budget, r->period, &u->budget_usd) != 0)
        return -1;
    u->set_budget = r->budget != NULL;
    u->set_period = r->period != NULL;
    u->budget_period = r->period;
    return 0;
}

int cli_key_add(int argc, char **argv)
{
    const char *cmd = "key add", *db = NULL, *name = NULL;
    int help = 0;
    cli_key_rules r = {0};
    const cli_opt opts[] = {{"db", &db, NULL},           {"name", &name, NULL},      {"models", &r.models, NULL},
                            {"rpm", &r.rpm, NULL},       {"expires", &r.expires, NULL}, {"budget", &r.budget, NULL},
                            {"budget-period", &r.period, NULL}, {"help", NULL, &help}, {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &help, cli_usage_key);
    if (rc >= 0)
        return rc;
    if (!name || !*name) {
        fprintf(stderr, "switchyard %s: --name is required\n", cmd);
        return CLI_EXIT_USAGE;
    }
    key_update u;
    if (cli_key_rules_parse(cmd, &r, &u) != 0)
        return CLI_EXIT_USAGE;
    store *s = cli_store_open_new(cmd, db);
    if (!s)
        return CLI_EXIT_FAIL;
    char key[128], err[512] = "", prefix[16];
    int64_t id = 0;
    if (store_key_live_by_name(s, name, &id, prefix) == 1) {
        fprintf(stderr, "switchyard %s: a key named '%s' exists (id %lld, prefix %s); choose another name, or revoke "
                        "it first with 'switchyard key revoke --id %lld'\n", cmd, name, (long long)id, prefix,
                (long long)id);
        store_close(s);
        return CLI_EXIT_FAIL;
    }
    rc = store_key_add(s, name, key, sizeof key, &id, err, sizeof err);
    if (rc == 0 && (u.set_models || u.set_rpm || u.set_expires || u.set_budget || u.set_period) &&
        store_key_update(s, id, NULL, &u, err, sizeof err) < 0)
        rc = -1; /* the key exists without its rules: say so rather than print it */
    if (rc == 0) {
        printf("added platform key %s (id %lld, prefix %.7s); it is shown only this once:\n", name,
               (long long)id, key);
        printf("%s\n", key);
        memset(key, 0, sizeof key);
    } else {
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    }
    store_close(s);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

int cli_key_update(int argc, char **argv)
{
    const char *cmd = "key update", *db = NULL, *name = NULL, *idtext = NULL, *prefix = NULL;
    int help = 0;
    cli_key_rules r = {0};
    const cli_opt opts[] = {{"db", &db, NULL},         {"name", &name, NULL},          {"models", &r.models, NULL},
                            {"id", &idtext, NULL},     {"prefix", &prefix, NULL},
                            {"all-models", NULL, &r.all_models}, {"rpm", &r.rpm, NULL}, {"expires", &r.expires, NULL},
                            {"budget", &r.budget, NULL}, {"budget-period", &r.period, NULL},
                            {"help", NULL, &help},      {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &help, cli_usage_key);
    if (rc >= 0)
        return rc;
    key_update u;
    if (cli_key_rules_parse(cmd, &r, &u) != 0)
        return CLI_EXIT_USAGE;
    if (!u.set_models && !u.set_rpm && !u.set_expires && !u.set_budget && !u.set_period) {
        fprintf(stderr, "switchyard %s: nothing to change (give --models, --all-models, --rpm, --expires, --budget"
                        " or --budget-period)\n", cmd);
        return CLI_EXIT_USAGE;
    }
    int64_t id = 0;
    store *s = cli_key_open_selected(cmd, db, name, idtext, prefix, &id, &rc);
    if (!s)
        return rc;
    char err[512] = "";
    int n = store_key_update(s, id, NULL, &u, err, sizeof err);
    if (n > 0)
        printf("updated key id %lld\n", (long long)id);
    else
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    store_close(s);
    return n > 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

/* A key's spend and use, from the request log (store_keys_activity): today
 * (UTC), its budget window's spend when it has a budget, its last request. */
typedef struct cli_key_use {
    int64_t requests_today;
    double usd_today, period_usd, last_used_at; /* period_usd < 0: no budget; last_used_at 0: not seen */
} cli_key_use;

/* How far back `key list` looks for a key's last request: the request log's
 * default retention (store.h); older rows are rarely kept anyway. */
#define CLI_KEY_LAST_USED_DAYS 90

typedef struct cli_key_uses {
    const platform_key *k;
    cli_key_use *u;
    size_t n;
} cli_key_uses;

static void cli_key_activity(void *ud, const store_key_activity *a)
{
    cli_key_uses *x = ud;
    for (size_t i = 0; i < x->n; i++)
        if (x->k[i].id == a->key_id) {
            x->u[i].requests_today = a->requests_today;
            x->u[i].usd_today = a->usd_today;
            x->u[i].last_used_at = a->last_used_at;
        }
}

/* Each key's use into u[0..n); -1 when the log could not be read. */
static int cli_key_uses_load(store *s, const platform_key *k, size_t n, cli_key_use *u)
{
    double now = (double)time(NULL), day = floor(now / 86400) * 86400;
    for (size_t i = 0; i < n; i++)
        u[i] = (cli_key_use){0, 0, -1, 0};
    cli_key_uses x = {k, u, n};
    if (store_keys_activity(s, day, now - CLI_KEY_LAST_USED_DAYS * 86400.0, cli_key_activity, &x) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!(k[i].budget_usd > 0))
            continue;
        double start, end;
        budget_window(k[i].budget_period, now, &start, &end);
        if (store_spent_since(s, 1, k[i].id, start, &u[i].period_usd) != 0)
            return -1;
    }
    return 0;
}

static void cli_key_time(double ts, char *out, size_t n)
{
    time_t t = (time_t)ts;
    struct tm tm;
    strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
}

static void cli_key_json(sbuf *o, const platform_key *k, const cli_key_use *u)
{
    sbuf_printf(o, "{\"id\":%lld,\"name\":", (long long)k->id);
    sbuf_json_str(o, k->name, strlen(k->name));
    sbuf_puts(o, ",\"prefix\":");
    sbuf_json_str(o, k->prefix, strlen(k->prefix));
    sbuf_printf(o, ",\"revoked\":%s,\"preferred_account_id\":", k->revoked ? "true" : "false");
    if (k->preferred_account_id)
        sbuf_printf(o, "%lld", (long long)k->preferred_account_id);
    else
        sbuf_puts(o, "null");
    sbuf_puts(o, ",\"allowed_models\":");
    if (k->allowed_models)
        sbuf_json_str(o, k->allowed_models, strlen(k->allowed_models));
    else
        sbuf_puts(o, "null");
    sbuf_printf(o, ",\"max_rpm\":%d,\"expires_at\":%lld,\"budget_usd\":%.2f,\"budget_period\":", k->max_rpm,
                (long long)k->expires_at, k->budget_usd);
    sbuf_json_str(o, k->budget_period, strlen(k->budget_period));
    sbuf_printf(o, ",\"spend\":{\"today_usd\":%.6f,\"today_requests\":%lld,\"period_usd\":", u->usd_today,
                (long long)u->requests_today);
    if (u->period_usd >= 0)
        sbuf_printf(o, "%.6f", u->period_usd);
    else
        sbuf_puts(o, "null");
    sbuf_puts(o, "},\"last_used_at\":");
    if (u->last_used_at > 0)
        sbuf_printf(o, "%.3f", u->last_used_at);
    else
        sbuf_puts(o, "null");
    sbuf_puts(o, "}");
}

static void cli_key_print(const platform_key *k, const cli_key_use *u, size_t n, int json)
{
    sbuf o = SBUF_INIT;
    sbuf_puts(&o, "[");
    if (!json)
        printf("%-5s %-24s %-8s %-7s %-9s %-5s %-20s %-16s %-10s %-10s %-20s %s\n", "ID", "NAME", "PREFIX", "REVOKED",
               "PREFERRED", "RPM", "EXPIRES", "BUDGET", "TODAY", "PERIOD", "LAST USED", "MODELS");
    for (size_t i = 0; i < n; i++) {
        if (json) {
            sbuf_puts(&o, i ? "," : "");
            cli_key_json(&o, &k[i], &u[i]);
            continue;
        }
        char today[24], period[24] = "-", last[24] = "-";
        snprintf(today, sizeof today, "$%.4f", u[i].usd_today);
        if (u[i].period_usd >= 0)
            snprintf(period, sizeof period, "$%.4f", u[i].period_usd);
        if (u[i].last_used_at > 0)
            cli_key_time(u[i].last_used_at, last, sizeof last);
        char pref[24] = "-";
        if (k[i].preferred_account_id)
            snprintf(pref, sizeof pref, "%lld", (long long)k[i].preferred_account_id);
        char rpm[16] = "-", exp[24] = "never", budget[40] = "-";
        if (k[i].budget_usd > 0)
            snprintf(budget, sizeof budget, "$%.2f/%s", k[i].budget_usd, k[i].budget_period);
        if (k[i].max_rpm)
            snprintf(rpm, sizeof rpm, "%d", k[i].max_rpm);
        if (k[i].expires_at)
            cli_key_time((double)k[i].expires_at, exp, sizeof exp);
        cli_line("%-5lld %-24s %-8s %-7s %-9s %-5s %-20s %-16s %-10s %-10s %-20s %s", (long long)k[i].id, k[i].name,
                 k[i].prefix, k[i].revoked ? "yes" : "no", pref, rpm, exp, budget, today, period, last,
                 k[i].allowed_models ? k[i].allowed_models : "*");
    }
    sbuf_puts(&o, "]\n");
    if (json)
        fputs(o.p, stdout);
    sbuf_free(&o);
}

int cli_key_list(int argc, char **argv)
{
    const char *cmd = "key list", *db = NULL;
    int json = 0, help = 0;
    const cli_opt opts[] = {{"db", &db, NULL}, {"json", NULL, &json}, {"help", NULL, &help}, {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &help, cli_usage_key);
    if (rc >= 0)
        return rc;
    store *s = cli_store_open(cmd, db);
    if (!s)
        return CLI_EXIT_FAIL;
    platform_key *k = NULL;
    size_t n = 0;
    rc = store_keys_load(s, &k, &n);
    cli_key_use *u = rc == 0 ? calloc(n ? n : 1, sizeof *u) : NULL;
    if (rc == 0 && !u)
        rc = -1;
    if (rc == 0 && cli_key_uses_load(s, k, n, u) != 0) {
        fprintf(stderr, "switchyard %s: cannot read the request log of %s (spend, last used)\n", cmd, store_path(s));
        rc = -1;
    } else if (rc == 0) {
        cli_key_print(k, u, n, json);
    } else {
        fprintf(stderr, "switchyard %s: cannot read keys from %s\n", cmd, store_path(s));
    }
    free(u);
    store_keys_free(k, n);
    store_close(s);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

/* ---------- key prefer / revoke ---------- */

static int cli_key_prefer_check(const char *cmd, const char *acct, int clear)
{
    if (clear == !!acct) {
        fprintf(stderr, "switchyard %s: give either --account ACCOUNT or --clear\n", cmd);
        return -1;
    }
    if (acct && !*acct) {
        fprintf(stderr, "switchyard %s: --account needs an account name\n", cmd);
        return -1;
    }
    return 0;
}

int cli_key_prefer(int argc, char **argv)
{
    const char *cmd = "key prefer", *db = NULL, *name = NULL, *acct = NULL, *idtext = NULL, *prefix = NULL;
    int clear = 0, help = 0;
    const cli_opt opts[] = {{"db", &db, NULL},       {"name", &name, NULL},     {"id", &idtext, NULL},
                            {"prefix", &prefix, NULL}, {"account", &acct, NULL}, {"clear", NULL, &clear},
                            {"help", NULL, &help},   {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &help, cli_usage_key);
    if (rc >= 0)
        return rc;
    if (cli_key_prefer_check(cmd, acct, clear) != 0)
        return CLI_EXIT_USAGE;
    int64_t id = 0;
    store *s = cli_key_open_selected(cmd, db, name, idtext, prefix, &id, &rc);
    if (!s)
        return rc;
    char err[512] = "";
    int ok = store_key_prefer(s, id, acct, err, sizeof err) == 0;
    if (ok && acct)
        printf("key id %lld now prefers account %s\n", (long long)id, acct);
    else if (ok)
        printf("cleared the preferred account of key id %lld\n", (long long)id);
    else
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    store_close(s);
    return ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

int cli_key_revoke(int argc, char **argv)
{
    const char *cmd = "key revoke", *db = NULL, *name = NULL, *idtext = NULL, *prefix = NULL;
    int help = 0;
    const cli_opt opts[] = {{"db", &db, NULL},         {"name", &name, NULL}, {"id", &idtext, NULL},
                            {"prefix", &prefix, NULL}, {"help", NULL, &help}, {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &help, cli_usage_key);
    if (rc >= 0)
        return rc;
    int64_t id = 0;
    store *s = cli_key_open_selected(cmd, db, name, idtext, prefix, &id, &rc);
    if (!s)
        return rc;
    char err[512] = "";
    int n = store_key_revoke_id(s, id, err, sizeof err);
    if (n > 0)
        printf("revoked key id %lld\n", (long long)id);
    else if (n == 0)
        printf("key id %lld was already revoked\n", (long long)id);
    else
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    store_close(s);
    return n >= 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
