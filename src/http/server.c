/* server.c: client-facing HTTP (see server.h). Everything here runs on the
 * loop and only validates and dispatches; proxy.c does the upstream work. */
#include "http/server.h"
#include "route/pool.h"
#include "store/store.h"
#include "store/store_runfile.h"
#include "http/conn_limit.h"
#include "http/health.h"
#include "route/key_rules.h"
#include "route/pool_usage.h"
#include "route/model_catalog.h"
#include "http/request.h"
#include "base/json.h"
#include "http/body_decode.h"
#include "http/ws.h"
#include "base/log.h"
#include "obs/metrics.h"
#include "upstream/upstream.h"
#include "dialect/dialect.h"
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* Where an accepted, authenticated, parsed request goes (server_start). */
static server_handler_fn server_handler;

#define SERVER_MAX_HEADERS (256 * 1024) /* a request's head at most */

typedef struct server_route {
    const char *path;
    const char *suffix;
    api_kind api;
    int is_get;
} server_route;

static const server_route server_routes[] = {
    {"/v1/chat/completions", "/chat/completions", API_CHAT, 0},
    {"/v1/responses", "/responses", API_RESPONSES, 0},
    {"/v1/messages", "/messages", API_MESSAGES, 0}, /* Claude Code, the Anthropic SDKs (docs/claude.md) */
    {"/v1/messages/count_tokens", "/messages/count_tokens", API_MESSAGES, 0}, /* answered here (an estimate) */
    {"/v1/models", "/models", API_CHAT, 1},
    {"/models", "/models", API_CHAT, 1}, /* Codex's picker with the gateway's root as its base URL */
};
/* GET and DELETE /v1/responses/{id}: a stored response, at the account that
 * owns it (its path is the suffix and the id) */
static const server_route server_response_route = {"/v1/responses/{id}", "/responses/", API_RESPONSES, 1};
#define SERVER_RESPONSE_PREFIX "/v1/responses/"

/* The id of /v1/responses/<id> (or /v1/responses/<id>/input_items, its
 * input: *items set) into out: 1..127 of [A-Za-z0-9_-]. 0 / -1. */
static int server_response_id(const char *path, char *out, size_t n, int *items)
{
    size_t pl = sizeof SERVER_RESPONSE_PREFIX - 1;
    if (strncmp(path, SERVER_RESPONSE_PREFIX, pl) != 0)
        return -1;
    const char *id = path + pl;
    size_t len = strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-");
    int input_items = strcmp(id + len, "/input_items") == 0;
    if (!len || (id[len] && !input_items) || len >= n)
        return -1;
    memcpy(out, id, len);
    out[len] = '\0';
    if (items)
        *items = input_items;
    return 0;
}

void server_date_header(struct evkeyvalq *headers)
{
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    static time_t shown = -1;
    static char date[48];
    time_t now = time(NULL);
    if (now != shown) {
        struct tm tm;
        gmtime_r(&now, &tm);
        /* evhttp's format (evutil_date_rfc1123) */
        snprintf(date, sizeof date, "%s, %02d %s %4d %02d:%02d:%02d GMT", days[tm.tm_wday % 7], tm.tm_mday,
                 months[tm.tm_mon % 12], 1900 + tm.tm_year, tm.tm_hour, tm.tm_min, tm.tm_sec);
        shown = now;
    }
    evhttp_add_header(headers, "Date", date);
}

/* ---------- replies written in the turn they are made ----------
 *
 * evhttp queues a reply in the connection's output buffer and enables the
 * write event; the bytes go out one loop turn later, once epoll has said
 * the socket is writable, and the write event is dropped again after: two
 * epoll_ctl calls and a wakeup per answer (and per stream chunk). A client
 * socket almost always has room, so each reply is queued here and written
 * at the first point where nothing of evhttp or the proxy is on the stack
 * (evhttp may free the request in what follows): right after the upstream
 * event that brought it (server_flush_pending, from serve.c), else by an
 * event activated with the first reply of the turn, which libevent runs
 * after the turn's other callbacks and before it asks epoll again. When all
 * of it went out, the write event is dropped before the loop ever applies
 * it (the epoll changelist cancels the pair) and evhttp's "written"
 * callback runs as libevent would have run it. A partial write or an
 * error leaves the rest to libevent, as before. */
static struct event *server_flush_ev;
static struct bufferevent **server_unflushed; /* each holds a reference */
static size_t server_n_unflushed, server_alloc_unflushed;

static void server_flush_one(struct bufferevent *bev)
{
    bufferevent_data_cb written;
    bufferevent_getcb(bev, NULL, &written, NULL, NULL);
    struct evbuffer *out = bufferevent_get_output(bev);
    evutil_socket_t fd = bufferevent_getfd(bev);
    /* a freed connection has no callbacks; one reading has writing off */
    if (written && fd >= 0 && (bufferevent_get_enabled(bev) & EV_WRITE) && evbuffer_get_length(out) &&
        evbuffer_write(out, fd) > 0 && !evbuffer_get_length(out)) {
        bufferevent_disable(bev, EV_WRITE); /* evhttp enables it again with its next write */
        bufferevent_trigger(bev, EV_WRITE, 0);
    }
}

static void server_on_flush(evutil_socket_t fd, short what, void *arg) { server_flush_pending(); }

void server_flush_pending(void)
{
    /* a "written" callback may queue another reply: taken one at a time */
    for (size_t i = 0; i < server_n_unflushed; i++) {
        struct bufferevent *bev = server_unflushed[i];
        server_flush_one(bev);
        bufferevent_decref(bev);
    }
    server_n_unflushed = 0;
}

