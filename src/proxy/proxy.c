/* proxy.c: one client request through the pool (see proxy.h).
 *
 * Life of a request: proxy_start builds the route plan, proxy_next takes the
 * next available candidate and starts an upstream transfer. Upstream
 * callbacks feed either the error collector (non-2xx), the preflight (2xx
 * SSE, held back until semantic output or the window ends) or the client
 * directly (2xx plain). A failure before commit is classified by the policy:
 * fail over (cool the account down, proxy_next) or return it as is. Once
 * anything was sent to the client the request is committed: a later upstream
 * failure ends the stream with an explicit error event, never a replay.
 * proxy_finish writes the request log and trace line and frees everything.
 *
 * Each stage of that life is a file (they share proxy_internal.h):
 * proxy_attempt.c chooses and starts an attempt, proxy_relay.c holds,
 * commits and relays its answer, proxy_recover.c handles a failed attempt,
 * proxy_finish.c ends the attempt and the request. This file keeps the
 * entry (proxy_start), the request's memory (kept for the next request)
 * and the client's connection: its headers once planned, the watch that
 * notices a hang-up, the close. */
#include "proxy/proxy_internal.h"
#include "http/server.h"
#include "base/log.h"
#include "http/conn_limit.h"
#include "obs/trace.h"
#include "route/affinity.h"
#include "shared/limits_fail.h"
#include "route/budget_hold.h"
#include "obs/metrics.h"
#include <event2/bufferevent.h>
#include <event2/event_struct.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/* ---------- the request's memory ---------- */

/* Finished requests kept for the next ones (loop thread only): a proxy_req
 * is 3 KiB, and glibc serves an allocation that size from its bins (with a
 * malloc_consolidate pass whenever small freed chunks are waiting), which
 * cost about 7 000 instructions per request; a kept one is only zeroed.
 * It keeps the small buffers every request fills (the plain
 * answer read for its usage, the client bytes), emptied, so the next
 * request does not allocate and grow them again; larger ones are freed. */
#define PROXY_SPARE 128
#define PROXY_SPARE_BUF 2048 /* largest buffer a kept request keeps */
static proxy_req *proxy_spare[PROXY_SPARE];
static size_t proxy_n_spare;

static proxy_req *proxy_req_new(void)
{
    if (!proxy_n_spare)
        return calloc(1, sizeof(proxy_req));
    proxy_req *p = proxy_spare[--proxy_n_spare];
    sbuf sniff = p->sniff, out = p->out;
    memset(p, 0, sizeof *p);
    p->sniff = sniff, p->out = out;
    return p;
}


void proxy_req_release(proxy_req *p)
{
    if (proxy_n_spare < PROXY_SPARE) {
        sbuf_keep(&p->sniff, PROXY_SPARE_BUF);
        sbuf_keep(&p->out, PROXY_SPARE_BUF);
        proxy_spare[proxy_n_spare++] = p;
        return;
    }
    sbuf_free(&p->sniff);
    sbuf_free(&p->out);
    free(p);
}

/* ---------- the client's headers ---------- */

/* Takes h out of q and frees it as evhttp_remove_header would, without
 * looking it up again by name (a case-blind compare per header, a function
 * call per letter in libevent). libevent allocates headers with malloc:
 * the gateway never installs other allocators (event_set_mem_functions). */
static void proxy_header_unlink(struct evkeyvalq *q, struct evkeyval *h)
{
    if (h->next.tqe_next) /* TAILQ_REMOVE */
        h->next.tqe_next->next.tqe_prev = h->next.tqe_prev;
    else
        q->tqh_last = h->next.tqe_prev;
    *h->next.tqe_prev = h->next.tqe_next;
    free(h->key);
    free(h->value);
    free(h);
}

/* Of the client's request headers, only those proxy_build_headers
 * forwards (on every attempt, a resumed one too) and Connection (libevent
 * reads it when the reply ends) are needed once the request is planned.
 * The rest (Host, Authorization with the platform key, Content-*,
 * Accept, ...) goes: a stream held open for minutes keeps neither their
 * memory nor the key (docs/performance.md, "Long-lived streams"). */
