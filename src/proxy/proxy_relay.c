/* proxy_relay.c: an attempt's answer on its way to the client (the life
 * of a request: proxy.c). The upstream callbacks sort the answer by its
 * head: an error is collected (proxy_recover.c classifies it), a 2xx stream
 * is held back in preflight until it carries output, a plain 2xx is held
 * whole. proxy_commit starts the client's reply (no failover after it);
 * then bytes are relayed as they come, a loop turn's worth as one chunk,
 * with the upstream paused while the client is behind. Every byte of
 * every answer passes here: the hot path (docs/performance.md). */
#include "proxy/proxy_internal.h"
#include "base/json.h"
#include "route/pool_usage.h"
#include "route/rate_event.h"
#include "dialect/fill.h"
#include "http/server.h"
#include "obs/metrics.h"
#include "obs/trace.h"
#include "route/affinity.h"
#include "upstream/usage.h"
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/http_struct.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <strings.h>

#define PROXY_SNIFF_MAX (1u << 20)       /* kept of a plain 2xx body, to read usage */
#define PROXY_CLIENT_HIGH (4u << 20)     /* pause upstream above this much unsent to the client */
#define PROXY_PLAIN_HOLD (1u << 20)      /* a plain answer is held whole up to this size ... */
#define PROXY_PLAIN_HOLD_ALL (64u << 20) /* ... while all held ones together stay under this */
#define PROXY_RELAY_MAX (8u << 10)   /* kept of an upstream's x-codex-* response headers */
#define PROXY_EVENT_HOLD_MAX (1u << 20) /* an unfinished event held back from the client, at most */
#define PROXY_OUT_FIRST 2048u /* client bytes of a loop turn: the first allocation (freed when sent) */
#define PROXY_WHOLE_MAX (64u << 20) /* a plain answer translated once whole, at most */

/* ---------- client output ---------- */

static struct evbuffer *proxy_client_outbuf(proxy_req *p)
{
    struct evhttp_connection *c = evhttp_request_get_connection(p->req);
    struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
    return bev ? bufferevent_get_output(bev) : NULL;
}

static void proxy_on_client_drained(struct evhttp_connection *c, void *arg)
{
    proxy_req *p = arg;
    if (!p->paused || !p->up)
        return;
    struct evbuffer *out = proxy_client_outbuf(p);
    if (!out || evbuffer_get_length(out) < PROXY_CLIENT_HIGH / 2) {
        p->paused = 0;
        upstream_resume(p->up);
    }
}

/* Once the status line and headers are written (evhttp_send_reply_start
 * puts them in the connection's buffer), libevent keeps the header list
 * until the request ends and reads only "Connection" from it (whether the
 * connection closes after). A stream held open for minutes keeps only that
 * one: three allocations less per header (docs/performance.md). */
static void proxy_drop_sent_headers(struct evhttp_request *req)
{
    struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
    struct evkeyval *h, *next, *conn = NULL;
    int conns = 0;
    for (h = oh->tqh_first; h; h = h->next.tqe_next)
        if (strcasecmp(h->key, "Connection") == 0) {
            conn = h;
            conns++;
        }
    if (conns > 1) { /* unusual: each removed by name (the first of that name is h itself) */
        for (h = oh->tqh_first; h; h = next) {
            next = h->next.tqe_next;
            if (strcasecmp(h->key, "Connection") != 0)
                evhttp_remove_header(oh, h->key);
        }
        return;
    }
    /* the usual: the whole list at once (a removal by name walks the list
     * comparing names: most of the cost), then Connection again if there was one */
    char *keep = conn ? sbuf_strdup_nonempty(conn->value) : NULL;
    int had = conn != NULL;
    evhttp_clear_headers(oh);
    if (had)
        evhttp_add_header(oh, "Connection", keep ? keep : "");
    free(keep);
}

/* Requests whose client bytes wait for this turn's flush, so that
 * proxy_flush_pending can send them as soon as curl has returned from the
 * socket read that brought them (flush_ev, which runs after the rest of
 * the turn, stays as the fallback for bytes made elsewhere). */
static proxy_req **proxy_unflushed;
static size_t proxy_n_unflushed, proxy_alloc_unflushed;

static void proxy_unflushed_add(proxy_req *p)
{
    if (p->unflushed_at)
        return;
    if (proxy_n_unflushed == proxy_alloc_unflushed) {
        size_t n = proxy_alloc_unflushed ? proxy_alloc_unflushed * 2 : 64;
        proxy_req **v = realloc(proxy_unflushed, n * sizeof *v);
        if (!v)
            return; /* flush_ev sends it */
        proxy_unflushed = v;
        proxy_alloc_unflushed = n;
    }
    proxy_unflushed[proxy_n_unflushed++] = p;
    p->unflushed_at = proxy_n_unflushed;
}

void proxy_unflushed_remove(proxy_req *p)
{
    if (!p->unflushed_at)
        return;
    proxy_req *last = proxy_unflushed[--proxy_n_unflushed];
    proxy_unflushed[p->unflushed_at - 1] = last;
    last->unflushed_at = p->unflushed_at;
    p->unflushed_at = 0;
}

/* A plain answer is held until it is complete (up to PROXY_PLAIN_HOLD,
 * with all held answers under PROXY_PLAIN_HOLD_ALL): its client waits for
 * the whole of it anyway, it then goes out with a Content-Length, and an
 * upstream that cuts it midway has told the client nothing, so the request
 * can still go to another account (proxy_plain_cut_unseen) instead of the
 * client getting a cut answer. A larger one is relayed as it comes. */
