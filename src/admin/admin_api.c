/* admin_api.c: the admin surface (see admin_api.h): who may use it
 * (loopback or the admin listener; the admin token, compared in constant
 * time), the JSON reads and actions under /admin/api/, the embedded
 * dashboard files under /admin/ and /metrics. Every handler runs on the
 * loop: reads come from the in-memory pool or bounded sqlite reads (WAL,
 * busy_timeout 0); changes apply to memory at once and reach the database
 * through the store's writer thread. Nothing here prints an account token
 * or a platform key. */
#include "admin/admin_api.h"
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

/* One per listener: the gateway's (loopback only) or --admin-listen. */
typedef struct admin_ctx {
    gateway *gw;
    int dedicated;
} admin_ctx;

static admin_ctx admin_ctxs[2];

/* ---------- access ---------- */

int admin_digest_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = la != lb || la == 0;
    size_t n = la < lb ? la : lb;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

int admin_is_loopback(const struct sockaddr *sa)
{
    if (!sa)
        return 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return 1;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return 0;
}

static void admin_peer(struct evhttp_request *req, char *out, size_t n)
{
    struct evhttp_connection *c = evhttp_request_get_connection(req);
    char *host = NULL;
    ev_uint16_t port = 0;
    if (c)
        evhttp_connection_get_peer(c, &host, &port);
    snprintf(out, n, "%s", host ? host : "?");
}

void admin_token_load(gateway *gw)
{
    char hash[65];
    int rc = store_admin_token_get(gw->st, hash);
    if (rc == 0)
        snprintf(gw->admin_hash, sizeof gw->admin_hash, "%s", hash);
    else if (rc == 1)
        gw->admin_hash[0] = '\0';
    /* rc -1 (busy): keep what we had */
}

/* The listener rule: on the gateway's listener only loopback clients, and
 * only when no admin listener was configured; on either, only a Host that
 * is the gateway's own (a page of another site re-pointed at 127.0.0.1
 * must not read the pool: http/host_check.h). Replies and returns 0 when
 * the request is refused. */
static int admin_host_ok(const admin_ctx *ctx, struct evhttp_request *req)
{
    char msg[512];
    if (host_check_request(&ctx->gw->cfg, req, msg, sizeof msg))
        return 1;
    server_send_error(req, 403, "permission_error", "host_not_allowed", msg);
    return 0;
}

static int admin_network_ok(const admin_ctx *ctx, struct evhttp_request *req)
{
    if (ctx->dedicated)
        return admin_host_ok(ctx, req);
    struct evhttp_connection *c = evhttp_request_get_connection(req);
    if (c && admin_is_loopback(evhttp_connection_get_addr(c)))
        return admin_host_ok(ctx, req);
    server_send_error(req, 403, "permission_error", "admin_loopback_only",
                      "the admin surface answers loopback clients only; start the gateway with "
                      "--admin-listen HOST:PORT to serve it on another address");
    return 0;
}

static const char *admin_bearer(struct evhttp_request *req)
{
    const char *auth = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
        return NULL;
    auth += 7;
    while (*auth == ' ')
        auth++;
    return *auth ? auth : NULL;
}

/* Network rule and admin token. Replies and returns 0 when refused. */
static int admin_auth(const admin_ctx *ctx, struct evhttp_request *req)
{
    if (!admin_network_ok(ctx, req))
        return 0;
    const char *tok = admin_bearer(req);
    if (!tok) {
        server_send_error(req, 401, "invalid_request_error", "missing_admin_token",
                          "missing admin token: send 'Authorization: Bearer <admin token>' "
                          "(create one with 'switchyard admin token')");
        return 0;
    }
    char hex[65];
    sha256_hex(tok, strlen(tok), hex);
    if (ctx->gw->admin_hash[0] && admin_digest_equal(hex, ctx->gw->admin_hash))
        return 1;
    if (pool_auth(ctx->gw->pool, tok)) {
        server_send_error(req, 403, "permission_error", "platform_key_not_admin",
                          "a platform key cannot use the admin API; use the admin token");
        return 0;
    }
    server_send_error(req, 401, "invalid_request_error", "invalid_admin_token",
                      ctx->gw->admin_hash[0] ? "invalid admin token"
                                             : "no admin token is set: run 'switchyard admin token'");
    return 0;
}

/* ---------- replies and small JSON helpers ---------- */

static void admin_send(struct evhttp_request *req, int status, const char *ctype, const char *body, size_t len)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", ctype);
    evhttp_add_header(h, "Cache-Control", "no-store");
    evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
    struct evbuffer *out = evbuffer_new();
    evbuffer_add(out, body, len);
    evhttp_send_reply(req, status, NULL, out);
    evbuffer_free(out);
}

static void admin_send_json(struct evhttp_request *req, sbuf *b)
{
    sbuf_puts(b, "\n");
    admin_send(req, 200, "application/json", b->p, b->len);
    sbuf_free(b);
}

static void admin_str(sbuf *b, const char *s)
{
    if (s)
        sbuf_json_str(b, s, strlen(s));
    else
        sbuf_puts(b, "null");
}

