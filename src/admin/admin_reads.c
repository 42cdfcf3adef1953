/* admin_reads.c: the admin API's JSON reads (admin_internal.h): the
 * overview, accounts with their live state, keys, the request log's pages
 * and one request, spend today and against budgets, aggregates, the last
 * hour's timeline, the policy's status, the alerts listed. Reads come from
 * the in-memory pool and the metrics, or bounded sqlite reads (WAL,
 * busy_timeout 0) on the loop. Nothing here prints an account token or a
 * platform key. */
#include "admin/admin_api.h"
#include "admin/admin_internal.h"
#include "shared/shared.h"
#include "accounts/account_poll.h"
#include "admin/admin_alerts.h"
#include "admin/admin_body.h"
#include "accounts/signin.h"
#include "route/pool.h"
#include "policy/policy.h"
#include "store/store.h"
#include "obs/alert.h"
#include "obs/trace.h"
#include "route/account_limits.h"
#include "route/breaker.h"
#include "route/hold.h"
#include "base/embedded.h"
#include "base/json.h"
#include "base/log.h"
#include "obs/metrics.h"
#include "http/server.h"
#include "http/host_check.h"
#include "http/ws.h"
#include "base/sha256.h"
#include "store/store_admin.h"
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>


#define ADMIN_REQUESTS_DEFAULT 50
#define ADMIN_SCAN_MAX 20000  /* log rows one filtered page may examine; the client pages on */
/* ... and one page of a text search (q): each row's fields are lowered and
 * searched once per word; 5 000 rows with 8 words take about 30 ms. */
#define ADMIN_SEARCH_SCAN_MAX 5000

/* ---------- reads ---------- */

void admin_families_json(sbuf *b, const account_state *st, double now)
{
    int n = 0;
    sbuf_puts(b, "[");
    for (int i = 0; st && i < ACCOUNT_FAMILIES; i++) {
        const account_family *f = &st->fam[i];
        if (!f->family[0] || f->until <= now)
            continue;
        sbuf_puts(b, n++ ? ",{\"family\":" : "{\"family\":");
        sbuf_json_str(b, f->family, strlen(f->family));
        sbuf_puts(b, ",\"model\":");
        if (f->model[0])
            sbuf_json_str(b, f->model, strlen(f->model));
        else
            sbuf_puts(b, "null");
        sbuf_printf(b, ",\"until\":%.0f,\"remaining_s\":%.0f,\"ladder_step\":%d}", ceil(f->until),
                    ceil(f->until - now), f->ladder_step);
    }
    sbuf_puts(b, "]");
}

void admin_families_text(const account_state *st, double now, sbuf *out)
{
    for (int i = 0; st && i < ACCOUNT_FAMILIES; i++) {
        const account_family *f = &st->fam[i];
        if (f->family[0] && f->until > now)
            sbuf_printf(out, "%s%s for %.0fs after a 429 for %s", out->len ? "; " : "", f->family,
                        ceil(f->until - now), f->model[0] ? f->model : "one of its models");
    }
}

const char *admin_account_state(const pool_account *pa, double now)
{
    const char *breaker = breaker_state_name(pa, now);
    if (!pa->a.enabled)
        return "disabled";
    if (pa->a.login_error)
        return "needs_login";
    if (pa->a.hold) /* which hold, and what to do: the account's "hold" (admin_hold_json) */
        return "held";
    if (account_limits_over_budget(pa, now))
        return "over_budget";
    if (strcmp(breaker, "open") == 0)
        return "breaker_open";
    if (pa->st.cooldown_until > now)
        return "cooling";
    if (account_limits_wait_s(pa, now) > 0)
        return "rate_limited";
    if (pa->a.max_concurrency > 0 && pa->inflight >= pa->a.max_concurrency)
        return "busy";
    if (strcmp(breaker, "half_open") == 0)
        return "half_open";
    return "available";
}

/* ,"key":v, or null when the value is not known */
static void admin_opt(sbuf *b, const char *key, int known, double v)
{
    sbuf_printf(b, ",\"%s\":", key);
    if (known)
        admin_num(b, v);
    else
        sbuf_puts(b, "null");
}

static void admin_window(sbuf *b, const char *name, double used, double reset_at, double window_s, double now)
{
    sbuf_printf(b, "\"%s\":{\"used_pct\":", name);
    if (used >= 0)
        admin_num(b, used);
    else
        sbuf_puts(b, "null");
    admin_opt(b, "reset_at", reset_at > 0, reset_at);
    admin_opt(b, "resets_in_s", reset_at > 0, reset_at > now ? ceil(reset_at - now) : 0);
    admin_opt(b, "window_s", window_s > 0, window_s);
    sbuf_puts(b, "}");
}

/* -1 unknown, else a JSON boolean */
static void admin_tristate(sbuf *b, int v) { sbuf_puts(b, v < 0 ? "null" : v ? "true" : "false"); }

