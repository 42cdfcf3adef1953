/* cli_account.c: `switchyard account add|list|import|export|update|enable|
 * disable|remove|reset`. Tokens can come from a file or stdin so they stay
 * out of shell history (the secrets readers below), and no command here ever
 * prints an upstream token; a Codex login file gives a chatgpt account its
 * token and login. */
#include "admin/cli_internal.h"
#include "admin/admin_api.h"
#include "accounts/login_file.h"
#include "base/budget.h"
#include "base/jwt.h"
#include "base/sbuf.h"
#include "base/url.h"
#include "route/hold.h"
#include "store/store.h"
#include "upstream/model_list.h"
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

#define CLI_SECRET_MAX 65536

void cli_usage_account(FILE *f)
{
    fputs("usage: switchyard account add --name N --base-url URL (--token T | --token - | --token-file PATH)\n"
          "                              [--kind api_key|chatgpt|aggregate|anthropic] [--sort N] [--max-concurrency N]\n"
          "                              [--chatgpt-account-id ID] [--model-map JSON] [--context-fallback]\n"
          "                              [--weight N] [--max-rpm N] [--max-tpm N]\n"
          "                              [--budget USD [--budget-period month|<N>d]] [--models a,b,c]\n"
          "                              [--prefill auto|yes|no] [--speaks auto|responses|chat|both] [--db PATH]\n"
          "       switchyard account add --name N --codex-auth ~/.codex/auth.json [options above]\n"
          "                              (a chatgpt account from a Codex login; --base-url is optional for chatgpt)\n"
          "       switchyard account login [--name N] [--device] [--no-browser] [--port N] [--timeout S] [--db PATH]\n"
          "                              (signs in to ChatGPT as Codex CLI does; see docs/accounts.md)\n"
          "       switchyard account import FILE... [--db PATH]\n"
          "                              (Codex auth.json files and exports of many logins; see docs/accounts.md)\n"
          "       switchyard account export --out FILE|- [--name N] [--with-secrets] [--db PATH]\n"
          "       switchyard account update --name N [--token T | --token-file PATH | --codex-auth FILE]\n"
          "                              [--base-url URL] [--sort N] [--max-concurrency N] [--model-map JSON]\n"
          "                              [--context-fallback | --no-context-fallback] [--weight N]\n"
          "                              [--max-rpm N] [--max-tpm N] [--budget USD] [--budget-period month|<N>d]\n"
          "                              [--models a,b,c | --models ''] [--prefill auto|yes|no]\n"
          "                              [--speaks auto|responses|chat|both]\n"
          "       switchyard account list [--json] [--db PATH]\n"
          "       switchyard account enable|disable|remove|reset --name N [--db PATH]\n"
          "  --context-fallback marks a larger-context account: a request another account refuses as too\n"
          "  long (context_length_exceeded) is sent to it once; reset clears cooldown, 429 ladder, breaker and a hold\n"
          "  --models lists the models the account serves (requests for others skip it); without it the\n"
          "  list the upstream's /models gives is used, and '' clears it\n"
          "  --prefill: how a cut stream is finished here: yes sends the delivered text as an assistant prefill\n"
          "  (a refusal is remembered; reset forgets it); auto and no send it followed by the instruction to continue\n"
          "  --speaks: the API dialects its upstream speaks (auto: the kind's; a ChatGPT login speaks responses,\n"
          "  a key or relay both until it answers 404/405 to one, which is remembered); others are translated\n"
          "  --token - reads the token from stdin; the database defaults to $SWITCHYARD_DB or ./switchyard.db\n",
          f);
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
    const char *codex_auth, *weight, *max_rpm, *max_tpm, *budget, *budget_period, *models, *prefill, *speaks;
    int help, context_fallback;
} cli_account_args;

/* --prefill auto|yes|no into *out; -1 after a message ("refused" is the
 * gateway's own finding, not an operator's choice). */
static int cli_prefill_parse(const char *cmd, const char *text, int *out)
{
    if (!text)
        return 0;
    if (account_prefill_parse(text, out) != 0 || *out == PREFILL_REFUSED) {
        fprintf(stderr, "switchyard %s: --prefill must be auto, yes or no, got '%s'\n", cmd, text);
        return -1;
    }
    return 0;
}