/* A JSON number; non-finite values become null. */
static void admin_num(sbuf *b, double v)
{
    if (!isfinite(v))
        sbuf_puts(b, "null");
    else if (v == floor(v) && fabs(v) < 1e15)
        sbuf_printf(b, "%.0f", v);
    else
        sbuf_printf(b, "%.3f", v);
}

static int admin_method(struct evhttp_request *req, enum evhttp_cmd_type want)
{
    if (evhttp_request_get_command(req) == want)
        return 1;
    server_send_error(req, 405, "invalid_request_error", "method_not_allowed",
                      want == EVHTTP_REQ_GET ? "use GET for this path" : "use POST for this path");
    return 0;
}

/* The query string's parameters (caller clears q). */
static void admin_query(struct evhttp_request *req, struct evkeyvalq *q)
{
    q->tqh_first = NULL;
    q->tqh_last = &q->tqh_first;
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
    const char *qs = u ? evhttp_uri_get_query(u) : NULL;
    if (qs)
        evhttp_parse_query_str(qs, q);
}

static double admin_qnum(struct evkeyvalq *q, const char *name, double dflt)
{
    const char *v = evhttp_find_header(q, name);
    if (!v || !*v)
        return dflt;
    char *end;
    double d = strtod(v, &end);
    return *end || !isfinite(d) ? dflt : d;
}

/* A query value as an integer within [lo, hi]; dflt when absent, not a
 * number or out of range (1e300 is not cast: json_num_to_int64). */
static int64_t admin_qint(struct evkeyvalq *q, const char *name, int64_t dflt, int64_t lo, int64_t hi)
{
    int64_t v;
    return json_num_to_int64(admin_qnum(q, name, (double)dflt), lo, hi, &v) == 0 ? v : dflt;
}

/* The POST body read for kind (admin/admin_body.h); replies 400 and
 * returns -1 if it is refused. The caller frees b either way. */
static int admin_body_read(struct evhttp_request *req, admin_body_kind kind, admin_body *b)
{
    struct evbuffer *ib = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(ib);
    const char *p = len && len <= ADMIN_BODY_MAX ? (const char *)evbuffer_pullup(ib, -1) : "";
    if (admin_body_parse(kind, p, len, b) == 0)
        return 0;
    server_send_error(req, b->status, "invalid_request_error", b->code, b->message);
    return -1;
}

/* Logs an admin change (gateway log and trace): who, what, on what. */
static void admin_audit(gateway *gw, struct evhttp_request *req, const char *action, const char *target)
{
    char peer[64];
    admin_peer(req, peer, sizeof peer);
    log_info("admin: %s %s (from %s)", action, target, peer);
    trace_event(gw->trace, "ADMIN_ACTION", "action=%s target=\"%s\" peer=%s", action, target, peer);
}

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

static void admin_account_json(sbuf *b, const pool_account *pa, double now)
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

static void admin_get_accounts(admin_ctx *ctx, struct evhttp_request *req)
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

static void admin_get_keys(admin_ctx *ctx, struct evhttp_request *req)
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
static void admin_get_requests(admin_ctx *ctx, struct evhttp_request *req)
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
static void admin_get_request(admin_ctx *ctx, struct evhttp_request *req)
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
static void admin_get_spend(admin_ctx *ctx, struct evhttp_request *req)
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

static void admin_get_stats(admin_ctx *ctx, struct evhttp_request *req)
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

static void admin_get_timeline(admin_ctx *ctx, struct evhttp_request *req)
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

static void admin_seed_minute(void *ud, double t, int64_t requests, int64_t failovers, int64_t failed)
{
    metrics_minute_seed(t, requests, failovers, failed);
}

static void admin_seed_usage(void *ud, const store_usage_group *u)
{
    metrics_usage_seed_day(*(const double *)ud, u->account_id, u->key_id, u->model, u->requests, u->input_tokens,
                           u->cached_tokens, u->output_tokens, u->cost_usd);
}

static void admin_get_policy(admin_ctx *ctx, struct evhttp_request *req)
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

static size_t admin_changes_waiting(void); /* admin changes waiting for room in the writer's queue */
static size_t admin_answers_waiting(void); /* changes made, their answers waiting for the commit */

static void admin_get_overview(admin_ctx *ctx, struct evhttp_request *req)
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

/* ---------- actions ---------- */


/* ---------- answers that wait for the commit ---------- */

/* An acknowledged change is a written one (issue 33: a disable answered
 * 200 and then `kill -9` within 20 ms came back enabled). A change's
 * answer waits until the writer has committed everything queued when it
 * was made (the change and the state it saved), usually the writer's group
 * window, a few ms; the timer looks every ADMIN_DURABLE_POLL_US. Past
 * ADMIN_DURABLE_S (a stalled disk) the answer is 202 with "written":false:
 * the running gateway has the change, the database not yet. */
#define ADMIN_DURABLE_MAX 256
#define ADMIN_DURABLE_S 10.0
#define ADMIN_DURABLE_POLL_US 2000

typedef struct admin_durable_reply {
    struct evhttp_request *req;
    sbuf body;
    uint64_t ticket;
    double deadline;
} admin_durable_reply;

static struct {
    admin_durable_reply q[ADMIN_DURABLE_MAX];
    size_t n;
    struct event timer;
    int timer_ready;
    store *st;
} admin_durable;

