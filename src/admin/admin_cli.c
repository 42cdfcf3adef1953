/* admin_cli.c: `switchyard admin token` (creates or rotates the admin
 * token: printed once, as the last line; only its sha256 is stored),
 * `switchyard status` (the pool at a glance: from the running gateway's
 * admin API when it can be reached with an admin token, else from the
 * database) and `switchyard logs` (one line per request with its attempts,
 * read from the database; --follow polls for new rows). */
#include "admin/cli_internal.h"
#include "admin/admin_api.h"
#include "admin/admin_client.h"
#include "admin/cli.h"
#include "admin/gateway_find.h"
#include "core/config.h"
#include "route/hold.h"
#include "base/budget.h"
#include "base/json.h"
#include "obs/trace.h"
#include "base/sbuf.h"
#include "base/sha256.h"
#include "base/safe_file.h"
#include "store/store_admin.h"
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ADMIN_LOG_FOLLOW_MS 500

/* ---------- admin token ---------- */

void admin_cli_usage_admin(FILE *f)
{
    fputs("usage: switchyard admin token [--rotate] [--db PATH]\n"
          "  prints the admin token, as the last line: the one in <db>.admin-token (mode 0600, beside\n"
          "  the database; `status` reads it there), else a new one; --rotate makes a new one (the old\n"
          "  one stops working within a second, and signs the dashboard out). The database keeps its hash\n",
          f);
}

/* <db>.admin-token (admin/admin_client.h) holds the admin token itself,
 * for the operator's commands (issue 34: printed once and rotated by every
 * look, it could not be had again without signing the dashboard out).
 * Beside the database, so only who can read the database can read it;
 * mode 0600. */

int admin_cli_token_new(store *s, char *tok, size_t n, char *err, size_t errlen)
{
    char path[PATH_MAX];
    admin_client_token_path(store_path(s), path, sizeof path);
    if (n < 4 + ADMIN_TOKEN_CHARS + 1) {
        snprintf(err, errlen, "no room for the admin token");
        return -1;
    }
    memcpy(tok, "sya-", 5);
    if (store_random_base62(tok + 4, ADMIN_TOKEN_CHARS) != 0) {
        snprintf(err, errlen, "no randomness available");
        return -1;
    }
    tok[4 + ADMIN_TOKEN_CHARS] = '\0';
    char hash[65], prefix[12], why[512];
    sha256_hex(tok, strlen(tok), hash);
    snprintf(prefix, sizeof prefix, "%.8s", tok);
    /* the file first: a token stored but not in the file could not be had again */
    char line[4 + ADMIN_TOKEN_CHARS + 2];
    int ll = snprintf(line, sizeof line, "%s\n", tok);
    int rc = safe_file_replace(path, line, (size_t)ll, 0600, NULL, NULL, why, sizeof why);
    explicit_bzero(line, sizeof line);
    if (rc != 0) {
        snprintf(err, errlen, "cannot write %s: %.400s; nothing was changed", path, why);
        return -1;
    }
    return store_admin_token_set(s, hash, prefix, err, errlen);
}