static size_t proxy_held_bytes;

void proxy_hold_release(proxy_req *p)
{
    proxy_held_bytes -= p->held_counted;
    p->held_counted = 0;
}

static int proxy_plain_hold(proxy_req *p)
{
    if (!p->reply_held || p->mode != MODE_PLAIN || p->out.len > PROXY_PLAIN_HOLD ||
        proxy_held_bytes - p->held_counted + p->out.len > PROXY_PLAIN_HOLD_ALL) {
        proxy_hold_release(p);
        return 0;
    }
    proxy_held_bytes += p->out.len - p->held_counted;
    p->held_counted = p->out.len;
    return 1;
}

/* Hands what this loop turn gathered to libevent as one chunk. */
void proxy_client_flush(proxy_req *p)
{
    proxy_unflushed_remove(p);
    if (!p->out.len)
        return;
    event_del(&p->flush_ev);
    if (p->client_gone || !p->req) {
        proxy_hold_release(p);
        sbuf_reset(&p->out);
        return;
    }
    if (proxy_plain_hold(p))
        return;
    if (p->reply_held) {
        p->reply_held = 0;
        evhttp_send_reply_start(p->req, p->committed_status, NULL);
        proxy_drop_sent_headers(p->req);
    }
    struct evbuffer *chunk = p->gw->chunk; /* libevent moves its contents out */
    evbuffer_add(chunk, p->out.p, p->out.len);
    server_reply_chunk(p->req, chunk, proxy_on_client_drained, p);
    evbuffer_drain(chunk, evbuffer_get_length(chunk)); /* in case libevent refused it */
    /* freed, not kept: a held-open stream sends a small chunk now and then,
     * and thousands of them each keeping a buffer between events add up
     * (docs/performance.md, "Long-lived streams") */
    sbuf_free(&p->out);
}

void proxy_on_flush(evutil_socket_t fd, short what, void *arg) { proxy_client_flush(arg); }

/* see proxy.h */
void proxy_flush_pending(void)
{
    while (proxy_n_unflushed)
        proxy_client_flush(proxy_unflushed[proxy_n_unflushed - 1]);
}

/* Queues bytes for the client; returns 1 when the upstream should pause.
 * curl hands a stream over in pieces (one per HTTP chunk, often one per
 * event), several per socket read: they go out as one chunk once curl has
 * returned, in the same loop turn, instead of one chunk (and its framing
 * and bookkeeping) each. */
static int proxy_client_send(proxy_req *p, const char *buf, size_t n)
{
    if (!n || p->client_gone)
        return 0;
    size_t before = p->out.len;
    if (!p->out.cap) /* one allocation for what a loop turn usually gathers, not a doubling per event */
        sbuf_reserve(&p->out, n > PROXY_OUT_FIRST ? n : PROXY_OUT_FIRST);
    scrub_feed(&p->scrub, buf, n, &p->out);
    if (p->out.len && (!before || !p->unflushed_at)) { /* a held plain answer is looked at again */
        event_active(&p->flush_ev, EV_TIMEOUT, 1);
        proxy_unflushed_add(p);
    }
    struct evbuffer *out = proxy_client_outbuf(p);
    if (out && evbuffer_get_length(out) + p->out.len > PROXY_CLIENT_HIGH) {
        p->paused = 1;
        return 1;
    }
    return 0;
}

/* see proxy_internal.h */
int proxy_client_send_raw(proxy_req *p, const char *buf, size_t n) { return proxy_client_send(p, buf, n); }

/* Whole events for the client (preflight's and a committed stream's):
 * a codex.rate_limits event among them is told in the pool's numbers, as
 * the answer's x-codex-* headers are (route/rate_event.h). A stream
 * without one pays a memmem per send; one after an event cut short
 * (mid_event) goes as it is. */
static int proxy_client_send_whole_events(proxy_req *p, const char *buf, size_t n)
{
    if (p->in.api != API_RESPONSES || p->mid_event)
        return proxy_client_send(p, buf, n);
    sbuf filled = SBUF_INIT, ev = SBUF_INIT;
    /* an upstream's terminal event without its output gets the stream's items (dialect/fill.h) */
    if (p->fill_output && p->turn_items.len && memmem(buf, n, "\"response.", 10)) {
        sbuf_puts(&p->turn_items, "]");
        if (fill_output_sse(buf, n, p->turn_items.p, p->turn_items.len, &filled))
            buf = filled.p, n = filled.len;
        p->turn_items.p[--p->turn_items.len] = '\0';
    }
    if (memmem(buf, n, "codex.rate_limits", 17)) {
        double now = gateway_now();
        if (rate_event_rewrite_sse(buf, n, pool_usage_get(p->gw->pool, now), now, &ev))
            buf = ev.p, n = ev.len;
    }
    int pause = proxy_client_send(p, buf, n);
    sbuf_free(&filled);
    sbuf_free(&ev);
    return pause;
}

/* ... and a resumed Responses stream's events made the cut one's first
 * (upstream/resume.h: the splice parses them whole, whatever the cut);
 * and an upstream of another dialect made the client's (dialect.h: the
 * translator takes any cut and gives whole events). */