static void proxy_drop_client_headers(struct evhttp_request *req)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    struct evkeyval *h, *next;
    for (h = in->tqh_first; h; h = next) {
        next = h->next.tqe_next;
        char c = (char)(h->key[0] | 0x20);
        int conn = (c == 'c' && strcasecmp(h->key, "Connection") == 0) ||
                   (c == 'p' && strcasecmp(h->key, "Proxy-Connection") == 0);
        if (!conn && proxy_forward_index(h->key) < 0)
            proxy_header_unlink(in, h);
    }
}

/* ---------- the client's connection ---------- */

/* libevent stops reading a connection while its request is being served, so
 * a client hanging up goes unnoticed until we write. Watch the socket: EOF
 * means the client is gone and the upstream transfer must stop now.
 *
 * The watch belongs to the connection, not the request: it stays on the
 * loop between the requests of a kept-alive connection. evhttp turns its own
 * read event off when a request has arrived (and on again to write the
 * answer); a watch added only then made that an epoll_ctl of its own every
 * request (libevent's changelist turns the DEL and ADD of one loop turn into
 * a MOD, not into nothing), one already there keeps the descriptor's
 * registration as it is. Between requests the watch does nothing (evhttp
 * reads); the connection's close callback, ours from the first request on,
 * takes the watch off the loop before the descriptor can be closed. (The
 * struct is in proxy_internal.h: proxy_finish hands the watch back to the
 * connection.) */
static client_watch **proxy_watches; /* by descriptor (loop thread only) */
static size_t proxy_n_watches;

void proxy_watch_drop(client_watch *w)
{
    if (!w)
        return;
    if (w->on)
        event_del(&w->ev);
    evutil_socket_t fd = event_get_fd(&w->ev);
    if (fd >= 0 && (size_t)fd < proxy_n_watches && proxy_watches[fd] == w)
        proxy_watches[fd] = NULL;
    free(w);
}

/* evhttp frees a connection between its requests. */
void proxy_watch_closed(struct evhttp_connection *c, void *arg)
{
    (void)c;
    proxy_watch_drop(arg);
}

static void proxy_on_client_readable(evutil_socket_t fd, short what, void *arg)
{
    client_watch *w = arg;
    proxy_req *p = w->p;
    if (w->stale) { /* woken by the request's own bytes, which evhttp has read meanwhile */
        w->stale = 0;
        return;
    }
    if (!p) {
        /* between requests evhttp reads (this fired with its read event);
         * if it does not (another kind of request is being served), bytes
         * or an EOF would wake this every turn: step aside until the next
         * request of ours */
        struct bufferevent *bev = evhttp_connection_get_bufferevent(w->evcon);
        if (!bev || !(bufferevent_get_enabled(bev) & EV_READ)) {
            event_del(&w->ev);
            w->on = 0;
        }
        return;
    }
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) {
        event_del(&w->ev); /* pipelined bytes: not a hang-up, stop watching */
        w->on = 0;
        return;
    }
    if (n == 0) {
        /* EOF: the client is done sending. A half-close (shutdown(SHUT_WR)
         * after the request) says only that, and the client may still read;
         * a hang-up (close()) looks the same until something is written to
         * it. While the request runs it is answered: if the client is gone
         * the first write fails and libevent's close callback ends the
         * request then. But a request is never held waiting (a retry's
         * delay, a wait for capacity, for a login refresh or for an answer
         * from the other gateways) for a client
         * that may be gone: a wait in progress ends here, and none starts
         * later (the retry becomes a failover, the wait a 503). */
        event_del(&w->ev);
        w->on = 0;
        p->client_eof = 1;
        if (!(p->retry_timer && evtimer_pending(p->retry_timer, NULL)) && !p->wait && !p->ask && !p->slot_wait &&
            !p->chain_wait && !p->key_bucket && !p->acct_bucket) {
            log_debug("req %llu: client closed its sending side; answering anyway", (unsigned long long)p->id);
            return;
        }
    }
    log_debug("req %llu: client hung up", (unsigned long long)p->id);
    int status = proxy_client_left_status(p);
    if (status == 499)
        snprintf(p->error_class, sizeof p->error_class, "client_closed");
    proxy_drop_client(p, 0);
    proxy_finish(p, status);
}

