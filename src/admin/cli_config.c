/* cli_config.c: `switchyard config set|get|unset|list`, the settings stored
 * in the database. This file knows the keys and validates their values (with
 * core/config.c's checks) so a bad value never reaches a running gateway. */
#include "admin/cli_internal.h"
#include "core/config.h"
#include "core/redis_url.h"
#include "store/store.h"
#include <stdio.h>
#include <string.h>

void cli_usage_config(FILE *f)
{
    fputs("usage: switchyard config set KEY VALUE [--db PATH]\n"
          "       switchyard config get KEY [--db PATH]\n"
          "       switchyard config unset KEY [--db PATH]\n"
          "       switchyard config list [--db PATH]\n"
          "  keys: route_strategy   ordered | balanced | weighted (round_robin, rr = balanced)\n"
          "        rotation         account_rotation | aggregate_api_rotation | hybrid_rotation |\n"
          "                         hybrid_aggregate_first_rotation\n"
          "        affinity_idle_s  seconds a session keeps its account while idle (default 3600)\n"
          "        affinity_max     sessions remembered (default 10000)\n"
          "        usage_poll_s     seconds between chatgpt usage polls, 0 off (default 600)\n"
          "        oauth_refresh_margin_s  refresh a login this long before it expires (default 3600)\n"
          "        oauth_retry_min_s       first wait after a failed refresh, doubling (default 30)\n"
          "        oauth_retry_max_s       longest wait between failed refreshes (default 1800)\n"
          "        conversation_max_rows   stored conversation turns kept, 0 none (default 20000)\n"
          "        conversation_max_bytes  their bytes kept, 0 none (default 268435456)\n"
          "        conversation_max_days   days a stored turn is kept (default 30)\n"
          "        request_log_max_rows    request log rows kept, the oldest go first (default 1000000)\n"
          "        request_log_max_days    days a request log row is kept (default 90)\n"
          "        trace_max_bytes         gateway-trace.log rotates past this size (default 67108864)\n"
          "        trace_files             rotated trace logs kept (default 4)\n"
          "        alert_webhook_url       where alerts are posted (the alert policy; none by default)\n"
          "        shared_limits_fail      open | closed: a rate or concurrency limit Redis cannot check in\n"
          "                                time lets the local copy decide (open, default) or refuses (closed)\n"
          "        redis                   the pool's Redis, read at start when neither --redis nor\n"
          "                                SWITCHYARD_REDIS is given (docs/scale-out.md); not shared\n"
          "  a running gateway picks up changes; serve flags and SWITCHYARD_* variables take precedence\n",
          f);
}

/* ---------- config set / get / unset / list ---------- */

/* A setting `switchyard config` accepts: canonical() returns the value to
 * store, or NULL when the value is invalid. */
typedef struct cli_setting {
    const char *key;
    const char *(*canonical)(const char *value);
    const char *values; /* for the error message */
} cli_setting;

static const char *cli_rotation_canonical(const char *v) { return config_rotation_valid(v) ? v : NULL; }

static const char *cli_redis_canonical(const char *v)
{
    char err[256];
    return config_redis_check(v, err, sizeof err) == 0 ? v : NULL;
}

static const cli_setting cli_settings[] = {
    {"route_strategy", config_strategy_canonical, "ordered, balanced or weighted (round_robin and rr mean balanced)"},
    {"rotation", cli_rotation_canonical,
     "account_rotation, aggregate_api_rotation, hybrid_rotation or hybrid_aggregate_first_rotation"},
    {"affinity_idle_s", config_affinity_idle_canonical, "whole seconds, 1 to 2592000"},
    {"affinity_max", config_affinity_max_canonical, "a whole number of sessions, 1 to 16777216"},
    {"usage_poll_s", config_usage_poll_canonical, "whole seconds, 0 (off) to 604800"},
    {"oauth_refresh_margin_s", config_oauth_margin_canonical, "whole seconds, 0 to 2592000"},
    {"oauth_retry_min_s", config_oauth_retry_canonical, "whole seconds, 1 to 604800"},
    {"oauth_retry_max_s", config_oauth_retry_canonical, "whole seconds, 1 to 604800"},
    {"conversation_max_rows", config_conversation_rows_canonical, "a whole number of turns, 0 (none) to 100000000"},
    {"conversation_max_bytes", config_conversation_bytes_canonical, "whole bytes, 0 (none) to 1099511627776"},
    {"conversation_max_days", config_conversation_days_canonical, "whole days, 1 to 3650"},
    {"request_log_max_rows", config_log_rows_canonical, "a whole number of rows, 1000 to 1000000000"},
    {"request_log_max_days", config_log_days_canonical, "whole days, 1 to 3650"},
    {"trace_max_bytes", config_trace_bytes_canonical, "whole bytes, 65536 to 1099511627776"},
    {"trace_files", config_trace_files_canonical, "a whole number of files, 1 to 100"},
    {"alert_webhook_url", config_alert_url_canonical, "an http:// or https:// URL with a host"},
    {"shared_limits_fail", config_limits_fail_canonical, "open or closed"},
    {"redis", cli_redis_canonical, "redis://[[user]:password@]host[:port][/db][?pool=NAME] or unix://..."},
};
#define CLI_N_SETTINGS (sizeof cli_settings / sizeof cli_settings[0])

