/* cli.c: `switchyard account add|list|import|export|update|enable|disable|remove`, `switchyard
 * key add|list|prefer|revoke` and `switchyard config set|get|unset|list`
 * (the settings stored in the database; this file knows and validates the
 * keys). Tokens can come from a file or stdin so they stay out of shell
 * history; no command ever prints an upstream token, and a platform key is
 * printed exactly once, by `key add`, as its last line. */
#include "admin/cli.h"
#include "codex/codex_attach.h"
#include "base/budget.h"
#include "core/config.h"
#include "base/json.h"
#include "base/jwt.h"
#include "accounts/login_file.h"
#include "base/sbuf.h"
#include "store/store.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2
#define CLI_SECRET_MAX 65536


static void cli_usage_account(FILE *f)
{
    fputs("usage: switchyard account add --name N --base-url URL (--token T | --token - | --token-file PATH)\n"
          "                              [--kind api_key|chatgpt|aggregate] [--sort N] [--max-concurrency N]\n"
          "                              [--chatgpt-account-id ID] [--model-map JSON] [--context-fallback]\n"
          "                              [--weight N] [--max-rpm N] [--max-tpm N]\n"
          "                              [--budget USD [--budget-period month|<N>d]]\n"
          "                              [--db PATH]\n"
          "       switchyard account add --name N --codex-auth ~/.codex/auth.json [options above]\n"
          "                              (a chatgpt account from a Codex login; --base-url is optional for chatgpt)\n"
          "       switchyard account import FILE... [--db PATH]\n"
          "                              (Codex auth.json files and exports of many logins; see docs/accounts.md)\n"
          "       switchyard account export --out FILE|- [--name N] [--with-secrets] [--db PATH]\n"
          "       switchyard account update --name N [--token T | --token-file PATH | --codex-auth FILE]\n"
          "                              [--base-url URL] [--sort N] [--max-concurrency N] [--model-map JSON]\n"
          "                              [--context-fallback | --no-context-fallback] [--weight N]\n"
          "                              [--max-rpm N] [--max-tpm N] [--budget USD] [--budget-period month|<N>d]\n"
          "       switchyard account list [--json] [--db PATH]\n"
          "       switchyard account enable|disable|remove|reset --name N [--db PATH]\n"
          "  --context-fallback marks a larger-context account: a request another account refuses as too\n"
          "  long (context_length_exceeded) is sent to it once; reset clears cooldown, 429 ladder and breaker\n"
          "  --token - reads the token from stdin; the database defaults to $SWITCHYARD_DB or ./switchyard.db\n",
          f);
}

static void cli_usage_key(FILE *f)
{
    fputs("usage: switchyard key add --name N [RULES] [--db PATH]\n"
          "       switchyard key update --name KEY [RULES] [--db PATH]\n"
          "       switchyard key list [--json] [--db PATH]\n"
          "       switchyard key prefer --name KEY (--account ACCOUNT | --clear) [--db PATH]\n"
          "       switchyard key revoke --name KEY [--db PATH]\n"
          "  RULES: --models LIST    allowed models, comma-separated exact names or patterns ('gpt-5*')\n"
          "         --all-models     allow every model again (update)\n"
          "         --rpm N          requests per minute for this key (0 = unlimited)\n"
          "         --expires WHEN   YYYY-MM-DD (valid through that day, UTC), YYYY-MM-DDTHH:MM:SSZ, or never\n"
          "         --budget USD     spending budget (0 = none); --budget-period month (default) or <N>d\n"
          "  key add prints the new key once, as its last line; only its hash is stored;\n"
          "  prefer and revoke apply to every key with that name\n",
          f);
}

static void cli_usage_config(FILE *f)
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
          "  a running gateway picks up changes; serve flags and SWITCHYARD_* variables take precedence\n",
          f);
}

static void cli_usage_codex(FILE *f)
{
    fputs("usage: switchyard codex attach [--codex-home DIR] [--gateway URL] [--db PATH]\n"
          "       switchyard codex detach [--codex-home DIR] [--force] [--db PATH]\n"
          "       switchyard codex status [--codex-home DIR] [--db PATH]\n"
          "  the Codex home defaults to $CODEX_HOME, else ~/.codex; the gateway URL to the listen\n"
          "  address ($SWITCHYARD_LISTEN, else 127.0.0.1:8787). attach points Codex at the gateway\n"
          "  with a platform key of its own; detach hands config.toml back (see docs/codex.md)\n",
          f);
}

static const cli_opt *cli_opt_find(const cli_opt *opts, const char *name, size_t len)
{
    for (; opts->name; opts++)
        if (strlen(opts->name) == len && strncmp(opts->name, name, len) == 0)
            return opts;
    return NULL;
}

/* Positional arguments a command accepts: up to max, into v. */
typedef struct cli_pos {
    const char **v;
    int max, n;
} cli_pos;

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
static int cli_parse(const char *cmd, int argc, char **argv, const cli_opt *opts, cli_pos *pos)
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

static const char *cli_db_path(const char *opt)
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
static store *cli_store_open_named(const char *cmd, const char *db, const char *name, int *rc)
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

static int cli_parse_int(const char *cmd, const char *opt, const char *text, int min, int *out)
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
static int cli_budget_parse(const char *cmd, const char *budget, const char *period, double *usd)
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

/* ---------- secrets ---------- */

/* Strips surrounding whitespace (a trailing newline from a file or echo). */
static void cli_secret_trim(sbuf *b)
{
    size_t start = 0;
    while (b->len && (unsigned char)b->p[b->len - 1] <= ' ')
        b->p[--b->len] = '\0';
    while (start < b->len && (unsigned char)b->p[start] <= ' ')
        start++;
    sbuf_consume(b, start);
}

static int cli_secret_read_stream(FILE *f, sbuf *out)
{
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        sbuf_append(out, buf, n);
        if (out->len > CLI_SECRET_MAX)
            break;
    }
    memset(buf, 0, sizeof buf);
    return ferror(f) || out->len > CLI_SECRET_MAX ? -1 : 0;
}