static int proxy_client_send_continued(proxy_req *p, const char *buf, size_t n)
{
    if (!p->splice)
        return proxy_client_send_whole_events(p, buf, n);
    sbuf sp = SBUF_INIT;
    resume_splice_feed(p->splice, buf, n, &sp);
    int pause = sp.len ? proxy_client_send_whole_events(p, sp.p, sp.len) : 0;
    sbuf_free(&sp);
    return pause;
}

/* ... and a continuation's repeat of what the client has taken out first
 * (upstream/overlap.h). */
static int proxy_client_send_events(proxy_req *p, const char *buf, size_t n)
{
    if (p->xs) {
        sbuf tr = SBUF_INIT;
        dialect_stream_feed(p->xs, buf, n, &tr);
        int pause = tr.len ? proxy_client_send(p, tr.p, tr.len) : 0;
        sbuf_free(&tr);
        return pause;
    }
    if (!p->trim)
        return proxy_client_send_continued(p, buf, n);
    sbuf tr = SBUF_INIT;
    overlap_feed(p->trim, buf, n, &tr);
    int pause = tr.len ? proxy_client_send_continued(p, tr.p, tr.len) : 0;
    sbuf_free(&tr);
    return pause;
}

/* see proxy_internal.h */
void proxy_trim_end(proxy_req *p)
{
    overlap_trim *t = p->trim;
    if (!t)
        return;
    p->trim = NULL; /* what comes after (an error event) goes as it is */
    sbuf tr = SBUF_INIT;
    overlap_end(t, &tr);
    if (tr.len)
        proxy_client_send_continued(p, tr.p, tr.len);
    sbuf_free(&tr);
    if (t->removed)
        trace_event(p->gw->trace, "STREAM_RESUME_OVERLAP", "req=%llu account=%s removed_bytes=%zu",
                    (unsigned long long)p->id, p->acct_name, t->removed);
    overlap_free(t);
    free(t);
}

/* The serving account's x-codex-* headers (rate-limit windows, credits,
 * turn state) go back to the client: Codex shows them and sends the turn
 * state back on its next request, which must then reach this account. */
/* One window of the pool's usage as the x-codex-<which>-* headers. */
static void proxy_pool_window_headers(struct evkeyvalq *oh, const char *which, const pool_window *w, double now)
{
    char name[48], v[32];
    snprintf(name, sizeof name, "x-codex-%s-used-percent", which);
    snprintf(v, sizeof v, "%.0f", floor(w->used_pct + 0.5));
    evhttp_add_header(oh, name, v);
    if (w->window_s > 0) {
        snprintf(name, sizeof name, "x-codex-%s-window-minutes", which);
        snprintf(v, sizeof v, "%.0f", floor(w->window_s / 60 + 0.5));
        evhttp_add_header(oh, name, v);
    }
    if (w->reset_at > now) {
        snprintf(name, sizeof name, "x-codex-%s-reset-at", which);
        snprintf(v, sizeof v, "%.0f", ceil(w->reset_at));
        evhttp_add_header(oh, name, v);
        snprintf(name, sizeof name, "x-codex-%s-reset-after-seconds", which);
        snprintf(v, sizeof v, "%.0f", ceil(w->reset_at - now));
        evhttp_add_header(oh, name, v);
    }
}

/* A usage window header of the serving account: the client gets the
 * pool's windows instead (route/pool_usage.h). */
static int proxy_is_window_header(const char *name)
{
    return strncasecmp(name, "x-codex-primary-", 16) == 0 || strncasecmp(name, "x-codex-secondary-", 18) == 0;
}

void proxy_relay_headers(proxy_req *p, struct evkeyvalq *oh)
{
    const pool_usage *u = NULL;
    if (p->in.api == API_RESPONSES) {
        double now = gateway_now();
        u = pool_usage_get(p->gw->pool, now);
        if (u->primary.known)
            proxy_pool_window_headers(oh, "primary", &u->primary, now);
        if (u->secondary.known)
            proxy_pool_window_headers(oh, "secondary", &u->secondary, now);
    }
    for (size_t off = 0; off < p->relay.len;) {
        const char *name = p->relay.p + off;
        const char *value = name + strlen(name) + 1;
        if (!u || !proxy_is_window_header(name))
            evhttp_add_header(oh, name, value);
        if (strcasecmp(name, "x-codex-turn-state") == 0 && p->status >= 200 && p->status < 300)
            router_turn_state_owner_set(p->gw, value, p->acct_id); /* the next turn comes back here */
        off = (size_t)(value - p->relay.p) + strlen(value) + 1;
    }
}

/* The session now belongs to the account that answered its turn; the trace
 * says when that is a different account than last time. */
static void proxy_affinity_note(proxy_req *p)
{
    if (!p->session[0])
        return;
    if (affinity_put(p->gw->affinity, p->session, p->acct_id, gateway_now()))
        shared_session_tell(p->gw->shared, p->session, p->acct_id);
    if (p->plan.pinned_owner || p->plan.affinity_prev == p->acct_id)
        return;
    pool_account *prev = p->plan.affinity_prev ? pool_find(p->gw->pool, p->plan.affinity_prev) : NULL;
    trace_event(p->gw->trace, "AFFINITY", "req=%llu session=%s account=%s previous=%s reason=%s",
                (unsigned long long)p->id, p->session, p->acct_name,
                prev ? prev->a.name : "-", p->plan.affinity_prev ? "moved" : "new_session");
}

/* v in decimal, at the end of buf[24]; returns its start (no printf on the request path). */
static const char *proxy_utoa(char buf[24], size_t v)
{
    char *e = buf + 23;
    *e = '\0';
    do
        *--e = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    return e;
}