static const cli_setting *cli_setting_find(const char *cmd, const char *key)
{
    for (size_t i = 0; i < CLI_N_SETTINGS; i++)
        if (strcmp(cli_settings[i].key, key) == 0)
            return &cli_settings[i];
    fprintf(stderr, "switchyard %s: unknown setting '%s'; known settings:", cmd, key);
    for (size_t i = 0; i < CLI_N_SETTINGS; i++)
        fprintf(stderr, "%s %s", i ? "," : "", cli_settings[i].key);
    fputc('\n', stderr);
    return NULL;
}

typedef struct cli_config_args {
    const char *db;
    const char *pos[2];
    const cli_setting *setting; /* pos[0] looked up, when the command takes a key */
} cli_config_args;

/* Parses [--db PATH] and exactly want positional arguments (the first is a
 * known key when want > 0). Returns -1 to go on, else the exit code. */
static int cli_config_parse(const char *cmd, int argc, char **argv, int want, const char *what,
                            cli_config_args *a)
{
    int help = 0;
    cli_pos pos = {a->pos, want, 0};
    const cli_opt opts[] = {{"db", &a->db, NULL}, {"help", NULL, &help}, {NULL, NULL, NULL}};
    if (cli_parse(cmd, argc, argv, opts, &pos) != 0 || (!help && pos.n != want)) {
        if (pos.n != want)
            fprintf(stderr, "switchyard %s: expected %s\n", cmd, what);
        cli_usage_config(stderr);
        return CLI_EXIT_USAGE;
    }
    if (help) {
        cli_usage_config(stdout);
        return CLI_EXIT_OK;
    }
    if (want > 0 && !(a->setting = cli_setting_find(cmd, a->pos[0])))
        return CLI_EXIT_USAGE;
    return -1;
}

static void cli_config_line(void *ud, const char *key, const char *value);

int cli_config_set(int argc, char **argv)
{
    const char *cmd = "config set";
    cli_config_args a = {0};
    int rc = cli_config_parse(cmd, argc, argv, 2, "KEY VALUE", &a);
    if (rc >= 0)
        return rc;
    const char *value = a.setting->canonical(a.pos[1]);
    char why[256];
    /* the address may hold a password: the reason it is refused, not the value */
    if (!value && strcmp(a.setting->key, "redis") == 0 && config_redis_check(a.pos[1], why, sizeof why) != 0) {
        fprintf(stderr, "switchyard %s: invalid %s: %s; expected %s\n", cmd, a.setting->key, why, a.setting->values);
        return CLI_EXIT_USAGE;
    }
    if (!value) {
        fprintf(stderr, "switchyard %s: invalid %s '%s'; expected %s\n", cmd, a.setting->key, a.pos[1],
                a.setting->values);
        return CLI_EXIT_USAGE;
    }
    store *s = cli_store_open(cmd, a.db);
    if (!s)
        return CLI_EXIT_FAIL;
    char err[512] = "";
    rc = store_setting_set(s, a.setting->key, value, err, sizeof err);
    if (rc == 0)
        cli_config_line(NULL, a.setting->key, value); /* a password in the address left out */
    else
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    store_close(s);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

int cli_config_get(int argc, char **argv)
{
    const char *cmd = "config get";
    cli_config_args a = {0};
    int rc = cli_config_parse(cmd, argc, argv, 1, "KEY", &a);
    if (rc >= 0)
        return rc;
    store *s = cli_store_open(cmd, a.db);
    if (!s)
        return CLI_EXIT_FAIL;
    char value[1024];
    rc = store_setting_get(s, a.setting->key, value, sizeof value);
    if (rc == 0)
        printf("%s\n", value);
    else if (rc == 1)
        fprintf(stderr, "switchyard %s: %s is not set (the environment or the default applies)\n", cmd,
                a.setting->key);
    else
        fprintf(stderr, "switchyard %s: cannot read %s from %s\n", cmd, a.setting->key, store_path(s));
    store_close(s);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

int cli_config_unset(int argc, char **argv)
{
    const char *cmd = "config unset";
    cli_config_args a = {0};
    int rc = cli_config_parse(cmd, argc, argv, 1, "KEY", &a);
    if (rc >= 0)
        return rc;
    store *s = cli_store_open(cmd, a.db);
    if (!s)
        return CLI_EXIT_FAIL;
    char err[512] = "";
    rc = store_setting_delete(s, a.setting->key, err, sizeof err);
    if (rc == 0)
        printf("unset %s\n", a.setting->key);
    else if (rc == 1)
        printf("%s was not set\n", a.setting->key);
    else
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    store_close(s);
    return rc >= 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

static void cli_config_line(void *ud, const char *key, const char *value)
{
    redis_url u;
    char d[600], err[256];
    if (strcmp(key, "redis") == 0 && redis_url_parse(value, &u, err, sizeof err) == 0) {
        redis_url_describe(&u, d, sizeof d); /* the password left out */
        memset(u.pass, 0, sizeof u.pass);
        value = d;
    }
    printf("%s=%s\n", key, value);
}

int cli_config_list(int argc, char **argv)
{
    const char *cmd = "config list";
    cli_config_args a = {0};
    int rc = cli_config_parse(cmd, argc, argv, 0, "no arguments", &a);
    if (rc >= 0)
        return rc;
    store *s = cli_store_open(cmd, a.db);
    if (!s)
        return CLI_EXIT_FAIL;
    rc = store_settings_load(s, cli_config_line, NULL);
    if (rc != 0)
        fprintf(stderr, "switchyard %s: cannot read settings from %s\n", cmd, store_path(s));
    store_close(s);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