/* On a terminal, reads one line with echo off so the token is not shown. */
static int cli_secret_read_tty(sbuf *out)
{
    struct termios old, quiet;
    int have_tc = tcgetattr(STDIN_FILENO, &old) == 0;
    fputs("token (input hidden): ", stderr);
    if (have_tc) {
        quiet = old;
        quiet.c_lflag &= ~(tcflag_t)ECHO;
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    }
    int c;
    while ((c = getchar()) != EOF && c != '\n' && out->len <= CLI_SECRET_MAX) {
        char ch = (char)c;
        sbuf_append(out, &ch, 1);
    }
    if (have_tc)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
    fputc('\n', stderr);
    return out->len > CLI_SECRET_MAX ? -1 : 0;
}

static int cli_secret_read_file(const char *cmd, const char *path, sbuf *out)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "switchyard %s: cannot read token file %s: %s\n", cmd, path, strerror(errno));
        return -1;
    }
    int rc = cli_secret_read_stream(f, out);
    fclose(f);
    if (rc != 0)
        fprintf(stderr, "switchyard %s: cannot read token file %s (error or larger than %d bytes)\n", cmd,
                path, CLI_SECRET_MAX);
    return rc;
}

/* A token goes into an HTTP header: no spaces or control characters. */
static int cli_secret_check(const char *cmd, const sbuf *b)
{
    if (b->len == 0) {
        fprintf(stderr, "switchyard %s: the token is empty\n", cmd);
        return -1;
    }
    for (size_t i = 0; i < b->len; i++) {
        unsigned char c = (unsigned char)b->p[i];
        if (c <= ' ' || c == 0x7f) {
            fprintf(stderr, "switchyard %s: the token contains whitespace or control characters\n", cmd);
            return -1;
        }
    }
    return 0;
}

/* Fills out from --token T, --token - (stdin) or --token-file PATH. */
static int cli_token_get(const char *cmd, const char *token, const char *file, sbuf *out)
{
    int rc = 0;
    if (token && file) {
        fprintf(stderr, "switchyard %s: give either --token or --token-file, not both\n", cmd);
        return -1;
    }
    if (!token && !file) {
        fprintf(stderr, "switchyard %s: --token (or --token -, --token-file) is required\n", cmd);
        return -1;
    }
    if (file)
        rc = cli_secret_read_file(cmd, file, out);
    else if (strcmp(token, "-") == 0 && isatty(STDIN_FILENO))
        rc = cli_secret_read_tty(out);
    else if (strcmp(token, "-") == 0)
        rc = cli_secret_read_stream(stdin, out);
    else
        sbuf_puts(out, token);
    if (rc != 0 && !file)
        fprintf(stderr, "switchyard %s: cannot read the token from stdin\n", cmd);
    if (rc == 0)
        cli_secret_trim(out);
    return rc == 0 ? cli_secret_check(cmd, out) : -1;
}

/* ---------- account add ---------- */

typedef struct cli_account_args {
    const char *db, *name, *base_url, *token, *token_file, *kind, *sort, *max_conc, *chatgpt_id, *model_map;
    const char *codex_auth, *weight, *max_rpm, *max_tpm, *budget, *budget_period;
    int help, context_fallback;
} cli_account_args;

#define CLI_CHATGPT_BASE_URL "https://chatgpt.com/backend-api/codex"

/* The JWT exp of a ChatGPT access token given with --token; 0 for other tokens. */
static int64_t cli_token_expiry(const char *token)
{
    jwt_claims c;
    return jwt_claims_read(token, &c) == 0 ? c.exp : 0;
}

/* Reads a Codex CLI auth.json (or any one-login file login_file reads):
 * exactly one login, which the caller owns. */
static int cli_codex_auth_read(const char *cmd, const char *path, login_list *out)
{
    char err[512] = "";
    if (login_file_read(path, out, err, sizeof err) != 0) {
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
        return -1;
    }
    if (out->n != 1) {
        fprintf(stderr, "switchyard %s: %s holds %zu logins; use 'switchyard account import' for several\n", cmd,
                path, out->n);
        return -1;
    }
    if (out->v[0].kind != ACCOUNT_CHATGPT) {
        fprintf(stderr, "switchyard %s: %s is not a ChatGPT login\n", cmd, path);
        return -1;
    }
    return 0;
}

/* Shape check only; the store validates the JSON strictly. */
static int cli_looks_like_object(const char *s)
{
    size_t n = strlen(s);
    while (n && (unsigned char)s[n - 1] <= ' ')
        n--;
    while (n && (unsigned char)*s <= ' ')
        s++, n--;
    return n >= 2 && s[0] == '{' && s[n - 1] == '}';
}

/* Checks everything that does not need the token or the database, so a bad
 * flag is reported before a token is read from stdin. */
static int cli_account_validate(const char *cmd, const cli_account_args *a, account_new *an)
{
    if (a->kind && account_kind_parse(a->kind, &an->kind) != 0) {
        fprintf(stderr, "switchyard %s: --kind must be api_key, chatgpt or aggregate, got '%s'\n", cmd, a->kind);
        return -1;
    }
    if (a->codex_auth && a->kind && an->kind != ACCOUNT_CHATGPT) {
        fprintf(stderr, "switchyard %s: --codex-auth makes a chatgpt account; drop --kind %s\n", cmd, a->kind);
        return -1;
    }
    if (a->codex_auth)
        an->kind = ACCOUNT_CHATGPT;
    /* the ChatGPT backend has one address: chatgpt accounts need no --base-url */
    const char *base_url = a->base_url ? a->base_url : an->kind == ACCOUNT_CHATGPT ? CLI_CHATGPT_BASE_URL : NULL;
    if (!a->name || !*a->name || !base_url) {
        fprintf(stderr, "switchyard %s: --name and --base-url are required\n", cmd);
        return -1;
    }
    if (strncmp(base_url, "http://", 7) != 0 && strncmp(base_url, "https://", 8) != 0) {
        fprintf(stderr, "switchyard %s: --base-url must start with http:// or https://\n", cmd);
        return -1;
    }
    if (a->model_map && !cli_looks_like_object(a->model_map)) {
        fprintf(stderr, "switchyard %s: --model-map must be a JSON object, e.g. '{\"gpt-5\":\"gpt-5-codex\"}'\n", cmd);
        return -1;
    }
    if (a->sort && cli_parse_int(cmd, "sort", a->sort, INT_MIN, &an->sort) != 0)
        return -1;
    if (a->max_conc && cli_parse_int(cmd, "max-concurrency", a->max_conc, 0, &an->max_concurrency) != 0)
        return -1;
    if (a->weight && cli_parse_int(cmd, "weight", a->weight, 1, &an->weight) != 0)
        return -1;
    if (a->max_rpm && cli_parse_int(cmd, "max-rpm", a->max_rpm, 0, &an->max_rpm) != 0)
        return -1;
    if (a->max_tpm && cli_parse_int(cmd, "max-tpm", a->max_tpm, 0, &an->max_tpm) != 0)
        return -1;
    if (cli_budget_parse(cmd, a->budget, a->budget_period, &an->budget_usd) != 0)
        return -1;
    an->budget_period = a->budget_period;
    an->name = a->name;
    an->base_url = base_url;
    an->chatgpt_account_id = a->chatgpt_id;
    an->model_map = a->model_map;
    return 0;
}