void proxy_commit(proxy_req *p)
{
    if (p->committed)
        return;
    p->committed = 1;
    proxy_pf_timer_drop(p); /* its callback ignores a committed request */
    proxy_affinity_note(p);
    p->error_class[0] = '\0'; /* failures before commit are history (trace, why); report what follows */
    sbuf_reset(&p->errmsg);
    struct evkeyvalq *oh = evhttp_request_get_output_headers(p->req);
    /* what the client gets: the upstream's type when it is the client's own
     * answer, else the client's dialect's (a translated or aggregated answer,
     * or a stream the upstream sent without a Content-Type) */
    const char *ctype = p->whole                                ? "application/json"
                        : p->xs || (!p->resp_ctype[0] && p->mode == MODE_PREFLIGHT) ? "text/event-stream"
                        : p->resp_ctype[0]                      ? p->resp_ctype
                                                                : "application/json";
    evhttp_add_header(oh, "Content-Type", ctype);
    if (p->resp_request_id[0])
        evhttp_add_header(oh, "x-request-id", p->resp_request_id);
    if (p->mode == MODE_PREFLIGHT && !p->whole)
        evhttp_add_header(oh, "Cache-Control", "no-cache");
    proxy_relay_headers(p, oh);
    evhttp_add_header(oh, "x-switchyard-account", p->acct_name);
    proxy_moved_header(p, oh);
    char n[24];
    evhttp_add_header(oh, "x-switchyard-attempts", proxy_utoa(n, (size_t)(p->attempts > 0 ? p->attempts : 0)));
    server_date_header(oh);
    if (p->req->major < 1 || (p->req->major == 1 && p->req->minor < 1)) {
        /* HTTP/1.0 (and 0.9) has no chunked encoding and the length is unknown: the
         * body runs to the connection's close. libevent decides keep-alive
         * (and would then announce "Content-Length: 0") from the request's
         * Connection header, so that header goes. */
        evhttp_remove_header(evhttp_request_get_input_headers(p->req), "Connection");
        evhttp_add_header(oh, "Connection", "close");
    }
    p->committed_status = p->status;
    if (p->mode == MODE_PLAIN || p->whole) {
        /* committed now, but the status line waits: a plain answer is held
         * whole up to PROXY_PLAIN_HOLD and then goes out with a
         * Content-Length (proxy_done_committed); a larger one goes out as a
         * chunked reply as it comes (proxy_client_flush, proxy_plain_hold) */
        p->reply_held = 1;
        return;
    }
    evhttp_send_reply_start(p->req, p->status, NULL);
    proxy_drop_sent_headers(p->req);
}

/* The held plain answer, complete: one reply with a Content-Length instead
 * of a chunked one (no chunk framing to write, or for the client to read). */
void proxy_reply_whole(proxy_req *p)
{
    p->reply_held = 0;
    event_del(&p->flush_ev);
    proxy_unflushed_remove(p);
    proxy_hold_release(p);
    char len[24];
    evhttp_add_header(evhttp_request_get_output_headers(p->req), "Content-Length", proxy_utoa(len, p->out.len));
    struct evbuffer *body = p->gw->chunk;
    evbuffer_add(body, p->out.p, p->out.len);
    server_reply(p->req, p->committed_status, body);
    evbuffer_drain(body, evbuffer_get_length(body));
    sbuf_reset(&p->out);
}

/* An answer the gateway made whole (dialect.h: aggregated or translated):
 * committed now with status, its bytes scrubbed of the account's secrets
 * as every relayed byte is, and sent with a Content-Length. */
void proxy_reply_made(proxy_req *p, int status, const sbuf *body)
{
    p->status = status;
    proxy_commit(p);
    sbuf_reset(&p->out);
    scrub_feed(&p->scrub, body->p ? body->p : "", body->len, &p->out);
    scrub_flush(&p->scrub, &p->out);
    if (p->client_gone || !p->req) {
        sbuf_reset(&p->out);
        return;
    }
    proxy_reply_whole(p);
}

/* Takes back the commit of a plain answer held whole (nothing of it was
 * sent): its bytes, its reply headers, its place in the flush lists. */
void proxy_uncommit_held(proxy_req *p)
{
    p->committed = 0;
    p->reply_held = 0;
    event_del(&p->flush_ev);
    proxy_unflushed_remove(p);
    proxy_hold_release(p);
    sbuf_reset(&p->out);
    evhttp_clear_headers(evhttp_request_get_output_headers(p->req)); /* proxy_commit's */
}

/* What is held back of a stream after its late error goes to the client
 * now, and nothing more is held. Returns 1 when the upstream should pause. */
int proxy_late_release(proxy_req *p)
{
    p->late_released = 1;
    int pause = p->late_held.len ? proxy_client_send_events(p, p->late_held.p, p->late_held.len) : 0;
    sbuf_free(&p->late_held);
    return pause;
}

/* The attempt's stream bytes, in order, on their way to the client. From
 * the first byte of an error event that came after output (preflight's
 * late_error_at) on, they are held back: at the stream's end the policy
 * decides whether the client sees that error, or the answer goes on
 * elsewhere (proxy_late_error). More than PROXY_LATE_HELD_MAX after it is
 * no error that ends a stream: it all goes on as it came. */