/* --speaks auto|responses|chat|both into *out; -1 after a message. */
static int cli_speaks_parse(const char *cmd, const char *text, int *out)
{
    if (!text)
        return 0;
    if (account_speaks_parse(text, out) != 0) {
        fprintf(stderr, "switchyard %s: --speaks must be auto, responses, chat or both, got '%s'\n", cmd, text);
        return -1;
    }
    return 0;
}

/* Normalizes --models into buf (the caller frees it); -1 after a message. */
static int cli_models_parse(const char *cmd, const char *in, sbuf *buf)
{
    char err[256] = "";
    if (!in)
        return 0;
    if (model_list_normalize(in, buf, err, sizeof err) != 0) {
        fprintf(stderr, "switchyard %s: --models: %s\n", cmd, err);
        return -1;
    }
    return 0;
}

#define CLI_CHATGPT_BASE_URL "https://chatgpt.com/backend-api/codex"
#define CLI_ANTHROPIC_BASE_URL "https://api.anthropic.com/v1"

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
        fprintf(stderr, "switchyard %s: --kind must be api_key, chatgpt, aggregate or anthropic, got '%s'\n", cmd,
                a->kind);
        return -1;
    }
    if (a->codex_auth && a->kind && an->kind != ACCOUNT_CHATGPT) {
        fprintf(stderr, "switchyard %s: --codex-auth makes a chatgpt account; drop --kind %s\n", cmd, a->kind);
        return -1;
    }
    if (a->codex_auth)
        an->kind = ACCOUNT_CHATGPT;
    /* the ChatGPT backend and the Anthropic API have one address each: those
     * kinds need no --base-url */
    const char *base_url = a->base_url                      ? a->base_url
                           : an->kind == ACCOUNT_CHATGPT   ? CLI_CHATGPT_BASE_URL
                           : an->kind == ACCOUNT_ANTHROPIC ? CLI_ANTHROPIC_BASE_URL
                                                           : NULL;
    if (!a->name || !*a->name) { /* each missing flag by itself: the message names only what is wrong */
        fprintf(stderr, "switchyard %s: --name is required%s\n", cmd, a->name ? " (it is empty)" : "");
        return -1;
    }
    if (!base_url || !*base_url) {
        fprintf(stderr, "switchyard %s: --base-url is required (only chatgpt and anthropic accounts have a default)\n",
                cmd);
        return -1;
    }
    char why[URL_BASE_MAX + 160];
    if (url_base_check(base_url, why, sizeof why) != 0) { /* before a token is read; the store checks it again */
        fprintf(stderr, "switchyard %s: --base-url %s\n", cmd, why);
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
    store *s = cli_store_open_new(cmd, db);
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

int cli_account_add(int argc, char **argv)
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
        {"models", &a.models, NULL}, {"prefill", &a.prefill, NULL}, {"speaks", &a.speaks, NULL},
        {"help", NULL, &a.help}, {NULL, NULL, NULL},
    };
    account_new an = {.kind = ACCOUNT_API_KEY, .max_concurrency = -1};
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &a.help, cli_usage_account);
    if (rc >= 0)
        return rc;
    an.context_fallback = a.context_fallback;
    if (cli_account_validate(cmd, &a, &an) != 0 || cli_prefill_parse(cmd, a.prefill, &an.prefill) != 0 ||
        cli_speaks_parse(cmd, a.speaks, &an.speaks) != 0)
        return CLI_EXIT_USAGE;
    if (an.kind == ACCOUNT_ANTHROPIC && an.speaks != SPEAKS_AUTO) {
        fprintf(stderr, "switchyard %s: --speaks is about the OpenAI APIs; an anthropic account speaks the Messages "
                        "API only\n", cmd);
        return CLI_EXIT_USAGE;
    }
    sbuf models = SBUF_INIT;
    if (cli_models_parse(cmd, a.models, &models) != 0) {
        sbuf_free(&models);
        return CLI_EXIT_USAGE;
    }
    an.models = models.p;
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
    sbuf_free(&models);
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

/* ,"hold": null, or the state the account is held in, what happened and
 * what to do (route/hold.h), as the admin API tells it. */