static void proxy_watch_client(proxy_req *p)
{
    struct bufferevent *bev = p->evcon ? evhttp_connection_get_bufferevent(p->evcon) : NULL;
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    if (fd < 0)
        return;
    if ((size_t)fd >= proxy_n_watches) {
        size_t n = proxy_n_watches ? proxy_n_watches : 64;
        while (n <= (size_t)fd)
            n *= 2;
        client_watch **t = realloc(proxy_watches, n * sizeof *t);
        if (!t)
            return;
        memset(t + proxy_n_watches, 0, (n - proxy_n_watches) * sizeof *t);
        proxy_watches = t;
        proxy_n_watches = n;
    }
    client_watch *w = proxy_watches[fd];
    if (w && w->p) /* evhttp serves one request of a connection at a time: not expected */
        w->p->watch = NULL;
    if (w && w->evcon != p->evcon) { /* another connection's (not expected: its close dropped it) */
        proxy_watch_drop(w);
        w = NULL;
    }
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w)
            return;
        w->evcon = p->evcon;
        event_assign(&w->ev, p->gw->base, fd, EV_READ | EV_PERSIST, proxy_on_client_readable, w);
        proxy_watches[fd] = w;
    }
    w->p = p;
    p->watch = w;
    /* the bytes of this request may have woken the watch too, and it runs
     * after evhttp: nothing to look at then (level-triggered, a later
     * byte or EOF wakes it again) */
    w->stale = w->on && (w->ev.ev_evcallback.evcb_flags & (EVLIST_ACTIVE | EVLIST_ACTIVE_LATER));
    if (!w->on)
        w->on = event_add(&w->ev, NULL) == 0;
}

/* Closes the client connection (and with it the request) without a final
 * chunk; our close callback is removed first so it cannot run on the way.
 * reset: the answer was cut, so the close must not look like its end. An
 * HTTP/1.0 answer (no Content-Length, no chunks) ends at the close, and
 * evhttp_connection_free shuts the socket down with a FIN first, which the
 * client reads as a complete body. So a TCP reset goes out instead
 * (conn_limit_reset): the client reads what arrived, then ECONNRESET. */
void proxy_drop_client(proxy_req *p, int reset)
{
    struct evhttp_connection *c = p->req ? evhttp_request_get_connection(p->req) : NULL;
    p->client_gone = 1;
    p->req = NULL;
    struct bufferevent *bev = c && reset ? evhttp_connection_get_bufferevent(c) : NULL;
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    if (fd >= 0)
        conn_limit_reset(fd);
    if (c) {
        evhttp_connection_set_closecb(c, NULL, NULL);
        proxy_watch_drop(p->watch);
        p->watch = NULL;
        evhttp_connection_free(c); /* frees the request too */
    }
}

static void proxy_on_client_close(struct evhttp_connection *c, void *arg)
{
    proxy_req *p = arg;
    /* libevent closes it before the answer is done (the client stopped
     * reading for the idle timeout, or it hung up): a clean close would end
     * an HTTP/1.0 answer as if whole. This runs before evhttp's shutdown. */
    struct bufferevent *bev = p->committed ? evhttp_connection_get_bufferevent(c) : NULL;
    if (bev && bufferevent_getfd(bev) >= 0)
        conn_limit_reset(bufferevent_getfd(bev));
    p->client_gone = 1;
    proxy_watch_drop(p->watch); /* the connection goes: its descriptor with it */
    p->watch = NULL;
    log_debug("req %llu: client went away", (unsigned long long)p->id);
    int status = proxy_client_left_status(p);
    if (status == 499)
        snprintf(p->error_class, sizeof p->error_class, "client_closed");
    /* libevent detached the request from the connection; it is ours to free */
    if (p->req && !evhttp_request_get_connection(p->req))
        evhttp_request_free(p->req);
    p->req = NULL;
    proxy_finish(p, status);
}

/* ---------- the entry ---------- */

