/* cli.c: the command table of `switchyard account|key|config|codex` (each
 * group's subcommands, dispatched by name) and what every subcommand file
 * shares: --option parsing, the --db path, opening the store and checking
 * integer and budget values (admin_cli.c uses the parsing and the store
 * too). The commands themselves live in one file per group: cli_account.c,
 * cli_key.c, cli_config.c, cli_codex.c, cli_usage.c and cli_backup.c. */
#include "admin/cli.h"
#include "admin/cli_internal.h"
#include "base/budget.h"
#include "base/text.h"
#include "store/store.h"
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_opt *cli_opt_find(const cli_opt *opts, const char *name, size_t len)
{
    for (; opts->name; opts++)
        if (strlen(opts->name) == len && strncmp(opts->name, name, len) == 0)
            return opts;
    return NULL;
}

/* Handles the option argv[*i] (--name VALUE, --name=VALUE or --flag),
 * moving *i past its value. Prints the error and returns -1 if invalid. */
static int cli_parse_opt(const char *cmd, int argc, char **argv, int *i, const cli_opt *opts)
{
    const char *arg = argv[*i];
    const char *eq = strchr(arg + 2, '=');
    size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
    const cli_opt *o = cli_opt_find(opts, arg + 2, len);
    if (!o) {
        fprintf(stderr, "switchyard %s: unknown option '%.*s'\n", cmd, (int)len + 2, arg);
        return -1;
    }
    if (!o->val && eq) {
        fprintf(stderr, "switchyard %s: --%s takes no value\n", cmd, o->name);
        return -1;
    }
    if (!o->val) {
        *o->flag = 1;
    } else if (eq) {
        *o->val = eq + 1;
    } else if (*i + 1 < argc) {
        *o->val = argv[++*i];
    } else {
        fprintf(stderr, "switchyard %s: --%s needs a value\n", cmd, o->name);
        return -1;
    }
    return 0;
}

/* Parses options and, when pos is given, up to pos->max positional
 * arguments from argv[0..argc). Prints the error and returns -1 on anything
 * unexpected. */
int cli_parse(const char *cmd, int argc, char **argv, const cli_opt *opts, cli_pos *pos)
{
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) == 0) {
            if (cli_parse_opt(cmd, argc, argv, &i, opts) != 0)
                return -1;
        } else if (pos && pos->n < pos->max) {
            pos->v[pos->n++] = argv[i];
        } else {
            fprintf(stderr, "switchyard %s: unexpected argument '%s'\n", cmd, argv[i]);
            return -1;
        }
    }
    return 0;
}

/* Parses argv (options only); returns -1 to go on, else the exit code
 * (usage printed). */
int cli_parse_or_usage(const char *cmd, int argc, char **argv, const cli_opt *opts, const int *help,
                              void (*usage)(FILE *))
{
    if (cli_parse(cmd, argc, argv, opts, NULL) != 0) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (*help) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    return -1;
}

const char *cli_db_path(const char *opt)
{
    const char *env = getenv("SWITCHYARD_DB");
    if (opt && *opt)
        return opt;
    return env && *env ? env : "./switchyard.db";
}

store *cli_store_open(const char *cmd, const char *db)
{
    char err[512] = "";
    store *s = store_open(cli_db_path(db), err, sizeof err);
    if (!s)
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    return s;
}

/* Opens the store for a command that acts on --name; NULL with *rc set to
 * the exit code when the name is missing or the store cannot be opened. */
store *cli_store_open_named(const char *cmd, const char *db, const char *name, int *rc)
{
    if (!name || !*name) {
        fprintf(stderr, "switchyard %s: --name is required\n", cmd);
        *rc = CLI_EXIT_USAGE;
        return NULL;
    }
    store *s = cli_store_open(cmd, db);
    *rc = s ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    return s;
}

int cli_parse_int(const char *cmd, const char *opt, const char *text, int min, int *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < min || v > INT_MAX) {
        if (min == INT_MIN)
            fprintf(stderr, "switchyard %s: --%s must be an integer, got '%s'\n", cmd, opt, text);
        else
            fprintf(stderr, "switchyard %s: --%s must be an integer >= %d, got '%s'\n", cmd, opt, min, text);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* --budget USD (>= 0; 0 removes it) and --budget-period month|<N>d. */
int cli_budget_parse(const char *cmd, const char *budget, const char *period, double *usd)
{
    if (budget) {
        char *end = NULL;
        errno = 0;
        *usd = strtod(budget, &end);
        if (errno || end == budget || *end || !(*usd >= 0 && *usd < 1e12)) {
            fprintf(stderr, "switchyard %s: --budget must be an amount in USD >= 0, got '%s'\n", cmd, budget);
            return -1;
        }
    }
    if (period && budget_period_valid(period) != 0) {
        fprintf(stderr, "switchyard %s: --budget-period must be month or <N>d (e.g. 7d), got '%s'\n", cmd, period);
        return -1;
    }
    return 0;
}

/* ---------- dispatch ---------- */

typedef struct cli_sub {
    const char *name;
    int (*fn)(int argc, char **argv);
} cli_sub;

static int cli_dispatch(const char *group, int argc, char **argv, const cli_sub *subs, void (*usage)(FILE *))
{
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "help") || !strcmp(sub, "--help") || !strcmp(sub, "-h")) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    for (; subs->name; subs++)
        if (strcmp(subs->name, sub) == 0)
            return subs->fn(argc - 2, argv + 2);
    fprintf(stderr, "switchyard %s: unknown command '%s'\n", group, sub);
    usage(stderr);
    return CLI_EXIT_USAGE;
}

int cli_account_main(int argc, char **argv)
{
    static const cli_sub subs[] = {{"add", cli_account_add},         {"list", cli_account_list},
                                   {"enable", cli_account_enable},   {"disable", cli_account_disable},
                                   {"remove", cli_account_remove},   {"reset", cli_account_reset},
                                   {"import", cli_account_import},   {"export", cli_account_export},
                                   {"update", cli_account_update},
                                   {NULL, NULL}};
    return cli_dispatch("account", argc, argv, subs, cli_usage_account);
}

int cli_key_main(int argc, char **argv)
{
    static const cli_sub subs[] = {{"add", cli_key_add},       {"list", cli_key_list}, {"prefer", cli_key_prefer},
                                   {"update", cli_key_update},
                                   {"revoke", cli_key_revoke}, {NULL, NULL}};
    return cli_dispatch("key", argc, argv, subs, cli_usage_key);
}

int cli_config_main(int argc, char **argv)
{
    static const cli_sub subs[] = {{"set", cli_config_set},     {"get", cli_config_get},
                                   {"unset", cli_config_unset}, {"list", cli_config_list},
                                   {NULL, NULL}};
    return cli_dispatch("config", argc, argv, subs, cli_usage_config);
}

int cli_codex_main(int argc, char **argv)
{
    static const cli_sub subs[] = {{"attach", cli_codex_attach}, {"detach", cli_codex_detach},
                                   {"status", cli_codex_status}, {NULL, NULL}};
    return cli_dispatch("codex", argc, argv, subs, cli_usage_codex);
}

void cli_line(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    char *raw = malloc((size_t)n + 1);
    if (!raw)
        abort();
    va_start(ap, fmt);
    vsnprintf(raw, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sbuf esc = SBUF_INIT;
    text_escape(&esc, raw, (size_t)n, NULL);
    sbuf_append(&esc, "\n", 1);
    fwrite(esc.p, 1, esc.len, stdout);
    sbuf_free(&esc);
    free(raw);
}
