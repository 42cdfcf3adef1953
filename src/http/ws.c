/* ws.c: the Responses WebSocket endpoint (see ws.h).
 *
 * Taking the connection from evhttp: libevent 2.1's evhttp has no upgrade.
 * The handler answers nothing through evhttp: it writes the 101 itself on
 * the connection's bufferevent and installs its own callbacks there, so
 * evhttp's connection stays as it was after dispatch (a request waiting
 * for its answer, reading off) and never runs again for it. Freeing it
 * would shut the socket down (evhttp_connection_free does shutdown(fd,
 * SHUT_WR)), so it is kept until the socket is done with, then freed like
 * any: that frees the request, lets go of the bufferevent and so releases
 * the connection in conn_limit.c (which counts it meanwhile; its request
 * clock and body accounting leave it at conn_limit_upgrade). evhttp_free
 * (the gateway stopping) frees it too: the close callback set on it tells
 * this module, which lets go of everything else; ws_stop_all, called
 * before, normally leaves nothing for that.
 *
 * A turn: one response.create message becomes a POST /v1/responses made
 * with evhttp's client to the address the client reached (getsockname of
 * its socket), with the client's own key and headers, so the request is
 * served exactly as an HTTP client's. Its SSE answer is parsed
 * (base/sse.h) and each event's data goes back as one text message; an
 * answer that is not a 200 goes back as {"type":"error","status":S,
 * "error":{...}}, the shape Codex reads as an HTTP error of that status.
 * One turn at a time per connection (Codex waits for each).
 *
 * The loopback connection: one evhttp client per WebSocket, kept alive for
 * its life, turn after turn (a connection per turn cost a connect, two
 * accepts, shutdowns and closes: 38 system calls a turn against 7;
 * docs/performance.md). Each turn is a new evhttp request, so nothing of
 * one turn's headers reaches the next. When the server side closes it
 * (an answer with Connection: close, the client idle timeout between
 * turns) evhttp sees the close and connects anew at the next request. The
 * one race left, the idle timeout firing in the loop turn in which the
 * next request goes out, is taken care of by one retry on a fresh
 * connection: a request on a reused connection that got no answer head
 * at all is sent again. That is safe because the server is this process:
 * a request it read is always answered with a head (a refusal, an error,
 * the stream), so no head means it was never served. Each new connection
 * is announced to conn_limit (conn_limit_expect_own), so it does not take
 * a share of its address's connections (the WebSocket's own connection
 * does); it counts against the connection cap like any. A WebSocket that
 * closes mid-turn frees the connection with the request on it: the proxy
 * sees its client go and cancels the upstream transfer.
 *
 * Flow control: events are framed into the socket's output buffer; above
 * WS_HIGH_WATER the turn's answer stops being read (TCP holds the proxy
 * back, which holds its upstream back), and reading resumes below
 * WS_LOW_WATER. A client that does not read at all is cut off by the
 * write timeout (the client idle timeout), or at WS_MAX_OUTPUT bytes.
 *
 * Limits: a message at most the body limit (closed with 1009 past it);
 * idle connections closed (1000) after WS_IDLE_S; every connection
 * after WS_MAX_AGE_S (1001; the 60 minutes of OpenAI's endpoint), after
 * its turn if one is running; a stopping gateway closes idle ones (1001).
 *
 * Memory: the body budget (SWITCHYARD_MAX_BODIES_IN_FLIGHT) counts what a
 * message really costs, and there is as little of it as can be (issue 33:
 * a message was held five times over, counted once). wslay does not buffer
 * data frames (no_buffering): their payloads go into the connection's own
 * buffer, sized from each frame's declared length, instead of wslay's
 * chunks and the copy it flattens them into. The request is written over
 * that buffer (ws_frame_request), the loopback request refers to it
 * (evbuffer_add_reference, no copy), and the turn's input is recorded from
 * it only when the turn completes. So a message is held twice while its
 * turn runs: once here (kept for a retry and the record) and once by the
 * request the loopback connection carries (its arriving bytes, then the
 * proxy's body). Both are charged: from its first frame a message is
 * counted with its declared length (msg_held) and the same again reserved
 * for the loopback copy (msg_reserved), so a message is admitted only if
 * twice its size fits (ws_frame_count; one alone always may, the HTTP
 * rule); past the budget the socket is closed with 1013. The reservation
 * is handed to the server when it takes the loopback request
 * (ws_turn_claim, from http/server.c: the request is neither checked
 * against the budget again nor refused while it arrives, conn_limit_own),
 * and the proxy then counts its body as any. What stays charged here
 * until the turn ends is the message (turn_held). A bare HTTP body is held
 * about twice too (the body and its parse), counted once: the budget
 * bounds both within about twice itself (docs/security.md). */
#include "http/ws.h"
#include "http/conn_limit.h"
#include "http/ws_turn.h"
#include "base/json.h"
#include "base/log.h"
#include "base/sbuf.h"
#include "base/sse.h"
#include "obs/metrics.h"
#include "upstream/conversation.h"
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/keyvalq_struct.h>
#include <openssl/evp.h>
#include <wslay/wslay.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11" /* RFC 6455 section 1.3 */
#define WS_MAX_AGE_S 3600.0   /* OpenAI's endpoint closes its connections after 60 minutes */
/* no turn and no message this long: closed. As long as the age: Codex sees
 * a close between turns only when its next request fails, and with no
 * stream retries (what codex attach writes) it then stays on HTTP */
#define WS_IDLE_S 3600.0
#define WS_CLOSE_GRACE_S 5.0  /* after our close frame: the peer's, at most this long */
#define WS_HIGH_WATER ((size_t)1 << 20)
#define WS_LOW_WATER ((size_t)256 << 10)
#define WS_MAX_OUTPUT ((size_t)64 << 20)
#define WS_ERR_BODY_MAX ((size_t)64 << 10)

/* A turn's body, referred to by the loopback request's buffer (no copy):
 * freed by the last of the two to let go. */
typedef struct ws_lent {
    char *p;
    int refs;
} ws_lent;