static int cli_account_insert(const char *cmd, const char *db, const account_new *an)
{
    store *s = cli_store_open(cmd, db);
    if (!s)
        return CLI_EXIT_FAIL;
    char err[512] = "";
    int64_t id = 0;
    int rc = store_account_add(s, an, &id, err, sizeof err);
    if (rc == 0)
        printf("added account %s (id %lld)\n", an->name, (long long)id);
    else
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    store_close(s);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

static int cli_account_add(int argc, char **argv)
{
    const char *cmd = "account add";
    cli_account_args a = {0};
    const cli_opt opts[] = {
        {"db", &a.db, NULL}, {"name", &a.name, NULL}, {"base-url", &a.base_url, NULL},
        {"token", &a.token, NULL}, {"token-file", &a.token_file, NULL}, {"kind", &a.kind, NULL},
        {"sort", &a.sort, NULL}, {"max-concurrency", &a.max_conc, NULL},
        {"chatgpt-account-id", &a.chatgpt_id, NULL}, {"model-map", &a.model_map, NULL},
        {"codex-auth", &a.codex_auth, NULL}, {"context-fallback", NULL, &a.context_fallback},
        {"weight", &a.weight, NULL}, {"max-rpm", &a.max_rpm, NULL},
        {"max-tpm", &a.max_tpm, NULL}, {"budget", &a.budget, NULL}, {"budget-period", &a.budget_period, NULL},
        {"help", NULL, &a.help}, {NULL, NULL, NULL},
    };
    account_new an = {.kind = ACCOUNT_API_KEY, .max_concurrency = -1};
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &a.help, cli_usage_account);
    if (rc >= 0)
        return rc;
    an.context_fallback = a.context_fallback;
    if (cli_account_validate(cmd, &a, &an) != 0)
        return CLI_EXIT_USAGE;
    sbuf token = SBUF_INIT;
    login_list logins = {0};
    rc = CLI_EXIT_USAGE;
    int got;
    if (a.codex_auth && (a.token || a.token_file)) {
        fprintf(stderr, "switchyard %s: --codex-auth already gives the token; drop --token/--token-file\n", cmd);
        got = -1;
    } else if (a.codex_auth) {
        got = cli_codex_auth_read(cmd, a.codex_auth, &logins);
    } else {
        got = cli_token_get(cmd, a.token, a.token_file, &token);
    }
    if (got == 0 && a.codex_auth) {
        const login_entry *e = &logins.v[0];
        an.token = e->access_token;
        login_entry_login(e, &an.login);
        if (!an.chatgpt_account_id)
            an.chatgpt_account_id = e->account_id;
    } else if (got == 0) {
        an.token = token.p;
        an.login.token_expires_at = cli_token_expiry(token.p);
    }
    if (got == 0)
        rc = cli_account_insert(cmd, a.db, &an);
    sbuf_secret_wipe(&token);
    login_list_free(&logins);
    return rc;
}

/* ---------- account list ---------- */

static const account_state *cli_state_find(const account_state *st, size_t n, int64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (st[i].account_id == id)
            return &st[i];
    return NULL;
}

static double cli_cooldown_left(const account_state *st, double now)
{
    return st && st->cooldown_until > now ? st->cooldown_until - now : 0;
}

/* "42% in 2h13m": a usage window's used percent and the time to its reset. */
static void cli_window_fmt(char *out, size_t n, double used, double reset_at, double now)
{
    if (used < 0) {
        snprintf(out, n, "-");
        return;
    }
    long left = reset_at > now ? (long)(reset_at - now + 0.5) : -1;
    if (left < 0)
        snprintf(out, n, "%.0f%%", used);
    else if (left >= 86400)
        snprintf(out, n, "%.0f%% in %ldd%ldh", used, left / 86400, left % 86400 / 3600);
    else if (left >= 3600)
        snprintf(out, n, "%.0f%% in %ldh%02ldm", used, left / 3600, left % 3600 / 60);
    else
        snprintf(out, n, "%.0f%% in %ldm%02lds", used, left / 60, left % 60);
}

static void cli_window_json(sbuf *o, const char *name, double used, double window_s, double reset_at, double now)
{
    sbuf_printf(o, ",\"%s\":", name);
    if (used < 0) {
        sbuf_puts(o, "null");
        return;
    }
    sbuf_printf(o, "{\"used_percent\":%g,\"window_s\":%.0f,\"reset_at\":%.0f,\"resets_in_s\":%.0f}", used,
                window_s, reset_at, reset_at > now ? reset_at - now : 0);
}

/* The usage fields of an account's JSON entry (what the headers and the
 * usage poll said). */