static void cli_hold_json(sbuf *o, const account *a)
{
    sbuf_puts(o, ",\"hold\":");
    if (!a->hold) {
        sbuf_puts(o, "null");
        return;
    }
    hold_info h = hold_describe(a->hold);
    char fix[HOLD_TEXT_MAX];
    hold_fix(a->hold, a->name, fix, sizeof fix);
    const char *const strs[][2] = {{"state", a->hold}, {"what", h.what}, {"fix", fix}, {"detail", a->hold_detail}};
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) {
        sbuf_printf(o, "%s\"%s\":", i ? "," : "{", strs[i][0]);
        if (strs[i][1])
            sbuf_json_str(o, strs[i][1], strlen(strs[i][1]));
        else
            sbuf_puts(o, "null");
    }
    sbuf_printf(o, ",\"since\":%lld}", (long long)a->hold_since);
}

/* A dialect bit set as a JSON array of names. */
static void cli_dialects_json(sbuf *o, unsigned bits)
{
    sbuf_printf(o, "[%s%s%s]", bits & ACCOUNT_DIALECT_RESPONSES ? "\"responses\"" : "",
                (bits & ACCOUNT_DIALECT_RESPONSES) && (bits & ACCOUNT_DIALECT_CHAT) ? "," : "",
                bits & ACCOUNT_DIALECT_CHAT ? "\"chat\"" : "");
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
    sbuf_puts(o, "\"family_cooldowns\":");
    admin_families_json(o, st, now);
    sbuf_puts(o, ",");
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
    sbuf_printf(o, ",\"access_expires_at\":%lld,\"last_refresh_at\":%lld,\"refreshable\":%s",
                (long long)a->token_expires_at, (long long)a->last_refresh_at, a->refresh_token ? "true" : "false");
    cli_hold_json(o, a);
    sbuf_puts(o, ",\"models\":");
    if (a->models)
        sbuf_json_str(o, a->models, strlen(a->models));
    else
        sbuf_puts(o, "null");
    sbuf_printf(o, ",\"prefill\":\"%s\",\"speaks\":\"%s\",\"dialects\":", account_prefill_name(a->prefill),
                account_speaks_name(a->speaks));
    unsigned speaks = account_dialects(a, st);
    unsigned refused = st ? (unsigned)st->dialects_refused : 0;
    cli_dialects_json(o, speaks);
    sbuf_puts(o, ",\"dialects_refused\":");
    cli_dialects_json(o, refused);
    sbuf_puts(o, "}");
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

/* The cells of an account's row in `account list` (the columns of
 * CLI_ACCOUNT_HEAD); v points into the buffers or the account. */
typedef struct cli_account_cells {
    char id[24], sort[16], maxc[16], weight[16], cool[32], ok60[16], lat60[16], ladder[16], w5h[40], wk[40],
        plan[48], budget[96];
    const char *v[17];
} cli_account_cells;

static const char *const cli_account_head[] = {"ID",      "NAME",      "KIND",      "SORT",          "ENABLED",
                                                "MAXCONC", "WEIGHT",    "COOLDOWN",  "OK_60S",        "LAT_60S",
                                                "LADDER",  "LAST_ERROR", "5H_WINDOW", "WEEKLY_WINDOW", "PLAN",
                                                "BUDGET",  "BASE_URL"};
#define CLI_ACCOUNT_ALIGN "lllrlrrlllrllllll"

/* spent: in the budget's current window (unused without a budget). */
static void cli_account_cells_make(cli_account_cells *c, const account *a, const account_state *st, double spent,
                                   double now)
{
    snprintf(c->cool, sizeof c->cool, "-");
    snprintf(c->ok60, sizeof c->ok60, "-");
    snprintf(c->lat60, sizeof c->lat60, "-");
    double left = cli_cooldown_left(st, now);
    if (left > 0)
        snprintf(c->cool, sizeof c->cool, "%.0fs", left);
    cli_window_fmt(c->w5h, sizeof c->w5h, st ? st->primary_used_pct : -1, st ? st->primary_reset_at : 0, now);
    cli_window_fmt(c->wk, sizeof c->wk, st ? st->secondary_used_pct : -1, st ? st->secondary_reset_at : 0, now);
    snprintf(c->plan, sizeof c->plan, "%s", st && st->plan_type[0] ? st->plan_type : "-");
    if (st && st->usage_poll_status && st->usage_poll_status != 200) /* e.g. 401: the token was refused */
        snprintf(c->plan, sizeof c->plan, "%s(poll %d)", st->plan_type[0] ? st->plan_type : "", st->usage_poll_status);
    if (cli_window_fresh(st, now)) {
        snprintf(c->ok60, sizeof c->ok60, "%.0f%%/%d", st->success_rate_60s * 100, st->attempts_60s);
        if (st->latency_60s_ms >= 0)
            snprintf(c->lat60, sizeof c->lat60, "%.0fms", st->latency_60s_ms);
    }
    snprintf(c->id, sizeof c->id, "%lld", (long long)a->id);
    snprintf(c->sort, sizeof c->sort, "%d", a->sort);
    snprintf(c->maxc, sizeof c->maxc, "%d", a->max_concurrency);
    snprintf(c->weight, sizeof c->weight, "%d", a->weight);
    snprintf(c->ladder, sizeof c->ladder, "%d", st ? st->ladder_step : 0);
    cli_table_budget(c->budget, sizeof c->budget, a->budget_usd, a->budget_period, spent,
                     a->budget_usd > 0 && spent >= a->budget_usd);
    const char *v[] = {c->id,    a->name, account_kind_name(a->kind), c->sort, a->enabled ? "yes" : "no", c->maxc,
                       c->weight, c->cool, c->ok60, c->lat60, c->ladder,
                       st && st->last_error[0] ? st->last_error : "-", c->w5h, c->wk, c->plan, c->budget,
                       a->base_url};
    memcpy(c->v, v, sizeof v);
}

static void cli_account_row(const cli_table *tab, const account *a, const account_state *st, double spent, double now)
{
    cli_account_cells c;
    cli_account_cells_make(&c, a, st, spent, now);
    cli_table_print(tab, c.v);
    sbuf fam = SBUF_INIT;
    admin_families_text(st, now, &fam);
    if (fam.len) /* a 429 for one limit family: the account serves its other models */
        printf("      limit family cooling down: %s\n", fam.p);
    sbuf_free(&fam);
    if (a->kind == ACCOUNT_CHATGPT) {
        char login[160];
        cli_login_state(a, now, login, sizeof login);
        cli_line("      login: %s%s%s%s%s", a->email ? a->email : "-", ", ", login, a->plan_type ? ", plan " : "",
               a->plan_type ? a->plan_type : "");
    }
    if (a->models)
        cli_line("      models: %s", a->models);
    unsigned speaks = account_dialects(a, st);
    if (a->kind == ACCOUNT_ANTHROPIC)
        cli_line("      speaks: messages (the Anthropic Messages API: Messages clients only, natively)");
    else if (a->speaks != SPEAKS_AUTO || (st && st->dialects_refused)) /* not the kind's default: say what it speaks */
        cli_line("      speaks: %s (%s)",
                 speaks == (ACCOUNT_DIALECT_RESPONSES | ACCOUNT_DIALECT_CHAT) ? "responses, chat"
                 : speaks & ACCOUNT_DIALECT_RESPONSES                        ? "responses"
                                                                             : "chat",
                 st && st->dialects_refused ? "learned: it answered 404/405 to the other; account reset forgets it"
                                            : "declared with --speaks; the other is translated");
    if (a->prefill == PREFILL_YES || a->prefill == PREFILL_REFUSED)
        cli_line("      prefill: %s", a->prefill == PREFILL_YES ? "yes (a cut stream is continued as an assistant prefill)"
                                                                : "refused one (learned: continued with the instruction "
                                                                  "instead; account reset forgets it)");
    if (a->hold) { /* out of the pool until an operator acts: say why and what to do */
        char when[32] = "-", fix[HOLD_TEXT_MAX];
        time_t t = (time_t)a->hold_since;
        struct tm tm;
        if (t > 0 && gmtime_r(&t, &tm))
            strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        hold_fix(a->hold, a->name, fix, sizeof fix);
        cli_line("      HELD: %s since %s (%s): %s", a->hold, when, a->hold_detail ? a->hold_detail : "-",
                 hold_describe(a->hold).what);
        cli_line("      to fix: %s", fix);
    }
}

/* spent[i]: acc[i]'s spend in its budget's current window. */
static void cli_account_print(const account *acc, size_t n, const account_state *st, size_t nst, const double *spent,
                              int json)
{
    double now = (double)time(NULL);
    sbuf o = SBUF_INIT;
    cli_table t;
    cli_table_init(&t, cli_account_head, CLI_ACCOUNT_ALIGN);
    for (size_t i = 0; !json && i < n; i++) { /* the widths first: every row's columns line up */
        cli_account_cells c;
        cli_account_cells_make(&c, &acc[i], cli_state_find(st, nst, acc[i].id), spent[i], now);
        cli_table_fit(&t, c.v);
    }
    if (!json)
        cli_table_print(&t, cli_account_head);
    sbuf_puts(&o, "[");
    for (size_t i = 0; i < n; i++) {
        const account_state *s = cli_state_find(st, nst, acc[i].id);
        if (json) {
            sbuf_puts(&o, i ? "," : "");
            cli_account_json(&o, &acc[i], s, now);
        } else {
            cli_account_row(&t, &acc[i], s, spent[i], now);
        }
    }
    sbuf_puts(&o, "]\n");
    if (json)
        fputs(o.p, stdout);
    sbuf_free(&o);
}

int cli_account_list(int argc, char **argv)
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
    double *spent = rc == 0 ? calloc(n ? n : 1, sizeof *spent) : NULL;
    double now = (double)time(NULL);
    for (size_t i = 0; spent && i < n; i++) { /* what the dashboard shows: spent in the budget's window */
        double start, end;
        if (!(acc[i].budget_usd > 0))
            continue;
        budget_window(acc[i].budget_period, now, &start, &end);
        if (store_spent_since(s, 0, acc[i].id, start, &spent[i]) != 0)
            spent[i] = 0;
    }
    if (rc == 0 && spent)
        cli_account_print(acc, n, st, nst, spent, json);
    else
        fprintf(stderr, "switchyard %s: cannot read accounts from %s\n", cmd, store_path(s));
    store_accounts_free(acc, n);
    free(spent);
    free(st);
    store_close(s);
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

/* ---------- account enable / disable / remove ---------- */

typedef enum { CLI_ACCOUNT_ENABLE, CLI_ACCOUNT_DISABLE, CLI_ACCOUNT_REMOVE, CLI_ACCOUNT_RESET } cli_account_action;

static int cli_account_change(const char *cmd, int argc, char **argv, cli_account_action action)
{
    static const char *const done[] = {"enabled", "disabled", "removed", "reset (cooldown, ladder, breaker, hold) of"};
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

int cli_account_enable(int argc, char **argv)
{
    return cli_account_change("account enable", argc, argv, CLI_ACCOUNT_ENABLE);
}

int cli_account_disable(int argc, char **argv)
{
    return cli_account_change("account disable", argc, argv, CLI_ACCOUNT_DISABLE);
}

int cli_account_remove(int argc, char **argv)
{
    return cli_account_change("account remove", argc, argv, CLI_ACCOUNT_REMOVE);
}

int cli_account_reset(int argc, char **argv)
{
    return cli_account_change("account reset", argc, argv, CLI_ACCOUNT_RESET);
}

/* ---------- account import / export / update ---------- */

int cli_account_import(int argc, char **argv)
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
    store *s = cli_store_open_new(cmd, db);
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

int cli_account_export(int argc, char **argv)
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

int cli_account_update(int argc, char **argv)
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
        {"models", &a.models, NULL}, {"prefill", &a.prefill, NULL}, {"speaks", &a.speaks, NULL}, {NULL, NULL, NULL},
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
    if (cli_prefill_parse(cmd, a.prefill, &p.prefill) != 0 || cli_speaks_parse(cmd, a.speaks, &p.speaks) != 0)
        return CLI_EXIT_USAGE;
    p.has_prefill = a.prefill != NULL;
    p.has_speaks = a.speaks != NULL;
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
    sbuf models = SBUF_INIT;
    if (got == 0 && cli_models_parse(cmd, a.models, &models) != 0)
        got = -1; /* a usage error: nothing is written */
    p.models = a.models ? (models.p ? models.p : "") : NULL;
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
    sbuf_free(&models);
    sbuf_secret_wipe(&token);
    login_list_free(&logins);
    return rc;
}