/* Takes a reference to req's connection for the flush after this callback. */
static void server_flush_later(struct evhttp_request *req)
{
    struct evhttp_connection *c = server_flush_ev ? evhttp_request_get_connection(req) : NULL;
    struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
    if (!bev)
        return;
    if (server_n_unflushed == server_alloc_unflushed) {
        size_t n = server_alloc_unflushed ? server_alloc_unflushed * 2 : 64;
        struct bufferevent **v = realloc(server_unflushed, n * sizeof *v);
        if (!v)
            return; /* libevent writes it, a turn later */
        server_unflushed = v;
        server_alloc_unflushed = n;
    }
    bufferevent_incref(bev);
    server_unflushed[server_n_unflushed++] = bev;
    if (server_n_unflushed == 1)
        event_active(server_flush_ev, EV_TIMEOUT, 1);
}

void server_reply(struct evhttp_request *req, int status, struct evbuffer *body)
{
    server_flush_later(req);
    evhttp_send_reply(req, status, NULL, body);
}

void server_reply_chunk(struct evhttp_request *req, struct evbuffer *chunk,
                        void (*written)(struct evhttp_connection *, void *), void *arg)
{
    server_flush_later(req);
    evhttp_send_reply_chunk_with_cb(req, chunk, written, arg);
}

void server_reply_end(struct evhttp_request *req)
{
    server_flush_later(req);
    evhttp_send_reply_end(req);
}

void server_send_error(struct evhttp_request *req, int status, const char *type, const char *code,
                       const char *message)
{
    server_send_error_param(req, status, type, code, NULL, message);
}

/* 1 when the request is one of the Anthropic Messages API (/v1/messages,
 * its count_tokens, with a query or not): its errors go in Anthropic's
 * shape, whatever answers them (the edge, the proxy). */
int server_is_messages(struct evhttp_request *req)
{
    const char *uri = evhttp_request_get_uri(req);
    static const char prefix[] = "/v1/messages";
    if (!uri || strncmp(uri, prefix, sizeof prefix - 1) != 0)
        return 0;
    char c = uri[sizeof prefix - 1];
    return c == '\0' || c == '?' || c == '/';
}

void server_send_error_param(struct evhttp_request *req, int status, const char *type, const char *code,
                             const char *param, const char *message)
{
    sbuf b = SBUF_INIT;
    if (server_is_messages(req)) {
        /* {"type":"error","error":{"type","message"}}, the type from the
         * status; the gateway's own overload (no account free) is
         * Anthropic's 529, which its clients retry */
        if (status == 503)
            status = 529;
        dialect_error_own(API_MESSAGES, status, code, param, message, &b);
        sbuf_puts(&b, "\n");
    } else {
        sbuf_puts(&b, "{\"error\":{");
        json_error_members(&b, message, type, code);
        if (param && *param) {
            sbuf_puts(&b, ",\"param\":");
            sbuf_json_str(&b, param, strlen(param));
        }
        sbuf_puts(&b, "}}\n");
    }
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", "application/json");
    struct evbuffer *out = evbuffer_new();
    evbuffer_add(out, b.p, b.len);
    server_reply(req, status, out);
    evbuffer_free(out);
    sbuf_free(&b);
}

/* An error for a request that never reaches the proxy, counted in the
 * metrics by endpoint and status like the proxied ones. */
static void server_refuse(struct evhttp_request *req, const char *endpoint, int status, const char *type,
                          const char *code, const char *message)
{
    metrics_request(endpoint, status);
    server_send_error(req, status, type, code, message);
}

/* see server.h */
int server_count_tokens_reply(struct evhttp_request *req, const char *body, size_t len)
{
    long n = messages_count_tokens_estimate(body, len);
    if (n < 0) {
        server_send_error(req, 400, "invalid_request_error", "invalid_request", "messages: Field required");
        return 400;
    }
    char b[64];
    int w = snprintf(b, sizeof b, "{\"input_tokens\":%ld}\n", n);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", "application/json");
    evhttp_add_header(h, "x-switchyard-token-count", "estimate");
    struct evbuffer *out = evbuffer_new();
    evbuffer_add(out, b, (size_t)w);
    server_reply(req, 200, out);
    evbuffer_free(out);
    return 200;
}

/* 1 when an enabled anthropic account can count a Messages request's
 * tokens itself: then count_tokens goes through the proxy to such an
 * account (natively), else the estimate answers. */
static int server_pool_counts_tokens(gateway *gw)
{
    for (size_t i = 0, n = pool_count(gw->pool); i < n; i++) {
        const pool_account *pa = pool_at(gw->pool, i);
        if (pa->a.kind == ACCOUNT_ANTHROPIC && pa->a.enabled)
            return 1;
    }
    return 0;
}

/* The platform key from "Authorization: Bearer K" or "x-api-key: K". */
static const char *server_presented_key(struct evhttp_request *req)
{
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    const char *auth = evhttp_find_header(h, "Authorization");
    if (auth && strncasecmp(auth, "Bearer ", 7) == 0) {
        auth += 7;
        while (*auth == ' ')
            auth++;
        return *auth ? auth : NULL;
    }
    const char *k = evhttp_find_header(h, "x-api-key");
    return k && *k ? k : NULL;
}

static const server_route *server_route_find(const char *path)
{
    for (size_t i = 0; i < sizeof server_routes / sizeof *server_routes; i++)
        if (strcmp(path, server_routes[i].path) == 0)
            return &server_routes[i];
    char id[128];
    if (server_response_id(path, id, sizeof id, NULL) == 0)
        return &server_response_route;
    return NULL;
}

/* Request framing libevent accepts but must not: two different
 * Content-Length values, or Transfer-Encoding beside Content-Length or
 * other than plain "chunked". Two parsers (ours and the next hop's) could
 * read such a request differently, so it is refused and the connection
 * closed, as RFC 9112 section 6.3 asks. Returns 1 when refused. */