/* {"usd","period","spent_usd","resets_at","over"}: a budget of an account
 * or a key and what was spent in its current window; null without one. */
static void admin_budget_json(sbuf *b, double usd, const char *period, const budget_state *bs, double now)
{
    if (!(usd > 0)) {
        sbuf_puts(b, "null");
        return;
    }
    int current = now >= bs->start && now < bs->end;
    sbuf_puts(b, "{\"usd\":");
    admin_num(b, usd);
    sbuf_puts(b, ",\"period\":");
    admin_str(b, period && *period ? period : "month");
    sbuf_printf(b, ",\"spent_usd\":%.6f", current && isfinite(bs->spent) ? bs->spent : 0); /* to the micro-dollar */
    admin_opt(b, "resets_at", current, bs->end);
    sbuf_printf(b, ",\"over\":%s}", budget_over(bs, usd, now) ? "true" : "false");
}

/* ,"weight":..,"limits":{..},"budget":{..}: the channel controls of pa. */
static void admin_controls_json(sbuf *b, const pool_account *pa, double now)
{
    const account *a = &pa->a;
    sbuf_printf(b, ",\"weight\":%d,\"limits\":{\"max_rpm\":%d,\"max_tpm\":%d,\"wait_s\":", a->weight, a->max_rpm,
                a->max_tpm);
    admin_num(b, account_limits_wait_s(pa, now));
    sbuf_puts(b, "},\"budget\":");
    admin_budget_json(b, a->budget_usd, a->budget_period, &pa->budget, now);
}

/* ,"login":{...}: a ChatGPT login's health (docs/accounts.md); null for
 * other kinds. Never a token. */
static void admin_login_json(sbuf *b, const pool_account *pa)
{
    const account *a = &pa->a;
    sbuf_puts(b, ",\"login\":");
    if (a->kind != ACCOUNT_CHATGPT) {
        sbuf_puts(b, "null");
        return;
    }
    sbuf_puts(b, "{\"needs_login\":");
    admin_str(b, a->login_error);
    sbuf_puts(b, ",\"email\":");
    admin_str(b, a->email);
    sbuf_puts(b, ",\"plan_type\":");
    admin_str(b, a->plan_type);
    admin_opt(b, "access_expires_at", a->token_expires_at > 0, (double)a->token_expires_at);
    admin_opt(b, "last_refresh_at", a->last_refresh_at > 0, (double)a->last_refresh_at);
    sbuf_printf(b, ",\"refreshable\":%s,\"refreshing\":%s}", a->refresh_token ? "true" : "false",
                pa->refreshing ? "true" : "false");
}

/* ,"hold":{...}: why the account is out of the pool until an operator acts
 * and what to do (route/hold.h); null when it is not held. */
static void admin_hold_json(sbuf *b, const account *a)
{
    sbuf_puts(b, ",\"hold\":");
    if (!a->hold) {
        sbuf_puts(b, "null");
        return;
    }
    hold_info h = hold_describe(a->hold);
    char fix[HOLD_TEXT_MAX];
    hold_fix(a->hold, a->name, fix, sizeof fix);
    sbuf_puts(b, "{\"state\":");
    admin_str(b, a->hold);
    sbuf_puts(b, ",\"what\":");
    admin_str(b, h.what);
    sbuf_puts(b, ",\"fix\":");
    admin_str(b, fix);
    sbuf_puts(b, ",\"detail\":");
    admin_str(b, a->hold_detail);
    admin_opt(b, "since", a->hold_since > 0, (double)a->hold_since);
    sbuf_puts(b, "}");
}