static void admin_durable_run(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what, (void)arg;
    uint64_t done = store_writer_committed(admin_durable.st);
    double now = gateway_now();
    size_t keep = 0;
    for (size_t i = 0; i < admin_durable.n; i++) {
        admin_durable_reply *r = &admin_durable.q[i];
        if (done >= r->ticket) {
            admin_send_json(r->req, &r->body);
        } else if (now >= r->deadline) {
            sbuf_free(&r->body);
            static const char late[] =
                "{\"ok\":true,\"written\":false,\"message\":\"applied to the running gateway; not yet written to the "
                "database (its writer is behind): a restart before it is written loses it\"}\n";
            admin_send(r->req, 202, "application/json", late, sizeof late - 1);
        } else {
            admin_durable.q[keep++] = *r;
        }
    }
    admin_durable.n = keep;
    struct timeval tv = {0, ADMIN_DURABLE_POLL_US};
    if (admin_durable.n)
        evtimer_add(&admin_durable.timer, &tv);
}

static size_t admin_answers_waiting(void) { return admin_durable.n; }

/* b (a change's 200 answer) sent once what was queued by now is committed. */
static void admin_send_durable(admin_ctx *ctx, struct evhttp_request *req, sbuf *b)
{
    store *st = ctx->gw->st;
    uint64_t ticket = store_writer_queued(st);
    if (!ticket || store_writer_committed(st) >= ticket || admin_durable.n == ADMIN_DURABLE_MAX) {
        admin_send_json(req, b); /* no writer (nothing to wait for), already written, or too many waiting */
        return;
    }
    if (!admin_durable.timer_ready) {
        evtimer_assign(&admin_durable.timer, ctx->gw->base, admin_durable_run, NULL);
        admin_durable.timer_ready = 1;
    }
    admin_durable.st = st;
    admin_durable.q[admin_durable.n++] = (admin_durable_reply){req, *b, ticket, gateway_now() + ADMIN_DURABLE_S};
    *b = (sbuf)SBUF_INIT;
    struct timeval tv = {0, ADMIN_DURABLE_POLL_US};
    if (!evtimer_pending(&admin_durable.timer, NULL))
        evtimer_add(&admin_durable.timer, &tv);
}

/* ---------- changes that wait for the writer ---------- */

/* A change the writer's queue cannot take now (STORE_OPS_MAX changes
 * already waiting for a commit: many dashboards or scripts saving at once)
 * waits here instead of an immediate 503, and its handler runs again from
 * the start, in arrival order, after the writer's next commits. Nothing is
 * applied before the queue takes a request's changes, so running a handler
 * again is safe. 503 writer_busy only past ADMIN_WAIT_MAX waiting requests
 * or ADMIN_WAIT_S of waiting. A request whose client went away meanwhile is
 * answered into the void (libevent frees it). */
#define ADMIN_WAIT_MAX 256
#define ADMIN_WAIT_S 10.0
#define ADMIN_WAIT_POLL_US 5000

typedef void (*admin_handler)(admin_ctx *ctx, struct evhttp_request *req);

typedef struct admin_waiter {
    admin_ctx *ctx;
    struct evhttp_request *req;
    admin_handler fn;
    double deadline;
} admin_waiter;

static struct {
    admin_waiter q[ADMIN_WAIT_MAX]; /* a ring, oldest at head */
    size_t head, n;
    struct event timer;
    int timer_ready;
    admin_handler running; /* the handler being run, to run it again */
    int retry;             /* running a waiter again: a full queue keeps it in its place */
    int still_full;
} admin_wait;

static size_t admin_changes_waiting(void) { return admin_wait.n; }

static void admin_busy(struct evhttp_request *req)
{
    server_send_error(req, 503, "server_error", "writer_busy", "too many changes are waiting to be written; retry");
}

static void admin_wait_run(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what, (void)arg;
    double now = gateway_now();
    while (admin_wait.n) {
        admin_waiter w = admin_wait.q[admin_wait.head];
        if (now < w.deadline) {
            admin_wait.retry = 1;
            admin_wait.still_full = 0;
            admin_wait.running = w.fn;
            w.fn(w.ctx, w.req);
            admin_wait.retry = 0;
            admin_wait.running = NULL;
            if (admin_wait.still_full)
                break;
        } else {
            admin_busy(w.req);
        }
        admin_wait.head = (admin_wait.head + 1) % ADMIN_WAIT_MAX;
        admin_wait.n--;
    }
    struct timeval tv = {0, ADMIN_WAIT_POLL_US};
    if (admin_wait.n)
        evtimer_add(&admin_wait.timer, &tv);
}

/* Queues ops[0..n) all or none: 1 queued (the caller applies them to the
 * running gateway now); 0 not (the request waits, or was answered 503). */