static int server_framing_bad(struct evhttp_request *req, const char *path)
{
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    const char *cl = NULL, *why = NULL;
    int te = 0;
    for (struct evkeyval *kv = h->tqh_first; kv && !why; kv = kv->next.tqe_next) {
        char c0 = (char)(kv->key[0] | 0x20); /* most headers are neither: skip the comparisons */
        if (c0 != 'c' && c0 != 't')
            continue;
        if (strcasecmp(kv->key, "Content-Length") == 0) {
            if (cl && strcmp(cl, kv->value) != 0)
                why = "two different Content-Length headers";
            cl = kv->value;
        } else if (strcasecmp(kv->key, "Transfer-Encoding") == 0) {
            if (te++ || strcasecmp(kv->value, "chunked") != 0)
                why = "unsupported Transfer-Encoding (only a single 'chunked' is accepted)";
        }
    }
    if (!why && cl && te)
        why = "both Content-Length and Transfer-Encoding";
    if (!why && cl && (!*cl || cl[strspn(cl, "0123456789")] != '\0'))
        why = "Content-Length is not a decimal number";
    if (!why)
        return 0;
    evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
    char msg[160];
    snprintf(msg, sizeof msg, "bad request framing: %s", why);
    server_refuse(req, path, 400, "invalid_request_error", "bad_request_framing", msg);
    return 1;
}

/* Moves the body out of libevent's buffer piece by piece, so the two copies
 * never exist whole at the same time (evbuffer_pullup would make a third). */
static void server_take_body(struct evbuffer *ib, sbuf *body, size_t len)
{
    sbuf_reserve(body, len);
    while (evbuffer_get_length(ib) > 0) {
        size_t n = evbuffer_get_length(ib);
        if (n > (1u << 20))
            n = 1u << 20;
        sbuf_reserve(body, n);
        int got = evbuffer_remove(ib, body->p + body->len, n);
        if (got <= 0)
            break;
        body->len += (size_t)got;
    }
    if (body->p)
        body->p[body->len] = '\0';
}

/* The codings of every Content-Encoding line, in order, into c. Replies 415
 * and returns -1 for one the gateway does not decode. */
static int server_body_codings(struct evhttp_request *req, const char *endpoint, body_codings *c)
{
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    char why[256];
    c->n = 0;
    for (struct evkeyval *kv = h->tqh_first; kv; kv = kv->next.tqe_next) {
        if ((kv->key[0] | 0x20) != 'c' || strcasecmp(kv->key, "Content-Encoding") != 0)
            continue;
        if (body_decode_codings(kv->value, c, why, sizeof why) != BODY_DECODE_OK) {
            server_refuse(req, endpoint, 415, "invalid_request_error", "unsupported_content_encoding", why);
            return -1;
        }
    }
    return 0;
}

/* A body sent compressed (Content-Encoding: zstd, as Codex sends with a
 * ChatGPT login; gzip; deflate) is decoded here, before anything reads it:
 * the body limit and the in-flight budget hold for the DECODED size, and
 * decoding stops the moment it passes whichever is smaller, so a small
 * body that would inflate to gigabytes costs that much and no more. The
 * upstream gets the decoded body (the client's Content-Encoding is not a
 * forwarded header).
 *
 * A slice at a time (issue 33): a body that inflates to the 16 MiB limit
 * is tens of milliseconds of work, and a key holder sending many of them
 * at once kept the loop from everything else (/health's p99 0.46 s). A
 * body's first slice, about SERVER_DECODE_SLICE bytes (read plus
 * written), is decoded when it arrives (an ordinary body is done in it);
 * what is left waits in one queue, and each loop turn decodes one slice of
 * the body at its head, which then goes to the back: the decoding work of
 * a loop turn is one slice however many bodies wait, and they share the
 * turns evenly. The next slice is a zero-delay timer, which libevent runs
 * only after it has polled the sockets again (an event_active would run
 * in the same pass, before any socket), so other requests are served
 * between slices. On the loop
 * rather than on a worker thread: the gateway has no threads on its
 * request path, the decoder's output is counted against the budget as it
 * grows, checked at every slice, with no locking, and a decoding whose
 * connection evhttp closes is dropped (its close callback). (evhttp does
 * not watch a connection whose request waits for its answer, as the
 * proxy's client watch does: a client that goes mid-decoding is usually
 * seen when the answer is written; the work is bounded by the limit.) The
 * request continues (its key checked again: it may have been revoked
 * meanwhile) when the body is whole. */
#define SERVER_DECODE_SLICE ((size_t)1 << 20)

typedef struct server_decode {
    gateway *gw;
    struct evhttp_request *req;
    struct evhttp_connection *evcon;
    const server_route *route;
    request_input in;
    body_codings codings;
    sbuf raw;
    size_t len;                /* the body's size as sent */
    body_decoder *dec;
    size_t charged;            /* in gw->body_bytes: the raw body and the output so far */
    int slices;
    struct server_decode *prev, *next; /* in the queue */
} server_decode;

static server_decode *server_decode_head, *server_decode_tail;
static struct event *server_decode_ev; /* one slice of the body at the head, at the next loop turn */

static void server_decode_push(server_decode *d)
{
    d->next = NULL;
    d->prev = server_decode_tail;
    if (server_decode_tail)
        server_decode_tail->next = d;
    else
        server_decode_head = d;
    server_decode_tail = d;
    static const struct timeval now = {0, 0};
    if (!evtimer_pending(server_decode_ev, NULL))
        evtimer_add(server_decode_ev, &now); /* after the sockets have been polled again (see above) */
}