void admin_account_json(sbuf *b, const pool_account *pa, double now)
{
    const account *a = &pa->a;
    const account_state *st = &pa->st;
    sbuf_printf(b, "{\"id\":%lld,\"name\":", (long long)a->id);
    admin_str(b, a->name);
    sbuf_printf(b, ",\"kind\":\"%s\",\"sort\":%d,\"enabled\":%s,\"state\":\"%s\",\"inflight\":%d,"
                   "\"max_concurrency\":%d,\"cooldown_until\":",
                account_kind_name(a->kind), a->sort, a->enabled ? "true" : "false", admin_account_state(pa, now),
                pa->inflight, a->max_concurrency);
    admin_num(b, st->cooldown_until > now ? st->cooldown_until : 0);
    sbuf_puts(b, ",\"cooldown_remaining_s\":");
    admin_num(b, st->cooldown_until > now ? ceil(st->cooldown_until - now) : 0);
    sbuf_printf(b, ",\"ladder_step\":%d,\"last_429_at\":", st->ladder_step);
    admin_num(b, st->last_429_at);
    sbuf_puts(b, ",\"family_cooldowns\":");
    admin_families_json(b, st, now);
    sbuf_puts(b, ",\"last_error\":");
    admin_str(b, st->last_error[0] ? st->last_error : NULL);
    sbuf_puts(b, ",\"breaker\":");
    admin_str(b, breaker_state_name(pa, now));
    sbuf_printf(b, ",\"fail_streak\":%d,\"health\":{\"success_rate\":", pa->breaker.fails_in_row);
    admin_num(b, st->success_ema);
    sbuf_puts(b, ",\"latency_ema_ms\":");
    admin_num(b, st->latency_ema_ms);
    health_figures h;
    health_window_read(&pa->health, now, &h);
    admin_opt(b, "success_rate_60s", h.attempts > 0, h.success_rate);
    admin_opt(b, "latency_60s_ms", h.latency_ms >= 0, h.latency_ms);
    sbuf_printf(b, ",\"attempts_60s\":%d}", h.attempts);
    admin_controls_json(b, pa, now);
    sbuf_puts(b, ",\"usage\":{");
    admin_window(b, "primary", st->primary_used_pct, st->primary_reset_at, st->primary_window_s, now);
    sbuf_puts(b, ",");
    admin_window(b, "secondary", st->secondary_used_pct, st->secondary_reset_at, st->secondary_window_s, now);
    sbuf_puts(b, ",\"plan_type\":");
    admin_str(b, st->plan_type[0] ? st->plan_type : NULL);
    sbuf_puts(b, ",\"credits\":{\"has_credits\":");
    admin_tristate(b, st->has_credits);
    sbuf_puts(b, ",\"unlimited\":");
    admin_tristate(b, st->credits_unlimited);
    admin_opt(b, "balance", st->credits_balance >= 0, st->credits_balance);
    sbuf_puts(b, "}");
    admin_opt(b, "polled_at", st->usage_polled_at > 0, st->usage_polled_at);
    sbuf_printf(b, ",\"poll_status\":%d}", st->usage_poll_status);
    admin_login_json(b, pa);
    admin_hold_json(b, a);
    /* the models it serves (docs/accounts.md): the operator's list, the one its upstream gave, the refused */
    sbuf_puts(b, ",\"models\":{\"override\":");
    admin_str(b, a->models);
    sbuf_puts(b, ",\"upstream\":");
    admin_str(b, pa->models_upstream);
    sbuf_puts(b, ",\"refused\":");
    admin_str(b, pa->models_refused);
    sbuf_printf(b, "},\"prefill\":\"%s\",\"prefill_refused\":%s", account_prefill_name(a->prefill),
                pa->prefill_refused ? "true" : "false");
    /* the dialects its upstream speaks (docs/clients.md): declared, learned, what is used now */
    unsigned now_speaks = account_dialects(a, st), refused = (unsigned)st->dialects_refused;
    sbuf_printf(b, ",\"speaks\":\"%s\",\"dialects\":[%s%s%s],\"dialects_refused\":[%s%s%s]}",
                account_speaks_name(a->speaks), now_speaks & ACCOUNT_DIALECT_RESPONSES ? "\"responses\"" : "",
                now_speaks == (ACCOUNT_DIALECT_RESPONSES | ACCOUNT_DIALECT_CHAT) ? "," : "",
                now_speaks & ACCOUNT_DIALECT_CHAT ? "\"chat\"" : "", refused & ACCOUNT_DIALECT_RESPONSES ? "\"responses\"" : "",
                (refused & 3u) == 3u ? "," : "", refused & ACCOUNT_DIALECT_CHAT ? "\"chat\"" : "");
}

void admin_get_accounts(admin_ctx *ctx, struct evhttp_request *req)
{
    double now = gateway_now();
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"now\":");
    admin_num(&b, now);
    sbuf_puts(&b, ",\"accounts\":[");
    for (size_t i = 0; i < pool_count(ctx->gw->pool); i++) {
        if (i)
            sbuf_puts(&b, ",");
        admin_account_json(&b, pool_at(ctx->gw->pool, i), now);
    }
    sbuf_puts(&b, "]}");
    admin_send_json(req, &b);
}

void admin_get_keys(admin_ctx *ctx, struct evhttp_request *req)
{
    pool *p = ctx->gw->pool;
    double now = gateway_now();
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"keys\":[");
    for (size_t i = 0; i < pool_key_count(p); i++) {
        const platform_key *k = pool_key_at(p, i);
        const pool_account *pref = k->preferred_account_id ? pool_find(p, k->preferred_account_id) : NULL;
        sbuf_printf(&b, "%s{\"id\":%lld,\"name\":", i ? "," : "", (long long)k->id);
        admin_str(&b, k->name);
        sbuf_puts(&b, ",\"prefix\":");
        admin_str(&b, k->prefix);
        sbuf_printf(&b, ",\"revoked\":%s,\"preferred_account_id\":", k->revoked ? "true" : "false");
        if (k->preferred_account_id)
            sbuf_printf(&b, "%lld", (long long)k->preferred_account_id);
        else
            sbuf_puts(&b, "null");
        sbuf_puts(&b, ",\"preferred_account\":");
        admin_str(&b, pref ? pref->a.name : NULL);
        sbuf_puts(&b, ",\"budget\":");
        admin_budget_json(&b, k->budget_usd, k->budget_period, &pool_key_entry(p, i)->budget, now);
        sbuf_puts(&b, "}");
    }
    sbuf_puts(&b, "]}");
    admin_send_json(req, &b);
}