typedef struct ws_conn {
    gateway *gw;
    struct evhttp_connection *evcon;   /* the client's (evhttp's, kept until the end) */
    struct evhttp_request *upgrade;    /* its request: the client's headers */
    struct bufferevent *bev;
    wslay_event_context_ptr ctx;
    char local_host[INET6_ADDRSTRLEN];
    int local_port;
    double opened_at, last_active;
    struct event *tick;                /* 1 s: idle, age, drain, close grace */
    struct event *later;               /* work done outside other callbacks */
    int dead;                          /* to be freed by later */
    int closing;                       /* our close frame is queued */
    double close_by;
    int close_after_turn;              /* 1001 once the turn ends */
    int failed;                        /* a protocol error: our close frame written, the rest waits for the end */
    int input_paused;                  /* the client owes reading more than WS_HIGH_WATER: it is not read */
    uint64_t frame_left;               /* bytes of the frame being handed to wslay (head and payload) */
    uint64_t id;                       /* names its turns to the server (ws_turn_claim) */
    sbuf msg;                          /* the message being received (data frames' payloads) */
    int frame_data;                    /* the frame wslay is reading belongs to it (not a control frame) */
    size_t msg_held;                   /* its frames' declared lengths, in gw->body_bytes until it is
                                        * whole (then turn_held) or dropped (ws_held_release) */
    size_t msg_reserved;               /* as much again, in gw->body_bytes: the loopback copy's */
    size_t turn_held;                  /* the turn's message (c->turn.body), in gw->body_bytes */
    size_t turn_reserved;              /* its loopback copy's share, until the server claims it */
    struct ws_lent *turn_lent;         /* c->turn's body once referred to by a loopback request */
    double msg_since;                  /* when its first frame was counted: it must be whole within
                                        * client_request_timeout_s, as an HTTP request must (ws_on_tick) */
    conv_link last;                    /* the connection's last response (heap strings) */
    uint64_t warmups;
    struct evhttp_connection *loop;    /* the loopback client, kept alive (NULL until the first turn) */
    /* the turn in progress */
    int busy;
    ws_request turn;                   /* what it asks for: kept for a retry */
    struct evhttp_request *turn_req;   /* NULL once evhttp is done with it */
    int turn_status;
    int turn_reused;                   /* sent on a connection an earlier request used */
    int turn_retry;                    /* to be sent again on a fresh connection (by later) */
    int turn_retried;
    int turn_paused;                   /* its answer is not read until the client catches up */
    sse_parser sse;
    ws_collect collect;
    sbuf turn_input;                   /* the request's input items (recorded as the conversation) */
    sbuf turn_err;                     /* a non-200 answer's body */
    struct ws_conn *prev, *next;
} ws_conn;

static ws_conn *ws_all;
static size_t ws_n;
static uint64_t ws_next_id;
static double ws_max_age_s = WS_MAX_AGE_S, ws_idle_s = WS_IDLE_S;

size_t ws_open_count(void) { return ws_n; }

static double ws_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* SWITCHYARD_WS_MAX_AGE_S and SWITCHYARD_WS_IDLE_S: shorter limits for tests. */
static void ws_read_env(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    const char *a = getenv("SWITCHYARD_WS_MAX_AGE_S"), *i = getenv("SWITCHYARD_WS_IDLE_S");
    if (a && atof(a) > 0)
        ws_max_age_s = atof(a);
    if (i && atof(i) > 0)
        ws_idle_s = atof(i);
}

/* ---------- the handshake ---------- */

/* 1 when the comma-separated header value holds token (case-insensitive). */
static int ws_has_token(const char *value, const char *token)
{
    size_t tl = strlen(token);
    while (value && *value) {
        value += strspn(value, " \t,");
        size_t n = strcspn(value, ",");
        size_t m = n;
        while (m && (value[m - 1] == ' ' || value[m - 1] == '\t'))
            m--;
        if (m == tl && strncasecmp(value, token, tl) == 0)
            return 1;
        value += n;
    }
    return 0;
}

int ws_is_upgrade(struct evhttp_request *req)
{
    return ws_has_token(evhttp_find_header(evhttp_request_get_input_headers(req), "Upgrade"), "websocket");
}

/* Sec-WebSocket-Accept for key into out (29 bytes with the NUL); -1 if key
 * is not the base64 of 16 bytes. */
static int ws_accept_key(const char *key, char out[29])
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (!key || strlen(key) != 24 || strcmp(key + 22, "==") != 0)
        return -1;
    for (int i = 0; i < 22; i++)
        if (!key[i] || !strchr(b64, key[i]))
            return -1;
    if ((strchr(b64, key[21]) - b64) & 15) /* the last character holds 2 bits of the 16th byte */
        return -1;
    char buf[64];
    int n = snprintf(buf, sizeof buf, "%s%s", key, WS_GUID);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (!EVP_Digest(buf, (size_t)n, md, &mdlen, EVP_sha1(), NULL) || mdlen != 20)
        return -1;
    return EVP_EncodeBlock((unsigned char *)out, md, 20) == 28 ? 0 : -1;
}

/* ---------- framing ---------- */

static void ws_fail(ws_conn *c, uint16_t code, const char *reason);

/* The message being received is dropped: it stops counting against the body budget. */
static void ws_held_release(ws_conn *c)
{
    c->gw->body_bytes -= c->msg_held + c->msg_reserved;
    c->gw->body_reserved -= c->msg_reserved;
    c->msg_held = c->msg_reserved = 0;
    sbuf_free(&c->msg);
}

static void ws_lent_drop(ws_lent *l)
{
    if (--l->refs == 0) {
        free(l->p);
        free(l);
    }
}

static void ws_lent_cleanup(const void *data, size_t len, void *arg)
{
    ws_lent_drop(arg);
}

/* Frees the turn's request; its body goes when the loopback buffer lets go of it too. */
static void ws_turn_free_request(ws_conn *c)
{
    if (c->turn_lent) {
        c->turn.body = (sbuf)SBUF_INIT; /* the lent body's */
        ws_lent_drop(c->turn_lent);
        c->turn_lent = NULL;
    }
    ws_request_free(&c->turn);
}

/* The turn is over (or goes with its connection): its charges end. */
static void ws_turn_release(ws_conn *c)
{
    c->gw->body_bytes -= c->turn_held + c->turn_reserved;
    c->gw->body_reserved -= c->turn_reserved;
    c->turn_held = c->turn_reserved = 0;
}

void ws_turn_claim(const char *id)
{
    char *end;
    unsigned long long n = id ? strtoull(id, &end, 10) : 0;
    if (!n || *end)
        return;
    for (ws_conn *c = ws_all; c; c = c->next)
        if (c->id == n) {
            c->gw->body_bytes -= c->turn_reserved;
            c->gw->body_reserved -= c->turn_reserved;
            c->turn_reserved = 0;
            return;
        }
}