static void server_decode_unlink(server_decode *d)
{
    if (d->prev)
        d->prev->next = d->next;
    else if (server_decode_head == d)
        server_decode_head = d->next;
    if (d->next)
        d->next->prev = d->prev;
    else if (server_decode_tail == d)
        server_decode_tail = d->prev;
    d->prev = d->next = NULL;
}

static void server_serve(struct evhttp_request *req, gateway *gw, const server_route *r, pool_key *pk,
                         request_input *in);
static pool_key *server_authorize(struct evhttp_request *req, gateway *gw, const char *endpoint);

static void server_decode_free(server_decode *d)
{
    d->gw->body_bytes -= d->charged;
    if (d->evcon)
        evhttp_connection_set_closecb(d->evcon, NULL, NULL);
    metrics_body_decode(d->slices);
    server_decode_unlink(d);
    body_decoder_free(d->dec);
    sbuf_free(&d->raw);
    json_free(d->in.doc);
    sbuf_free(&d->in.body);
    free(d);
}

/* The client went mid-decoding: nothing more is done for it. */
static void server_decode_on_close(struct evhttp_connection *evcon, void *arg)
{
    server_decode *d = arg;
    d->evcon = NULL;
    d->gw->trim_due = 1;
    server_decode_free(d);
}

/* The decoding ended with rc (not OK): the refusal, as it always was. */
static void server_decode_refuse(server_decode *d, body_decode_rc rc, int over_budget, size_t room, const char *why)
{
    gateway *gw = d->gw;
    struct evhttp_request *req = d->req;
    const char *endpoint = d->in.endpoint;
    if (over_budget) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "the gateway holds %zu bytes of request bodies in flight; this body decodes to more than the %zu "
                 "bytes left of its budget of %zu bytes: retry shortly",
                 gw->cfg.max_bodies_in_flight - room, room, gw->cfg.max_bodies_in_flight);
        gw->refused_bodies++;
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
        server_refuse(req, endpoint, 503, "server_error", "body_budget_exceeded", msg);
    } else if (rc == BODY_DECODE_TOO_LARGE) {
        server_refuse(req, endpoint, 413, "invalid_request_error", "request_too_large", why);
    } else if (rc == BODY_DECODE_UNSUPPORTED) {
        server_refuse(req, endpoint, 415, "invalid_request_error", "unsupported_content_encoding", why);
    } else {
        server_refuse(req, endpoint, 400, "invalid_request_error", "invalid_body_encoding", why);
    }
}

/* One slice of d; then back in the queue, or the request goes on. */
static void server_decode_slice(server_decode *d)
{
    gateway *gw = d->gw;
    char why[256];
    int done = 0;
    d->slices++;
    body_decode_rc rc = body_decoder_run(d->dec, SERVER_DECODE_SLICE, &done, why, sizeof why);
    size_t held = d->raw.cap + body_decoder_held(d->dec);
    gw->body_bytes = gw->body_bytes - d->charged + held; /* what it holds now, counted */
    d->charged = held;
    /* the budget, checked at every slice: what the others hold may have
     * grown meanwhile; one body alone may take it all, as ever */
    size_t others = gw->body_bytes - d->charged + conn_limit_receiving(gw->conns);
    size_t budget = gw->cfg.max_bodies_in_flight;
    size_t room = others > 0 ? (others < budget ? budget - others : 0) : SIZE_MAX;
    int over_budget = held > room && (!done || rc == BODY_DECODE_OK);
    if (over_budget) {
        rc = BODY_DECODE_TOO_LARGE; /* answered as the budget's 503 */
        done = 1;
    }
    if (!done) {
        server_decode_push(d);
        return;
    }
    if (d->len >= GATEWAY_TRIM_BODY || held >= GATEWAY_TRIM_BODY)
        gw->trim_due = 1; /* large blocks freed here */
    if (rc != BODY_DECODE_OK) {
        server_decode_refuse(d, rc, over_budget, room, why);
        server_decode_free(d);
        return;
    }
    request_input in = d->in;
    body_decoder_take(d->dec, &in.body);
    memset(&d->in, 0, sizeof d->in);
    log_debug("%s: a %zu-byte %s-encoded body decoded to %zu bytes in %d slices", in.endpoint, d->len,
              body_decode_name(d->codings.c[d->codings.n - 1]), in.body.len, d->slices);
    struct evhttp_request *req = d->req;
    const server_route *r = d->route;
    server_decode_free(d); /* its charge ends: the proxy counts the body it holds */
    request_error err;
    if (request_parse(in.body.p, in.body.len, gw->cfg.max_body, &in, &err) != 0) {
        server_refuse(req, in.endpoint, err.status, "invalid_request_error", err.code, err.message);
        json_free(in.doc);
        sbuf_free(&in.body);
        return;
    }
    pool_key *pk = server_authorize(req, gw, r->path); /* again: the pool may have been reloaded meanwhile */
    if (!pk) {
        json_free(in.doc);
        sbuf_free(&in.body);
        return;
    }
    server_serve(req, gw, r, pk, &in);
}

static void server_decode_on_turn(evutil_socket_t fd, short what, void *arg)
{
    server_decode *d = server_decode_head;
    if (!d)
        return;
    server_decode_unlink(d);
    server_decode_slice(d); /* pushed back if not done */
    static const struct timeval now = {0, 0};
    if (server_decode_head && !evtimer_pending(server_decode_ev, NULL))
        evtimer_add(server_decode_ev, &now);
}