static void cli_usage_json(sbuf *o, const account_state *st, double now)
{
    if (!st) {
        sbuf_puts(o, ",\"plan_type\":null,\"primary\":null,\"secondary\":null,\"credits\":null,"
                     "\"usage_polled_at\":0,\"usage_poll_status\":0");
        return;
    }
    sbuf_puts(o, ",\"plan_type\":");
    if (st->plan_type[0])
        sbuf_json_str(o, st->plan_type, strlen(st->plan_type));
    else
        sbuf_puts(o, "null");
    cli_window_json(o, "primary", st->primary_used_pct, st->primary_window_s, st->primary_reset_at, now);
    cli_window_json(o, "secondary", st->secondary_used_pct, st->secondary_window_s, st->secondary_reset_at, now);
    if (st->has_credits < 0)
        sbuf_puts(o, ",\"credits\":null");
    else
        sbuf_printf(o, ",\"credits\":{\"has_credits\":%s,\"unlimited\":%s,\"balance\":%g}",
                    st->has_credits ? "true" : "false", st->credits_unlimited > 0 ? "true" : "false",
                    st->credits_balance);
    sbuf_printf(o, ",\"usage_polled_at\":%.0f,\"usage_poll_status\":%d", st->usage_polled_at,
                st->usage_poll_status);
}

/* The state's 60 s figures describe the minute before its last attempt:
 * shown while that minute is not over, and only when it held attempts. */
static int cli_window_fresh(const account_state *st, double now)
{
    return st && st->attempts_60s > 0 && st->success_rate_60s >= 0 && now - st->updated_at < 60;
}

static void cli_account_json(sbuf *o, const account *a, const account_state *st, double now)
{
    sbuf_printf(o, "{\"id\":%lld,\"name\":", (long long)a->id);
    sbuf_json_str(o, a->name, strlen(a->name));
    sbuf_printf(o, ",\"kind\":\"%s\",\"base_url\":", account_kind_name(a->kind));
    sbuf_json_str(o, a->base_url, strlen(a->base_url));
    sbuf_printf(o, ",\"sort\":%d,\"enabled\":%s,\"max_concurrency\":%d,\"context_fallback\":%s,\"weight\":%d,"
                   "\"max_rpm\":%d,\"max_tpm\":%d,\"budget_usd\":%.2f,\"budget_period\":\"%s\",\"cooldown_remaining_s\":%.0f,"
                   "\"ladder_step\":%d,",
                a->sort, a->enabled ? "true" : "false", a->max_concurrency, a->context_fallback ? "true" : "false",
                a->weight, a->max_rpm, a->max_tpm, a->budget_usd, a->budget_period, cli_cooldown_left(st, now),
                st ? st->ladder_step : 0);
    if (cli_window_fresh(st, now))
        sbuf_printf(o, "\"success_rate_60s\":%.4f,\"latency_60s_ms\":%.1f,\"attempts_60s\":%d,", st->success_rate_60s,
                    st->latency_60s_ms, st->attempts_60s);
    else
        sbuf_puts(o, "\"success_rate_60s\":null,\"latency_60s_ms\":null,\"attempts_60s\":0,");
    sbuf_puts(o, "\"last_error\":");
    if (st && st->last_error[0])
        sbuf_json_str(o, st->last_error, strlen(st->last_error));
    else
        sbuf_puts(o, "null");
    cli_usage_json(o, st, now);
    const char *const strs[][2] = {{"email", a->email}, {"login_plan_type", a->plan_type},
                                   {"chatgpt_account_id", a->chatgpt_account_id}, {"needs_login", a->login_error}};
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) {
        sbuf_printf(o, ",\"%s\":", strs[i][0]);
        if (strs[i][1])
            sbuf_json_str(o, strs[i][1], strlen(strs[i][1]));
        else
            sbuf_puts(o, "null");
    }
    sbuf_printf(o, ",\"access_expires_at\":%lld,\"last_refresh_at\":%lld,\"refreshable\":%s}",
                (long long)a->token_expires_at, (long long)a->last_refresh_at, a->refresh_token ? "true" : "false");
}

/* The LOGIN column: "needs_login: why", the access token's time left, or "-". */
static void cli_login_state(const account *a, double now, char *out, size_t n)
{
    if (a->login_error)
        snprintf(out, n, "needs_login: %s", a->login_error);
    else if (a->token_expires_at && a->token_expires_at <= now)
        snprintf(out, n, "expired%s", a->refresh_token ? " (refreshes)" : "");
    else if (a->token_expires_at)
        snprintf(out, n, "expires in %.0fh", (a->token_expires_at - now) / 3600.0);
    else
        snprintf(out, n, "%s", a->refresh_token ? "refreshable" : "-");
}

static void cli_account_row(const account *a, const account_state *st, double now)
{
    char cool[32] = "-", w5h[40], wk[40], plan[48], ok60[16] = "-", lat60[16] = "-";
    double left = cli_cooldown_left(st, now);
    if (left > 0)
        snprintf(cool, sizeof cool, "%.0fs", left);
    cli_window_fmt(w5h, sizeof w5h, st ? st->primary_used_pct : -1, st ? st->primary_reset_at : 0, now);
    cli_window_fmt(wk, sizeof wk, st ? st->secondary_used_pct : -1, st ? st->secondary_reset_at : 0, now);
    snprintf(plan, sizeof plan, "%s", st && st->plan_type[0] ? st->plan_type : "-");
    if (st && st->usage_poll_status && st->usage_poll_status != 200) /* e.g. 401: the token was refused */
        snprintf(plan, sizeof plan, "%s(poll %d)", st->plan_type[0] ? st->plan_type : "", st->usage_poll_status);
    if (cli_window_fresh(st, now)) {
        snprintf(ok60, sizeof ok60, "%.0f%%/%d", st->success_rate_60s * 100, st->attempts_60s);
        if (st->latency_60s_ms >= 0)
            snprintf(lat60, sizeof lat60, "%.0fms", st->latency_60s_ms);
    }
    printf("%-5lld %-20s %-9s %5d %-7s %7d %6d %-9s %-9s %-8s %6d %-14s %-15s %-15s %-12s %s\n", (long long)a->id,
           a->name, account_kind_name(a->kind), a->sort, a->enabled ? "yes" : "no", a->max_concurrency, a->weight,
           cool, ok60, lat60, st ? st->ladder_step : 0, st && st->last_error[0] ? st->last_error : "-", w5h, wk, plan,
           a->base_url);
    if (a->kind == ACCOUNT_CHATGPT) {
        char login[160];
        cli_login_state(a, now, login, sizeof login);
        printf("      login: %s%s%s%s%s\n", a->email ? a->email : "-", ", ", login, a->plan_type ? ", plan " : "",
               a->plan_type ? a->plan_type : "");
    }
}