static void proxy_trace_pool(proxy_req *p)
{
    static sbuf names; /* loop thread only; kept between requests (trace_event copies what it is given) */
    sbuf_reset(&names);
    for (size_t i = 0; i < p->plan.n; i++) {
        pool_account *pa = pool_find(p->gw->pool, p->plan.ids[i]);
        if (i)
            sbuf_puts(&names, ",");
        sbuf_puts(&names, pa ? pa->a.name : "?");
    }
    /* affinity=<account> when the session's account went first, "-" without a session */
    const pool_account *aff = p->plan.affinity_prev ? pool_find(p->gw->pool, p->plan.affinity_prev) : NULL;
    const char *aff_field = !p->session[0] || p->plan.pinned_owner ? "-"
                           : p->plan.affinity_first && aff       ? aff->a.name
                           : aff                                 ? "unavailable"
                                                                 : "none";
    trace_event(p->gw->trace, "CANDIDATE_POOL",
                "req=%llu endpoint=%s model=%s stream=%d strategy=%s ordered_candidates=%s pinned_by=%s affinity=%s",
                (unsigned long long)p->id, p->in.endpoint, p->in.model[0] ? p->in.model : "-", p->in.stream,
                p->plan.strategy, names.len ? names.p : "-", p->plan.pinned_by ? p->plan.pinned_by : "-", aff_field);
    for (size_t i = 0; i < p->plan.nskips; i++)
        trace_event(p->gw->trace, "CANDIDATE_SKIP", "req=%llu account=%s reason=\"%s\"", (unsigned long long)p->id,
                    p->plan.skips[i].name, p->plan.skips[i].reason);
    if (p->plan.skips_more || p->plan.beyond) /* a pool of thousands: counted, not listed */
        trace_event(p->gw->trace, "CANDIDATE_SKIP_MORE", "req=%llu skipped=%zu beyond_max_attempts=%zu",
                    (unsigned long long)p->id, p->plan.skips_more, p->plan.beyond);
}

static void proxy_plan(proxy_req *p);

/* The pool's position for a balanced pick came (or none in time). */
static void proxy_on_cursor(void *ud, int64_t pos)
{
    proxy_req *p = ud;
    p->cursor_wait = NULL;
    p->rctx.cursor_pos = pos;
    proxy_plan(p);
}

/* The request's records are known (here, or asked of the other gateways):
 * plan its route and start. */
/* Balanced strategy: the pool's position for this request's pick into
 * p->rctx.cursor_pos (shared_cursor_take), before router_plan: NULL when it
 * is set now (or not needed: another strategy, a kept turn, a lone
 * gateway); otherwise proxy_on_cursor brings it within SHARED_ASK_MS. */
static shared_call *proxy_cursor_take(proxy_req *p)
{
    gateway *gw = p->gw;
    route_ctx *ctx = &p->rctx;
    ctx->cursor_pos = 0;
    if (strcmp(gw->cfg.route_strategy, "balanced") != 0 || ctx->is_get || router_kept(gw, ctx))
        return NULL;
    const platform_key *k = ctx->key_id ? pool_key_find(gw->pool, ctx->key_id) : NULL;
    char key[17] = "-"; /* the key by (a prefix of) its hash: the pool shares keys by hash */
    if (k)
        memcpy(key, k->hash, 16), key[16] = '\0';
    return shared_cursor_take(gw->shared, key, ctx->model, &ctx->cursor_pos, proxy_on_cursor, p);
}

static void proxy_plan(proxy_req *p)
{
    gateway *gw = p->gw;
    struct evhttp_request *req = p->req;
    if (p->in.response_id[0] && !pool_owner_get(p->gw->pool, p->in.response_id)) {
        char msg[256];
        snprintf(msg, sizeof msg, "Response with id '%s' not found: it was not relayed through this gateway, or is "
                                  "no longer known to it", p->in.response_id);
        proxy_drop_client_headers(req);
        proxy_send_error(p, 404, "invalid_request_error", "response_not_found", msg);
        proxy_finish(p, 404);
        return;
    }
    if (!p->cursor_asked) { /* balanced: where the pool's rotation stands (a wait only when nothing is reserved) */
        p->cursor_asked = 1;
        p->cursor_wait = proxy_cursor_take(p);
        if (p->cursor_wait)
            return;
    }
    if (!p->in.is_get)
        pool_family_of(gw->pool, p->in.model, p->rctx.family, sizeof p->rctx.family);
    router_plan(gw, &p->rctx, &p->plan);
    p->rctx.turn_state = NULL; /* the client's headers are not ours to keep */
    proxy_drop_client_headers(req);
    proxy_trace_pool(p);
    proxy_next(p);
}

/* What the request names that this gateway does not know (shared/shared.h):
 * the owner of its previous_response_id (or stored response), of its turn
 * state, of its blobs, and its session's last account. Called only where
 * there is somewhere to ask. */