/* Starts decoding the body (see above). Replies 500 and returns -1 when it cannot. */
static int server_decode_start(struct evhttp_request *req, gateway *gw, const server_route *r, request_input *in,
                               const body_codings *c, size_t len)
{
    if (!server_decode_ev)
        server_decode_ev = evtimer_new(gw->base, server_decode_on_turn, NULL);
    server_decode *d = server_decode_ev ? calloc(1, sizeof *d) : NULL;
    if (!d) {
        server_refuse(req, in->endpoint, 500, "server_error", "internal_error", "the gateway cannot decode the body");
        return -1;
    }
    d->gw = gw;
    d->req = req;
    d->route = r;
    d->in = *in;
    d->codings = *c;
    d->len = len;
    server_take_body(evhttp_request_get_input_buffer(req), &d->raw, len);
    d->dec = body_decoder_new(c, d->raw.p ? d->raw.p : "", d->raw.len, gw->cfg.max_body);
    d->charged = d->raw.cap;
    gw->body_bytes += d->charged;
    d->evcon = evhttp_request_get_connection(req);
    if (d->evcon)
        evhttp_connection_set_closecb(d->evcon, server_decode_on_close, d);
    server_decode_slice(d); /* the first slice now: an ordinary body is done in it */
    return 0;
}

/* Reads the fields routing needs; replies 400/413/415 and returns -1 if
 * the body is bad; 1 when it is being decoded (the request goes on from
 * server_decode_slice). */
static int server_parse_body(struct evhttp_request *req, gateway *gw, const server_route *r, request_input *in)
{
    struct evbuffer *ib = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(ib);
    request_error err;
    body_codings codings;
    if (server_body_codings(req, in->endpoint, &codings) < 0)
        return -1;
    if (len > gw->cfg.max_body) {
        request_parse(NULL, len, gw->cfg.max_body, in, &err);
        server_refuse(req, in->endpoint, err.status, "invalid_request_error", err.code, err.message);
        return -1;
    }
    /* held by requests in progress, and arriving on other connections */
    size_t others = gw->body_bytes + conn_limit_receiving(gw->conns);
    /* a WebSocket's turn: admitted with this copy when its message
     * arrived, and the share reserved for it is counted here from now on */
    int own = conn_limit_own(gw->conns, req);
    if (own) {
        ws_turn_claim(evhttp_find_header(evhttp_request_get_input_headers(req), "X-Switchyard-Ws-Turn"));
    } else if (others > 0 && others + len > gw->cfg.max_bodies_in_flight) {
        char msg[192];
        snprintf(msg, sizeof msg,
                 "the gateway holds %zu bytes of request bodies in flight; this %zu-byte body would pass its "
                 "budget of %zu bytes: retry shortly",
                 others, len, gw->cfg.max_bodies_in_flight);
        gw->refused_bodies++;
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
        server_refuse(req, in->endpoint, 503, "server_error", "body_budget_exceeded", msg);
        return -1;
    }
    if (codings.n)
        return server_decode_start(req, gw, r, in, &codings, len) < 0 ? -1 : 1;
    else {
        server_take_body(ib, &in->body, len);
    }
    if (request_parse(in->body.p, in->body.len, gw->cfg.max_body, in, &err) == 0)
        return 0;
    server_refuse(req, in->endpoint, err.status, "invalid_request_error", err.code, err.message);
    return -1;
}

/* The key's own rules (expiry, models, budget, rpm); replies and returns -1
 * when the request is outside them. */
/* A request a key's rule refused (a model not allowed, over budget, over
 * its rate, an expired key) is a request: it gets its row in the request
 * log, with the key, the status, the rule's code as its class and the
 * message the client got, so `logs` and the dashboard answer "why does CI
 * get 429s?" (issue 34). No account was tried: none is named. */
static void server_refusal_log(gateway *gw, const char *endpoint, const pool_key *pk, const request_input *in,
                               const key_verdict *v)
{
    request_log rl;
    memset(&rl, 0, sizeof rl);
    rl.ts = gateway_now();
    rl.platform_key_id = pk->k.id;
    sbuf_copy_cstr(rl.endpoint, sizeof rl.endpoint, endpoint);
    sbuf_copy_cstr(rl.model, sizeof rl.model, in->model);
    rl.stream = in->stream;
    rl.status = v->status;
    sbuf_copy_cstr(rl.route_strategy, sizeof rl.route_strategy, gw->cfg.route_strategy);
    sbuf_copy_cstr(rl.error_class, sizeof rl.error_class, v->code ? v->code : "key_rule");
    rl.input_tokens = rl.output_tokens = rl.total_tokens = rl.cached_tokens = -1;
    rl.cost_usd = -1;
    const char *msg = v->message;
    rl.error_message = malloc(STORE_LOG_MESSAGE_MAX + 1);
    if (rl.error_message)
        log_redact_message(rl.error_message, STORE_LOG_MESSAGE_MAX + 1, msg, strlen(msg));
    store_writer_put_log(gw->st, &rl);
}

static int server_key_rules(struct evhttp_request *req, gateway *gw, const char *endpoint, pool_key *pk,
                            const request_input *in, const char *model)
{
    key_verdict v;
    if (key_rules_check(pk, model, gateway_now(), &v) == 0)
        return 0;
    if (v.retry_after > 0) {
        char ra[24];
        snprintf(ra, sizeof ra, "%.0f", v.retry_after < 1 ? 1 : v.retry_after + 0.999);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", ra);
    }
    server_refuse(req, endpoint, v.status, v.type, v.code, v.message);
    server_refusal_log(gw, endpoint, pk, in, &v);
    metrics_key_refusal(pk->k.id, v.code);
    return -1;
}

/* The platform key the request presents, or NULL once it is refused (401). */
static pool_key *server_authorize(struct evhttp_request *req, gateway *gw, const char *endpoint)
{
    const char *presented = server_presented_key(req);
    if (!presented) {
        server_refuse(req, endpoint, 401, "invalid_request_error", "missing_api_key",
                      "missing platform key: send 'Authorization: Bearer <key>' (create one with 'switchyard key add')");
        return NULL;
    }
    pool_key *pk = pool_auth(gw->pool, presented);
    if (!pk)
        server_refuse(req, endpoint, 401, "invalid_request_error", "invalid_api_key", "invalid platform key");
    return pk;
}