/* A frame's head at the front of in: its size (2 to 14 bytes) and
 * declared payload length, or 0 while it has not all arrived. */
static size_t ws_frame_head(struct evbuffer *in, int *opcode, uint64_t *payload)
{
    uint8_t h[14];
    ev_ssize_t got = evbuffer_copyout(in, h, sizeof h);
    if (got < 2)
        return 0;
    size_t ext = (h[1] & 0x7f) == 126 ? 2 : (h[1] & 0x7f) == 127 ? 8 : 0;
    size_t need = 2 + ext + (h[1] & 0x80 ? 4 : 0);
    if ((size_t)got < need)
        return 0;
    *opcode = h[0] & 0x0f;
    *payload = h[1] & 0x7f;
    if (ext) {
        *payload = 0;
        for (size_t i = 0; i < ext; i++)
            *payload = *payload << 8 | h[2 + i];
    }
    return need;
}

/* A data frame about to be handed to wslay, whose payload goes into the
 * message's buffer (sized for it at once, ws_on_frame_start): counted in
 * the body budget with the rest of its message, twice (the loopback copy's
 * share reserved; see the top), or, when that passes the budget while
 * other bodies are in flight (the HTTP rule: one body alone may take it
 * all), the socket is closed with 1013 and nothing is allocated. A frame
 * past the body limit wslay refuses itself (1009); a message whose frames
 * pass it together is closed here the same way (wslay, not buffering,
 * checks each frame only). Returns -1 when refused. */
static int ws_frame_count(ws_conn *c, int opcode, uint64_t payload)
{
    gateway *gw = c->gw;
    if (opcode > WSLAY_BINARY_FRAME || !payload || payload > gw->cfg.max_body)
        return 0;
    if (payload > gw->cfg.max_body - c->msg_held) {
        ws_fail(c, 1009, "the message is larger than a request body may be");
        return -1;
    }
    size_t mine = c->msg_held + c->msg_reserved;
    size_t others = gw->body_bytes - mine + conn_limit_receiving(gw->conns);
    size_t want = 2 * (c->msg_held + (size_t)payload);
    size_t budget = gw->cfg.max_bodies_in_flight;
    if (others > 0 && (others >= budget || want > budget - others)) {
        gw->refused_bodies++;
        log_info("websocket: a %zu-byte message (twice that held while its turn runs) would pass the body budget "
                 "(%zu bytes in flight of %zu)", want / 2, others, gw->cfg.max_bodies_in_flight);
        ws_fail(c, 1013, "the gateway holds too many request bodies: try again later");
        return -1;
    }
    if (!c->msg_held)
        c->msg_since = ws_now();
    c->msg_held += (size_t)payload;
    c->msg_reserved += (size_t)payload;
    gw->body_bytes += 2 * (size_t)payload;
    gw->body_reserved += (size_t)payload;
    return 0;
}

/* A frame's head, read by wslay: a data frame's payload goes into the
 * message's buffer, grown to the exact size (its length was counted in
 * ws_frame_count; a doubling would hold up to twice that). */
static void ws_on_frame_start(wslay_event_context_ptr ctx, const struct wslay_event_on_frame_recv_start_arg *arg,
                              void *ud)
{
    ws_conn *c = ud;
    c->frame_data = arg->opcode <= WSLAY_BINARY_FRAME;
    if (!c->frame_data || !arg->payload_length || c->failed)
        return;
    size_t cap = c->msg.len + (size_t)arg->payload_length + 1;
    if (cap > c->msg.cap) {
        char *p = realloc(c->msg.p, cap);
        if (!p)
            abort(); /* same policy as sbuf */
        c->msg.p = p;
        c->msg.cap = cap;
    }
}

static void ws_on_frame_chunk(wslay_event_context_ptr ctx, const struct wslay_event_on_frame_recv_chunk_arg *arg,
                              void *ud)
{
    ws_conn *c = ud;
    if (c->frame_data && !c->failed && arg->data_length)
        sbuf_append(&c->msg, arg->data, arg->data_length);
}

/* wslay's read: one frame at a time, its head only once it has all
 * arrived and its frame is counted (ws_frame_count). One at a time, so
 * that a message wslay completes is released (ws_on_msg) before the next
 * frame's head is counted. The frames are followed by their declared
 * lengths as wslay follows them; a head wslay refuses stops its reading,
 * so nothing after it needs following. */
static ssize_t ws_recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *arg)
{
    ws_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(c->bev);
    size_t given = 0;
    while (given < len && !c->failed) {
        if (!c->frame_left) {
            if (given) /* the next frame: at the next call */
                break;
            int opcode;
            uint64_t payload;
            size_t head = ws_frame_head(in, &opcode, &payload);
            if (!head || ws_frame_count(c, opcode, payload) != 0)
                break;
            c->frame_left = payload > UINT64_MAX - head ? UINT64_MAX : head + payload;
        }
        size_t want = len - given < c->frame_left ? len - given : (size_t)c->frame_left;
        int n = evbuffer_remove(in, buf + given, want);
        if (n <= 0)
            break;
        given += (size_t)n;
        c->frame_left -= (uint64_t)n;
    }
    if (!given) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    return (ssize_t)given;
}