static void proxy_ask_build(void *ud, shared_ask *q)
{
    proxy_req *p = ud;
    pool *pl = p->gw->pool;
    const char *pin = p->rctx.previous_response_id;
    if (pin && *pin && !pool_owner_get(pl, pin))
        shared_ask_add(q, SHARED_ASK_OWNER, pin);
    if (p->rctx.turn_state && *p->rctx.turn_state) {
        char key[72];
        router_turn_state_key(p->rctx.turn_state, key);
        if (!pool_owner_get(pl, key))
            shared_ask_add(q, SHARED_ASK_OWNER, key);
    }
    if (p->session[0] && p->gw->affinity && !affinity_get(p->gw->affinity, p->session, gateway_now()))
        shared_ask_add(q, SHARED_ASK_SESSION, p->session);
    proxy_blobs_ask(p, q);
}

static void proxy_on_asked(void *ud)
{
    proxy_req *p = ud;
    p->ask = NULL;
    proxy_blobs_asked(p);
    if (!p->key_bucket)
        proxy_plan(p);
}

static const platform_key *proxy_key(proxy_req *p)
{
    for (size_t i = 0; p->in.key_id && i < pool_key_count(p->gw->pool); i++)
        if (pool_key_at(p->gw->pool, i)->id == p->in.key_id)
            return pool_key_at(p->gw->pool, i);
    return NULL;
}

/* shared_limits_fail is closed and the pool's word on the key's rate limit
 * cannot be had (shared/limits_fail.h): 503, not a request let through on
 * the local bucket alone. */
static void proxy_key_unchecked(proxy_req *p, const platform_key *k, limits_unseen cause)
{
    char why[160], msg[480];
    limits_fail_why(p->gw, cause, why, sizeof why);
    snprintf(msg, sizeof msg, "platform key '%s' has a rate limit, and the rate limits of this pool cannot be checked: "
             "%s (shared_limits_fail is closed); retry shortly", k ? k->name : "?", why);
    metrics_redis_limits_refused(METRICS_LIMITS_REFUSED_KEY);
    trace_event(p->gw->trace, "KEY_LIMITS_UNAVAILABLE", "req=%llu key=%s reason=\"%s\"", (unsigned long long)p->id,
                k ? k->name : "?", why);
    proxy_drop_client_headers(p->req);
    evhttp_add_header(evhttp_request_get_output_headers(p->req), "Retry-After", "1");
    proxy_send_error(p, 503, "server_error", "limits_unavailable", msg);
    snprintf(p->error_class, sizeof p->error_class, "limits_unavailable");
    proxy_finish(p, 503);
}

/* A key with a budget reserves its typical request cost while the request
 * is in flight (route/budget_hold.h); one whose reservation would cross
 * the budget is refused as over it (429 insufficient_quota, as
 * key_rules_check refuses a key already over). -1: refused and finished. */
static int proxy_key_hold(proxy_req *p)
{
    pool_key *pk = NULL;
    for (size_t i = 0; p->in.key_id && i < pool_key_count(p->gw->pool) && !pk; i++)
        if (pool_key_entry(p->gw->pool, i)->k.id == p->in.key_id)
            pk = pool_key_entry(p->gw->pool, i);
    if (!pk || !(pk->k.budget_usd > 0))
        return 0;
    char why[320], msg[480];
    budget_hold_owner o = {"key", pk->k.name, pk->k.budget_usd, pk->k.budget_period};
    if (budget_hold_take(p->gw->policy, &o, &pk->budget, gateway_now(), &p->key_held, why, sizeof why))
        return 0;
    snprintf(msg, sizeof msg, "platform key '%s' is at the end of its budget: %s", pk->k.name, why);
    trace_event(p->gw->trace, "KEY_OVER_BUDGET", "req=%llu key=%s reserved=%.4f", (unsigned long long)p->id,
                pk->k.name, pk->budget.held);
    proxy_drop_client_headers(p->req);
    proxy_send_error(p, 429, "insufficient_quota", "insufficient_quota", msg);
    snprintf(p->error_class, sizeof p->error_class, "over_budget");
    proxy_finish(p, 429);
    return -1;
}

/* The pool's answer for the key's rpm bucket (shared/shared.h), sent with
 * the ask so that the request waits for one round trip, not two. */