/* GET /wham/usage and /api/codex/usage (as Codex asks the ChatGPT backend,
 * with the gateway's base URL in front or not): what the pool as a whole
 * can still do, for any valid platform key (route/pool_usage.h). */
static int server_usage_path(const char *path)
{
    static const char *const paths[] = {"/wham/usage", "/api/codex/usage", "/backend-api/wham/usage",
                                        "/v1/wham/usage", "/v1/api/codex/usage"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++)
        if (strcmp(path, paths[i]) == 0)
            return 1;
    return 0;
}

static void server_usage_reply(struct evhttp_request *req, gateway *gw, enum evhttp_cmd_type method)
{
    if (method != EVHTTP_REQ_GET)
        return server_refuse(req, "other", 405, "invalid_request_error", "method_not_allowed", "use GET for this path");
    if (!server_authorize(req, gw, "other"))
        return;
    double now = gateway_now();
    sbuf b = SBUF_INIT;
    pool_usage_json(pool_usage_get(gw->pool, now), now, &b);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    struct evbuffer *out = evbuffer_new();
    if (out)
        evbuffer_add(out, b.p, b.len);
    server_reply(req, 200, out);
    if (out)
        evbuffer_free(out);
    sbuf_free(&b);
}

/* 1 if the query of uri has a client_version parameter (Codex asking for
 * its own model-info form); a value made of version characters only is
 * remembered for the model poll (gateway.codex_version). */