static ssize_t ws_send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *arg)
{
    ws_conn *c = arg;
    if (evbuffer_add(bufferevent_get_output(c->bev), data, len) != 0) {
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    return (ssize_t)len;
}

static void ws_kill(ws_conn *c, const char *why)
{
    if (c->dead)
        return;
    if (why)
        log_info("websocket: closing a connection: %s", why);
    c->dead = 1;
    event_active(c->later, EV_TIMEOUT, 1);
}

/* The close handshake is over (or cannot finish): the connection goes.
 * After our close frame the client's is awaited (what else it sends is
 * dropped): closing a socket with unread bytes would reset it, and the
 * client could lose the close frame (its code says why) with them. */
static void ws_check_end(ws_conn *c)
{
    if (c->dead || c->failed) /* ends at the client's EOF (ws_on_event) or the grace (ws_on_tick) */
        return;
    size_t pending = evbuffer_get_length(bufferevent_get_output(c->bev));
    int sent = wslay_event_get_close_sent(c->ctx);
    if (sent && !c->closing) { /* wslay's own (1009, 1002, the answer to the client's close) */
        c->closing = 1;
        c->close_by = ws_now() + WS_CLOSE_GRACE_S;
    }
    if (sent && !pending && wslay_event_get_close_received(c->ctx))
        ws_kill(c, NULL);
    else if (!sent && !pending && !wslay_event_want_read(c->ctx) && !wslay_event_want_write(c->ctx))
        ws_kill(c, NULL);
}

/* Frames what wslay has queued into the socket's buffer. Past
 * WS_HIGH_WATER owed to the client, the client is not read any more (until
 * ws_on_write sees the buffer below WS_LOW_WATER): each message it sends
 * may be answered (an error event, a pong), so a client that sends and
 * never reads would otherwise fill the gateway's memory with its answers. */
static void ws_flush(ws_conn *c)
{
    if (c->dead)
        return;
    if (wslay_event_want_write(c->ctx) && wslay_event_send(c->ctx) != 0) {
        ws_kill(c, "framing failed");
        return;
    }
    size_t owed = evbuffer_get_length(bufferevent_get_output(c->bev));
    if (owed > WS_MAX_OUTPUT) {
        ws_kill(c, "the client does not read what it is sent");
        return;
    }
    if (owed > WS_HIGH_WATER && !c->input_paused) {
        c->input_paused = 1;
        bufferevent_disable(c->bev, EV_READ);
    }
    ws_check_end(c);
}

/* RFC 6455 7.1.7, failing the connection after a protocol error: a close
 * frame with code written straight to the socket (wslay queues its own
 * with no code at all when its frame parser fails, or echoes a close it
 * should have refused; neither is sent), what the client sends next is
 * dropped, and the socket closes when the client closes it or after the
 * grace. Server frames are unmasked: 0x88, the length, the code, the reason. */
static void ws_fail(ws_conn *c, uint16_t code, const char *reason)
{
    if (c->dead || c->failed)
        return;
    size_t n = strlen(reason);
    if (n > 123)
        n = 123;
    if (!wslay_event_get_close_sent(c->ctx)) {
        uint8_t head[4] = {0x88, (uint8_t)(2 + n), (uint8_t)(code >> 8), (uint8_t)(code & 0xff)};
        struct evbuffer *out = bufferevent_get_output(c->bev);
        evbuffer_add(out, head, sizeof head);
        evbuffer_add(out, reason, n);
    }
    log_info("websocket: failing a connection (%u): %s", code, reason);
    ws_held_release(c);
    wslay_event_shutdown_read(c->ctx);
    wslay_event_shutdown_write(c->ctx);
    c->failed = 1;
    c->closing = 1;
    c->close_by = ws_now() + WS_CLOSE_GRACE_S;
    if (c->input_paused) { /* the rest is read to be dropped */
        c->input_paused = 0;
        bufferevent_enable(c->bev, EV_READ);
    }
}

static void ws_send_text(ws_conn *c, const char *p, size_t n)
{
    struct wslay_event_msg m = {WSLAY_TEXT_FRAME, (const uint8_t *)p, n};
    if (!c->dead && !c->closing)
        wslay_event_queue_msg(c->ctx, &m);
}

static void ws_close(ws_conn *c, uint16_t code, const char *reason)
{
    if (c->dead || c->closing)
        return;
    c->closing = 1;
    c->close_by = ws_now() + WS_CLOSE_GRACE_S;
    wslay_event_queue_close(c->ctx, code, (const uint8_t *)reason, strlen(reason));
    ws_flush(c);
}

/* {"type":"error","status":S,"error":{"type":..,"code":..,"message":..}} */
static void ws_send_error(ws_conn *c, int status, const char *type, const char *code, const char *message)
{
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"type\":\"error\",\"status\":");
    sbuf_put_int(&b, status);
    sbuf_puts(&b, ",\"error\":{");
    json_error_members(&b, message, type, code);
    sbuf_puts(&b, "}}");
    ws_send_text(c, b.p, b.len);
    sbuf_free(&b);
}

/* ---------- the conversation ---------- */

static void ws_last_clear(ws_conn *c)
{
    free(c->last.response_id);
    free(c->last.input_json);
    free(c->last.output_json);
    memset(&c->last, 0, sizeof c->last);
}