static int admin_queue(admin_ctx *ctx, struct evhttp_request *req, const store_admin_op *ops, size_t n)
{
    gateway *gw = ctx->gw;
    if (admin_wait.retry) {
        if (store_writer_put_admin_ops(gw->st, ops, n) == 0)
            return 1;
        admin_wait.still_full = 1;
        return 0;
    }
    /* behind earlier waiters, never ahead of them: the last change sent is the last applied */
    if (!admin_wait.n && store_writer_put_admin_ops(gw->st, ops, n) == 0)
        return 1;
    if (!admin_wait.running || admin_wait.n == ADMIN_WAIT_MAX) {
        admin_busy(req);
        return 0;
    }
    if (!admin_wait.timer_ready) {
        evtimer_assign(&admin_wait.timer, gw->base, admin_wait_run, NULL);
        admin_wait.timer_ready = 1;
    }
    admin_wait.q[(admin_wait.head + admin_wait.n++) % ADMIN_WAIT_MAX] =
        (admin_waiter){ctx, req, admin_wait.running, gateway_now() + ADMIN_WAIT_S};
    struct timeval tv = {0, ADMIN_WAIT_POLL_US};
    if (!evtimer_pending(&admin_wait.timer, NULL))
        evtimer_add(&admin_wait.timer, &tv);
    return 0;
}

/* The account the body's "account" names (a name, or an id as a number). */
static pool_account *admin_body_account(gateway *gw, struct evhttp_request *req, const admin_ref *r)
{
    pool_account *pa = NULL;
    if (r->invalid || r->kind == ADMIN_REF_NULL) {
        server_send_error(req, 400, "invalid_request_error", "invalid_value", ADMIN_BODY_ACCOUNT_MSG);
        return NULL;
    }
    if (r->kind == ADMIN_REF_NAME) {
        for (size_t i = 0; i < pool_count(gw->pool) && !pa; i++)
            if (strcmp(pool_at(gw->pool, i)->a.name, r->name) == 0)
                pa = pool_at(gw->pool, i);
    } else if (r->kind == ADMIN_REF_ID) {
        pa = pool_find(gw->pool, r->id);
    }
    if (!pa)
        server_send_error(req, 404, "invalid_request_error", "unknown_account", "no such account");
    return pa;
}

typedef enum { ADMIN_ENABLE, ADMIN_DISABLE, ADMIN_RESET } admin_account_action;

static void admin_post_account(admin_ctx *ctx, struct evhttp_request *req, admin_account_action act)
{
    gateway *gw = ctx->gw;
    admin_body body;
    pool_account *pa = admin_body_read(req, ADMIN_BODY_ACCOUNT, &body) == 0 ? admin_body_account(gw, req, &body.account)
                                                                             : NULL;
    admin_body_free(&body);
    if (!pa)
        return;
    if (act == ADMIN_RESET) {
        if (pa->a.hold) { /* written as `account reset` does: a reload, a restart find it cleared */
            store_admin_op op = {.kind = STORE_OP_ACCOUNT_UNHOLD, .id = pa->a.id};
            if (!admin_queue(ctx, req, &op, 1))
                return;
            free(pa->a.hold);
            free(pa->a.hold_detail);
            pa->a.hold = pa->a.hold_detail = NULL;
            pa->a.hold_since = 0;
        }
        pool_account_reset(pa);
        pa->st.updated_at = gateway_now();
        pool_state_save(gw->pool, pa);
        admin_audit(gw, req, "reset_cooldown", pa->a.name);
    } else {
        store_admin_op op = {.kind = STORE_OP_ACCOUNT_ENABLED, .id = pa->a.id, .value = act == ADMIN_ENABLE};
        if (!admin_queue(ctx, req, &op, 1))
            return;
        pa->a.enabled = act == ADMIN_ENABLE;
        admin_audit(gw, req, act == ADMIN_ENABLE ? "enable" : "disable", pa->a.name);
    }
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"ok\":true,\"account\":");
    admin_account_json(&b, pa, gateway_now());
    sbuf_puts(&b, "}");
    admin_send_durable(ctx, req, &b);
}

static void admin_post_enable(admin_ctx *ctx, struct evhttp_request *req) { admin_post_account(ctx, req, ADMIN_ENABLE); }
static void admin_post_disable(admin_ctx *ctx, struct evhttp_request *req) { admin_post_account(ctx, req, ADMIN_DISABLE); }
static void admin_post_reset(admin_ctx *ctx, struct evhttp_request *req) { admin_post_account(ctx, req, ADMIN_RESET); }

/* {"key": id, "account": name | id | null}: null clears the preference. */
static void admin_post_prefer(admin_ctx *ctx, struct evhttp_request *req)
{
    gateway *gw = ctx->gw;
    admin_body body;
    if (admin_body_read(req, ADMIN_BODY_PREFER, &body) != 0) {
        admin_body_free(&body);
        return;
    }
    const admin_ref *kr = &body.key; /* an id too large for one names no key */
    platform_key *key = NULL;
    for (size_t i = 0; kr->kind != ADMIN_REF_NONE && i < pool_key_count(gw->pool); i++) {
        platform_key *k = pool_key_at(gw->pool, i);
        if ((kr->kind == ADMIN_REF_ID && k->id == kr->id) || (kr->kind == ADMIN_REF_NAME && strcmp(k->name, kr->name) == 0)) {
            key = k;
            break;
        }
    }
    pool_account *pa = NULL;
    if (!key) {
        server_send_error(req, 404, "invalid_request_error", "unknown_key", "no such platform key ('key': id or name)");
    } else if (body.account.kind != ADMIN_REF_NULL) {
        pa = admin_body_account(gw, req, &body.account);
        if (!pa) {
            admin_body_free(&body);
            return;
        }
    }
    admin_body_free(&body);
    if (!key)
        return;
    store_admin_op op = {.kind = STORE_OP_KEY_PREFERRED, .id = key->id, .value = pa ? pa->a.id : 0};
    if (!admin_queue(ctx, req, &op, 1))
        return;
    key->preferred_account_id = pa ? pa->a.id : 0;
    char target[200];
    snprintf(target, sizeof target, "key %s -> %s", key->name, pa ? pa->a.name : "(none)");
    admin_audit(gw, req, "prefer", target);
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"ok\":true}");
    admin_send_durable(ctx, req, &b);
}