typedef struct admin_rows {
    sbuf *b;
    size_t n;
    int64_t last_id;
} admin_rows;

static void admin_log_row(void *ud, const store_log_row *r)
{
    admin_rows *rows = ud;
    sbuf *b = rows->b;
    sbuf_printf(b, "%s{\"id\":%lld,\"ts\":", rows->n++ ? "," : "", (long long)r->id);
    admin_num(b, r->ts);
    sbuf_printf(b, ",\"key_id\":%lld,\"key\":", (long long)r->key_id);
    admin_str(b, r->key_name);
    sbuf_puts(b, ",\"endpoint\":");
    admin_str(b, r->endpoint);
    sbuf_puts(b, ",\"model\":");
    admin_str(b, r->model);
    sbuf_printf(b, ",\"stream\":%s,\"account_id\":%lld,\"account\":", r->stream ? "true" : "false",
                (long long)r->account_id);
    admin_str(b, r->account_name);
    sbuf_printf(b, ",\"status\":%d,\"attempts\":%d,\"latency_ms\":", r->status, r->attempts);
    admin_num(b, r->latency_ms);
    sbuf_puts(b, ",\"strategy\":");
    admin_str(b, r->route_strategy);
    sbuf_puts(b, ",\"error_class\":");
    admin_str(b, r->error_class);
    sbuf_puts(b, ",\"error_message\":");
    admin_str(b, r->error_message[0] ? r->error_message : NULL);
    sbuf_printf(b, ",\"input_tokens\":%ld,\"output_tokens\":%ld,\"total_tokens\":%ld", r->input_tokens,
                r->output_tokens, r->total_tokens);
    admin_opt(b, "cached_tokens", r->cached_tokens >= 0, (double)r->cached_tokens);
    sbuf_puts(b, ",\"cost_usd\":");
    if (r->cost_usd >= 0)
        sbuf_printf(b, "%.6f", r->cost_usd);
    else
        sbuf_puts(b, "null");
    sbuf_puts(b, ",\"upstream_model\":");
    admin_str(b, r->upstream_model[0] ? r->upstream_model : NULL);
    sbuf_printf(b, ",\"resumed\":%s,\"tried\":", r->resumed ? "true" : "false");
    /* written by proxy.c as a JSON array; anything else is not passed on */
    sbuf_puts(b, r->attempts_json[0] == '[' ? r->attempts_json : "[]");
    sbuf_puts(b, "}");
    rows->last_id = r->id;
}

/* The filters of /admin/api/requests from its query string (q holds them;
 * the caller clears it). */
static store_log_filter admin_log_filter(struct evkeyvalq *q)
{
    const char *failed = evhttp_find_header(q, "failed");
    return (store_log_filter){
        .before_id = admin_qint(q, "before", 0, 0, INT64_MAX),
        .after_id = admin_qint(q, "after", 0, 0, INT64_MAX),
        .key = evhttp_find_header(q, "key"),
        .account = evhttp_find_header(q, "account"),
        .status = (int)admin_qint(q, "status", 0, 0, 999),
        .failed = failed && (strcmp(failed, "1") == 0 || strcmp(failed, "true") == 0),
        .since = admin_qnum(q, "since", 0),
        .until = admin_qnum(q, "until", 0),
        .model = evhttp_find_header(q, "model"),
        .endpoint = evhttp_find_header(q, "endpoint"),
        .q = evhttp_find_header(q, "q"),
        .limit = (int)admin_qint(q, "limit", ADMIN_REQUESTS_DEFAULT, 0, INT32_MAX),
    };
}

/* A page of the request log, newest first: filters (exact: key, account,
 * status, failed, model, endpoint; a time range since/until; q, words
 * found anywhere in the row), at most limit rows, and next_before, the
 * cursor of the next page (null: nothing older is left). A filtered page
 * examines at most ADMIN_SCAN_MAX rows, so a search that matches little
 * answers in bounded time with fewer rows and a cursor ("scan_limited")
 * where it stopped, instead of walking the table on the loop. */