int admin_cli_token_main(int argc, char **argv)
{
    const char *cmd = "admin token", *db = NULL;
    int help = 0, rotate = 0;
    const cli_opt opts[] = {{"db", &db, NULL}, {"rotate", NULL, &rotate}, {"help", NULL, &help}, {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &help, admin_cli_usage_admin);
    if (rc >= 0)
        return rc;
    char tok[4 + ADMIN_TOKEN_CHARS + 1] = "sya-";
    char path[PATH_MAX];
    admin_client_token_path(cli_db_path(db), path, sizeof path);
    if (!rotate) { /* the one there, if any: looking does not rotate it */
        store *s = cli_store_open(cmd, db);
        if (!s)
            return 1;
        int have = admin_client_token_read(cli_db_path(db), s, tok, sizeof tok);
        store_close(s);
        if (have) {
            printf("admin token (from %s; `switchyard admin token --rotate` makes a new one).\n"
                   "Use it as 'Authorization: Bearer <token>' or in the dashboard at /admin/; 'switchyard status'\n"
                   "reads it from the file:\n%s\n",
                   path, tok);
            explicit_bzero(tok, sizeof tok);
            return 0;
        }
        memcpy(tok, "sya-", 5);
    }
    store *s = cli_store_open(cmd, db);
    if (!s)
        return 1;
    char err[512] = "";
    rc = admin_cli_token_new(s, tok, sizeof tok, err, sizeof err);
    store_close(s);
    if (rc != 0) {
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
        return 1;
    }
    printf("admin token created (it replaces any earlier one), kept in %s (mode 0600).\n"
           "Use it as 'Authorization: Bearer <token>' or in the dashboard at /admin/; 'switchyard status'\n"
           "reads it from the file:\n%s\n",
           path, tok);
    explicit_bzero(tok, sizeof tok);
    return 0;
}

/* ---------- status ---------- */

typedef struct status_row {
    char name[512], kind[16], state[16], breaker[12], last_error[32];
    char budget[96]; /* cli_table_budget: "$3.20 of $50.00 monthly", "-" */
    char hold[32], hold_what[96], hold_fix[HOLD_TEXT_MAX]; /* hold "": not held (route/hold.h) */
    int enabled, ladder, inflight; /* inflight -1: unknown (database) */
    double cooldown_s, primary_pct, secondary_pct, primary_reset_s, secondary_reset_s; /* -1 unknown */
    char families[256]; /* limit families resting (admin_families_text), "" none */
} status_row;

static void admin_cli_usage_status(FILE *f)
{
    fputs("usage: switchyard status [--db PATH] [--url URL] [--json]\n"
          "  the pool at a glance. Asks the gateway serving this database (it records its address\n"
          "  beside the database; --url to ask another) with $SWITCHYARD_ADMIN_TOKEN; without a token\n"
          "  or a gateway that answers it reads the database (no in-flight counts or breaker state there)\n"
          "  and says why\n",
          f);
}

static double admin_cli_num(const json_value *o, const char *k, double dflt)
{
    json_value *v = json_get(o, k);
    return v && v->type == JSON_NUMBER ? v->num : dflt;
}

/* An integer member of the gateway's answer: dflt unless it fits an int
 * (json_num_to_int64: a cast of 1e300 is undefined). */
static int admin_cli_int(const json_value *o, const char *k, int dflt)
{
    int64_t v;
    return json_get_int64(o, k, INT_MIN, INT_MAX, &v) == 0 ? (int)v : dflt;
}

static void admin_cli_str(const json_value *o, const char *k, char *out, size_t n)
{
    const char *s = json_get_str(o, k);
    snprintf(out, n, "%s", s ? s : "-");
}

static size_t admin_cli_rows_from_api(const json_value *doc, status_row **out)
{
    json_value *arr = json_get(doc, "accounts");
    size_t n = arr && arr->type == JSON_ARRAY ? arr->count : 0;
    status_row *rows = calloc(n ? n : 1, sizeof *rows);
    size_t i = 0;
    for (json_value *a = arr ? arr->child : NULL; a && i < n; a = a->next, i++) {
        status_row *r = &rows[i];
        admin_cli_str(a, "name", r->name, sizeof r->name);
        admin_cli_str(a, "kind", r->kind, sizeof r->kind);
        admin_cli_str(a, "state", r->state, sizeof r->state);
        admin_cli_str(a, "breaker", r->breaker, sizeof r->breaker);
        admin_cli_str(a, "last_error", r->last_error, sizeof r->last_error);
        r->enabled = json_get_bool(a, "enabled", 1);
        r->ladder = admin_cli_int(a, "ladder_step", 0);
        r->inflight = admin_cli_int(a, "inflight", -1);
        json_value *b = json_get(a, "budget");
        if (b && b->type == JSON_OBJECT)
            cli_table_budget(r->budget, sizeof r->budget, admin_cli_num(b, "usd", 0), json_get_str(b, "period"),
                             admin_cli_num(b, "spent_usd", 0), json_get_bool(b, "over", 0));
        else
            snprintf(r->budget, sizeof r->budget, "-");
        r->cooldown_s = admin_cli_num(a, "cooldown_remaining_s", 0);
        json_value *u = json_get(a, "usage");
        json_value *p = u ? json_get(u, "primary") : NULL, *s = u ? json_get(u, "secondary") : NULL;
        r->primary_pct = p ? admin_cli_num(p, "used_pct", -1) : -1;
        r->secondary_pct = s ? admin_cli_num(s, "used_pct", -1) : -1;
        r->primary_reset_s = p ? admin_cli_num(p, "resets_in_s", -1) : -1;
        r->secondary_reset_s = s ? admin_cli_num(s, "resets_in_s", -1) : -1;
        json_value *fams = json_get(a, "family_cooldowns");
        sbuf ft = SBUF_INIT;
        for (json_value *f = fams && fams->type == JSON_ARRAY ? fams->child : NULL; f; f = f->next) {
            const char *fn = json_get_str(f, "family"), *fm = json_get_str(f, "model");
            if (fn)
                sbuf_printf(&ft, "%s%.40s for %.0fs after a 429 for %.60s", ft.len ? "; " : "", fn,
                            admin_cli_num(f, "remaining_s", 0), fm ? fm : "one of its models");
        }
        snprintf(r->families, sizeof r->families, "%s", ft.len ? ft.p : "");
        sbuf_free(&ft);
        json_value *h = json_get(a, "hold");
        if (h && h->type == JSON_OBJECT && json_get_str(h, "state")) {
            snprintf(r->hold, sizeof r->hold, "%s", json_get_str(h, "state"));
            admin_cli_str(h, "what", r->hold_what, sizeof r->hold_what);
            admin_cli_str(h, "fix", r->hold_fix, sizeof r->hold_fix);
        }
    }
    *out = rows;
    return i;
}

static size_t admin_cli_rows_from_db(store *s, status_row **out)
{
    account *acc = NULL;
    account_state *st = NULL;
    size_t n = 0, nst = 0;
    if (store_accounts_load(s, &acc, &n) != 0 || store_states_load(s, &st, &nst) != 0) {
        store_accounts_free(acc, n);
        free(st);
        *out = NULL;
        return (size_t)-1;
    }
    status_row *rows = calloc(n ? n : 1, sizeof *rows);
    double now = gateway_now();
    for (size_t i = 0; i < n; i++) {
        pool_account pa;
        memset(&pa, 0, sizeof pa);
        pa.a = acc[i];
        pa.st.primary_used_pct = pa.st.secondary_used_pct = -1;
        for (size_t k = 0; k < nst; k++)
            if (st[k].account_id == acc[i].id)
                pa.st = st[k];
        status_row *r = &rows[i];
        snprintf(r->name, sizeof r->name, "%s", acc[i].name);
        snprintf(r->kind, sizeof r->kind, "%s", account_kind_name(acc[i].kind));
        snprintf(r->state, sizeof r->state, "%s", admin_account_state(&pa, now));
        snprintf(r->breaker, sizeof r->breaker, "-");
        snprintf(r->last_error, sizeof r->last_error, "%s", pa.st.last_error[0] ? pa.st.last_error : "-");
        r->enabled = acc[i].enabled;
        r->ladder = pa.st.ladder_step;
        r->inflight = -1;
        double spent = 0, start, end;
        if (acc[i].budget_usd > 0) { /* what the dashboard shows: spent in the budget's window */
            budget_window(acc[i].budget_period, now, &start, &end);
            if (store_spent_since(s, 0, acc[i].id, start, &spent) != 0)
                spent = 0;
        }
        cli_table_budget(r->budget, sizeof r->budget, acc[i].budget_usd, acc[i].budget_period, spent,
                         acc[i].budget_usd > 0 && spent >= acc[i].budget_usd);
        r->cooldown_s = pa.st.cooldown_until > now ? ceil(pa.st.cooldown_until - now) : 0;
        r->primary_pct = pa.st.primary_used_pct;
        r->secondary_pct = pa.st.secondary_used_pct;
        r->primary_reset_s = pa.st.primary_reset_at > 0 ? fmax(0, pa.st.primary_reset_at - now) : -1;
        r->secondary_reset_s = pa.st.secondary_reset_at > 0 ? fmax(0, pa.st.secondary_reset_at - now) : -1;
        sbuf ft = SBUF_INIT;
        admin_families_text(&pa.st, now, &ft);
        snprintf(r->families, sizeof r->families, "%s", ft.len ? ft.p : "");
        sbuf_free(&ft);
        if (acc[i].hold) {
            snprintf(r->hold, sizeof r->hold, "%s", acc[i].hold);
            snprintf(r->hold_what, sizeof r->hold_what, "%s", hold_describe(acc[i].hold).what);
            hold_fix(acc[i].hold, acc[i].name, r->hold_fix, sizeof r->hold_fix);
        }
    }
    store_accounts_free(acc, n);
    free(st);
    *out = rows;
    return n;
}

/* "1h05m", "42s", "-" */
static void admin_cli_dur(char *out, size_t n, double s)
{
    if (s > 99999 * 3600.0) /* an answer's number: the casts below stay within int */
        s = 99999 * 3600.0;
    if (s < 0)
        snprintf(out, n, "-");
    else if (s < 60)
        snprintf(out, n, "%.0fs", s);
    else if (s < 3600)
        snprintf(out, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else
        snprintf(out, n, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
}

static void admin_cli_pct(char *out, size_t n, double pct, double reset_s)
{
    char r[16];
    admin_cli_dur(r, sizeof r, reset_s);
    if (pct < 0)
        snprintf(out, n, "-");
    else if (reset_s >= 0)
        snprintf(out, n, "%.0f%% (%s)", pct, r);
    else
        snprintf(out, n, "%.0f%%", pct);
}

/* The cells of a row (the columns of the header below). */
typedef struct status_cells {
    char cool[16], ladder[16], infl[12], p[32], s[32];
    const char *v[11];
} status_cells;

static void admin_cli_cells(const status_row *r, status_cells *c)
{
    admin_cli_dur(c->cool, sizeof c->cool, r->cooldown_s > 0 ? r->cooldown_s : -1);
    snprintf(c->ladder, sizeof c->ladder, "%d", r->ladder);
    if (r->inflight >= 0)
        snprintf(c->infl, sizeof c->infl, "%d", r->inflight);
    else
        snprintf(c->infl, sizeof c->infl, "-");
    admin_cli_pct(c->p, sizeof c->p, r->primary_pct, r->primary_reset_s);
    admin_cli_pct(c->s, sizeof c->s, r->secondary_pct, r->secondary_reset_s);
    const char *v[] = {r->name, r->kind, r->state, c->cool, c->ladder, r->breaker, c->infl, c->p, c->s,
                       r->budget[0] ? r->budget : "-", r->last_error};
    memcpy(c->v, v, sizeof v);
}

static void admin_cli_rows_print(const status_row *rows, size_t n)
{
    static const char *const head[] = {"ACCOUNT", "KIND",      "STATE",  "COOLDOWN", "LADDER",    "BREAKER",
                                       "INFLIGHT", "5H USED", "WEEK USED", "BUDGET", "LAST_ERROR"};
    cli_table t;
    status_cells c;
    cli_table_init(&t, head, "llllrlrllll");
    for (size_t i = 0; i < n; i++) { /* the widths first: a long name moves every row's columns alike */
        admin_cli_cells(&rows[i], &c);
        cli_table_fit(&t, c.v);
    }
    cli_table_print(&t, head);
    for (size_t i = 0; i < n; i++) {
        admin_cli_cells(&rows[i], &c);
        cli_table_print(&t, c.v);
    }
    for (size_t i = 0; i < n; i++) /* a 429 for one limit family: the account serves its other models */
        if (rows[i].families[0])
            printf("limit family cooling down: %s: %s\n", rows[i].name, rows[i].families);
    for (size_t i = 0; i < n; i++) /* held accounts wait for an operator: what happened, what to do */
        if (rows[i].hold[0]) {
            cli_line("held: %s (%s): %s", rows[i].name, rows[i].hold, rows[i].hold_what);
            cli_line("  to fix: %s", rows[i].hold_fix);
        }
}

/* The database's view as JSON: {"source":"database","accounts":[...]}
 * with the fields of the API's accounts document that the database knows. */
static void admin_cli_rows_json(const status_row *rows, size_t n, const char *gateway_note)
{
    sbuf o = SBUF_INIT;
    sbuf_puts(&o, "{\"source\":\"database\",\"gateway\":");
    sbuf_json_str(&o, gateway_note, strlen(gateway_note));
    sbuf_puts(&o, ",\"accounts\":[");
    for (size_t i = 0; i < n; i++) {
        const status_row *r = &rows[i];
        sbuf_puts(&o, i ? ",{\"name\":" : "{\"name\":");
        sbuf_json_str(&o, r->name, strlen(r->name));
        sbuf_printf(&o, ",\"kind\":\"%s\",\"state\":\"%s\",\"enabled\":%s,\"cooldown_remaining_s\":%.0f,"
                        "\"ladder_step\":%d,\"last_error\":",
                    r->kind, r->state, r->enabled ? "true" : "false", r->cooldown_s, r->ladder);
        if (strcmp(r->last_error, "-") == 0)
            sbuf_puts(&o, "null");
        else
            sbuf_json_str(&o, r->last_error, strlen(r->last_error));
        sbuf_puts(&o, ",\"hold\":");
        if (r->hold[0]) {
            const char *const f[][2] = {{"state", r->hold}, {"what", r->hold_what}, {"fix", r->hold_fix}};
            for (size_t k = 0; k < 3; k++) {
                sbuf_printf(&o, "%s\"%s\":", k ? "," : "{", f[k][0]);
                sbuf_json_str(&o, f[k][1], strlen(f[k][1]));
            }
            sbuf_puts(&o, "}");
        } else {
            sbuf_puts(&o, "null");
        }
        sbuf_puts(&o, "}");
    }
    sbuf_puts(&o, "]}\n");
    fputs(o.p, stdout);
    sbuf_free(&o);
}

/* "1.2 MB" */
static void admin_cli_bytes(char *out, size_t n, long long b)
{
    if (b < 0)
        snprintf(out, n, "?");
    else if (b < 1000000)
        snprintf(out, n, "%.0f kB", (double)b / 1e3);
    else if (b < 1000000000LL)
        snprintf(out, n, "%.1f MB", (double)b / 1e6);
    else
        snprintf(out, n, "%.1f GB", (double)b / 1e9);
}

static long long admin_cli_file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long long)sb.st_size : 0;
}

/* The disk the gateway of this database uses (its files are beside it):
 * the database with its WAL, the trace with its rotated files, and what
 * the file system has left. */
static void admin_cli_disk_line(const char *db)
{
    char path[4200], tpath[4096], a[24], b[24], c[24], d[24];
    snprintf(path, sizeof path, "%s-wal", db);
    long long dbb = admin_cli_file_size(db), wal = admin_cli_file_size(path), tr = 0;
    trace_path_for_db(db, tpath, sizeof tpath);
    tr = admin_cli_file_size(tpath);
    for (int i = 1; i <= 100; i++) { /* trace_files is at most 100 */
        snprintf(path, sizeof path, "%s.%d", tpath, i);
        long long sz = admin_cli_file_size(path);
        if (!sz)
            break;
        tr += sz;
    }
    struct statvfs vb;
    long long avail = statvfs(db, &vb) == 0 ? (long long)vb.f_bavail * (long long)vb.f_frsize : -1;
    admin_cli_bytes(a, sizeof a, dbb);
    admin_cli_bytes(b, sizeof b, wal);
    admin_cli_bytes(c, sizeof c, tr);
    admin_cli_bytes(d, sizeof d, avail);
    cli_line("disk: database %s (+ WAL %s), trace logs %s; %s free on its file system", a, b, c, d);
}

static int admin_cli_status(int argc, char **argv)
{
    const char *cmd = "status", *db = NULL, *url = NULL;
    int help = 0, json = 0;
    const cli_opt opts[] = {{"db", &db, NULL},     {"url", &url, NULL},      {"json", NULL, &json},
                            {"help", NULL, &help}, {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &help, admin_cli_usage_status);
    if (rc >= 0)
        return rc;
    char why[256] = "no admin token ($SWITCHYARD_ADMIN_TOKEN is not set, no <db>.admin-token: `switchyard admin token`)";
    admin_client ac;
    admin_client_locate(cli_db_path(db), url, &ac);
    const gateway_found found = ac.found;
    const char *base = ac.base;
    status_row *rows = NULL;
    size_t n = 0;
    int asked = ac.token[0] && (url || found.answering);
    if (asked) {
        sbuf body = SBUF_INIT, ov = SBUF_INIT;
        int ok = admin_client_call(&ac, "GET", "/admin/api/accounts", 3000, &body, why, sizeof why) == 0;
        if (ok)
            admin_client_call(&ac, "GET", "/admin/api/overview", 3000, &ov, why, sizeof why);
        json_value *doc = ok ? json_parse(body.p, body.len, NULL, 0) : NULL;
        json_value *odoc = ov.len ? json_parse(ov.p, ov.len, NULL, 0) : NULL;
        if (doc && json) {
            fputs(body.p, stdout);
        } else if (doc) {
            n = admin_cli_rows_from_api(doc, &rows);
            cli_line("gateway %s (live): strategy %s, rotation %s, %.0f active request(s), policies %s", base,
                   odoc ? json_get_str(odoc, "strategy") ? json_get_str(odoc, "strategy") : "?" : "?",
                   odoc ? json_get_str(odoc, "rotation") ? json_get_str(odoc, "rotation") : "?" : "?",
                   odoc ? admin_cli_num(odoc, "active_requests", 0) : 0,
                   odoc && json_get(odoc, "policy") ? json_get_str(json_get(odoc, "policy"), "source") : "?");
            admin_cli_rows_print(rows, n);
            admin_cli_disk_line(cli_db_path(db));
        } else if (ok) {
            snprintf(why, sizeof why, "the gateway's answer was not JSON");
        }
        json_free(doc);
        json_free(odoc);
        sbuf_free(&body);
        sbuf_free(&ov);
        if (doc) {
            free(rows);
            admin_client_close(&ac);
            return 0;
        }
    }
    admin_client_close(&ac);
    store *s = cli_store_open(cmd, db);
    if (!s)
        return 1;
    n = admin_cli_rows_from_db(s, &rows);
    if (n == (size_t)-1) {
        fprintf(stderr, "switchyard %s: cannot read accounts from %s\n", cmd, store_path(s));
        store_close(s);
        return 1;
    }
    /* one line: which gateway, and why the database speaks instead */
    char note[700];
    if (asked || url)
        snprintf(note, sizeof note, "the gateway at %s was not asked: %s", base, why);
    else if (found.answering)
        snprintf(note, sizeof note, "the gateway at %s (pid %ld) serves this database, but %s", found.rf.url,
                 found.rf.pid, why);
    else
        gateway_find_describe(&found, note, sizeof note);
    if (json) {
        admin_cli_rows_json(rows, n, note);
    } else {
        cli_line("%s; showing it from the database %s", note, store_path(s));
        admin_cli_rows_print(rows, n);
        admin_cli_disk_line(store_path(s));
    }
    free(rows);
    store_close(s);
    return 0;
}

int admin_cli_status_main(int argc, char **argv) { return admin_cli_status(argc - 1, argv + 1); }

/* ---------- logs ---------- */

static void admin_cli_usage_logs(FILE *f)
{
    fputs("usage: switchyard logs [--db PATH] [--follow] [--account A] [--key K] [--failed] [--limit N]\n"
          "                       [--search WORDS] [--model M] [--endpoint E] [--status N]\n"
          "                       [--since WHEN] [--until WHEN] [--before ID]\n"
          "  one line per request (newest last) with its attempts: account(outcome class status ms) > ...\n"
          "  --account matches requests served by or tried on A; --key takes a key name or id;\n"
          "  --search: every word found in the model, endpoint, account, key, error class, error\n"
          "  message, status or attempts (case-insensitive); --model, --endpoint, --status: exact;\n"
          "  WHEN: unix seconds, YYYY-MM-DD[THH:MM[:SS]] (UTC) or Nm, Nh, Nd ago;\n"
          "  --before ID: the page older than request ID (the last line names the next one);\n"
          "  --follow keeps printing new requests until interrupted\n",
          f);
}

static void admin_cli_log_line(void *ud, const store_log_row *r)
{
    (void)ud;
    char when[32];
    time_t t = (time_t)r->ts;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    sbuf line = SBUF_INIT;
    sbuf_printf(&line, "%s #%lld %s %s %s %d %.0fms key=%s account=%s", when, (long long)r->id, r->endpoint,
                r->model[0] ? r->model : "-", r->stream ? "stream" : "plain", r->status, r->latency_ms,
                r->key_name[0] ? r->key_name : "-", r->account_name[0] ? r->account_name : "-");
    if (r->error_class[0])
        sbuf_printf(&line, " class=%s", r->error_class);
    if (r->total_tokens >= 0)
        sbuf_printf(&line, " tokens=%ld", r->total_tokens);
    json_value *arr = json_parse(r->attempts_json, strlen(r->attempts_json), NULL, 0);
    int i = 0;
    for (json_value *a = arr && arr->type == JSON_ARRAY ? arr->child : NULL; a; a = a->next, i++) {
        const char *cls = json_get_str(a, "class"), *said = json_get_str(a, "message");
        sbuf_printf(&line, "%s%s(%s%s%s %.0f %.0fms", i ? " > " : " tried: ", json_get_str(a, "account") ? json_get_str(a, "account") : "?",
                    json_get_str(a, "outcome") ? json_get_str(a, "outcome") : "?", cls && *cls ? " " : "",
                    cls && *cls ? cls : "", json_get_num(a, "status", 0), json_get_num(a, "ms", 0));
        /* what a failed attempt's upstream said, unless it is the message below */
        sbuf_printf(&line, said && *said && strcmp(said, r->error_message) != 0 ? " \"%s\")" : "%s)",
                    said && *said && strcmp(said, r->error_message) != 0 ? said : "");
    }
    json_free(arr);
    if (r->error_message[0]) /* last: it is the longest, and the line's end is where it can be read */
        sbuf_printf(&line, " message: %s", r->error_message);
    cli_line("%s", line.p); /* model, names and classes escaped: one row, one line */
    sbuf_free(&line);
}

static volatile sig_atomic_t admin_cli_stop;
static void admin_cli_on_sigint(int sig) { admin_cli_stop = 1; }

static void admin_cli_note_id(void *ud, const store_log_row *r)
{
    int64_t *last = ud;
    admin_cli_log_line(NULL, r);
    if (r->id > *last)
        *last = r->id;
}

static void admin_cli_max_id(void *ud, const store_log_row *r)
{
    int64_t *first = ud;
    if (!*first || r->id < *first)
        *first = r->id;
}

static int admin_cli_logs(int argc, char **argv)
{
    const char *cmd = "logs", *db = NULL, *acct = NULL, *key = NULL, *limit_s = NULL, *search = NULL, *model = NULL,
               *endpoint = NULL, *status_s = NULL, *since_s = NULL, *until_s = NULL, *before_s = NULL;
    int help = 0, follow = 0, failed = 0;
    const cli_opt opts[] = {{"db", &db, NULL},         {"account", &acct, NULL},  {"key", &key, NULL},
                            {"limit", &limit_s, NULL}, {"follow", NULL, &follow}, {"failed", NULL, &failed},
                            {"search", &search, NULL}, {"model", &model, NULL},   {"endpoint", &endpoint, NULL},
                            {"status", &status_s, NULL}, {"since", &since_s, NULL}, {"until", &until_s, NULL},
                            {"before", &before_s, NULL}, {"help", NULL, &help},   {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &help, admin_cli_usage_logs);
    if (rc >= 0)
        return rc;
    int limit = limit_s ? atoi(limit_s) : 20;
    if (limit < 1 || limit > 1000) {
        fprintf(stderr, "switchyard %s: --limit must be 1..1000\n", cmd);
        return 2;
    }
    double now = (double)time(NULL);
    double since = since_s ? cli_parse_when(since_s, now) : 0, until = until_s ? cli_parse_when(until_s, now) : 0;
    if (since < 0 || until < 0) {
        fprintf(stderr, "switchyard %s: --%s must be " CLI_WHEN_FORMS ", got '%s'\n",
                cmd, since < 0 ? "since" : "until", since < 0 ? since_s : until_s);
        return 2;
    }
    char *end = NULL;
    long status = status_s ? strtol(status_s, &end, 10) : 0;
    if (status_s && (!*status_s || *end || status < 100 || status > 999)) {
        fprintf(stderr, "switchyard %s: --status must be an HTTP status (100..999), got '%s'\n", cmd, status_s);
        return 2;
    }
    long long before = before_s ? strtoll(before_s, &end, 10) : 0;
    if (before_s && (!*before_s || *end || before < 1)) {
        fprintf(stderr, "switchyard %s: --before must be a request id (1 or more), got '%s'\n", cmd, before_s);
        return 2;
    }
    if (before && follow) {
        fprintf(stderr, "switchyard %s: --before pages back; it does not go with --follow\n", cmd);
        return 2;
    }
    store *s = cli_store_open(cmd, db);
    if (!s)
        return 1;
    /* the newest `limit` rows (below --before), printed oldest first: find where they start */
    store_log_filter f = {.key = key, .account = acct, .failed = failed, .limit = limit, .q = search,
                          .model = model, .endpoint = endpoint, .status = (int)status, .since = since,
                          .until = until, .before_id = before};
    int64_t first = 0, last = 0;
    int n = store_logs_query(s, &f, admin_cli_max_id, &first);
    if (n < 0) {
        fprintf(stderr, "switchyard %s: cannot read request logs from %s\n", cmd, store_path(s));
        store_close(s);
        return 1;
    }
    int64_t top = before; /* the rows of the page: first..below --before */
    f.before_id = 0;
    f.after_id = first ? first - 1 : 0;
    f.limit = 1000;
    if (first) {
        if (top)
            f.before_id = top;
        store_logs_query(s, &f, admin_cli_note_id, &last);
    }
    if (first && n == limit) /* a full page: there may be older ones */
        printf("(older requests: switchyard logs ... --before %lld)\n", (long long)first);
    fflush(stdout);
    f.before_id = 0;
    if (follow) {
        signal(SIGINT, admin_cli_on_sigint);
        signal(SIGTERM, admin_cli_on_sigint);
        if (!last) { /* nothing yet: start after whatever exists now, matching or not */
            store_log_filter any = {.limit = 1};
            store_logs_query(s, &any, admin_cli_max_id, &last);
        }
        while (!admin_cli_stop) {
            f.after_id = last;
            store_logs_query(s, &f, admin_cli_note_id, &last);
            fflush(stdout);
            struct timespec ts = {0, ADMIN_LOG_FOLLOW_MS * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    store_close(s);
    return 0;
}

int admin_cli_logs_main(int argc, char **argv) { return admin_cli_logs(argc - 1, argv + 1); }