/* {"strategy": "...", "rotation": "..."} (either or both). */
static void admin_post_settings(admin_ctx *ctx, struct evhttp_request *req)
{
    gateway *gw = ctx->gw;
    admin_body body;
    if (admin_body_read(req, ADMIN_BODY_SETTINGS, &body) != 0) {
        admin_body_free(&body);
        return;
    }
    const char *canon = body.strategy, *rotation = body.rotation;
    store_admin_op ops[2];
    size_t n = 0;
    if (canon) {
        ops[n] = (store_admin_op){.kind = STORE_OP_SETTING};
        snprintf(ops[n].key, sizeof ops[n].key, "route_strategy");
        snprintf(ops[n].text, sizeof ops[n].text, "%s", canon);
        n++;
    }
    if (rotation) {
        ops[n] = (store_admin_op){.kind = STORE_OP_SETTING};
        snprintf(ops[n].key, sizeof ops[n].key, "rotation");
        snprintf(ops[n].text, sizeof ops[n].text, "%s", rotation);
        n++;
    }
    /* all or nothing: both settings go in one writer transaction, or neither
     * is queued; the running gateway follows once the queue took them */
    if (!admin_queue(ctx, req, ops, n)) {
        admin_body_free(&body);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char target[128];
        snprintf(target, sizeof target, "%s=%s", ops[i].key, ops[i].text);
        admin_audit(gw, req, "set", target);
    }
    /* the running gateway follows at once, pinned or not; a flag or
     * environment variable wins again at the next start (the reply says so) */
    if (canon)
        snprintf(gw->cfg.route_strategy, sizeof gw->cfg.route_strategy, "%s", canon);
    if (rotation)
        snprintf(gw->cfg.rotation, sizeof gw->cfg.rotation, "%s", rotation);
    admin_body_free(&body);
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"ok\":true,\"strategy\":");
    admin_str(&b, gw->cfg.route_strategy);
    sbuf_puts(&b, ",\"rotation\":");
    admin_str(&b, gw->cfg.rotation);
    sbuf_printf(&b, ",\"strategy_pinned\":%s,\"rotation_pinned\":%s}", gw->cfg.strategy_pinned ? "true" : "false",
                gw->cfg.rotation_pinned ? "true" : "false");
    admin_send_durable(ctx, req, &b);
}

static void admin_post_reload(admin_ctx *ctx, struct evhttp_request *req)
{
    gateway *gw = ctx->gw;
    admin_audit(gw, req, "reload_policies", policy_source(gw->policy));
    if (gw->reload_policies(gw, "admin") != 0) {
        char msg[700];
        snprintf(msg, sizeof msg, "policy reload refused, the previous policy keeps serving: %s", gw->policy_reload_error);
        return server_send_error(req, 422, "invalid_request_error", "policy_reload_failed", msg);
    }
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"ok\":true,\"source\":");
    admin_str(&b, policy_source(gw->policy));
    sbuf_puts(&b, "}");
    admin_send_json(req, &b);
}

/* GET /admin/api/alerts[?limit=N][&id=N]: the events listed, newest first
 * (admin/admin_alerts.h). */
static void admin_get_alerts(admin_ctx *ctx, struct evhttp_request *req)
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

/* POST /admin/api/alerts/test: raises a test event (never deduplicated)
 * and answers the document of it alone; its outcome is "queued" until
 * the webhook answers (GET ?id= to follow), "unsent" with no webhook. */
static void admin_post_alert_test(admin_ctx *ctx, struct evhttp_request *req)
{
    gateway *gw = ctx->gw;
    if (!gw->alerts)
        return server_send_error(req, 503, "server_error", "alerts_unavailable", "the alert sender is not running");
    admin_audit(gw, req, "alert_test", "operator");
    uint64_t id = alert_test(gw->alerts, gw->policy, gateway_now());
    sbuf b = SBUF_INIT;
    admin_alerts_json(gw->alerts, (double)gw->cfg.alert_dedup_s, 1, id, &b);
    admin_send_json(req, &b);
}

/* ---------- metrics and the dashboard's files ---------- */