static char *ws_strndup(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (!d)
        abort(); /* same policy as sbuf */
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* The turn that just completed is the connection's last response. */
static void ws_last_set(ws_conn *c, const char *id, const sbuf *input, const char *output, size_t output_len)
{
    ws_last_clear(c);
    /* a continuation rebuilt from more than a body may be would be refused
     * (413): it is not kept, and the next turn's previous_response_id passes
     * as it is */
    if (!input->len || input->len + output_len > c->gw->cfg.max_body)
        return;
    c->last.response_id = ws_strndup(id, strlen(id));
    c->last.input_json = ws_strndup(input->p, input->len);
    c->last.input_len = input->len;
    c->last.output_json = ws_strndup(output, output_len);
    c->last.output_len = output_len;
}

/* generate: false: Codex prepares the conversation. Answered here, with
 * an id the next turn names; nothing is generated, nothing is billed. */
static void ws_warmup(ws_conn *c, const ws_request *r)
{
    sbuf input = SBUF_INIT;
    char prev[CONVERSATION_ID_MAX];
    int store_flag;
    if (conversation_record_input(r->body.p, r->body.len, &input, prev, &store_flag) != 0) {
        sbuf_free(&input);
        ws_send_error(c, 400, "invalid_request_error", "invalid_value", "the request's input is not valid");
        return;
    }
    unsigned char rnd[12] = {0};
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        memcpy(rnd, &c, sizeof c < sizeof rnd ? sizeof c : sizeof rnd);
    char id[64];
    int n = snprintf(id, sizeof id, "resp_sywarm_%llu_", (unsigned long long)++c->warmups);
    for (size_t i = 0; i < sizeof rnd && n + 2 < (int)sizeof id; i++)
        n += snprintf(id + n, sizeof id - (size_t)n, "%02x", rnd[i]);
    long long created = (long long)time(NULL);
    for (int done = 0; done < 2; done++) {
        sbuf b = SBUF_INIT;
        sbuf_puts(&b, done ? "{\"type\":\"response.completed\",\"sequence_number\":1,\"response\":{\"id\":"
                           : "{\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":");
        sbuf_json_str(&b, id, strlen(id));
        sbuf_puts(&b, ",\"object\":\"response\",\"created_at\":");
        sbuf_put_int(&b, created);
        sbuf_puts(&b, done ? ",\"status\":\"completed\",\"model\":" : ",\"status\":\"in_progress\",\"model\":");
        sbuf_json_str(&b, r->model, strlen(r->model));
        sbuf_puts(&b, ",\"output\":[]");
        if (done)
            sbuf_puts(&b, ",\"usage\":{\"input_tokens\":0,\"input_tokens_details\":{\"cached_tokens\":0},"
                          "\"output_tokens\":0,\"output_tokens_details\":{\"reasoning_tokens\":0},"
                          "\"total_tokens\":0}");
        sbuf_puts(&b, "}}");
        ws_send_text(c, b.p, b.len);
        sbuf_free(&b);
    }
    ws_last_set(c, id, &input, "[]", 2);
    sbuf_free(&input);
}

/* ---------- a turn, served by the gateway itself ---------- */

static void ws_turn_end(ws_conn *c);

static void ws_on_sse(void *ud, const char *event, const char *data, size_t len)
{
    ws_conn *c = ud;
    if (!len || (len == 6 && memcmp(data, "[DONE]", 6) == 0) || c->dead)
        return;
    ws_collect_event(&c->collect, data, len);
    ws_send_text(c, data, len);
}

static int ws_on_turn_head(struct evhttp_request *req, void *arg)
{
    ws_conn *c = arg;
    c->turn_status = evhttp_request_get_response_code(req);
    return 0;
}

static void ws_on_turn_chunk(struct evhttp_request *req, void *arg)
{
    ws_conn *c = arg;
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    if (c->dead)
        return;
    struct evbuffer_iovec v[16];
    int nv = evbuffer_peek(in, -1, NULL, v, 16);
    if (nv > 16) { /* rare: make it one piece */
        evbuffer_pullup(in, -1);
        nv = evbuffer_peek(in, -1, NULL, v, 1);
    }
    for (int i = 0; i < nv; i++) {
        if (c->turn_status == 200) {
            sse_feed(&c->sse, v[i].iov_base, v[i].iov_len);
        } else if (c->turn_err.len < WS_ERR_BODY_MAX) {
            size_t room = WS_ERR_BODY_MAX - c->turn_err.len;
            sbuf_append(&c->turn_err, v[i].iov_base, v[i].iov_len < room ? v[i].iov_len : room);
        }
    }
    ws_flush(c);
    if (!c->dead && evbuffer_get_length(bufferevent_get_output(c->bev)) > WS_HIGH_WATER && c->loop) {
        bufferevent_disable(evhttp_connection_get_bufferevent(c->loop), EV_READ);
        c->turn_paused = 1;
    }
}

/* A non-200 answer as the error event Codex maps to that HTTP status. */
static void ws_send_http_error(ws_conn *c, int status)
{
    size_t s, e;
    if (c->turn_err.len && json_member_span(c->turn_err.p, c->turn_err.len, "error", &s, &e) == 0 &&
        c->turn_err.p[s] == '{') {
        sbuf b = SBUF_INIT;
        sbuf_puts(&b, "{\"type\":\"error\",\"status\":");
        sbuf_put_int(&b, status);
        sbuf_puts(&b, ",\"error\":");
        sbuf_append(&b, c->turn_err.p + s, e - s);
        sbuf_puts(&b, "}");
        ws_send_text(c, b.p, b.len);
        sbuf_free(&b);
        return;
    }
    char msg[96];
    snprintf(msg, sizeof msg, "the gateway answered the turn with HTTP %d", status);
    ws_send_error(c, status, status >= 500 ? "server_error" : "invalid_request_error", NULL, msg);
}

static void ws_on_turn_done(struct evhttp_request *req, void *arg)
{
    ws_conn *c = arg;
    if (!c->turn_req)
        return;
    c->turn_req = NULL; /* evhttp frees it after this */
    int status = req ? evhttp_request_get_response_code(req) : 0;
    if (!status)
        status = c->turn_status;
    if (status <= 0 && c->turn_reused && !c->turn_retried && !c->dead) {
        /* no head: the server closed the kept connection before it read
         * the request (see the top): once more, on a fresh one, from later
         * (evhttp is on the stack) */
        log_debug("websocket: the kept loopback connection was closed under the turn: sending it again");
        c->turn_retry = 1;
        event_active(c->later, EV_TIMEOUT, 1);
        return;
    }
    if (!c->dead) {
        if (status == 200 && !c->collect.terminal) {
            ws_send_error(c, 502, "server_error", "stream_cut",
                          "the answer ended before response.completed; retry the turn");
        } else if (status != 200 && status > 0) {
            ws_send_http_error(c, status);
        } else if (status <= 0) {
            ws_send_error(c, 502, "server_error", "gateway_unreachable",
                          "the gateway could not serve the turn; retry it");
        }
        if (c->collect.completed) {
            /* the input recorded only now, from the request kept for a retry:
             * not a second copy of a large message for the whole turn */
            char prev[CONVERSATION_ID_MAX];
            int store_flag;
            if (conversation_record_input(c->turn.body.p, c->turn.body.len, &c->turn_input, prev, &store_flag) != 0)
                sbuf_reset(&c->turn_input);
            ws_last_set(c, c->collect.response_id, &c->turn_input, c->collect.output.p, c->collect.output.len);
            sbuf_free(&c->turn_input);
        }
    }
    ws_turn_end(c);
}

/* Headers of the upgrade request that do not travel to the turn's request:
 * hop-by-hop, the handshake's, and what the turn's request sets itself. */
static int ws_header_stays(const char *name)
{
    static const char *const skip[] = {"Host", "Connection", "Upgrade", "Content-Length", "Content-Type",
                                       "Content-Encoding", "Transfer-Encoding", "Accept", "Accept-Encoding",
                                       "Keep-Alive", "TE", "Trailer", "Expect", "X-Switchyard-Ws-Turn"};
    for (size_t i = 0; i < sizeof skip / sizeof *skip; i++)
        if (strcasecmp(name, skip[i]) == 0)
            return 1;
    return strncasecmp(name, "Sec-WebSocket-", 14) == 0 || strncasecmp(name, "Proxy-", 6) == 0;
}

/* OpenAI-Beta without the responses_websockets feature (the turn is HTTP). */
static void ws_add_beta(struct evkeyvalq *out, const char *value)
{
    sbuf b = SBUF_INIT;
    const char *p = value;
    while (*p) {
        p += strspn(p, " \t,");
        size_t n = strcspn(p, ",");
        size_t m = n;
        while (m && (p[m - 1] == ' ' || p[m - 1] == '\t'))
            m--;
        if (m && strncasecmp(p, "responses_websockets", 20) != 0) {
            if (b.len)
                sbuf_puts(&b, ", ");
            sbuf_append(&b, p, m);
        }
        p += n;
    }
    if (b.len)
        evhttp_add_header(out, "OpenAI-Beta", b.p);
    sbuf_free(&b);
}

/* Sends the turn (c->turn) on the kept loopback connection, made first if
 * there is none; evhttp connects it again when the server side closed it. */
static void ws_turn_send(ws_conn *c)
{
    if (!c->loop) {
        c->loop = evhttp_connection_base_new(c->gw->base, NULL, c->local_host, (ev_uint16_t)c->local_port);
        /* the proxy bounds every wait of a turn; this only keeps the connection from outliving its socket */
        if (c->loop)
            evhttp_connection_set_timeout(c->loop, (int)ws_max_age_s + 60);
    }
    struct evhttp_request *req = c->loop ? evhttp_request_new(ws_on_turn_done, c) : NULL;
    if (!req) {
        ws_send_error(c, 500, "server_error", NULL, "the gateway could not start the turn");
        ws_turn_end(c);
        return;
    }
    const ws_request *r = &c->turn;
    evhttp_request_set_header_cb(req, ws_on_turn_head);
    evhttp_request_set_chunked_cb(req, ws_on_turn_chunk);
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    evhttp_add_header(out, "Host", "localhost");
    evhttp_add_header(out, "Content-Type", "application/json");
    evhttp_add_header(out, "Accept", "text/event-stream");
    struct evkeyvalq *in = evhttp_request_get_input_headers(c->upgrade);
    for (struct evkeyval *kv = in->tqh_first; kv; kv = kv->next.tqe_next) {
        if (ws_header_stays(kv->key))
            continue;
        if (ws_request_header(r, kv->key) || strcasecmp(kv->key, "x-codex-turn-state") == 0)
            continue; /* the message's own (client_metadata) wins; a turn state is the message's */
        if (strcasecmp(kv->key, "OpenAI-Beta") == 0)
            ws_add_beta(out, kv->value);
        else
            evhttp_add_header(out, kv->key, kv->value);
    }
    for (size_t i = 0; i < r->n_headers; i++)
        evhttp_add_header(out, r->headers[i].name, r->headers[i].value);
    char id[24];
    snprintf(id, sizeof id, "%llu", (unsigned long long)c->id);
    evhttp_add_header(out, "X-Switchyard-Ws-Turn", id); /* the server claims the reservation by it */
    /* a reference, not a copy; the bytes are freed by whichever lets go
     * last, the turn or the connection's buffer (an answer can come before
     * the request is all written: a refusal) */
    if (!c->turn_lent) {
        c->turn_lent = malloc(sizeof *c->turn_lent);
        if (!c->turn_lent)
            abort(); /* same policy as sbuf */
        c->turn_lent->p = r->body.p;
        c->turn_lent->refs = 1;
    }
    c->turn_lent->refs++;
    if (evbuffer_add_reference(evhttp_request_get_output_buffer(req), r->body.p, r->body.len, ws_lent_cleanup,
                               c->turn_lent) != 0)
        c->turn_lent->refs--;
    struct bufferevent *lb = evhttp_connection_get_bufferevent(c->loop);
    c->turn_reused = bufferevent_getfd(lb) >= 0; /* -1: not connected (new, or reset after a close) */
    c->turn_req = req;
    c->turn_status = 0;
    /* on failure evhttp has freed the request, having told ws_on_turn_done or not */
    if (evhttp_make_request(c->loop, req, EVHTTP_REQ_POST, "/v1/responses") != 0 && c->turn_req) {
        c->turn_req = NULL;
        ws_send_error(c, 500, "server_error", NULL, "the gateway could not start the turn");
        ws_turn_end(c);
        return;
    }
    int fd = bufferevent_getfd(lb);
    if (!c->turn_reused && fd >= 0 && c->turn_req) /* connecting now: the listener accepts it later */
        conn_limit_expect_own(c->gw->conns, fd);
}

/* The turn is over; a connection past its age closes. */
static void ws_turn_end(ws_conn *c)
{
    c->busy = 0;
    c->turn_retry = 0;
    ws_turn_free_request(c);
    ws_turn_release(c);
    c->last_active = ws_now();
    if (c->close_after_turn)
        ws_close(c, 1001, "connection lifetime reached");
    ws_flush(c);
}

static void ws_turn_reset(ws_conn *c)
{
    sse_free(&c->sse);
    sse_init(&c->sse, ws_on_sse, c);
    ws_collect_free(&c->collect);
    ws_collect_init(&c->collect, c->gw->cfg.max_body);
    sbuf_reset(&c->turn_input);
    sbuf_keep(&c->turn_err, 4096);
    c->turn_paused = 0;
    c->turn_retried = 0;
}

/* The turn's request is larger than its message (a continuation rebuilt
 * with the last response): the difference is charged, twice, unless that
 * passes the budget beside other bodies. Returns -1 when refused (an error
 * event, as the loopback request would have been answered). */
static int ws_turn_charge(ws_conn *c, size_t len)
{
    gateway *gw = c->gw;
    size_t mine = c->msg_held + c->msg_reserved;
    if (len <= c->msg_held)
        return 0;
    size_t others = gw->body_bytes - mine + conn_limit_receiving(gw->conns);
    size_t budget = gw->cfg.max_bodies_in_flight;
    if (others > 0 && (others >= budget || 2 * len > budget - others)) {
        gw->refused_bodies++;
        char msg[224];
        snprintf(msg, sizeof msg,
                 "the gateway holds %zu bytes of request bodies in flight; this %zu-byte continuation would pass its "
                 "budget of %zu bytes: retry shortly",
                 others, len, budget);
        ws_send_error(c, 503, "server_error", "body_budget_exceeded", msg);
        return -1;
    }
    size_t more = len - c->msg_held;
    gw->body_bytes += 2 * more;
    gw->body_reserved += more;
    c->msg_held += more;
    c->msg_reserved += more;
    return 0;
}

/* One text message from the client (taken: its buffer becomes the turn's request). */
static void ws_on_message(ws_conn *c, sbuf *msg)
{
    c->last_active = ws_now();
    ws_request r;
    size_t len = msg->len;
    ws_frame_kind kind = ws_frame_request(msg, c->last.response_id ? &c->last : NULL, &r);
    static const char *const kinds[] = {"a turn", "a warm-up", "an acknowledgement", "a bad message"};
    log_debug("websocket: %s (%zu bytes)%s", kinds[kind], len,
              r.chained ? ", continuing the last response: sent whole" : "");
    if (kind == WS_FRAME_IGNORE) {
        ws_request_free(&r);
        return;
    }
    if (kind == WS_FRAME_BAD) {
        ws_send_error(c, r.error_status, "invalid_request_error", r.error_code, r.error_message);
        ws_request_free(&r);
        return;
    }
    if (c->busy) {
        ws_send_error(c, 400, "invalid_request_error", "response_in_progress",
                      "a response is in progress on this connection: send the next one after its last event");
        ws_request_free(&r);
        return;
    }
    if (c->close_after_turn || c->closing) {
        ws_send_error(c, 400, "invalid_request_error", "websocket_connection_limit_reached",
                      "Responses websocket connection limit reached (60 minutes). Create a new websocket "
                      "connection to continue.");
        ws_request_free(&r);
        return;
    }
    metrics_websocket_turn(kind == WS_FRAME_WARMUP);
    if (kind == WS_FRAME_WARMUP) {
        ws_warmup(c, &r);
        ws_request_free(&r);
        return;
    }
    if (ws_turn_charge(c, r.chained ? r.body.cap : r.body.len) != 0) { /* rebuilt: its own buffer */
        ws_request_free(&r);
        return;
    }
    ws_turn_reset(c);
    c->busy = 1;
    c->turn = r; /* the turn's now: freed when it ends */
    c->turn_held = c->msg_held; /* the message's charges are the turn's */
    c->turn_reserved = c->msg_reserved;
    c->msg_held = c->msg_reserved = 0;
    ws_turn_send(c);
}

static void ws_on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *ud)
{
    ws_conn *c = ud;
    if (c->dead)
        return;
    if (arg->opcode == WSLAY_TEXT_FRAME) {
        sbuf m = c->msg; /* not buffered by wslay: the payloads are in c->msg */
        c->msg = (sbuf)SBUF_INIT;
        ws_on_message(c, &m); /* a turn takes over the message's charges */
        sbuf_free(&m);
        ws_held_release(c); /* what is not a turn's any more */
    } else if (arg->opcode == WSLAY_BINARY_FRAME) {
        ws_held_release(c);
        ws_close(c, 1003, "binary messages are not served");
    } else if (arg->opcode == WSLAY_CONNECTION_CLOSE && arg->msg_length == 1) /* a code is two bytes */
        ws_fail(c, 1002, "a close frame of one byte");
    else if (arg->opcode == WSLAY_CONNECTION_CLOSE)
        log_debug("websocket: the client closed (%u)", arg->status_code);
}

/* ---------- the socket ---------- */

static void ws_on_read(struct bufferevent *bev, void *arg)
{
    ws_conn *c = arg;
    if (c->dead)
        return;
    if (!wslay_event_get_read_enabled(c->ctx)) { /* closing: the rest is dropped */
        ws_held_release(c);
        struct evbuffer *in = bufferevent_get_input(bev);
        evbuffer_drain(in, evbuffer_get_length(in));
        ws_check_end(c);
        return;
    }
    if (wslay_event_recv(c->ctx) != 0) { /* the frame parser refused a frame head (a control frame over
                                           * 125 bytes or fragmented, a length not in its shortest form
                                           * or of 2^63 and more): our recv callback never fails */
        ws_fail(c, 1002, "protocol error: a malformed frame");
        return;
    }
    if (!wslay_event_get_read_enabled(c->ctx)) /* wslay closed (1009, 1002, 1007, the client's close) */
        ws_held_release(c);
    ws_flush(c);
}

static void ws_on_write(struct bufferevent *bev, void *arg)
{
    ws_conn *c = arg;
    if (c->dead)
        return;
    size_t owed = evbuffer_get_length(bufferevent_get_output(c->bev));
    if (c->turn_paused && c->loop && owed <= WS_LOW_WATER) {
        c->turn_paused = 0;
        bufferevent_enable(evhttp_connection_get_bufferevent(c->loop), EV_READ);
    }
    if (c->input_paused && owed <= WS_LOW_WATER) {
        c->input_paused = 0;
        bufferevent_enable(c->bev, EV_READ);
        if (evbuffer_get_length(bufferevent_get_input(c->bev))) /* what was read before the pause */
            ws_on_read(c->bev, c);
        if (c->dead)
            return;
    }
    ws_check_end(c);
}

static void ws_on_event(struct bufferevent *bev, short what, void *arg)
{
    ws_conn *c = arg;
    ws_kill(c, what & BEV_EVENT_TIMEOUT ? "the client stopped reading what it is sent" : NULL);
}

static void ws_free(ws_conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        ws_all = c->next;
    if (c->next)
        c->next->prev = c->prev;
    ws_n--;
    ws_held_release(c);
    if (c->loop) /* a turn still running goes with it: the proxy sees its client go and cancels */
        evhttp_connection_free(c->loop);
    ws_turn_free_request(c);
    ws_turn_release(c);
    event_free(c->tick);
    event_free(c->later);
    wslay_event_context_free(c->ctx);
    sse_free(&c->sse);
    ws_collect_free(&c->collect);
    sbuf_free(&c->turn_input);
    sbuf_free(&c->turn_err);
    ws_last_clear(c);
    if (c->evcon) {
        bufferevent_disable(c->bev, EV_READ);
        evhttp_connection_set_closecb(c->evcon, NULL, NULL);
        evhttp_connection_free(c->evcon); /* frees the request, releases the socket */
    }
    free(c);
}

static void ws_on_later(evutil_socket_t fd, short what, void *arg)
{
    ws_conn *c = arg;
    if (c->dead) {
        ws_free(c);
        return;
    }
    if (c->turn_retry && c->busy) {
        c->turn_retry = 0;
        c->turn_retried = 1; /* nothing of the answer came: nothing to reset */
        ws_turn_send(c);
    }
    if (evbuffer_get_length(bufferevent_get_input(c->bev))) /* bytes that came with the handshake */
        ws_on_read(c->bev, c);
}

static void ws_on_tick(evutil_socket_t fd, short what, void *arg)
{
    ws_conn *c = arg;
    double now = ws_now();
    if (c->dead)
        return;
    if (c->closing) {
        if (now > c->close_by)
            ws_kill(c, NULL);
        return;
    }
    if (c->msg_held && now - c->msg_since >= (double)c->gw->cfg.client_request_timeout_s) {
        /* a message trickled in, or left half sent, would hold its share of
         * the body budget for the socket's life: the HTTP request clock */
        ws_fail(c, 1008, "a message must arrive whole within the request time limit");
        return;
    }
    if (now - c->opened_at >= ws_max_age_s) {
        if (c->busy)
            c->close_after_turn = 1;
        else
            ws_close(c, 1001, "connection lifetime reached");
    } else if (!c->busy && c->gw->draining) {
        ws_close(c, 1001, "the gateway is shutting down");
    } else if (!c->busy && now - c->last_active >= ws_idle_s) {
        ws_close(c, 1000, "idle");
    }
}

/* evhttp is freeing the client's connection (evhttp_free): all else goes. */
static void ws_on_gone(struct evhttp_connection *evcon, void *arg)
{
    ws_conn *c = arg;
    c->evcon = NULL;
    ws_free(c);
}

/* Where the turn's requests go: the address the client reached, or
 * loopback when the gateway listens on every address (a client that came
 * over the network would otherwise make the gateway's own address a
 * client, counted against one address's share of connections). */
static int ws_local_address(ws_conn *c, int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return -1;
    const char *lh = c->gw->cfg.listen_host;
    int any4 = !strcmp(lh, "0.0.0.0") || !*lh, any6 = !strcmp(lh, "::") || !strcmp(lh, "[::]");
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        if (any4 || any6)
            sbuf_copy_cstr(c->local_host, sizeof c->local_host, "127.0.0.1");
        else
            inet_ntop(AF_INET, &a->sin_addr, c->local_host, sizeof c->local_host);
        c->local_port = ntohs(a->sin_port);
        return 0;
    }
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && (any4 || any6))
            sbuf_copy_cstr(c->local_host, sizeof c->local_host, "127.0.0.1");
        else if (any6)
            sbuf_copy_cstr(c->local_host, sizeof c->local_host, "::1");
        else
            inet_ntop(AF_INET6, &a->sin6_addr, c->local_host, sizeof c->local_host);
        c->local_port = ntohs(a->sin6_port);
        return 0;
    }
    return -1;
}