static int proxy_relay_events(proxy_req *p, const char *buf, size_t n)
{
    size_t at = p->relayed;
    p->relayed += n;
    if (!p->pf.late_error || p->late_released)
        return proxy_client_send_events(p, buf, n);
    size_t keep = p->pf.late_error_at > at ? p->pf.late_error_at - at : 0;
    if (keep >= n)
        return proxy_client_send_events(p, buf, n);
    sbuf_append(&p->late_held, buf + keep, n - keep);
    int pause = keep ? proxy_client_send_events(p, buf, keep) : 0;
    if (p->late_held.len > PROXY_LATE_HELD_MAX)
        pause |= proxy_late_release(p);
    return pause;
}

/* Sends what preflight holds, up to the end of its last complete event:
 * the rest of an event waits for its blank line, so a stream that dies in
 * the middle of an event never leaves the client with half of one (an
 * unfinished event longer than PROXY_EVENT_HOLD_MAX goes out as it comes).
 * all: send everything, e.g. before relaying the rest unparsed. Returns 1
 * when the upstream should pause. */
int proxy_flush_held(proxy_req *p, int all)
{
    size_t open = preflight_open_bytes(&p->pf);
    int everything = all || open > PROXY_EVENT_HOLD_MAX;
    size_t n = everything ? p->pf.held.len : p->pf.held.len - open;
    if (!n)
        return 0;
    int pause = proxy_relay_events(p, p->pf.held.p, n);
    p->mid_event = everything && open > 0;
    sbuf_consume(&p->pf.held, n);
    if (!p->pf.held.len)
        sbuf_free(&p->pf.held); /* nothing waits: no buffer kept between events (as out above) */
    return pause;
}

/* A committed stream with nothing held: what curl just handed over goes
 * out from its buffer instead of through pf->held (a copy, an allocation
 * and a free less per event); only an unfinished event's bytes are held.
 * The same outcome as holding buf and proxy_flush_held(p, 0). */
static int proxy_relay_committed(proxy_req *p, const char *buf, size_t n)
{
    size_t open = preflight_pass(&p->pf, buf, n);
    int everything = open > PROXY_EVENT_HOLD_MAX;
    size_t send = everything ? n : n - open;
    int pause = 0;
    if (send) {
        pause = proxy_relay_events(p, buf, send);
        p->mid_event = everything && open > 0;
    }
    if (send < n)
        sbuf_append(&p->pf.held, buf + send, n - send);
    return pause;
}

/* The stream broke after commit: say so in the stream's own format. */
void proxy_stream_interrupted(proxy_req *p, const char *why)
{
    sbuf msg = SBUF_INIT;
    sbuf_printf(&msg, "upstream stream from account %s ended before completion: %s",
                p->cut_account[0] ? p->cut_account : p->acct_name, why); /* a resume that failed: the cut */
    proxy_stream_fail(p, "upstream_stream_interrupted", msg.p);
    sbuf_free(&msg);
    snprintf(p->error_class, sizeof p->error_class, "stream_interrupted");
}

/* see proxy_internal.h. The error is an event of its own: the unfinished
 * event the upstream left is dropped (a client's SSE parser would discard
 * it too); if part of it already went out, a blank line ends it first, so
 * the error is never glued onto it. */