static void admin_metrics(admin_ctx *ctx, struct evhttp_request *req)
{
    gateway *gw = ctx->gw;
    double now = gateway_now();
    size_t n = pool_count(gw->pool);
    metrics_account *accts = calloc(n ? n : 1, sizeof *accts);
    for (size_t i = 0; i < n; i++) {
        const pool_account *pa = pool_at(gw->pool, i);
        health_figures h;
        health_window_read(&pa->health, now, &h);
        accts[i] = (metrics_account){pa->a.id, pa->a.name, admin_account_state(pa, now),
                                     pa->st.cooldown_until > now ? pa->st.cooldown_until - now : 0, pa->inflight,
                                     pa->st.primary_used_pct, pa->st.secondary_used_pct,
                                     h.success_rate, h.latency_ms, h.attempts};
    }
    store_writer_stats ws;
    store_writer_stats_get(gw->st, &ws);
    alert_stats as;
    alert_stats_get(gw->alerts, &as);
    metrics_gauges g = {accts, n, gw->policy_fallbacks_retired + policy_fallbacks(gw->policy), ws.pending_logs,
                        ws.pending_states, ws.dropped_logs, ws.failed_commits, gw->active, now - gw->started_at,
                        ws_open_count(), as.raised, as.suppressed, as.sent, as.retried, as.failed, as.dropped,
                        as.queued, NULL, 0, 0, 0, as.unsent, 0, 0, 0, 0};
    account_poll_stats ps;
    account_poll_stats_get(gw->polls, &ps);
    g.polls_in_flight = ps.in_flight;
    g.polls_in_flight_max = ps.in_flight_max;
    g.polls_started = ps.started;
    g.polls_deferred = ps.deferred;
    if (strcmp(shared_kind(gw->shared), "redis") == 0) {
        char why[8];
        g.redis = 1;
        g.redis_up = shared_degraded(gw->shared, why, 0) != 1;
    }
    size_t nk = pool_key_count(gw->pool);
    metrics_key *keys = calloc(nk ? nk : 1, sizeof *keys);
    for (size_t i = 0; i < nk && keys; i++)
        keys[i] = (metrics_key){pool_key_at(gw->pool, i)->id, pool_key_at(gw->pool, i)->name};
    g.keys = keys;
    g.n_keys = keys ? nk : 0;
    sbuf b = SBUF_INIT;
    metrics_format(&b, &g);
    free(accts);
    free(keys);
    admin_send(req, 200, "text/plain; version=0.0.4; charset=utf-8", b.p, b.len);
    sbuf_free(&b);
}

static const char *admin_ctype(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (dot && strcmp(dot, ".html") == 0)
        return "text/html; charset=utf-8";
    if (dot && strcmp(dot, ".css") == 0)
        return "text/css; charset=utf-8";
    if (dot && strcmp(dot, ".js") == 0)
        return "text/javascript; charset=utf-8";
    if (dot && strcmp(dot, ".svg") == 0)
        return "image/svg+xml";
    return "application/octet-stream";
}