void admin_get_requests(admin_ctx *ctx, struct evhttp_request *req)
{
    struct evkeyvalq q;
    admin_query(req, &q);
    store_log_filter f = admin_log_filter(&q);
    f.scan_max = f.q && *f.q ? ADMIN_SEARCH_SCAN_MAX : ADMIN_SCAN_MAX;
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"requests\":[");
    admin_rows rows = {&b, 0, 0};
    int n = store_logs_query(ctx->gw->st, &f, admin_log_row, &rows);
    evhttp_clear_headers(&q);
    if (n < 0) {
        sbuf_free(&b);
        return server_send_error(req, 503, "server_error", "database_busy", "the request log could not be read now; retry");
    }
    /* where the next page starts: after the last row of a full page, or
     * below the rows this one examined when the scan bound stopped it */
    int full = rows.n && !f.after_id && (size_t)n == (size_t)(f.limit < 1 ? 1 : f.limit > 1000 ? 1000 : f.limit);
    sbuf_puts(&b, "],\"next_before\":");
    if (full)
        sbuf_printf(&b, "%lld", (long long)rows.last_id);
    else if (f.scan_floor > 0)
        sbuf_printf(&b, "%lld", (long long)f.scan_floor + 1);
    else
        sbuf_puts(&b, "null");
    sbuf_printf(&b, ",\"scan_limited\":%s,\"scan_max\":%lld}", !full && f.scan_floor > 0 ? "true" : "false",
                (long long)f.scan_max);
    admin_send_json(req, &b);
}

/* One request log row by id (the dashboard's detail view): the row as in
 * /admin/api/requests, with its attempts, timings, tokens, cost and error. */
void admin_get_request(admin_ctx *ctx, struct evhttp_request *req)
{
    struct evkeyvalq q;
    admin_query(req, &q);
    int64_t id = admin_qint(&q, "id", 0, 1, INT64_MAX);
    evhttp_clear_headers(&q);
    if (!id)
        return server_send_error(req, 400, "invalid_request_error", "invalid_value", "give the request's id: ?id=N");
    store_log_filter f = {.id = id, .limit = 1};
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"request\":");
    admin_rows rows = {&b, 0, 0};
    int n = store_logs_query(ctx->gw->st, &f, admin_log_row, &rows);
    if (n < 0) {
        sbuf_free(&b);
        return server_send_error(req, 503, "server_error", "database_busy", "the request log could not be read now; retry");
    }
    if (n == 0) {
        sbuf_free(&b);
        return server_send_error(req, 404, "invalid_request_error", "unknown_request",
                                 "no request with that id in the request log (the retention may have removed it)");
    }
    sbuf_puts(&b, "}");
    admin_send_json(req, &b);
}

/* ---------- spend ---------- */

typedef struct admin_today {
    metrics_usage_row *rows;
    size_t n, cap;
} admin_today;

static void admin_today_add(void *ud, const metrics_usage_row *r)
{
    admin_today *t = ud;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        metrics_usage_row *grown = realloc(t->rows, cap * sizeof *grown);
        if (!grown)
            return;
        t->rows = grown;
        t->cap = cap;
    }
    t->rows[t->n++] = *r;
}

static const metrics_usage_row *admin_today_find(const admin_today *t, int by_key, int64_t id)
{
    for (size_t i = 0; i < t->n; i++)
        if ((by_key ? t->rows[i].key_id : t->rows[i].account_id) == id)
            return &t->rows[i];
    return NULL;
}

/* ,"today":{requests, input_tokens, cached_tokens, output_tokens, cost_usd} */
static void admin_today_json(sbuf *b, const metrics_usage_row *r)
{
    static const metrics_usage_row zero = {0};
    if (!r)
        r = &zero;
    sbuf_printf(b, ",\"today\":{\"requests\":%llu,\"input_tokens\":%llu,\"cached_tokens\":%llu,"
                   "\"output_tokens\":%llu,\"cost_usd\":%.6f}",
                (unsigned long long)r->requests, (unsigned long long)r->input, (unsigned long long)r->cached,
                (unsigned long long)r->output, r->cost_usd);
}

/* Spend against budget: per account and per key, today (UTC, kept in
 * memory by metrics.c and seeded from the request log at start) and in
 * the current budget window (the budgets' own figures, route/spend.c);
 * per model today. Revoked keys only with ?revoked=1. No database read. */
