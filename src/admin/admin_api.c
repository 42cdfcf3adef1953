/* admin_api.c: the admin surface (see admin_api.h): who may use it
 * (loopback or the admin listener; the admin token, compared in constant
 * time), the replies and query helpers its handlers share
 * (admin_internal.h), the route table of /admin/api/ (the reads are
 * admin_reads.c's, the changes admin_actions.c's), the embedded dashboard
 * files under /admin/, /metrics, and the dashboard's device-code sign-in.
 * Every handler runs on the loop. Nothing here prints an account token or
 * a platform key. */
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

void admin_send(struct evhttp_request *req, int status, const char *ctype, const char *body, size_t len)
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

void admin_send_json(struct evhttp_request *req, sbuf *b)
{
    sbuf_puts(b, "\n");
    admin_send(req, 200, "application/json", b->p, b->len);
    sbuf_free(b);
}

void admin_str(sbuf *b, const char *s)
{
    if (s)
        sbuf_json_str(b, s, strlen(s));
    else
        sbuf_puts(b, "null");
}

/* A JSON number; non-finite values become null. */
void admin_num(sbuf *b, double v)
{
    if (!isfinite(v))
        sbuf_puts(b, "null");
    else if (v == floor(v) && fabs(v) < 1e15)
        sbuf_printf(b, "%.0f", v);
    else
        sbuf_printf(b, "%.3f", v);
}

int admin_method(struct evhttp_request *req, enum evhttp_cmd_type want)
{
    if (evhttp_request_get_command(req) == want)
        return 1;
    server_send_error(req, 405, "invalid_request_error", "method_not_allowed",
                      want == EVHTTP_REQ_GET ? "use GET for this path" : "use POST for this path");
    return 0;
}

/* The query string's parameters (caller clears q). */
void admin_query(struct evhttp_request *req, struct evkeyvalq *q)
{
    q->tqh_first = NULL;
    q->tqh_last = &q->tqh_first;
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
    const char *qs = u ? evhttp_uri_get_query(u) : NULL;
    if (qs)
        evhttp_parse_query_str(qs, q);
}

double admin_qnum(struct evkeyvalq *q, const char *name, double dflt)
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
int64_t admin_qint(struct evkeyvalq *q, const char *name, int64_t dflt, int64_t lo, int64_t hi)
{
    int64_t v;
    return json_num_to_int64(admin_qnum(q, name, (double)dflt), lo, hi, &v) == 0 ? v : dflt;
}

/* The POST body read for kind (admin/admin_body.h); replies 400 and
 * returns -1 if it is refused. The caller frees b either way. */
int admin_body_read(struct evhttp_request *req, admin_body_kind kind, admin_body *b)
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
void admin_audit(gateway *gw, struct evhttp_request *req, const char *action, const char *target)
{
    char peer[64];
    admin_peer(req, peer, sizeof peer);
    log_info("admin: %s %s (from %s)", action, target, peer);
    trace_event(gw->trace, "ADMIN_ACTION", "action=%s target=\"%s\" peer=%s", action, target, peer);
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
        admin_actions_run(r->fn, ctx, req);
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
