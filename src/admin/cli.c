/* cli.c: the command table of `switchyard` (every command and each group's
 * subcommands, dispatched by name, with the one-line summaries that
 * `switchyard --help` is made of; the global --db) and what every subcommand file
 * shares: --option parsing, the --db path, opening the store and checking
 * integer and budget values (admin_cli.c uses the parsing and the store
 * too). The commands themselves live in one file per group: cli_account.c,
 * cli_key.c, cli_config.c, cli_codex.c, cli_claude.c, cli_usage.c, cli_backup.c and cli_init.c. */
#include "admin/cli.h"
#include "admin/cli_internal.h"
#include "policy/policy.h"
#include "base/budget.h"
#include "base/text.h"
#include "store/store.h"
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <time.h>
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
    if (cli_parse(cmd, argc, argv, opts, NULL) != 0) { /* what is wrong was said; where to look, in one line */
        (void)usage;
        fprintf(stderr, "(`switchyard %s --help` lists its options)\n", cmd);
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

store *cli_store_open_new(const char *cmd, const char *db)
{
    char err[512] = "";
    store *s = store_open(cli_db_path(db), err, sizeof err);
    if (!s)
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    return s;
}

/* A command that reads or changes what is there never makes a database: a
 * mistyped --db, or a command run from another directory, would otherwise
 * act on a new, empty one and say nothing (`codex attach` minted its key
 * in one, and attached Codex to another database's gateway). */
int cli_db_missing(const char *cmd, const char *db)
{
    const char *path = cli_db_path(db);
    struct stat sb;
    if (stat(path, &sb) == 0 || errno != ENOENT)
        return 0;
    fprintf(stderr,
            "switchyard %s: no database at %s (give --db PATH or set SWITCHYARD_DB; `switchyard init` makes "
            "one)\n",
            cmd, path);
    return 1;
}

store *cli_store_open(const char *cmd, const char *db)
{
    return cli_db_missing(cmd, db) ? NULL : cli_store_open_new(cmd, db);
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

/* see cli_internal.h */
double cli_parse_when(const char *text, double now)
{
    struct tm tm;
    static const char *const forms[] = {"%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%MZ",
                                        "%Y-%m-%dT%H:%M",     "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"};
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
        memset(&tm, 0, sizeof tm);
        const char *end = strptime(text, forms[i], &tm);
        if (end && !*end)
            return (double)timegm(&tm);
    }
    char *e = NULL;
    errno = 0;
    double v = strtod(text, &e);
    if (errno || e == text || !(v >= 0) || v > 1e11)
        return -1;
    if (!*e)
        return v;
    double unit = strcmp(e, "m") == 0 ? 60 : strcmp(e, "h") == 0 ? 3600 : strcmp(e, "d") == 0 ? 86400 : 0;
    return unit > 0 && v * unit <= now ? now - v * unit : -1;
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

/* ---------- the command table ---------- */

/* One subcommand of a group: its function gets the arguments after its name. */
typedef struct cli_sub {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} cli_sub;

/* One command of `switchyard`: a group with subcommands (subs and usage),
 * or a command of its own (fn gets argv with argv[0] = its name). The same
 * table dispatches and prints `switchyard --help`, so the help cannot
 * leave a command out. */
typedef struct cli_command {
    const char *name;
    const char *summary; /* a command of its own; a group's lines are its subcommands' */
    int (*fn)(int argc, char **argv);
    const cli_sub *subs;
    void (*usage)(FILE *f);
} cli_command;

static int (*cli_serve_fn)(int argc, char **argv); /* the top's (src/serve.c), handed to cli_main */

static int cli_serve(int argc, char **argv)
{
    if (!cli_serve_fn) {
        fprintf(stderr, "switchyard serve: not available in this program\n");
        return CLI_EXIT_FAIL;
    }
    return cli_serve_fn(argc, argv);
}

static const cli_sub cli_account_subs[] = {
    {"add", cli_account_add, "add an account: an API key, a ChatGPT login (--codex-auth) or an aggregate"},
    {"list", cli_account_list, "the accounts with their state, limits and usage (--json)"},
    {"update", cli_account_update, "change an account's token, URL, order, limits, budget or models"},
    {"enable", cli_account_enable, "let an account serve again"},
    {"disable", cli_account_disable, "keep an account out of the pool"},
    {"remove", cli_account_remove, "delete an account"},
    {"reset", cli_account_reset, "clear an account's cooldown, 429 ladder, breaker and hold"},
    {"import", cli_account_import, "add accounts from Codex auth.json files or an export"},
    {"export", cli_account_export, "write the accounts to a file (tokens only with --with-secrets)"},
    {"login", cli_account_login, "sign in to ChatGPT from here (browser with PKCE, or --device) and store the login"},
    {NULL, NULL, NULL}};

static const cli_sub cli_key_subs[] = {
    {"add", cli_key_add, "create a platform key for clients (printed once)"},
    {"list", cli_key_list, "the platform keys with their rules"},
    {"update", cli_key_update, "change a key's models, rate, expiry or budget"},
    {"prefer", cli_key_prefer, "send a key's requests to one account first (--clear: any)"},
    {"revoke", cli_key_revoke, "stop a key from working"},
    {NULL, NULL, NULL}};

static const cli_sub cli_config_subs[] = {
    {"set", cli_config_set, "store a setting in the database (a running gateway picks it up)"},
    {"get", cli_config_get, "print a setting"},
    {"unset", cli_config_unset, "remove a setting (back to its default)"},
    {"list", cli_config_list, "the settings stored in the database"},
    {NULL, NULL, NULL}};

static const cli_sub cli_codex_subs[] = {
    {"attach", cli_codex_attach, "point the Codex CLI at the gateway serving this database"},
    {"detach", cli_codex_detach, "hand Codex's config.toml back as it was"},
    {"status", cli_codex_status, "whether Codex is attached, and whether the gateway answers"},
    {NULL, NULL, NULL}};

static const cli_sub cli_claude_subs[] = {
    {"attach", cli_claude_attach, "point Claude Code at the gateway (the env of its settings.json)"},
    {"detach", cli_claude_detach, "hand Claude Code's settings.json back as it was"},
    {"status", cli_claude_status, "whether Claude Code is attached, and whether the gateway takes its key"},
    {NULL, NULL, NULL}};

static const cli_sub cli_admin_subs[] = {
    {"token", admin_cli_token_main, "create or replace the admin token (dashboard, admin API, status)"},
    {NULL, NULL, NULL}};

static const cli_command cli_commands[] = {
    {"init", "make a new database (schema, admin token); refused where one exists", cli_init_main, NULL, NULL},
    {"serve", "run the gateway", cli_serve, NULL, NULL},
    {"account", NULL, NULL, cli_account_subs, cli_usage_account},
    {"key", NULL, NULL, cli_key_subs, cli_usage_key},
    {"config", NULL, NULL, cli_config_subs, cli_usage_config},
    {"codex", NULL, NULL, cli_codex_subs, cli_usage_codex},
    {"claude", NULL, NULL, cli_claude_subs, cli_usage_claude},
    {"admin", NULL, NULL, cli_admin_subs, admin_cli_usage_admin},
    {"status", "the pool at a glance, from the running gateway or the database", admin_cli_status_main, NULL, NULL},
    {"logs", "one line per request with its attempts (--follow)", admin_cli_logs_main, NULL, NULL},
    {"alerts", "the alerts the gateway raised and what became of each; `alerts test` sends one", cli_alerts_main,
     NULL, NULL},
    {"usage", "requests, tokens and cost by key, account, model or day", cli_spend_main, NULL, NULL},
    {"backup", "a consistent copy of the whole database, while serving (--out FILE)", cli_backup_main, NULL, NULL},
    {"restore", "put a backup in place of the database (refused while a gateway serves it)", cli_restore_main, NULL,
     NULL},
    {"test", "run the policy tests (policies and their cases)", policy_test_main, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static const cli_command *cli_command_find(const char *name)
{
    for (const cli_command *c = cli_commands; c->name; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

static int cli_is_help(const char *a)
{
    return !strcmp(a, "help") || !strcmp(a, "--help") || !strcmp(a, "-h");
}

static int cli_dispatch(const cli_command *g, int argc, char **argv)
{
    if (argc < 2) {
        g->usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (cli_is_help(sub)) {
        g->usage(stdout);
        return CLI_EXIT_OK;
    }
    for (const cli_sub *s = g->subs; s->name; s++)
        if (strcmp(s->name, sub) == 0)
            return s->fn(argc - 2, argv + 2);
    fprintf(stderr, "switchyard %s: unknown command '%s'\n", g->name, sub);
    g->usage(stderr);
    return CLI_EXIT_USAGE;
}

static int cli_group_main(const char *name, int argc, char **argv)
{
    return cli_dispatch(cli_command_find(name), argc, argv);
}

int cli_account_main(int argc, char **argv) { return cli_group_main("account", argc, argv); }
int cli_key_main(int argc, char **argv) { return cli_group_main("key", argc, argv); }
int cli_config_main(int argc, char **argv) { return cli_group_main("config", argc, argv); }
int cli_codex_main(int argc, char **argv) { return cli_group_main("codex", argc, argv); }

void cli_help(FILE *f)
{
    fputs("switchyard: a local-first LLM API gateway\n\n"
          "usage: switchyard [--db PATH] COMMAND [SUBCOMMAND] [OPTIONS]\n"
          "       switchyard help [COMMAND]      (a command's options: switchyard COMMAND --help)\n\n"
          "commands:\n",
          f);
    for (const cli_command *c = cli_commands; c->name; c++) {
        if (!c->subs) {
            fprintf(f, "  %-20s %s\n", c->name, c->summary);
            continue;
        }
        for (const cli_sub *s = c->subs; s->name; s++) {
            char both[64];
            snprintf(both, sizeof both, "%s %s", c->name, s->name);
            fprintf(f, "  %-20s %s\n", both, s->summary);
        }
    }
    fputs("\n--db PATH names the database, before the command or after it (after it wins);\n"
          "the default is $SWITCHYARD_DB, else ./switchyard.db. See README.md and docs/.\n",
          f);
}

/* `switchyard help [COMMAND]`: everything, or one command's usage. */
static int cli_help_main(int argc, char **argv)
{
    if (argc < 2) {
        cli_help(stdout);
        return CLI_EXIT_OK;
    }
    const cli_command *c = cli_command_find(argv[1]);
    if (!c) {
        fprintf(stderr, "switchyard help: unknown command '%s'\n\n", argv[1]);
        cli_help(stderr);
        return CLI_EXIT_USAGE;
    }
    if (c->subs) {
        c->usage(stdout);
        return CLI_EXIT_OK;
    }
    char *args[] = {(char *)c->name, "--help", NULL};
    return c->fn(2, args);
}

int cli_main(int argc, char **argv, int (*serve)(int argc, char **argv))
{
    cli_serve_fn = serve;
    int i = 1;
    /* the global options, before the command */
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_help(stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
            printf("switchyard %s\n", SY_VERSION);
            return CLI_EXIT_OK;
        }
        const char *db = NULL;
        if (!strncmp(a, "--db=", 5))
            db = a + 5;
        else if (!strcmp(a, "--db") && i + 1 < argc)
            db = argv[++i];
        else if (!strcmp(a, "--db")) {
            fprintf(stderr, "switchyard: --db needs a value\n");
            return CLI_EXIT_USAGE;
        } else {
            fprintf(stderr, "switchyard: unknown option '%s' (before the command: --db PATH, --help, --version; "
                            "`switchyard --help` lists the commands)\n", a);
            return CLI_EXIT_USAGE;
        }
        if (!*db) {
            fprintf(stderr, "switchyard: --db needs a path, got ''\n");
            return CLI_EXIT_USAGE;
        }
        /* every command reads $SWITCHYARD_DB when it has no --db of its own: serve's
         * configuration too, so the one setting reaches all of them */
        setenv("SWITCHYARD_DB", db, 1);
    }
    if (i >= argc) {
        cli_help(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[i];
    if (!strcmp(name, "help"))
        return cli_help_main(argc - i, argv + i);
    const cli_command *c = cli_command_find(name);
    if (!c) {
        fprintf(stderr, "switchyard: unknown command '%s'\n\n", name);
        cli_help(stderr);
        return CLI_EXIT_USAGE;
    }
    return c->subs ? cli_dispatch(c, argc - i, argv + i) : c->fn(argc - i, argv + i);
}

void cli_line(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sbuf raw = SBUF_INIT, esc = SBUF_INIT;
    sbuf_vprintf(&raw, fmt, ap);
    va_end(ap);
    text_escape(&esc, raw.p ? raw.p : "", raw.len, NULL);
    sbuf_append(&esc, "\n", 1);
    fwrite(esc.p, 1, esc.len, stdout);
    sbuf_free(&esc);
    sbuf_free(&raw);
}