void proxy_stream_fail(proxy_req *p, const char *code, const char *text)
{
    sbuf ev = SBUF_INIT;
    sbuf_reset(&p->pf.held);
    proxy_trim_end(p); /* the continuation's text so far goes before the error */
    if (p->mid_event)
        sbuf_puts(&ev, "\n\n");
    p->mid_event = 0;
    if (p->in.api == API_RESPONSES) {
        sbuf_puts(&ev, "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":");
        const char *id = p->splice                                      ? p->splice->response_id
                         : p->xs && dialect_stream_response_id(p->xs)[0] ? dialect_stream_response_id(p->xs)
                                                                           : p->pf.response_id; /* the client's */
        sbuf_json_str(&ev, id, strlen(id));
        sbuf_puts(&ev, ",\"status\":\"failed\",\"error\":{\"code\":");
        sbuf_json_str(&ev, code, strlen(code));
        sbuf_puts(&ev, ",\"message\":");
        sbuf_json_str(&ev, text, strlen(text));
        sbuf_puts(&ev, "}}}\n\n");
    } else if (p->in.api == API_MESSAGES) { /* Anthropic's error event, and the end */
        sbuf_puts(&ev, "event: error\ndata: ");
        dialect_error_own(API_MESSAGES, 500, code, NULL, text, &ev);
        sbuf_puts(&ev, "\n\n");
    } else {
        sbuf_puts(&ev, "data: {\"error\":{");
        json_error_members(&ev, text, "upstream_error", code);
        sbuf_puts(&ev, "}}\n\n");
    }
    proxy_client_send(p, ev.p, ev.len);
    proxy_error_note(p, code, text);
    sbuf_free(&ev);
}

/* The attempt's translator (dialect.h), for a stream of another dialect or
 * one the client gets as one answer: the client's model, and whether a chat
 * client asked for its usage chunk. NULL when out of memory. */
static dialect_stream *proxy_translator_new(proxy_req *p)
{
    int include_usage = 0;
    size_t a, b;
    if (p->in.api == API_CHAT && json_member_span(p->in.body.p, p->in.body.len, "stream_options", &a, &b) == 0) {
        json_value *so = json_parse(p->in.body.p + a, b - a, NULL, 0);
        include_usage = so && json_get_bool(so, "include_usage", 0);
        json_free(so);
    }
    dialect_stream_opts o = {p->whole, include_usage, p->in.model};
    p->xs = dialect_stream_new(p->up_api, p->in.api, &o);
    return p->xs;
}

/* ---------- upstream callbacks ---------- */

/* The time-to-first-token limit: a stream that showed no semantic event by
 * then fails over before anything reached the client (classified as a
 * timeout). With no other candidate left it is committed instead: a slow
 * answer beats none, and the idle limit still guards it. */
static void proxy_on_pf_timer(evutil_socket_t fd, short what, void *arg)
{
    proxy_req *p = arg;
    if (p->mode != MODE_PREFLIGHT || p->committed || !p->pf_live)
        return;
    if (proxy_candidates_left(p, 0) > 0) {
        policy_event ev = {0};
        ev.status = p->status;
        ev.timeout = 1;
        ev.in_stream = 1;
        ev.error_message = "no output within the time-to-first-token limit";
        if (proxy_classify_and_route(p, &ev, ev.error_message))
            return;
        proxy_attempt_outcome(p, NULL, NULL); /* the slow stream is served after all: its end tells */
    }
    if (p->whole) /* nothing goes out before the end: the idle limit still guards it */
        return;
    preflight_commit(&p->pf);
    proxy_commit(p);
    proxy_flush_held(p, 0);
}

/* What the client's (shallow, request.c) doc says of reasoning: chat's
 * reasoning_effort, or a reasoning object (Responses; some chat relays),
 * whose effort is read from the body only when a stream first asks
 * (proxy_first_token_ms). Called at the request's start, before the doc goes. */
void proxy_reasoning_note(proxy_req *p, const json_value *doc)
{
    const char *effort = doc ? json_get_str(doc, "reasoning_effort") : NULL;
    const json_value *r = doc && !effort ? json_get(doc, "reasoning") : NULL;
    p->reasoning = effort || (r && r->type != JSON_NULL) ? REASONING_SET : REASONING_NONE;
    sbuf_copy_cstr(p->effort, sizeof p->effort, effort ? effort : "");
    if (r && r->type == JSON_OBJECT && r->count)
        p->reasoning = REASONING_UNREAD;
}

/* The request's reasoning effort for the first_token hook: NULL when it
 * says nothing of reasoning, "" when it asks for reasoning naming no effort. */
static const char *proxy_reasoning_effort(proxy_req *p)
{
    if (p->reasoning == REASONING_UNREAD) { /* once per request, and only for a stream */
        size_t a, b;
        if (json_member_span(p->in.body.p, p->in.body.len, "reasoning", &a, &b) == 0) {
            json_value *obj = json_parse(p->in.body.p + a, b - a, NULL, 0);
            const char *e = obj ? json_get_str(obj, "effort") : NULL;
            sbuf_copy_cstr(p->effort, sizeof p->effort, e ? e : "");
            json_free(obj);
        }
        p->reasoning = REASONING_SET;
    }
    return p->reasoning == REASONING_SET ? p->effort : NULL;
}

/* The time-to-first-token limit of this attempt, in ms: the first_token
 * policy's answer for the request and account, capped by SWITCHYARD_TTFT_MS.
 * Its after_output limit goes to p->after_output_ms (0: none, or no
 * shorter than the upstream idle limit, which then applies alone). */
static long proxy_first_token_ms(proxy_req *p)
{
    policy_first_token ft = {p->in.endpoint, p->in.model, proxy_reasoning_effort(p),
                             p->in.stream, account_kind_name(p->acct_kind), policy_prompt_kib(p->in.body.len)};
    policy_silence s = policy_silence_limits(p->gw->policy, &ft);
    double after = s.after_output * 1000.0;
    p->after_output_ms = after > 0 && after < (double)p->gw->cfg.idle_timeout_ms ? (long)after : 0;
    double ms = s.first_token * 1000.0;
    return ms < (double)p->gw->cfg.ttft_ms ? (long)ms : p->gw->cfg.ttft_ms;
}

/* An upstream header value the client will see: scrubbed whole, then cut
 * to fit (cutting first could leave the start of a token). */
static void proxy_copy_scrubbed(proxy_req *p, char *dst, size_t cap, const char *value)
{
    sbuf v = SBUF_INIT;
    scrub_text(&p->scrub, value, strlen(value), &v);
    sbuf_copy_cstr(dst, cap, v.len ? v.p : "");
    sbuf_free(&v);
}

/* An x-codex-* response header: kept for the client (bounded, only what
 * is safe in a header value, never one echoing the account's token); read
 * for usage after all of them (proxy_note_usage). */
static void proxy_note_codex_header(proxy_req *p, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    sbuf scrubbed = SBUF_INIT; /* any change: it holds the token (or the start of it) */
    scrub_text(&p->scrub, value, vl, &scrubbed);
    int secret = scrubbed.len != vl || (vl && memcmp(scrubbed.p, value, vl) != 0);
    sbuf_free(&scrubbed);
    if (p->relay.len + nl + vl + 2 <= PROXY_RELAY_MAX && !strpbrk(value, "\r\n") && !secret) {
        sbuf_append(&p->relay, name, nl + 1);
        sbuf_append(&p->relay, value, vl + 1);
    }
}

/* The usage an answer reports. Its x-codex-primary/secondary-* headers are
 * the windows of the limit that metered the request: the account's main
 * one, unless x-codex-active-limit names another family (a model metered
 * apart, e.g. a faster one with its own window), whose windows they then
 * are (with its own x-codex-<family>-* headers, which win): those are kept
 * for the attempt (p->limit_family, a 429 cools only that family,
 * proxy_recover.c) and leave the account's figures alone. The model's
 * family is learned for the pool (pool_family_learn). */
static void proxy_note_usage(proxy_req *p, pool_account *pa, const upstream_header *h, size_t n,
                             const char *active, double now)
{
    char fam[ACCOUNT_FAMILY_MAX] = "";
    if (active && (!usage_family_name(active, strlen(active), fam, sizeof fam) || strcmp(fam, "codex") == 0))
        fam[0] = '\0';
    if (active && p->in.model[0])
        pool_family_learn(p->gw->pool, p->in.model, fam);
    usage_windows main_w = USAGE_WINDOWS_UNKNOWN, own = USAGE_WINDOWS_UNKNOWN;
    for (size_t i = 0; i < n; i++) {
        const char *name = h[i].name;
        if ((name[0] | 0x20) != 'x' || strncasecmp(name, "x-codex-", 8) != 0)
            continue;
        if (!fam[0]) {
            usage_header_apply(&pa->st, name, h[i].value, now);
            continue;
        }
        if (usage_windows_apply(&main_w, name, h[i].value, now))
            continue;
        char other[ACCOUNT_FAMILY_MAX];
        usage_windows w = own;
        if (usage_family_header(&w, other, sizeof other, name, h[i].value, now) && strcmp(other, fam) == 0)
            own = w;
    }
    if (!fam[0])
        return;
    /* the family's own headers win over the main ones, field by field */
    if (own.primary_used_pct < 0) own.primary_used_pct = main_w.primary_used_pct;
    if (own.secondary_used_pct < 0) own.secondary_used_pct = main_w.secondary_used_pct;
    if (own.primary_reset_at <= 0) own.primary_reset_at = main_w.primary_reset_at;
    if (own.secondary_reset_at <= 0) own.secondary_reset_at = main_w.secondary_reset_at;
    if (own.primary_window_s <= 0) own.primary_window_s = main_w.primary_window_s;
    if (own.secondary_window_s <= 0) own.secondary_window_s = main_w.secondary_window_s;
    memcpy(p->limit_family, fam, sizeof fam);
    p->family_w = own;
}

/* Is a 2xx with this Content-Type an answer of the API? JSON or an event
 * stream; an HTML or text page (a proxy's or CDN's challenge, a captive
 * portal) is not. A missing Content-Type is given the benefit of the doubt. */
static int proxy_ctype_is_answer(const char *ctype)
{
    if (!ctype[0])
        return 1;
    return strncasecmp(ctype, "text/event-stream", 17) == 0 || strncasecmp(ctype, "application/json", 16) == 0 ||
           strcasestr(ctype, "+json") != NULL;
}

int proxy_up_headers(void *ud, int status, const upstream_header *h, size_t n)
{
    proxy_req *p = ud;
    pool_account *pa = proxy_account(p);
    double now = gateway_now();
    metrics_ttfb(now - p->t_attempt);
    p->status = status;
    p->retry_after = -1;
    p->limit_family[0] = '\0';
    const char *active = NULL; /* x-codex-active-limit */
    int codex = 0;
    for (size_t i = 0; i < n; i++) {
        /* by first letter: a real upstream sends twenty-odd headers, most
         * of them none of these */
        char c = (char)(h[i].name[0] | 0x20);
        if (c == 'c' && strcasecmp(h[i].name, "Content-Type") == 0)
            proxy_copy_scrubbed(p, p->resp_ctype, sizeof p->resp_ctype, h[i].value);
        else if (c == 'x' && strcasecmp(h[i].name, "x-request-id") == 0)
            proxy_copy_scrubbed(p, p->resp_request_id, sizeof p->resp_request_id, h[i].value);
        else if (c == 'r' && strcasecmp(h[i].name, "Retry-After") == 0 && p->retry_after < 0)
            p->retry_after = usage_header_seconds(h[i].value);
        else if (c == 'r' && strcasecmp(h[i].name, "retry-after-ms") == 0) { /* finer, so it wins */
            double ms = usage_header_seconds(h[i].value);
            if (ms >= 0)
                p->retry_after = ms / 1000.0;
        }
        else if (c == 'x' && strncasecmp(h[i].name, "x-codex-", 8) == 0) {
            proxy_note_codex_header(p, h[i].name, h[i].value);
            codex = 1;
            if (strcasecmp(h[i].name + 8, "active-limit") == 0)
                active = h[i].value;
        }
    }
    if (codex && pa)
        proxy_note_usage(p, pa, h, n, active, now);
    if (status >= 200 && status < 300 && !proxy_ctype_is_answer(p->resp_ctype))
        p->not_answer = "content_type"; /* e.g. a text/html challenge page: collected like an error */
    if (status < 200 || status >= 300 || p->not_answer) {
        p->mode = MODE_ERROR;
        return 0;
    }
    /* an answer to a streamed request that names no Content-Type is taken
     * as the stream it was asked for (the ChatGPT backend sends none) */
    int sse = strncasecmp(p->resp_ctype, "text/event-stream", 17) == 0 || (!p->resp_ctype[0] && p->up_stream);
    if (sse && !p->in.is_get) {
        p->mode = MODE_PREFLIGHT;
        preflight_init(&p->pf, p->up_api, p->gw->cfg.preflight_bytes); /* it reads the upstream's events */
        p->pf_live = 1;
        p->relayed = 0;
        p->late_released = 0;
        sbuf_reset(&p->late_held);
        /* the delivered text is kept only when the policy could resume this
         * stream and someone could take it now (reading each chunk's text
         * costs; a pool of one never resumes); a translated stream is not
         * resumed (docs/clients.md) */
        p->pf.keep_text = p->in.stream && !p->resumed && p->xstep != DIALECT_TRANSLATE &&
                          policy_may_resume(p->gw->policy, p->in.endpoint) && proxy_resume_possible(p);
        if ((p->xstep == DIALECT_TRANSLATE || p->whole) && !proxy_translator_new(p)) {
            p->mode = MODE_ERROR; /* out of memory: collected like an error, and the request moves on */
            p->not_answer = "content_type";
            return 0;
        }
        if (p->up_api == API_RESPONSES) { /* who minted its blobs; the stored turn (proxy_move.c) */
            int record = p->in.api == API_RESPONSES && !p->in.store_off && !p->whole; /* whole: made at the end */
            /* an upstream that keeps nothing ends with an empty output (the
             * ChatGPT backend): its items fill it for the client and the record */
            p->fill_output = p->in.api == API_RESPONSES && p->xstep == DIALECT_ADAPT && !p->whole;
            p->pf.on_item_blobs = proxy_item_blobs;
            p->pf.on_completed = record ? proxy_turn_completed : NULL;
            p->pf.on_item_done = p->fill_output ? proxy_item_done : NULL;
            sbuf_reset(&p->turn_items);
            p->pf.hooks_ud = p;
        }
        /* counted from the request (less its waits for capacity) for its
         * first attempt: the client's wait for the first token, connect and
         * headers included; from its own start for an attempt after another */
        double since = p->attempts <= 1 ? p->t_start + p->waited_s : p->t_attempt;
        long left = proxy_first_token_ms(p) - (long)((gateway_now() - since) * 1000.0);
        if (left < 1)
            left = 1;
        struct timeval tv = {left / 1000, (left % 1000) * 1000};
        if (!p->pf_timer && !(p->pf_timer = evtimer_new(p->gw->base, proxy_on_pf_timer, p)))
            abort();
        evtimer_add(p->pf_timer, &tv);
        return 0;
    }
    if (p->resume_pending) { /* a resumed stream must go on as a stream */
        p->mode = MODE_ERROR;
        return 0;
    }
    if (p->xstep == DIALECT_TRANSLATE) /* a plain answer of another dialect: translated once it is whole */
        p->whole = 1;
    /* plain 2xx: committed with its first byte (proxy_up_data), so a body
     * that fails before any byte arrives (e.g. an encoding curl cannot
     * decode) still fails over, and an empty body is no answer; once bytes
     * flow nothing can fail over */
    p->mode = MODE_PLAIN;
    return 0;
}

int proxy_up_data(void *ud, const char *buf, size_t n)
{
    proxy_req *p = ud;
    switch (p->mode) {
    case MODE_ERROR:
        p->errbody_total += n;
        if (p->errbody.len < PROXY_ERRBODY_MAX)
            sbuf_append(&p->errbody, buf, n < PROXY_ERRBODY_MAX - p->errbody.len ? n : PROXY_ERRBODY_MAX - p->errbody.len);
        return 0;
    case MODE_PLAIN:
        if (p->whole) { /* translated once whole: nothing is sent before */
            if (p->xwhole.len + n > PROXY_WHOLE_MAX) {
                p->mode = MODE_ERROR; /* collected like an error: the request moves on, or says why */
                p->not_answer = "too_large";
                return 0;
            }
            sbuf_append(&p->xwhole, buf, n);
            return 0;
        }
        if (n)
            proxy_commit(p);
        if (p->sniff.len < PROXY_SNIFF_MAX)
            sbuf_append(&p->sniff, buf, n);
        return proxy_client_send(p, buf, n);
    case MODE_PREFLIGHT: {
        if (p->whole) { /* one answer at the end: preflight reads the events, the translator keeps the answer */
            if (p->pf.state == PF_ERROR) /* an error the policy returned: its end is awaited, nothing relayed */
                return 0;
            preflight_pass(&p->pf, buf, n); /* nothing held: the translator keeps what the answer needs */
            sbuf none = SBUF_INIT;
            dialect_stream_feed(p->xs, buf, n, &none); /* aggregating: it gives nothing before the end */
            sbuf_free(&none);
            if (p->pf.state == PF_ERROR)
                proxy_on_stream_error(p);
            return 0;
        }
        if (p->pf.state == PF_COMMIT && p->committed && !p->resume_pending && !p->pf.held.len)
            return proxy_relay_committed(p, buf, n);
        pf_state st = preflight_feed(&p->pf, buf, n);
        if (st == PF_ERROR && p->resume_pending) /* the resumed stream was refused: ends as interrupted */
            return 0;
        if (st == PF_ERROR && p->committed) /* an error stream the policy returned: relay the rest */
            return proxy_client_send(p, buf, n);
        if (st == PF_ERROR) {
            proxy_on_stream_error(p);
            return 0;
        }
        if (st == PF_COMMIT) {
            if (p->after_output_ms && p->up) /* output from here: silence past this is a cut */
                upstream_set_idle(p->up, p->after_output_ms);
            p->resume_pending = 0; /* a resumed stream goes on */
            p->cut_account[0] = '\0';
            proxy_commit(p);
            return proxy_flush_held(p, 0);
        }
        return 0;
    }
    default:
        return 0;
    }
}