static void proxy_on_key_bucket(void *ud, shared_bucket_verdict v, double wait_s)
{
    proxy_req *p = ud;
    p->key_bucket = NULL;
    const platform_key *k = proxy_key(p);
    if ((v == SHARED_BUCKET_LOCAL || v == SHARED_BUCKET_FAILED) && limits_fail_key_strict(p->gw, k)) {
        proxy_key_unchecked(p, k, v == SHARED_BUCKET_LOCAL ? LIMITS_UNSEEN_LATE : LIMITS_UNSEEN_FAILED);
        return;
    }
    if (v != SHARED_BUCKET_EMPTY) {
        if (!p->ask)
            proxy_plan(p);
        return;
    }
    char msg[320], ra[24];
    snprintf(msg, sizeof msg, "platform key '%s' is limited to %d requests per minute across the gateways; retry in %.1fs",
             k ? k->name : "?", k ? k->max_rpm : 0, wait_s);
    snprintf(ra, sizeof ra, "%.0f", wait_s < 1 ? 1 : wait_s + 0.999);
    trace_event(p->gw->trace, "KEY_RATE_LIMITED", "req=%llu key=%s", (unsigned long long)p->id, k ? k->name : "?");
    proxy_drop_client_headers(p->req);
    evhttp_add_header(evhttp_request_get_output_headers(p->req), "Retry-After", ra);
    proxy_send_error(p, 429, "requests", "rate_limit_exceeded", msg);
    snprintf(p->error_class, sizeof p->error_class, "rate_limited");
    proxy_finish(p, 429);
}

void proxy_start(gateway *gw, struct evhttp_request *req, request_input *in)
{
    proxy_req *p = proxy_req_new();
    p->gw = gw;
    p->id = ++gw->next_req_id;
    p->req = req;
    p->in = *in;
    /* request.c read what it needed from the parsed body (model, stream,
     * ids) into in; nothing after reads the tree, so a stream held open
     * for minutes does not keep it (docs/performance.md) */
    proxy_reasoning_note(p, p->in.doc);
    proxy_dialect_note(p, p->in.doc);
    json_free(p->in.doc);
    p->in.doc = NULL;
    gw->body_bytes += in->body.len;
    p->t_start = gateway_now();
    p->in_tok = p->out_tok = p->tot_tok = p->cached_tok = -1;
    scrub_init(&p->scrub);
    event_assign(&p->flush_ev, gw->base, -1, 0, proxy_on_flush, p);
    gw->active++;
    p->evcon = evhttp_request_get_connection(req);
    if (p->evcon)
        evhttp_connection_set_closecb(p->evcon, proxy_on_client_close, p);
    proxy_watch_client(p);
    struct evkeyvalq *hin = evhttp_request_get_input_headers(req);
    const char *session = evhttp_find_header(hin, "session-id");
    if (!session)
        session = evhttp_find_header(hin, "session_id");
    if (!session) /* Claude Code's (docs/claude.md) */
        session = evhttp_find_header(hin, "x-claude-code-session-id");
    if (session && strlen(session) < sizeof p->session && !strpbrk(session, " \t\"\r\n"))
        memcpy(p->session, session, strlen(session) + 1);
    /* a stored response (GET/DELETE /v1/responses/{id}) is pinned to its
     * owner as a continuation of it would be */
    const char *pin = p->in.response_id[0] ? p->in.response_id : p->in.previous_response_id;
    p->rctx = (route_ctx){in->endpoint, in->api, in->is_get, p->in.model, in->key_id, in->preferred_account,
                          pin, evhttp_find_header(hin, "x-codex-turn-state"), p->session[0] ? p->session : NULL, "", 0};
    const platform_key *k = proxy_key(p);
    if (limits_fail_key_strict(gw, k) && limits_fail_reach(gw) == LIMITS_UNSEEN_DOWN) {
        proxy_key_unchecked(p, k, LIMITS_UNSEEN_DOWN);
        return;
    }
    if (proxy_key_hold(p) != 0)
        return;
    /* both sent before either answer is awaited: one round trip */
    p->key_bucket = shared_key_bucket_take(gw->shared, in->key_id, proxy_on_key_bucket, p);
    p->ask = shared_ask_send(gw->shared, proxy_ask_build, proxy_on_asked, p);
    if (!p->ask && !p->key_bucket)
        proxy_plan(p);
}