static int ws_refuse(ws_refusal *why, int status, const char *code, const char *message)
{
    why->status = status;
    why->code = code;
    why->message = message;
    return -1;
}

int ws_upgrade(gateway *gw, struct evhttp_request *req, ws_refusal *why)
{
    ws_read_env();
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    if (!ws_has_token(evhttp_find_header(h, "Connection"), "upgrade"))
        return ws_refuse(why, 400, "invalid_upgrade", "a WebSocket handshake needs 'Connection: Upgrade'");
    const char *version = evhttp_find_header(h, "Sec-WebSocket-Version");
    if (!version || strcmp(version, "13") != 0) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Sec-WebSocket-Version", "13");
        return ws_refuse(why, 426, "unsupported_websocket_version", "this gateway speaks WebSocket version 13");
    }
    /* a body on the handshake is nothing RFC 6455 defines: bytes a proxy
     * between could take for frames, or for the next request */
    const char *cl = evhttp_find_header(h, "Content-Length");
    if (evbuffer_get_length(evhttp_request_get_input_buffer(req)) || evhttp_find_header(h, "Transfer-Encoding") ||
        (cl && strspn(cl, "0") != strlen(cl))) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
        return ws_refuse(why, 400, "invalid_upgrade", "a WebSocket handshake carries no body");
    }
    char accept[29];
    if (ws_accept_key(evhttp_find_header(h, "Sec-WebSocket-Key"), accept) != 0)
        return ws_refuse(why, 400, "invalid_upgrade", "Sec-WebSocket-Key is not the base64 of 16 bytes");
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    int fd = bev ? bufferevent_getfd(bev) : -1;
    ws_conn *c = fd >= 0 ? calloc(1, sizeof *c) : NULL;
    if (!c)
        return ws_refuse(why, 500, "server_error", "the gateway cannot take the connection over");
    c->gw = gw;
    c->evcon = evcon;
    c->upgrade = req;
    c->bev = bev;
    struct wslay_event_callbacks cb = {ws_recv_cb,       ws_send_cb,         NULL, ws_on_frame_start,
                                       ws_on_frame_chunk, NULL,               ws_on_msg};
    c->tick = event_new(gw->base, -1, EV_PERSIST, ws_on_tick, c);
    c->later = event_new(gw->base, -1, 0, ws_on_later, c);
    if (ws_local_address(c, fd) != 0 || !c->tick || !c->later ||
        wslay_event_context_server_init(&c->ctx, &cb, c) != 0) {
        if (c->tick)
            event_free(c->tick);
        if (c->later)
            event_free(c->later);
        free(c);
        return ws_refuse(why, 500, "server_error", "the gateway cannot take the connection over");
    }
    wslay_event_config_set_max_recv_msg_length(c->ctx, gw->cfg.max_body);
    wslay_event_config_set_no_buffering(c->ctx, 1); /* data frames go to c->msg (see the top) */
    c->id = ++ws_next_id;
    sse_init(&c->sse, ws_on_sse, c);
    ws_collect_init(&c->collect, c->gw->cfg.max_body);
    c->opened_at = c->last_active = ws_now();

    /* from here on the connection is this module's */
    conn_limit_upgrade(gw->conns, req);
    struct evbuffer *out = bufferevent_get_output(bev);
    evbuffer_add_printf(out,
                        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        "Sec-WebSocket-Accept: %s\r\n\r\n",
                        accept);
    evhttp_connection_set_closecb(evcon, ws_on_gone, c);
    bufferevent_setcb(bev, ws_on_read, ws_on_write, ws_on_event, c);
    bufferevent_setwatermark(bev, EV_READ, 0, 0);
    bufferevent_setwatermark(bev, EV_WRITE, WS_LOW_WATER, 0);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
    /* after the enable: set before it, evhttp's read timeout (the client
     * idle timeout) stayed armed on the read event, and a socket quiet
     * between turns for that long was closed as one that does not read */
    struct timeval idle = {gw->cfg.client_idle_timeout_s, 0};
    bufferevent_set_timeouts(bev, NULL, gw->cfg.client_idle_timeout_s > 0 ? &idle : NULL);
    struct timeval second = {1, 0};
    event_add(c->tick, &second);
    if (evbuffer_get_length(bufferevent_get_input(bev)))
        event_active(c->later, EV_TIMEOUT, 1);
    c->next = ws_all;
    if (ws_all)
        ws_all->prev = c;
    ws_all = c;
    ws_n++;
    log_info("websocket: a Responses connection opened (%zu open)", ws_n);
    return 0;
}

void ws_stop_all(void)
{
    while (ws_all)
        ws_free(ws_all);
}