/* /admin/<file> from web/<file>, embedded at build time. */
static void admin_static(admin_ctx *ctx, struct evhttp_request *req)
{
    if (!admin_network_ok(ctx, req) || !admin_method(req, EVHTTP_REQ_GET))
        return;
    const char *uri = evhttp_request_get_uri(req);
    size_t plen = strcspn(uri, "?");
    char name[160];
    if (plen == 6 || plen == 7) /* "/admin" or "/admin/" */
        snprintf(name, sizeof name, "web/index.html");
    else
        snprintf(name, sizeof name, "web/%.*s", (int)(plen > 7 + 140 ? 140 : plen - 7), uri + 7);
    const embedded_file *f = embedded_find(name);
    if (!f)
        return server_send_error(req, 404, "invalid_request_error", "unknown_url", "no such file");
    if (plen == 6) { /* relative links in the page need the slash */
        evhttp_add_header(evhttp_request_get_output_headers(req), "Location", "/admin/");
        evhttp_send_reply(req, 302, "Found", NULL);
        return;
    }
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    /* nothing but our own files; the token travels in fetch headers only */
    evhttp_add_header(h, "Content-Security-Policy",
                      "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                      "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
    evhttp_add_header(h, "Referrer-Policy", "no-referrer");
    admin_send(req, 200, admin_ctype(name), f->data, f->len);
}

/* ---------- "Add ChatGPT account": the device-code sign-in ---------- */

/* The gateway's sign-ins (accounts/signin.h), made at admin_start. */
static signins *admin_signins;

static void admin_signin_json(sbuf *b, const signin_view *v)
{
    sbuf_printf(b, "{\"id\":%lld,\"state\":\"%s\",\"name\":", (long long)v->id, signin_state_name(v->state));
    admin_str(b, v->name[0] ? v->name : NULL);
    sbuf_puts(b, ",\"user_code\":");
    admin_str(b, v->user_code[0] ? v->user_code : NULL);
    sbuf_puts(b, ",\"verification_url\":");
    admin_str(b, v->verify_url[0] && v->user_code[0] ? v->verify_url : NULL);
    sbuf_puts(b, ",\"started_at\":");
    admin_num(b, v->started_at);
    sbuf_puts(b, ",\"expires_at\":");
    if (v->expires_at > 0)
        admin_num(b, v->expires_at);
    else
        sbuf_puts(b, "null");
    sbuf_printf(b, ",\"interval_s\":%ld,\"account\":", v->interval_s);
    admin_str(b, v->account[0] ? v->account : NULL);
    sbuf_printf(b, ",\"updated\":%s,\"error\":", v->updated ? "true" : "false");
    admin_str(b, v->error[0] ? v->error : NULL);
    sbuf_puts(b, "}");
}

static void admin_signin_reply(struct evhttp_request *req, int64_t id)
{
    signin_view v;
    if (signin_get(admin_signins, id, &v) != 0)
        return server_send_error(req, 404, "invalid_request_error", "unknown_signin",
                                 "no sign-in with that id (a newer sign-in may have taken its place)");
    sbuf b = SBUF_INIT;
    admin_signin_json(&b, &v);
    admin_send_json(req, &b);
}

/* The sign-in has its user code (or failed): the POST that started it is
 * answered now. The request is held until then, at most the oauth timeout;
 * one whose client went away is answered into the void (libevent frees it). */
static void admin_signin_ready(void *ud, int64_t id) { admin_signin_reply(ud, id); }

/* POST /admin/api/accounts/login {"name"?, "sort"?, "models"?}: starts a
 * device-code sign-in (sort and models set on the account it adds, as
 * `account add --sort --models` would; admin/admin_body.h) and answers
 * with its user code and where to enter it; GET
 * /admin/api/accounts/login?id=N: where that sign-in stands (pending,
 * approved with the account that holds the login, denied, expired,
 * failed). */
static void admin_login(admin_ctx *ctx, struct evhttp_request *req)
{
    if (evhttp_request_get_command(req) == EVHTTP_REQ_GET) {
        struct evkeyvalq q;
        admin_query(req, &q);
        int64_t id = admin_qint(&q, "id", 0, 1, INT64_MAX);
        evhttp_clear_headers(&q);
        if (!id)
            return server_send_error(req, 400, "invalid_request_error", "invalid_value",
                                     "give the sign-in's id: ?id=N");
        return admin_signin_reply(req, id);
    }
    if (!admin_method(req, EVHTTP_REQ_POST))
        return;
    admin_body body;
    if (admin_body_read(req, ADMIN_BODY_LOGIN, &body) != 0) {
        admin_body_free(&body);
        return;
    }
    char err[300];
    signin_settings set = {body.has_sort, body.sort, body.models};
    int64_t id = admin_signins ? signin_start(admin_signins, body.name, &set, admin_signin_ready, req, err, sizeof err)
                               : -1;
    if (id < 0) {
        admin_body_free(&body);
        return server_send_error(req, 503, "server_error", "signin_unavailable", admin_signins ? err : "not ready");
    }
    admin_audit(ctx->gw, req, "login", body.name ? body.name : "(named by the e-mail)");
    admin_body_free(&body);
}

void admin_stop(gateway *gw)
{
    (void)gw;
    signins_free(admin_signins); /* no callback runs: a held POST went with its listener */
    admin_signins = NULL;
}

/* ---------- routes ---------- */

typedef struct admin_route {
    const char *path;
    enum evhttp_cmd_type method;
    admin_handler fn;
} admin_route;

static const admin_route admin_routes[] = {
    {"/admin/api/overview", EVHTTP_REQ_GET, admin_get_overview},
    {"/admin/api/accounts", EVHTTP_REQ_GET, admin_get_accounts},
    {"/admin/api/keys", EVHTTP_REQ_GET, admin_get_keys},
    {"/admin/api/requests", EVHTTP_REQ_GET, admin_get_requests},
    {"/admin/api/request", EVHTTP_REQ_GET, admin_get_request},
    {"/admin/api/spend", EVHTTP_REQ_GET, admin_get_spend},
    {"/admin/api/stats", EVHTTP_REQ_GET, admin_get_stats},
    {"/admin/api/timeline", EVHTTP_REQ_GET, admin_get_timeline},
    {"/admin/api/policy", EVHTTP_REQ_GET, admin_get_policy},
    {"/admin/api/accounts/enable", EVHTTP_REQ_POST, admin_post_enable},
    {"/admin/api/accounts/disable", EVHTTP_REQ_POST, admin_post_disable},
    {"/admin/api/accounts/reset", EVHTTP_REQ_POST, admin_post_reset},
    {"/admin/api/keys/prefer", EVHTTP_REQ_POST, admin_post_prefer},
    {"/admin/api/settings", EVHTTP_REQ_POST, admin_post_settings},
    {"/admin/api/policy/reload", EVHTTP_REQ_POST, admin_post_reload},
    {"/admin/api/alerts", EVHTTP_REQ_GET, admin_get_alerts},
    {"/admin/api/alerts/test", EVHTTP_REQ_POST, admin_post_alert_test},
    /* GET (where a sign-in stands) or POST (start one): the handler checks */
    {"/admin/api/accounts/login", (enum evhttp_cmd_type)(EVHTTP_REQ_GET | EVHTTP_REQ_POST), admin_login},
};

static const admin_route *admin_route_find(struct evhttp_request *req)
{
    const char *uri = evhttp_request_get_uri(req);
    size_t plen = strcspn(uri, "?");
    for (size_t i = 0; i < sizeof admin_routes / sizeof *admin_routes; i++)
        if (strlen(admin_routes[i].path) == plen && strncmp(uri, admin_routes[i].path, plen) == 0)
            return &admin_routes[i];
    return NULL;
}

static void admin_on_api(struct evhttp_request *req, void *arg)
{
    admin_ctx *ctx = arg;
    const admin_route *r = admin_route_find(req);
    if (!r) /* registered paths only reach here */
        return server_send_error(req, 404, "invalid_request_error", "unknown_url", "unknown admin path");
    int any = (r->method & (r->method - 1)) != 0; /* several methods: the handler tells them apart */
    if (admin_auth(ctx, req) && (any || admin_method(req, r->method))) {
        admin_wait.running = r->fn;
        r->fn(ctx, req);
        admin_wait.running = NULL;
    }
}

static void admin_on_metrics(struct evhttp_request *req, void *arg)
{
    admin_ctx *ctx = arg;
    if (admin_network_ok(ctx, req) && admin_method(req, EVHTTP_REQ_GET))
        admin_metrics(ctx, req);
}

static void admin_on_static(struct evhttp_request *req, void *arg) { admin_static(arg, req); }

/* A /admin/api/ path not in the table (a typo: /admin/api/acounts): a 404
 * that lists the ones there are, from the table itself. */
static void admin_on_unknown_api(struct evhttp_request *req)
{
    sbuf m = SBUF_INIT;
    sbuf_puts(&m, "unknown admin API path; the admin API serves");
    for (size_t i = 0; i < sizeof admin_routes / sizeof *admin_routes; i++) {
        enum evhttp_cmd_type t = admin_routes[i].method;
        sbuf_printf(&m, "%s %s%s%s %s", i ? "," : "", t & EVHTTP_REQ_GET ? "GET" : "",
                    (t & EVHTTP_REQ_GET) && (t & EVHTTP_REQ_POST) ? "|" : "", t & EVHTTP_REQ_POST ? "POST" : "",
                    admin_routes[i].path);
    }
    server_send_error(req, 404, "invalid_request_error", "unknown_url", m.p);
    sbuf_free(&m);
}

static void admin_on_other(struct evhttp_request *req, void *arg)
{
    const char *uri = evhttp_request_get_uri(req);
    if (strncmp(uri, "/admin/api", 10) == 0 && (!uri[10] || uri[10] == '/' || uri[10] == '?'))
        return admin_on_unknown_api(req);
    server_send_error(req, 404, "invalid_request_error", "unknown_url",
                      "this is the admin listener: it serves /admin/, /admin/api/ and /metrics");
}

static void admin_register(struct evhttp *http, admin_ctx *ctx)
{
    for (size_t i = 0; i < sizeof admin_routes / sizeof *admin_routes; i++)
        evhttp_set_cb(http, admin_routes[i].path, admin_on_api, ctx);
    evhttp_set_cb(http, "/metrics", admin_on_metrics, ctx);
    evhttp_set_cb(http, "/admin", admin_on_static, ctx);
    evhttp_set_cb(http, "/admin/", admin_on_static, ctx);
    for (const embedded_file *f = embedded_files; f->name; f++)
        if (strncmp(f->name, "web/", 4) == 0 && strcmp(f->name, "web/index.html") != 0) {
            char path[160];
            snprintf(path, sizeof path, "/admin/%s", f->name + 4);
            evhttp_set_cb(http, path, admin_on_static, ctx);
        }
}

int admin_start(gateway *gw)
{
    if (!admin_signins && !(admin_signins = signins_new(gw)))
        return -1;
    /* the chart's last hour from the request log, once, before serving */
    double now = gateway_now();
    store_logs_timeline(gw->st, floor(now / 60) * 60 - 59 * 60, 60, admin_seed_minute, NULL);
    /* and today's spend (UTC day) by account, key and model */
    store_logs_usage_since(gw->st, floor(now / 86400) * 86400, admin_seed_usage, &now);
    if (!gw->cfg.admin_port) {
        admin_ctxs[0] = (admin_ctx){gw, 0};
        admin_register(gw->http, &admin_ctxs[0]);
        gw->admin_unknown = admin_on_unknown_api;
        return 0;
    }
    gw->admin_http = evhttp_new(gw->base);
    if (!gw->admin_http)
        return -1;
    evhttp_set_max_body_size(gw->admin_http, ADMIN_BODY_MAX);
    evhttp_set_timeout(gw->admin_http, 60);
    admin_ctxs[1] = (admin_ctx){gw, 1};
    admin_register(gw->admin_http, &admin_ctxs[1]);
    evhttp_set_gencb(gw->admin_http, admin_on_other, NULL);
    errno = 0;
    if (!evhttp_bind_socket_with_handle(gw->admin_http, gw->cfg.admin_host, (ev_uint16_t)gw->cfg.admin_port)) {
        log_error("cannot listen for the admin surface on %s:%d: %s", gw->cfg.admin_host, gw->cfg.admin_port,
                  errno ? strerror(errno) : "the address does not resolve");
        return -1;
    }
    log_info("admin surface on http://%s:%d/admin/ (not on the gateway listener)", gw->cfg.admin_host,
             gw->cfg.admin_port);
    return 0;
}