static int server_query_client_version(gateway *gw, const char *uri)
{
    const char *q = strchr(uri, '?');
    for (const char *p = q; p && *p; p = strchr(p + 1, '&')) {
        if (strncmp(p + 1, "client_version=", 15) != 0)
            continue;
        const char *v = p + 16;
        size_t n = strspn(v, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-+");
        if (n && n < sizeof gw->codex_version && (v[n] == '\0' || v[n] == '&')) {
            memcpy(gw->codex_version, v, n);
            gw->codex_version[n] = '\0';
        }
        return 1;
    }
    return 0;
}

/* The query of a /models request passed through, into out ("" when there
 * is none or it is longer than out or holds a byte outside the URL-safe
 * set: the upstream gets no query rather than one the gateway did not
 * check). */
static void server_models_query(const char *uri, char *out, size_t n)
{
    const char *q = strchr(uri, '?');
    out[0] = '\0';
    if (!q || !q[1] || strlen(q) >= n)
        return;
    if (strspn(q + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~=&%+") != strlen(q + 1))
        return;
    memcpy(out, q, strlen(q) + 1);
}

/* GET /v1/models (and /models): answered by the gateway from the pool's
 * model lists (route/model_catalog.h), in Codex's form when the client
 * asks with ?client_version=. 0 when nothing is known: the request is
 * passed through to an account as any other. */
static int server_models_reply(struct evhttp_request *req, gateway *gw, const platform_key *key)
{
    sbuf b = SBUF_INIT;
    const char *allowed = key->allowed_models;
    size_t known = server_query_client_version(gw, evhttp_request_get_uri(req))
                       ? model_catalog_codex(gw->pool, allowed, &b)
                       : model_catalog_openai(gw->pool, allowed, &b);
    if (known) {
        struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
        evhttp_add_header(oh, "Content-Type", "application/json");
        evhttp_add_header(oh, "x-switchyard-catalog", "pool");
        struct evbuffer *out = evbuffer_new();
        if (out)
            evbuffer_add(out, b.p, b.len);
        server_reply(req, 200, out);
        if (out)
            evbuffer_free(out);
    }
    sbuf_free(&b);
    return known > 0;
}

/* GET /v1/responses asking for a WebSocket: authenticated like any
 * request (a 401 before the upgrade), then the connection is ws.c's. */
static void server_websocket(struct evhttp_request *req, gateway *gw, const char *path)
{
    if (gw->draining)
        return server_refuse(req, path, 503, "server_error", "shutting_down", "the gateway is shutting down");
    if (!server_authorize(req, gw, path))
        return;
    ws_refusal why;
    if (ws_upgrade(gw, req, &why) != 0)
        return server_refuse(req, path, why.status, why.status >= 500 ? "server_error" : "invalid_request_error",
                             why.code, why.message);
}

static void server_handle(struct evhttp_request *req, void *arg)
{
    gateway *gw = arg;
    const char *uri = evhttp_request_get_uri(req);
    char path[256];
    size_t plen = strcspn(uri, "?");
    if (plen >= sizeof path)
        plen = sizeof path - 1;
    memcpy(path, uri, plen);
    path[plen] = '\0';
    enum evhttp_cmd_type method = evhttp_request_get_command(req);

    int admitted = conn_limit_request(gw->conns, req);
    if (admitted == CONN_ANSWERED) { /* refused on the socket already: the bytes written now go nowhere */
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
        return server_send_error(req, 503, "server_error", "refused", "the connection was already refused");
    }
    if (admitted == CONN_OVER_CAP) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
        return server_refuse(req, path, 503, "server_error", "too_many_connections",
                             "the gateway has as many client connections open as it allows; retry shortly");
    }
    if (server_framing_bad(req, path))
        return;
    if (method == EVHTTP_REQ_HEAD) {
        /* libevent 2.1 sends whatever body it is given even to HEAD (without
         * a length), which a kept-alive client would read as its next
         * answer: HEAD gets the status and headers only. */
        int health = strcmp(path, "/health") == 0 || strcmp(path, "/healthz") == 0;
        const server_route *hr = server_route_find(path);
        struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
        evhttp_add_header(oh, "Content-Type", "application/json");
        if (hr)
            evhttp_add_header(oh, "Allow", hr == &server_response_route ? "GET, DELETE" : hr->is_get ? "GET" : "POST");
        evhttp_send_reply(req, health ? 200 : hr ? 405 : 404, NULL, NULL);
        return;
    }
    if (strcmp(path, "/health") == 0 || strcmp(path, "/healthz") == 0)
        return health_reply(req, gw);
    if (server_usage_path(path))
        return server_usage_reply(req, gw, method);
    const server_route *r = server_route_find(path);
    if (method == EVHTTP_REQ_GET && r && r->api == API_RESPONSES && r != &server_response_route &&
        ws_is_upgrade(req))
        return server_websocket(req, gw, r->path);
    if (!r && gw->admin_unknown && strncmp(path, "/admin/api", 10) == 0 && (!path[10] || path[10] == '/'))
        return gw->admin_unknown(req); /* a mistyped admin path: the admin routes, not the /v1 ones */
    if (!r)
        return server_refuse(req, path, 404, "invalid_request_error", "unknown_url",
                             "unknown path; this gateway serves /v1/responses, /v1/chat/completions, /v1/messages and "
                             "/v1/models");
    int stored = r == &server_response_route;
    if (stored ? method != EVHTTP_REQ_GET && method != EVHTTP_REQ_DELETE
               : (r->is_get && method != EVHTTP_REQ_GET) || (!r->is_get && method != EVHTTP_REQ_POST))
        return server_refuse(req, r->path, 405, "invalid_request_error", "method_not_allowed",
                             stored ? "use GET or DELETE for this path"
                             : r->is_get ? "use GET for this path" : "use POST for this path");
    if (gw->draining)
        return server_refuse(req, r->path, 503, "server_error", "shutting_down", "the gateway is shutting down");

    pool_key *pk = server_authorize(req, gw, r->path);
    if (!pk)
        return;
    const platform_key *key = &pk->k;

    request_input in;
    memset(&in, 0, sizeof in);
    in.key_id = key->id;
    in.preferred_account = key->preferred_account_id;
    in.api = r->api;
    in.endpoint = r->path;
    in.suffix = r->suffix;
    in.is_get = r->is_get;
    if (stored) {
        server_response_id(path, in.response_id, sizeof in.response_id, &in.input_items);
        in.is_delete = method == EVHTTP_REQ_DELETE;
        if (in.input_items && in.is_delete)
            return server_refuse(req, r->path, 405, "invalid_request_error", "method_not_allowed",
                                 "DELETE is not allowed on /v1/responses/{id}/input_items: use GET (or DELETE "
                                 "/v1/responses/{id} for the response itself)");
    }
    int parsed = r->is_get ? 0 : server_parse_body(req, gw, r, &in);
    if (parsed != 0) { /* refused, or being decoded */
        if (parsed < 0) {
            json_free(in.doc);
            sbuf_free(&in.body);
        }
        return;
    }
    server_serve(req, gw, r, pk, &in);
}

/* The request, its body read: the key's rules, then its handler. */
static void server_serve(struct evhttp_request *req, gateway *gw, const server_route *r, pool_key *pk,
                         request_input *in_)
{
    request_input in = *in_;
    int stored = r == &server_response_route;
    const platform_key *key = &pk->k;
    if (server_key_rules(req, gw, r->path, pk, &in, r->is_get ? NULL : in.model) < 0) {
        json_free(in.doc);
        sbuf_free(&in.body);
        return;
    }
    if (strcmp(r->path, "/v1/messages/count_tokens") == 0 && !server_pool_counts_tokens(gw)) {
        metrics_request(r->path, server_count_tokens_reply(req, in.body.p, in.body.len));
        json_free(in.doc);
        sbuf_free(&in.body);
        return;
    }
    if (!stored && r->is_get && strcmp(r->suffix, "/models") == 0) {
        if (server_models_reply(req, gw, key))
            return;
        server_models_query(evhttp_request_get_uri(req), in.query, sizeof in.query);
    }
    server_handler(gw, req, &in);
    /* the request goes to its upstream now, before the next client's is
     * read: in a burst of requests each waits for those read before it,
     * not for the whole burst */
    upstream_run_due(gw->up);
}

/* The address is in use: is it this database's own gateway, still
 * running? Its run file (store/store_runfile.h, not yet replaced by this
 * start's) names a live pid listening on this port (on this host, or on
 * all of them, which it records as 127.0.0.1). 1 with rf filled. */
static int server_listen_holder(const gateway *gw, store_runfile *rf)
{
    char err[256], want[64];
    if (store_runfile_read(gw->cfg.db_path, rf, err, sizeof err) != 1 || rf->stopped_at > 0 ||
        rf->pid == (long)getpid() || (kill((pid_t)rf->pid, 0) != 0 && errno != EPERM))
        return 0;
    const char *host = rf->url + (strncmp(rf->url, "https://", 8) == 0 ? 8 : 7), *colon = strrchr(host, ':');
    snprintf(want, sizeof want, ":%d", gw->cfg.listen_port);
    if (!colon || strcmp(colon, want) != 0)
        return 0;
    size_t hl = (size_t)(colon - host);
    const char *lh = gw->cfg.listen_host;
    int wildcard = !*lh || !strcmp(lh, "0.0.0.0") || !strcmp(lh, "::");
    return wildcard || (hl == 9 && !strncmp(host, "127.0.0.1", 9)) || (hl == strlen(lh) && !strncmp(host, lh, hl)) ||
           (host[0] == '[' && hl == strlen(lh) + 2 && !strncmp(host + 1, lh, hl - 2));
}

int server_start(gateway *gw, server_handler_fn handle)
{
    server_handler = handle;
    gw->http = evhttp_new(gw->base);
    if (!gw->http)
        return -1;
    /* libevent answers bodies beyond its own cap with a bare 413; that cap
     * stays above ours (a request's head and body, checked as its bytes
     * arrive, conn_limit.c) so clients get our JSON error: only a declared
     * Content-Length beyond twice ours meets libevent's */
    size_t cap = (gw->cfg.max_body + SERVER_MAX_HEADERS) * 2;
    evhttp_set_max_body_size(gw->http, (ev_ssize_t)cap);
    evhttp_set_max_headers_size(gw->http, SERVER_MAX_HEADERS);
    /* reading a request or writing an answer: a client silent this long is
     * closed (a request waiting on its upstream is not reading or writing) */
    evhttp_set_timeout(gw->http, (int)gw->cfg.client_idle_timeout_s);
    /* every method libevent knows but CONNECT (whose answer it frames as a
     * tunnel) reaches server_handle, which answers in JSON; libevent itself
     * answers an excluded one with an HTML 501 */
    evhttp_set_allowed_methods(gw->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
                                             EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH |
                                             EVHTTP_REQ_TRACE);
    evhttp_set_gencb(gw->http, server_handle, gw);
    server_stop();
    server_flush_ev = event_new(gw->base, -1, 0, server_on_flush, NULL);
    if (!server_flush_ev)
        return -1;
    errno = 0;
    struct evhttp_bound_socket *bound =
        evhttp_bind_socket_with_handle(gw->http, gw->cfg.listen_host, (ev_uint16_t)gw->cfg.listen_port);
    if (!bound) {
        /* libevent leaves bind()'s errno; a name that does not resolve leaves none */
        int e = errno;
        store_runfile rf;
        if (e == EADDRINUSE && server_listen_holder(gw, &rf))
            log_error("cannot listen on %s:%d: it is in use: switchyard (pid %ld) serves %s there (stop it, or "
                      "give --listen another address)",
                      gw->cfg.listen_host, gw->cfg.listen_port, rf.pid, gw->cfg.db_path);
        else
            log_error("cannot listen on %s:%d: %s", gw->cfg.listen_host, gw->cfg.listen_port,
                      e ? strerror(e) : "the address does not resolve");
        return -1;
    }
    /* --listen HOST:0: the kernel chose the port; the run file, the
     * listening line and `codex attach` say the one it chose (tests start
     * every gateway this way: no port is guessed free and then raced for) */
    if (gw->cfg.listen_port == 0) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getsockname(evhttp_bound_socket_get_fd(bound), (struct sockaddr *)&ss, &sl) == 0)
            gw->cfg.listen_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                                 : ((struct sockaddr_in *)&ss)->sin_port);
    }
    /* answers go out as they are ready, often a head and a stream's first
     * event in one write and its next event a moment later: Nagle would
     * hold that second write for the client's delayed ACK (40 ms). Accepted
     * sockets inherit the option from the listener (Linux): no call per
     * connection. */
    int one = 1;
    if (setsockopt(evhttp_bound_socket_get_fd(bound), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        log_warn("listener: TCP_NODELAY: %s", strerror(errno));
    /* keep room for the database and logs; each client may hold an upstream
     * connection too, unless upstream streams share connections (h2c: one
     * per origin; a fiftieth is kept for https and background connections;
     * docs/architecture.md, "Limits") */
    long nofile = conn_limit_raise_nofile();
    long room = nofile - 64;
    long fit = nofile <= 0 ? gw->cfg.max_connections : gw->cfg.upstream_h2c ? room - room / 50 : room / 2;
    long conn_cap = gw->cfg.max_connections < fit ? gw->cfg.max_connections : (fit < 16 ? 16 : fit);
    if (conn_cap < gw->cfg.max_connections)
        log_info("descriptor limit %ld: client connections capped at %ld instead of %ld", nofile, conn_cap,
                 gw->cfg.max_connections);
    upstream_set_max_connections(gw->up, conn_cap);
    gw->conns = conn_limit_new(gw->base, gw->http, bound, (size_t)conn_cap, nofile,
                               (double)gw->cfg.client_request_timeout_s, (int)gw->cfg.client_idle_timeout_s);
    if (!gw->conns)
        return -1;
    conn_limit_set_body_limits(gw->conns, gw->cfg.max_body + SERVER_MAX_HEADERS, gw->cfg.max_bodies_in_flight,
                               &gw->body_bytes);
    /* by default a quarter of the cap, at least 256: a cap as large as the
     * global one would change nothing (and cost a getpeername per connection) */
    long per_ip = gw->cfg.max_connections_per_ip;
    if (per_ip < 0)
        per_ip = conn_cap / 4 > 256 ? conn_cap / 4 : 256;
    conn_limit_set_per_ip(gw->conns, per_ip < conn_cap ? (size_t)per_ip : 0, (int)gw->cfg.per_ip_loopback);
    return 0;
}

void server_stop(void)
{
    ws_stop_all(); /* before evhttp_free, which would free their connections under them */
    while (server_decode_head) /* bodies still being decoded: their requests go with evhttp_free */
        server_decode_free(server_decode_head);
    if (server_decode_ev)
        event_free(server_decode_ev);
    server_decode_ev = NULL;
    for (size_t i = 0; i < server_n_unflushed; i++) /* the loop is over: nothing more is written */
        bufferevent_decref(server_unflushed[i]);
    server_n_unflushed = 0;
    if (server_flush_ev)
        event_free(server_flush_ev);
    server_flush_ev = NULL;
    free(server_unflushed);
    server_unflushed = NULL;
    server_alloc_unflushed = 0;
}