static void cli_account_print(const account *acc, size_t n, const account_state *st, size_t nst, int json)
{
    double now = (double)time(NULL);
    sbuf o = SBUF_INIT;
    if (!json)
        printf("%-5s %-20s %-9s %5s %-7s %7s %6s %-9s %-9s %-8s %6s %-14s %-15s %-15s %-12s %s\n", "ID", "NAME", "KIND",
               "SORT", "ENABLED", "MAXCONC", "WEIGHT", "COOLDOWN", "OK_60S", "LAT_60S", "LADDER", "LAST_ERROR",
               "5H_WINDOW", "WEEKLY_WINDOW", "PLAN", "BASE_URL");
    sbuf_puts(&o, "[");
    for (size_t i = 0; i < n; i++) {
        const account_state *s = cli_state_find(st, nst, acc[i].id);
        if (json) {
            sbuf_puts(&o, i ? "," : "");
            cli_account_json(&o, &acc[i], s, now);
        } else {
            cli_account_row(&acc[i], s, now);
        }
    }
    sbuf_puts(&o, "]\n");
    if (json)
        fputs(o.p, stdout);
    sbuf_free(&o);
}

static int cli_account_list(int argc, char **argv)
{
    const char *cmd = "account list", *db = NULL;
    int json = 0, help = 0;
    const cli_opt opts[] = {{"db", &db, NULL}, {"json", NULL, &json}, {"help", NULL, &help}, {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &help, cli_usage_account);
    if (rc >= 0)
        return rc;
    store *s = cli_store_open(cmd, db);
    if (!s)
        return CLI_EXIT_FAIL;
    account *acc = NULL;
    account_state *st = NULL;
    size_t n = 0, nst = 0;
    rc = store_accounts_load(s, &acc, &n) == 0 && store_states_load(s, &st, &nst) == 0 ? 0 : -1;
    if (rc == 0)
        cli_account_print(acc, n, st, nst, json);
    else
        fprintf(stderr, "switchyard %s: cannot read accounts from %s\n", cmd, store_path(s));
    store_accounts_free(acc, n);
    free(st);
    store_close(s);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

/* ---------- account enable / disable / remove ---------- */

typedef enum { CLI_ACCOUNT_ENABLE, CLI_ACCOUNT_DISABLE, CLI_ACCOUNT_REMOVE, CLI_ACCOUNT_RESET } cli_account_action;

static int cli_account_change(const char *cmd, int argc, char **argv, cli_account_action action)
{
    static const char *const done[] = {"enabled", "disabled", "removed", "reset (cooldown, ladder, breaker) of"};
    const char *db = NULL, *name = NULL;
    int help = 0;
    const cli_opt opts[] = {{"db", &db, NULL}, {"name", &name, NULL}, {"help", NULL, &help}, {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &help, cli_usage_account);
    if (rc >= 0)
        return rc;
    store *s = cli_store_open_named(cmd, db, name, &rc);
    if (!s)
        return rc;
    char err[512] = "";
    if (action == CLI_ACCOUNT_REMOVE)
        rc = store_account_remove(s, name, err, sizeof err);
    else if (action == CLI_ACCOUNT_RESET)
        rc = store_account_reset(s, name, err, sizeof err);
    else
        rc = store_account_set_enabled(s, name, action == CLI_ACCOUNT_ENABLE, err, sizeof err);
    if (rc == 0)
        printf("%s account %s\n", done[action], name);
    else
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    store_close(s);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

static int cli_account_enable(int argc, char **argv)
{
    return cli_account_change("account enable", argc, argv, CLI_ACCOUNT_ENABLE);
}

static int cli_account_disable(int argc, char **argv)
{
    return cli_account_change("account disable", argc, argv, CLI_ACCOUNT_DISABLE);
}

static int cli_account_remove(int argc, char **argv)
{
    return cli_account_change("account remove", argc, argv, CLI_ACCOUNT_REMOVE);
}

static int cli_account_reset(int argc, char **argv)
{
    return cli_account_change("account reset", argc, argv, CLI_ACCOUNT_RESET);
}

/* ---------- account import / export / update ---------- */

static int cli_account_import(int argc, char **argv)
{
    const char *cmd = "account import", *db = NULL;
    const char *files[256];
    int help = 0;
    cli_pos pos = {files, 256, 0};
    const cli_opt opts[] = {{"db", &db, NULL}, {"help", NULL, &help}, {NULL, NULL, NULL}};
    if (cli_parse(cmd, argc, argv, opts, &pos) != 0 || (!help && pos.n == 0)) {
        if (!help && pos.n == 0)
            fprintf(stderr, "switchyard %s: give one or more files\n", cmd);
        cli_usage_account(stderr);
        return CLI_EXIT_USAGE;
    }
    if (help) {
        cli_usage_account(stdout);
        return CLI_EXIT_OK;
    }
    login_list l = {0};
    char err[512] = "";
    for (int i = 0; i < pos.n; i++)
        if (login_file_read(files[i], &l, err, sizeof err) != 0) {
            fprintf(stderr, "switchyard %s: %s; nothing was imported\n", cmd, err);
            login_list_free(&l);
            return CLI_EXIT_FAIL;
        }
    account_new *an = calloc(l.n, sizeof *an);
    char(*names)[128] = calloc(l.n, sizeof *names);
    const char **labels = calloc(l.n, sizeof *labels);
    for (size_t i = 0; i < l.n; i++) {
        login_entry_to_account(&l.v[i], &an[i], names[i], sizeof names[i]);
        labels[i] = l.v[i].label;
    }
    int rc = CLI_EXIT_FAIL, added = 0, updated = 0;
    store *s = cli_store_open(cmd, db);
    if (s && store_accounts_import(s, an, l.n, labels, &added, &updated, err, sizeof err) == 0) {
        printf("imported %zu login%s: %d added, %d updated\n", l.n, l.n == 1 ? "" : "s", added, updated);
        rc = CLI_EXIT_OK;
    } else if (s) {
        fprintf(stderr, "switchyard %s: %s; nothing was imported\n", cmd, err);
    }
    store_close(s);
    free(labels);
    free(names);
    free(an);
    login_list_free(&l);
    return rc;
}

/* Creates (or truncates) path with mode 0600 and writes text into it. */
static int cli_write_private(const char *cmd, const char *path, const sbuf *text)
{
    if (strcmp(path, "-") == 0)
        return fwrite(text->p, 1, text->len, stdout) == text->len ? 0 : -1;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = fd < 0 || fchmod(fd, 0600) != 0 ? -1 : 0;
    for (size_t off = 0; rc == 0 && off < text->len;) {
        ssize_t n = write(fd, text->p + off, text->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            rc = -1;
        else
            off += (size_t)n;
    }
    if (rc == 0 && fsync(fd) != 0)
        rc = -1;
    if (rc != 0)
        fprintf(stderr, "switchyard %s: cannot write %s: %s\n", cmd, path, strerror(errno));
    if (fd >= 0)
        close(fd);
    return rc;
}

static int cli_account_export(int argc, char **argv)
{
    const char *cmd = "account export", *db = NULL, *name = NULL, *out = NULL;
    int secrets = 0, help = 0;
    const cli_opt opts[] = {{"db", &db, NULL}, {"name", &name, NULL}, {"out", &out, NULL},
                            {"with-secrets", NULL, &secrets}, {"help", NULL, &help}, {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &help, cli_usage_account);
    if (rc >= 0)
        return rc;
    if (!out || !*out) {
        fprintf(stderr, "switchyard %s: --out FILE is required (--out - for stdout)\n", cmd);
        return CLI_EXIT_USAGE;
    }
    store *s = cli_store_open(cmd, db);
    if (!s)
        return CLI_EXIT_FAIL;
    account *acc = NULL;
    size_t n = 0, k = 0;
    rc = CLI_EXIT_FAIL;
    if (store_accounts_load(s, &acc, &n) != 0) {
        fprintf(stderr, "switchyard %s: cannot read accounts from %s\n", cmd, store_path(s));
    } else {
        for (size_t i = 0; i < n; i++) /* keep the selected ones at the front */
            if (!name || strcmp(acc[i].name, name) == 0) {
                account t = acc[k];
                acc[k++] = acc[i];
                acc[i] = t;
            }
        sbuf text = SBUF_INIT;
        login_file_write(&text, acc, k, secrets);
        if (name && k == 0)
            fprintf(stderr, "switchyard %s: no account named '%s'\n", cmd, name);
        else if (cli_write_private(cmd, out, &text) == 0)
            rc = CLI_EXIT_OK;
        if (rc == CLI_EXIT_OK && strcmp(out, "-") != 0)
            printf("exported %zu account%s to %s%s\n", k, k == 1 ? "" : "s", out,
                   secrets ? " (with tokens: keep it private)" : " (without tokens)");
        sbuf_secret_wipe(&text);
    }
    store_accounts_free(acc, n);
    store_close(s);
    return rc;
}

static int cli_account_update(int argc, char **argv)
{
    const char *cmd = "account update";
    cli_account_args a = {0};
    int no_fallback = 0;
    const cli_opt opts[] = {
        {"db", &a.db, NULL}, {"name", &a.name, NULL}, {"base-url", &a.base_url, NULL},
        {"token", &a.token, NULL}, {"token-file", &a.token_file, NULL}, {"sort", &a.sort, NULL},
        {"max-concurrency", &a.max_conc, NULL}, {"chatgpt-account-id", &a.chatgpt_id, NULL},
        {"model-map", &a.model_map, NULL}, {"codex-auth", &a.codex_auth, NULL}, {"help", NULL, &a.help},
        {"context-fallback", NULL, &a.context_fallback}, {"no-context-fallback", NULL, &no_fallback},
        {"weight", &a.weight, NULL}, {"max-rpm", &a.max_rpm, NULL}, {"max-tpm", &a.max_tpm, NULL},
        {"budget", &a.budget, NULL}, {"budget-period", &a.budget_period, NULL},
        {NULL, NULL, NULL},
    };
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &a.help, cli_usage_account);
    if (rc >= 0)
        return rc;
    account_patch p = {0};
    if (a.context_fallback && no_fallback) {
        fprintf(stderr, "switchyard %s: give --context-fallback or --no-context-fallback, not both\n", cmd);
        return CLI_EXIT_USAGE;
    }
    p.has_context_fallback = a.context_fallback || no_fallback;
    p.context_fallback = a.context_fallback;
    if ((a.weight && cli_parse_int(cmd, "weight", a.weight, 1, &p.weight) != 0) ||
        (a.max_rpm && cli_parse_int(cmd, "max-rpm", a.max_rpm, 0, &p.max_rpm) != 0) ||
        (a.max_tpm && cli_parse_int(cmd, "max-tpm", a.max_tpm, 0, &p.max_tpm) != 0) ||
        cli_budget_parse(cmd, a.budget, a.budget_period, &p.budget_usd) != 0)
        return CLI_EXIT_USAGE;
    p.has_weight = a.weight != NULL;
    p.has_max_rpm = a.max_rpm != NULL;
    p.has_max_tpm = a.max_tpm != NULL;
    p.has_budget = a.budget != NULL;
    p.budget_period = a.budget_period;
    if (!a.name || !*a.name) {
        fprintf(stderr, "switchyard %s: --name is required\n", cmd);
        return CLI_EXIT_USAGE;
    }
    if ((a.sort && cli_parse_int(cmd, "sort", a.sort, INT_MIN, &p.sort) != 0) ||
        (a.max_conc && cli_parse_int(cmd, "max-concurrency", a.max_conc, 0, &p.max_concurrency) != 0))
        return CLI_EXIT_USAGE;
    if (a.model_map && *a.model_map && !cli_looks_like_object(a.model_map)) {
        fprintf(stderr, "switchyard %s: --model-map must be a JSON object (or '' to clear it)\n", cmd);
        return CLI_EXIT_USAGE;
    }
    p.has_sort = a.sort != NULL;
    p.has_max_concurrency = a.max_conc != NULL;
    p.base_url = a.base_url;
    p.model_map = a.model_map;
    p.chatgpt_account_id = a.chatgpt_id;
    sbuf token = SBUF_INIT;
    login_list logins = {0};
    int got = 0;
    if (a.codex_auth && (a.token || a.token_file)) {
        fprintf(stderr, "switchyard %s: give either --codex-auth or --token, not both\n", cmd);
        got = -1;
    } else if (a.codex_auth && (got = cli_codex_auth_read(cmd, a.codex_auth, &logins)) == 0) {
        const login_entry *e = &logins.v[0];
        p.token = e->access_token;
        login_entry_login(e, &p.login);
        if (!p.chatgpt_account_id)
            p.chatgpt_account_id = e->account_id;
    } else if (!a.codex_auth && (a.token || a.token_file) &&
               (got = cli_token_get(cmd, a.token, a.token_file, &token)) == 0) {
        p.token = token.p;
        p.login.token_expires_at = cli_token_expiry(token.p);
    }
    rc = got == 0 ? CLI_EXIT_FAIL : CLI_EXIT_USAGE;
    store *s = got == 0 ? cli_store_open(cmd, a.db) : NULL;
    char err[512] = "";
    if (s && store_account_update(s, a.name, &p, err, sizeof err) == 0) {
        printf("updated account %s\n", a.name);
        rc = CLI_EXIT_OK;
    } else if (s) {
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    }
    store_close(s);
    sbuf_secret_wipe(&token);
    login_list_free(&logins);
    return rc;
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

static int cli_key_add(int argc, char **argv)
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
    store *s = cli_store_open(cmd, db);
    if (!s)
        return CLI_EXIT_FAIL;
    char key[128], err[512] = "";
    int64_t id = 0;
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

static int cli_key_update(int argc, char **argv)
{
    const char *cmd = "key update", *db = NULL, *name = NULL;
    int help = 0;
    cli_key_rules r = {0};
    const cli_opt opts[] = {{"db", &db, NULL},         {"name", &name, NULL},          {"models", &r.models, NULL},
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
    store *s = cli_store_open_named(cmd, db, name, &rc);
    if (!s)
        return rc;
    char err[512] = "";
    int n = store_key_update(s, 0, name, &u, err, sizeof err);
    if (n > 0)
        printf("updated key %s (%d key%s)\n", name, n, n == 1 ? "" : "s");
    else
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    store_close(s);
    return n > 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

static void cli_key_json(sbuf *o, const platform_key *k)
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
    sbuf_puts(o, "}");
}

static void cli_key_print(const platform_key *k, size_t n, int json)
{
    sbuf o = SBUF_INIT;
    sbuf_puts(&o, "[");
    if (!json)
        printf("%-5s %-24s %-8s %-7s %-9s %-5s %-20s %-16s %s\n", "ID", "NAME", "PREFIX", "REVOKED", "PREFERRED", "RPM",
               "EXPIRES", "BUDGET", "MODELS");
    for (size_t i = 0; i < n; i++) {
        if (json) {
            sbuf_puts(&o, i ? "," : "");
            cli_key_json(&o, &k[i]);
            continue;
        }
        char pref[24] = "-";
        if (k[i].preferred_account_id)
            snprintf(pref, sizeof pref, "%lld", (long long)k[i].preferred_account_id);
        char rpm[16] = "-", exp[24] = "never", budget[40] = "-";
        if (k[i].budget_usd > 0)
            snprintf(budget, sizeof budget, "$%.2f/%s", k[i].budget_usd, k[i].budget_period);
        if (k[i].max_rpm)
            snprintf(rpm, sizeof rpm, "%d", k[i].max_rpm);
        if (k[i].expires_at) {
            time_t t = (time_t)k[i].expires_at;
            struct tm tm;
            strftime(exp, sizeof exp, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
        }
        printf("%-5lld %-24s %-8s %-7s %-9s %-5s %-20s %-16s %s\n", (long long)k[i].id, k[i].name, k[i].prefix,
               k[i].revoked ? "yes" : "no", pref, rpm, exp, budget, k[i].allowed_models ? k[i].allowed_models : "*");
    }
    sbuf_puts(&o, "]\n");
    if (json)
        fputs(o.p, stdout);
    sbuf_free(&o);
}

static int cli_key_list(int argc, char **argv)
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
    if (rc == 0)
        cli_key_print(k, n, json);
    else
        fprintf(stderr, "switchyard %s: cannot read keys from %s\n", cmd, store_path(s));
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

static int cli_key_prefer(int argc, char **argv)
{
    const char *cmd = "key prefer", *db = NULL, *name = NULL, *acct = NULL;
    int clear = 0, help = 0;
    const cli_opt opts[] = {{"db", &db, NULL}, {"name", &name, NULL}, {"account", &acct, NULL},
                            {"clear", NULL, &clear}, {"help", NULL, &help}, {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &help, cli_usage_key);
    if (rc >= 0)
        return rc;
    if (cli_key_prefer_check(cmd, acct, clear) != 0)
        return CLI_EXIT_USAGE;
    store *s = cli_store_open_named(cmd, db, name, &rc);
    if (!s)
        return rc;
    char err[512] = "";
    int n = store_key_set_preferred_by_name(s, name, acct, err, sizeof err);
    if (n > 0 && acct)
        printf("key %s now prefers account %s (%d key%s)\n", name, acct, n, n == 1 ? "" : "s");
    else if (n > 0)
        printf("cleared the preferred account of key %s (%d key%s)\n", name, n, n == 1 ? "" : "s");
    else
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    store_close(s);
    return n > 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

static int cli_key_revoke(int argc, char **argv)
{
    const char *cmd = "key revoke", *db = NULL, *name = NULL;
    int help = 0;
    const cli_opt opts[] = {{"db", &db, NULL}, {"name", &name, NULL}, {"help", NULL, &help}, {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &help, cli_usage_key);
    if (rc >= 0)
        return rc;
    store *s = cli_store_open_named(cmd, db, name, &rc);
    if (!s)
        return rc;
    char err[512] = "";
    int n = store_key_revoke(s, name, err, sizeof err);
    if (n > 0)
        printf("revoked key %s (%d key%s)\n", name, n, n == 1 ? "" : "s");
    else if (n == 0)
        printf("key %s was already revoked\n", name);
    else
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    store_close(s);
    return n >= 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
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

static int cli_config_set(int argc, char **argv)
{
    const char *cmd = "config set";
    cli_config_args a = {0};
    int rc = cli_config_parse(cmd, argc, argv, 2, "KEY VALUE", &a);
    if (rc >= 0)
        return rc;
    const char *value = a.setting->canonical(a.pos[1]);
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
        printf("%s=%s\n", a.setting->key, value);
    else
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    store_close(s);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

static int cli_config_get(int argc, char **argv)
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

static int cli_config_unset(int argc, char **argv)
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

static void cli_config_line(void *ud, const char *key, const char *value) { printf("%s=%s\n", key, value); }

static int cli_config_list(int argc, char **argv)
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

/* ---------- codex attach / detach / status ---------- */

typedef struct cli_codex_args {
    const char *db, *home, *gateway;
    int force, help;
} cli_codex_args;

/* Parses the codex options (force only for detach) and opens the store;
 * NULL with *rc the exit code when the command should stop. */
static store *cli_codex_open(const char *cmd, int argc, char **argv, cli_codex_args *a, int create, char *home,
                             size_t n, int *rc)
{
    int nope = 0;
    const cli_opt opts[] = {{"db", &a->db, NULL},
                            {"codex-home", &a->home, NULL},
                            {"gateway", &a->gateway, NULL},
                            {"force", NULL, strcmp(cmd, "codex detach") == 0 ? &a->force : &nope},
                            {"help", NULL, &a->help},
                            {NULL, NULL, NULL}};
    *rc = cli_parse_or_usage(cmd, argc, argv, opts, &a->help, cli_usage_codex);
    if (*rc >= 0)
        return NULL;
    if (nope || (a->gateway && strcmp(cmd, "codex attach") != 0)) {
        fprintf(stderr, "switchyard %s: %s applies to %s only\n", cmd, nope ? "--force" : "--gateway",
                nope ? "detach" : "attach");
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

static int cli_codex_attach(int argc, char **argv)
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
    rc = codex_attach(s, home, gw, &report, err, sizeof err);
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

static int cli_codex_detach(int argc, char **argv) { return cli_codex_look("codex detach", argc, argv, 1); }
static int cli_codex_status(int argc, char **argv) { return cli_codex_look("codex status", argc, argv, 0); }

/* ---------- usage (spend report) ---------- */

static void cli_usage_spend(FILE *f)
{
    fputs("usage: switchyard usage [--by key|account|model|day] [--since WHEN] [--json] [--db PATH]\n"
          "  requests, tokens and cost (USD, from policies/prices.lua) in the request log;\n"
          "  WHEN is YYYY-MM-DD (UTC), Nd or Nh (the last N days / hours); default: everything\n",
          f);
}

/* "YYYY-MM-DD" (UTC midnight), "Nd" or "Nh" before now; -1 if unreadable. */
static double cli_parse_since(const char *text, double now)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *end = strptime(text, "%Y-%m-%d", &tm);
    if (end && !*end)
        return (double)timegm(&tm);
    char *e = NULL;
    errno = 0;
    long n = strtol(text, &e, 10);
    if (errno || e == text || n < 0 || (strcmp(e, "d") != 0 && strcmp(e, "h") != 0))
        return -1;
    return now - (double)n * (*e == 'd' ? 86400.0 : 3600.0);
}

typedef struct cli_spend_out {
    int json, rows;
    sbuf o;
} cli_spend_out;

static void cli_spend_row(void *ud, const usage_row *r)
{
    cli_spend_out *out = ud;
    if (!out->json) {
        printf("%-32s %9lld %12lld %12lld %12lld %12lld %12.4f%s\n", r->group, (long long)r->requests,
               (long long)r->input_tokens, (long long)r->cached_tokens, (long long)r->output_tokens,
               (long long)r->total_tokens, r->cost_usd, r->unpriced ? " *" : "");
    } else {
        sbuf_puts(&out->o, out->rows ? ",{\"group\":" : "{\"group\":");
        sbuf_json_str(&out->o, r->group, strlen(r->group));
        sbuf_printf(&out->o, ",\"requests\":%lld,\"input_tokens\":%lld,\"cached_tokens\":%lld,\"output_tokens\":%lld,"
                             "\"total_tokens\":%lld,\"cost_usd\":%.6f,\"unpriced_requests\":%lld}",
                    (long long)r->requests, (long long)r->input_tokens, (long long)r->cached_tokens,
                    (long long)r->output_tokens, (long long)r->total_tokens, r->cost_usd, (long long)r->unpriced);
    }
    out->rows++;
}

int cli_spend_main(int argc, char **argv)
{
    const char *cmd = "usage", *db = NULL, *by = NULL, *since_s = NULL;
    int json = 0, help = 0;
    const cli_opt opts[] = {{"db", &db, NULL},     {"by", &by, NULL},     {"since", &since_s, NULL},
                            {"json", NULL, &json}, {"help", NULL, &help}, {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc - 1, argv + 1, opts, &help, cli_usage_spend);
    if (rc >= 0)
        return rc;
    double since = 0;
    if (since_s && (since = cli_parse_since(since_s, (double)time(NULL))) < 0) {
        fprintf(stderr, "switchyard %s: --since must be YYYY-MM-DD, Nd or Nh, got '%s'\n", cmd, since_s);
        return CLI_EXIT_USAGE;
    }
    if (by && strcmp(by, "key") && strcmp(by, "account") && strcmp(by, "model") && strcmp(by, "day")) {
        fprintf(stderr, "switchyard %s: --by must be key, account, model or day, got '%s'\n", cmd, by);
        return CLI_EXIT_USAGE;
    }
    store *s = cli_store_open(cmd, db);
    if (!s)
        return CLI_EXIT_FAIL;
    cli_spend_out out = {.json = json, .o = SBUF_INIT};
    if (!json)
        printf("%-32s %9s %12s %12s %12s %12s %12s\n", by ? by : "", "REQUESTS", "INPUT", "CACHED", "OUTPUT",
               "TOTAL", "COST_USD");
    char err[512] = "";
    rc = store_usage_report(s, by, since, cli_spend_row, &out, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    else if (json)
        printf("[%s]\n", out.o.p ? out.o.p : "");
    sbuf_free(&out.o);
    store_close(s);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
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