void admin_get_spend(admin_ctx *ctx, struct evhttp_request *req)
{
    gateway *gw = ctx->gw;
    struct evkeyvalq q;
    admin_query(req, &q);
    const char *rv = evhttp_find_header(&q, "revoked");
    int with_revoked = rv && (strcmp(rv, "1") == 0 || strcmp(rv, "true") == 0);
    evhttp_clear_headers(&q);
    double now = gateway_now();
    admin_today by_acct = {0}, by_key = {0}, by_model = {0};
    metrics_usage_today(now, "account", admin_today_add, &by_acct);
    metrics_usage_today(now, "key", admin_today_add, &by_key);
    metrics_usage_today(now, "model", admin_today_add, &by_model);
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"now\":");
    admin_num(&b, now);
    sbuf_puts(&b, ",\"day_start\":");
    admin_num(&b, floor(now / 86400) * 86400);
    sbuf_puts(&b, ",\"accounts\":[");
    for (size_t i = 0; i < pool_count(gw->pool); i++) {
        const pool_account *pa = pool_at(gw->pool, i);
        sbuf_printf(&b, "%s{\"id\":%lld,\"name\":", i ? "," : "", (long long)pa->a.id);
        admin_str(&b, pa->a.name);
        admin_today_json(&b, admin_today_find(&by_acct, 0, pa->a.id));
        sbuf_puts(&b, ",\"budget\":");
        admin_budget_json(&b, pa->a.budget_usd, pa->a.budget_period, &pa->budget, now);
        sbuf_puts(&b, "}");
    }
    sbuf_puts(&b, "],\"keys\":[");
    size_t shown = 0, hidden = 0;
    for (size_t i = 0; i < pool_key_count(gw->pool); i++) {
        pool_key *pk = pool_key_entry(gw->pool, i);
        if (pk->k.revoked && !with_revoked) {
            hidden++;
            continue;
        }
        sbuf_printf(&b, "%s{\"id\":%lld,\"name\":", shown++ ? "," : "", (long long)pk->k.id);
        admin_str(&b, pk->k.name);
        sbuf_printf(&b, ",\"revoked\":%s", pk->k.revoked ? "true" : "false");
        admin_today_json(&b, admin_today_find(&by_key, 1, pk->k.id));
        sbuf_puts(&b, ",\"budget\":");
        admin_budget_json(&b, pk->k.budget_usd, pk->k.budget_period, &pk->budget, now);
        sbuf_puts(&b, "}");
    }
    sbuf_printf(&b, "],\"revoked_hidden\":%zu,\"models\":[", hidden);
    for (size_t i = 0; i < by_model.n; i++) {
        sbuf_puts(&b, i ? ",{\"model\":" : "{\"model\":");
        admin_str(&b, by_model.rows[i].model);
        admin_today_json(&b, &by_model.rows[i]);
        sbuf_puts(&b, "}");
    }
    sbuf_puts(&b, "]}");
    free(by_acct.rows);
    free(by_key.rows);
    free(by_model.rows);
    admin_send_json(req, &b);
}

/* At most this many rows per group in /admin/api/stats (the busiest
 * first); the rest are summed into one row named "(other)" with their
 * count in "rows". 20 000 models made a 4.4 MB answer built on the loop. */
#define ADMIN_STATS_ROWS 100

typedef struct admin_stats_rows {
    sbuf *b;
    size_t n;
    store_stat_row other;     /* the rows past ADMIN_STATS_ROWS, summed */
    int64_t others;
} admin_stats_rows;

static void admin_stat_put(sbuf *b, size_t i, const char *label, const store_stat_row *r, int64_t rows)
{
    sbuf_puts(b, i ? ",{\"name\":" : "{\"name\":");
    admin_str(b, label);
    sbuf_printf(b, ",\"requests\":%lld,\"failed\":%lld,\"attempts\":%lld,\"failovers\":%lld,\"input_tokens\":%lld,"
                   "\"output_tokens\":%lld,\"total_tokens\":%lld",
                (long long)r->requests, (long long)r->failed, (long long)r->attempts, (long long)r->failovers,
                (long long)r->input_tokens, (long long)r->output_tokens, (long long)r->total_tokens);
    if (rows)
        sbuf_printf(b, ",\"rows\":%lld", (long long)rows);
    sbuf_puts(b, "}");
}

static void admin_stat_row(void *ud, const store_stat_row *r)
{
    admin_stats_rows *rows = ud;
    if (rows->n < ADMIN_STATS_ROWS) {
        admin_stat_put(rows->b, rows->n++, r->label, r, 0);
        return;
    }
    store_stat_row *o = &rows->other;
    o->requests += r->requests;
    o->failed += r->failed;
    o->attempts += r->attempts;
    o->failovers += r->failovers;
    o->input_tokens += r->input_tokens;
    o->output_tokens += r->output_tokens;
    o->total_tokens += r->total_tokens;
    rows->others++;
}

void admin_get_stats(admin_ctx *ctx, struct evhttp_request *req)
{
    struct evkeyvalq q;
    admin_query(req, &q);
    double now = gateway_now();
    double since = admin_qnum(&q, "since", now - 3600), until = admin_qnum(&q, "until", 0);
    evhttp_clear_headers(&q);
    static const char *const groups[] = {"account", "key", "model"};
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"since\":");
    admin_num(&b, since);
    sbuf_puts(&b, ",\"until\":");
    admin_num(&b, until > 0 ? until : now);
    for (size_t g = 0; g < 3; g++) {
        sbuf_printf(&b, ",\"by_%s\":[", groups[g]);
        admin_stats_rows rows = {.b = &b};
        if (store_logs_stats(ctx->gw->st, groups[g], since, until, admin_stat_row, &rows) < 0) {
            sbuf_free(&b);
            return server_send_error(req, 503, "server_error", "database_busy", "the request log could not be read now; retry");
        }
        if (rows.others)
            admin_stat_put(&b, rows.n, "(other)", &rows.other, rows.others);
        sbuf_puts(&b, "]");
    }
    sbuf_puts(&b, "}");
    admin_send_json(req, &b);
}

static void admin_bucket(void *ud, double t, int64_t requests, int64_t failovers, int64_t failed)
{
    admin_rows *rows = ud;
    sbuf_puts(rows->b, rows->n++ ? ",{\"t\":" : "{\"t\":");
    admin_num(rows->b, t);
    sbuf_printf(rows->b, ",\"requests\":%lld,\"failovers\":%lld,\"failed\":%lld}", (long long)requests,
                (long long)failovers, (long long)failed);
}

void admin_get_timeline(admin_ctx *ctx, struct evhttp_request *req)
{
    struct evkeyvalq q;
    admin_query(req, &q);
    double minutes = admin_qnum(&q, "minutes", 60), bucket = admin_qnum(&q, "bucket", 60);
    evhttp_clear_headers(&q);
    if (minutes < 1 || minutes > 7 * 24 * 60 || bucket < 1 || bucket > 86400)
        return server_send_error(req, 400, "invalid_request_error", "invalid_value",
                                 "minutes must be 1..10080 and bucket 1..86400 seconds");
    double now = gateway_now();
    /* aligned buckets, so the chart's columns do not shift every poll */
    double since = floor((now - minutes * 60) / bucket) * bucket + bucket;
    sbuf b = SBUF_INIT, items = SBUF_INIT;
    admin_rows rows = {&items, 0, 0};
    int from_memory = minutes == 60 && bucket == 60; /* the dashboard's view: no database scan */
    if (from_memory)
        since = metrics_minutes(now, admin_bucket, &rows);
    sbuf_puts(&b, "{\"now\":");
    admin_num(&b, now);
    sbuf_puts(&b, ",\"since\":");
    admin_num(&b, since);
    sbuf_printf(&b, ",\"bucket_s\":%d,\"source\":\"%s\",\"buckets\":[", (int)bucket, from_memory ? "memory" : "database");
    if (!from_memory && store_logs_timeline(ctx->gw->st, since, (int)bucket, admin_bucket, &rows) < 0) {
        sbuf_free(&items);
        sbuf_free(&b);
        return server_send_error(req, 503, "server_error", "database_busy", "the request log could not be read now; retry");
    }
    if (items.len)
        sbuf_append(&b, items.p, items.len);
    sbuf_free(&items);
    sbuf_puts(&b, "]}");
    admin_send_json(req, &b);
}

void admin_seed_minute(void *ud, double t, int64_t requests, int64_t failovers, int64_t failed)
{
    metrics_minute_seed(t, requests, failovers, failed);
}

void admin_seed_usage(void *ud, const store_usage_group *u)
{
    metrics_usage_seed_day(*(const double *)ud, u->account_id, u->key_id, u->model, u->requests, u->input_tokens,
                           u->cached_tokens, u->output_tokens, u->cost_usd);
}

void admin_get_policy(admin_ctx *ctx, struct evhttp_request *req)
{
    gateway *gw = ctx->gw;
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"source\":");
    admin_str(&b, policy_source(gw->policy));
    sbuf_puts(&b, ",\"loaded_at\":");
    admin_num(&b, gw->policy_loaded_at);
    sbuf_puts(&b, ",\"files\":[");
    policy_file f;
    for (size_t i = 0; policy_file_info(gw->policy, i, &f) == 0; i++) {
        sbuf_puts(&b, i ? ",{\"hook\":" : "{\"hook\":");
        admin_str(&b, f.hook);
        sbuf_puts(&b, ",\"path\":");
        admin_str(&b, f.path);
        sbuf_puts(&b, ",\"sha256\":");
        admin_str(&b, f.sha256);
        sbuf_printf(&b, ",\"fallbacks\":%llu}", (unsigned long long)f.fallbacks);
    }
    sbuf_printf(&b, "],\"fallbacks\":%llu,\"fallbacks_total\":%llu,\"last_fallback\":",
                (unsigned long long)policy_fallbacks(gw->policy),
                (unsigned long long)(gw->policy_fallbacks_retired + policy_fallbacks(gw->policy)));
    const char *le = policy_last_error(gw->policy);
    admin_str(&b, le && *le ? le : NULL);
    sbuf_puts(&b, ",\"last_reload\":");
    if (gw->policy_reload_at > 0) {
        sbuf_puts(&b, "{\"at\":");
        admin_num(&b, gw->policy_reload_at);
        sbuf_printf(&b, ",\"ok\":%s,\"error\":", gw->policy_reload_ok ? "true" : "false");
        admin_str(&b, gw->policy_reload_ok ? NULL : gw->policy_reload_error);
        sbuf_puts(&b, "}");
    } else {
        sbuf_puts(&b, "null");
    }
    sbuf_puts(&b, "}");
    admin_send_json(req, &b);
}


void admin_get_overview(admin_ctx *ctx, struct evhttp_request *req)
{
    gateway *gw = ctx->gw;
    double now = gateway_now();
    store_writer_stats ws;
    store_writer_stats_get(gw->st, &ws);
    metrics_totals t;
    metrics_totals_get(&t);
    size_t by_state[METRICS_ACCOUNT_STATES] = {0};
    for (size_t i = 0; i < pool_count(gw->pool); i++) {
        const char *s = admin_account_state(pool_at(gw->pool, i), now);
        for (size_t k = 0; k < METRICS_ACCOUNT_STATES; k++)
            by_state[k] += strcmp(s, metrics_account_states[k]) == 0;
    }
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"now\":");
    admin_num(&b, now);
    sbuf_puts(&b, ",\"started_at\":");
    admin_num(&b, gw->started_at);
    sbuf_puts(&b, ",\"listen\":");
    char addr[96];
    snprintf(addr, sizeof addr, "%s:%d", gw->cfg.listen_host, gw->cfg.listen_port);
    admin_str(&b, addr);
    sbuf_puts(&b, ",\"strategy\":");
    admin_str(&b, gw->cfg.route_strategy);
    sbuf_puts(&b, ",\"rotation\":");
    admin_str(&b, gw->cfg.rotation);
    sbuf_printf(&b, ",\"strategy_pinned\":%s,\"rotation_pinned\":%s,\"active_requests\":%zu,\"draining\":%s,"
                    "\"accounts\":{\"total\":%zu",
                gw->cfg.strategy_pinned ? "true" : "false", gw->cfg.rotation_pinned ? "true" : "false", gw->active,
                gw->draining ? "true" : "false", pool_count(gw->pool));
    for (size_t k = 0; k < METRICS_ACCOUNT_STATES; k++)
        sbuf_printf(&b, ",\"%s\":%zu", metrics_account_states[k], by_state[k]);
    sbuf_puts(&b, "},\"policy\":{\"source\":");
    admin_str(&b, policy_source(gw->policy));
    sbuf_printf(&b, ",\"fallbacks_total\":%llu},\"writer\":{\"pending_logs\":%zu,\"pending_states\":%zu,"
                    "\"pending_changes\":%zu,\"changes_waiting\":%zu,\"answers_waiting\":%zu,\"idle\":%s,"
                    "\"dropped_logs\":%llu,\"failed_commits\":%llu,\"failing\":%s,\"last_error\":",
                (unsigned long long)(gw->policy_fallbacks_retired + policy_fallbacks(gw->policy)), ws.pending_logs,
                ws.pending_states, ws.pending_changes, admin_changes_waiting(), admin_answers_waiting(),
                ws.idle ? "true" : "false",
                (unsigned long long)ws.dropped_logs,
                (unsigned long long)ws.failed_commits, ws.failing ? "true" : "false");
    admin_str(&b, ws.failing ? ws.last_error : "");
    sbuf_puts(&b, ",\"file_problem\":"); /* "" while the database file is fine */
    admin_str(&b, ws.file_problem);
    sbuf_puts(&b, "},");
    sbuf_printf(&b, "\"since_start\":{\"requests\":%llu,\"attempts\":%llu,\"failovers\":%llu,"
                    "\"preflight_switches\":%llu,\"retries\":%llu,\"waits\":%llu}}",
                (unsigned long long)t.requests, (unsigned long long)t.attempts, (unsigned long long)t.failovers,
                (unsigned long long)t.preflight_switches, (unsigned long long)t.retries, (unsigned long long)t.waits);
    admin_send_json(req, &b);
}

/* GET /admin/api/alerts[?limit=N][&id=N]: the events listed, newest first
 * (admin/admin_alerts.h). */
void admin_get_alerts(admin_ctx *ctx, struct evhttp_request *req)
{
    struct evkeyvalq q;
    admin_query(req, &q);
    int64_t limit = admin_qint(&q, "limit", ADMIN_ALERTS_DEFAULT, 1, ALERT_LOG_MAX);
    int64_t id = admin_qint(&q, "id", 0, 0, INT64_MAX);
    evhttp_clear_headers(&q);
    sbuf b = SBUF_INIT;
    admin_alerts_json(ctx->gw->alerts, (double)ctx->gw->cfg.alert_dedup_s, (size_t)limit, (uint64_t)id, &b);
    admin_send_json(req, &b);
}
