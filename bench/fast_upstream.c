/* fast_upstream.c: a minimal, fast OpenAI-style upstream for the benchmarks.
 *
 * tests/mock_upstream.c is built for correctness tests: it records every
 * request forever (GET /_requests), builds each answer as a script run on
 * libevent timers and watches every socket for early EOF. That is the right
 * thing for the e2e tests and the wrong thing for a throughput baseline, so
 * the benchmarks use this server instead. It keeps no per-request state
 * beyond the reply being written and answers from canned bytes.
 *
 *   POST .../chat/completions   chat completion, plain JSON or SSE
 *   POST .../responses          Responses API, plain JSON or SSE
 *   GET  .../models             model list
 *   GET  /_health               {"ok":true}
 *
 * Any path prefix is accepted (e.g. /acct/bench/ok/v1/chat/completions, the
 * shape the e2e mock uses), only the suffix picks the endpoint. A body with
 * "stream": true gets an event stream (all events written at once, then the
 * terminal event). A body with "bench_hold_ms": N (N > 0) gets a long-lived
 * stream instead: the first text delta at once (so a gateway's preflight
 * commits), one more delta every "bench_interval_ms" (default 1000; the
 * older name "bench_gap_ms" works too; delta k is due k intervals after
 * the start, so a late one does not shift the rest) and the terminal event
 * N ms after the start.
 * Each of those later deltas carries "bench_t": the upstream's
 * CLOCK_MONOTONIC in microseconds when it was written, so a client on the
 * same host can tell how long the event took to reach it
 * (bench/stream_client.c). The body is never otherwise parsed.
 *
 * Two options make every answer of one instance slow, for a benchmark that
 * cannot put fields in the body (a proxy may drop unknown fields):
 * --first-byte-ms N sends every answer (headers and all of its bytes) N ms
 * after its request arrived, as an upstream that thinks before its first
 * token; --hold-ms N turns every streamed request without "bench_hold_ms"
 * into a long-lived stream of N ms (one delta every --gap-ms, default 1000).
 *
 * usage: fast_upstream --port N [--host ADDR] [--first-byte-ms N]
 *                      [--hold-ms N] [--gap-ms N]
 * (port 0 picks a free one; prints "listening on PORT"). SIGTERM/SIGINT
 * stop it. */
#include "tool_server.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <event2/util.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define FU_PIECES 8

static struct event_base *g_base;
static struct evbuffer *g_chunk; /* hands one canned event at a time to libevent (left empty) */
static long g_open_streams;
static long g_first_byte_ms; /* --first-byte-ms: every answer starts this late */
static long g_hold_ms;       /* --hold-ms: every plain stream is held this long */
static long g_gap_ms;        /* --gap-ms: between deltas of a held stream */

static const char *const g_words[FU_PIECES] = {"Hello", " from", " the", " fast", " mock", " upstream", ",", " bench."};

/* ---------- canned bodies, built once ---------- */

typedef struct canned {
    const char *p;
    size_t len;
} canned;

static canned c_chat_plain, c_resp_plain, c_models;
static canned c_chat_head, c_chat_delta[FU_PIECES], c_chat_tail;
static canned c_resp_head, c_resp_delta[FU_PIECES], c_resp_tail;

static void canned_set(canned *c, const char *s)
{
    c->len = strlen(s);
    char *p = malloc(c->len + 1);
    if (!p)
        abort();
    memcpy(p, s, c->len + 1);
    c->p = p;
}

static void build_canned(void)
{
    char buf[2048];
    canned_set(&c_chat_plain,
               "{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion\",\"created\":1700000000,"
               "\"model\":\"gpt-bench\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
               "\"content\":\"Hello from the fast mock upstream, bench.\"},\"finish_reason\":\"stop\"}],"
               "\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":8,\"total_tokens\":20}}");
    canned_set(&c_resp_plain,
               "{\"id\":\"resp_bench\",\"object\":\"response\",\"created_at\":1700000000,\"status\":\"completed\","
               "\"model\":\"gpt-bench\",\"output\":[{\"type\":\"message\",\"id\":\"msg_bench\",\"status\":\"completed\","
               "\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":"
               "\"Hello from the fast mock upstream, bench.\",\"annotations\":[]}]}],"
               "\"usage\":{\"input_tokens\":12,\"output_tokens\":8,\"total_tokens\":20}}");
    canned_set(&c_models, "{\"object\":\"list\",\"data\":[{\"id\":\"gpt-bench\",\"object\":\"model\","
                          "\"created\":1700000000,\"owned_by\":\"bench\"}]}");

    canned_set(&c_chat_head,
               "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"
               "\"model\":\"gpt-bench\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
               "\"content\":\"\"},\"finish_reason\":null}]}\n\n");
    for (int i = 0; i < FU_PIECES; i++) {
        snprintf(buf, sizeof buf,
                 "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"
                 "\"model\":\"gpt-bench\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"},"
                 "\"finish_reason\":null}]}\n\n",
                 g_words[i]);
        canned_set(&c_chat_delta[i], buf);
    }
    canned_set(&c_chat_tail,
               "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"
               "\"model\":\"gpt-bench\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],"
               "\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":8,\"total_tokens\":20}}\n\n"
               "data: [DONE]\n\n");

    canned_set(&c_resp_head,
               "event: response.created\n"
               "data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_bench\","
               "\"object\":\"response\",\"created_at\":1700000000,\"status\":\"in_progress\",\"model\":\"gpt-bench\","
               "\"output\":[]}}\n\n");
    for (int i = 0; i < FU_PIECES; i++) {
        snprintf(buf, sizeof buf,
                 "event: response.output_text.delta\n"
                 "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"item_id\":\"msg_bench\","
                 "\"output_index\":0,\"content_index\":0,\"delta\":\"%s\"}\n\n",
                 i + 1, g_words[i]);
        canned_set(&c_resp_delta[i], buf);
    }
    canned_set(&c_resp_tail,
               "event: response.completed\n"
               "data: {\"type\":\"response.completed\",\"sequence_number\":9,\"response\":{\"id\":\"resp_bench\","
               "\"object\":\"response\",\"created_at\":1700000000,\"status\":\"completed\",\"model\":\"gpt-bench\","
               "\"output\":[{\"type\":\"message\",\"id\":\"msg_bench\",\"status\":\"completed\",\"role\":\"assistant\","
               "\"content\":[{\"type\":\"output_text\",\"text\":\"Hello from the fast mock upstream, bench.\","
               "\"annotations\":[]}]}],\"usage\":{\"input_tokens\":12,\"output_tokens\":8,\"total_tokens\":20}}}\n\n");
}

/* ---------- helpers ---------- */

static void send_canned(struct evhttp_request *req, int code, const char *ctype, const canned *c)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", ctype);
    struct evbuffer *out = evbuffer_new();
    if (!out)
        abort();
    evbuffer_add_reference(out, c->p, c->len, NULL, NULL);
    evhttp_send_reply(req, code, code == 200 ? "OK" : "Error", out);
    evbuffer_free(out);
}

/* One event of a stream, as its own chunk. */
static void stream_send(struct evhttp_request *req, const canned *c)
{
    evbuffer_add_reference(g_chunk, c->p, c->len, NULL, NULL);
    evhttp_send_reply_chunk(req, g_chunk); /* drains g_chunk */
}

/* A held stream's event written straight to its socket as one chunk
 * ("SIZE\r\n" event "\r\n") with one send(), when nothing of the reply
 * waits in libevent's buffer (always, at a token per 50 ms or slower).
 * Through evhttp each event would cost a buffer chain, two epoll_ctl calls
 * (write interest on, then off) and a second loop turn: at 10 000 streams
 * the mock, not the system under test, was the bottleneck. What the socket
 * does not take goes to libevent's buffer, which writes it. Returns 0 when
 * the event was not sent (evhttp sends it). */
static int stream_send_direct(struct evhttp_request *req, const canned *c, size_t head, const char *stamp,
                              size_t sn)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    size_t len = c->len + sn;
    char buf[4096];
    if (!bev || evbuffer_get_length(bufferevent_get_output(bev)) || len + 16 > sizeof buf)
        return 0;
    int n = snprintf(buf, sizeof buf, "%zx\r\n", len);
    memcpy(buf + n, c->p, head);
    memcpy(buf + n + head, stamp, sn);
    memcpy(buf + n + head + sn, c->p + head, c->len - head);
    size_t total = (size_t)n + len + 2;
    memcpy(buf + total - 2, "\r\n", 2);
    ssize_t w = send(bufferevent_getfd(bev), buf, total, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return 1; /* the client is gone: libevent's read side will notice and close */
    if (w < 0)
        w = 0;
    if ((size_t)w < total) {
        bufferevent_write(bev, buf + w, total - (size_t)w);
        bufferevent_enable(bev, EV_WRITE);
    }
    return 1;
}

/* One event of a held stream, its JSON object stamped with the send time:
 * "data: {" + "\"bench_t\":MICROS," + the rest of the canned event. */
static void stream_send_stamped(struct evhttp_request *req, const canned *c)
{
    const char *obj = strstr(c->p, "data: {");
    if (!obj) {
        stream_send(req, c);
        return;
    }
    size_t head = (size_t)(obj - c->p) + 7;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char stamp[48];
    int sn = snprintf(stamp, sizeof stamp, "\"bench_t\":%lld,", (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000);
    if (stream_send_direct(req, c, head, stamp, (size_t)sn))
        return;
    evbuffer_add_reference(g_chunk, c->p, head, NULL, NULL);
    evbuffer_add(g_chunk, stamp, (size_t)sn);
    evbuffer_add_reference(g_chunk, c->p + head, c->len - head, NULL, NULL);
    evhttp_send_reply_chunk(req, g_chunk);
}

/* Starts an event stream: headers, the head event and the first n deltas. */
static void stream_open(struct evhttp_request *req, int chat, int n)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", "text/event-stream");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    evhttp_send_reply_start(req, 200, "OK");
    stream_send(req, chat ? &c_chat_head : &c_resp_head);
    for (int i = 0; i < n; i++)
        stream_send(req, chat ? &c_chat_delta[i] : &c_resp_delta[i]);
}

/* Ends an event stream with its terminal event. */
static void stream_close(struct evhttp_request *req, int chat)
{
    stream_send(req, chat ? &c_chat_tail : &c_resp_tail);
    evhttp_send_reply_end(req);
}

/* Finds the JSON member "key" (top level or not, the bench bodies are flat)
 * and returns a pointer to its value, or NULL. */
static const char *find_value(const char *body, size_t len, const char *key)
{
    size_t klen = strlen(key);
    const char *end = body + len;
    for (const char *p = body; p && p + klen + 2 <= end; p++) {
        p = memchr(p, '"', (size_t)(end - p));
        if (!p || p + klen + 2 > end)
            return NULL;
        if (memcmp(p + 1, key, klen) == 0 && p[klen + 1] == '"') {
            const char *v = p + klen + 2;
            while (v < end && (*v == ' ' || *v == '\t' || *v == '\r' || *v == '\n'))
                v++;
            if (v >= end || *v != ':')
                continue;
            v++;
            while (v < end && (*v == ' ' || *v == '\t' || *v == '\r' || *v == '\n'))
                v++;
            return v < end ? v : NULL;
        }
    }
    return NULL;
}

static long find_long(const char *body, size_t len, const char *key)
{
    const char *v = find_value(body, len, key);
    if (!v)
        return 0;
    long n = 0;
    const char *end = body + len;
    while (v < end && *v >= '0' && *v <= '9' && n < 100000000L)
        n = n * 10 + (*v++ - '0');
    return n;
}

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* ---------- long-lived streams ---------- */

typedef struct hold_job {
    struct evhttp_request *req;
    struct evhttp_connection *evcon;
    struct event *timer;
    int chat;
    int sent;        /* deltas sent */
    int64_t start;   /* us, CLOCK_MONOTONIC: the stream opened */
    long hold_ms;    /* the terminal event is due at start + hold_ms */
    long gap_ms;     /* delta k is due at start + k * gap_ms: a late one does not delay the next */
} hold_job;

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void hold_free(hold_job *j)
{
    if (j->timer)
        event_free(j->timer);
    free(j);
    g_open_streams--;
}

static void hold_close_cb(struct evhttp_connection *evcon, void *arg)
{
    /* the client went away: libevent frees the request, we free the job */
    hold_free(arg);
    evhttp_connection_set_closecb(evcon, NULL, NULL);
}

/* Waits for the next delta, or for the terminal event when that comes first. */
static void hold_arm(hold_job *j)
{
    long due_ms = (long)j->sent * j->gap_ms;
    if (due_ms > j->hold_ms)
        due_ms = j->hold_ms;
    int64_t wait = j->start + (int64_t)due_ms * 1000 - mono_us();
    if (wait < 0)
        wait = 0;
    struct timeval tv = {(time_t)(wait / 1000000), (suseconds_t)(wait % 1000000)};
    evtimer_add(j->timer, &tv);
}

static void hold_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    hold_job *j = arg;
    if ((long)j->sent * j->gap_ms < j->hold_ms) {
        stream_send_stamped(j->req,
                            j->chat ? &c_chat_delta[j->sent % FU_PIECES] : &c_resp_delta[j->sent % FU_PIECES]);
        j->sent++;
        hold_arm(j);
        return;
    }
    evhttp_connection_set_closecb(j->evcon, NULL, NULL);
    stream_close(j->req, j->chat);
    hold_free(j);
}

static void start_hold(struct evhttp_request *req, int chat, long hold_ms, long gap_ms)
{
    hold_job *j = calloc(1, sizeof *j);
    if (!j)
        abort();
    j->req = req;
    j->evcon = evhttp_request_get_connection(req);
    j->chat = chat;
    j->gap_ms = gap_ms > 0 ? gap_ms : 1000;
    j->hold_ms = hold_ms;
    j->start = mono_us();
    j->timer = evtimer_new(g_base, hold_timer_cb, j);
    g_open_streams++;
    evhttp_connection_set_closecb(j->evcon, hold_close_cb, j);
    stream_open(req, chat, 1);
    j->sent = 1;
    hold_arm(j);
}

/* ---------- requests ---------- */

static void send_stream(struct evhttp_request *req, int chat)
{
    stream_open(req, chat, FU_PIECES);
    stream_close(req, chat);
}

static void handle_now(struct evhttp_request *req)
{
    static const char health[] = "{\"ok\":true}\n";
    static const char notfound[] = "{\"error\":{\"message\":\"fast_upstream: unknown endpoint\","
                                   "\"type\":\"invalid_request_error\",\"code\":\"unknown_url\"}}";
    static const canned c_health = {health, sizeof health - 1};
    static const canned c_404 = {notfound, sizeof notfound - 1};
    const char *uri = evhttp_request_get_uri(req);
    size_t plen = strcspn(uri, "?");
    if (plen == 8 && memcmp(uri, "/_health", 8) == 0) {
        send_canned(req, 200, "application/json", &c_health);
        return;
    }
    if (ends_with(uri, plen, "/models")) {
        send_canned(req, 200, "application/json", &c_models);
        return;
    }
    int chat = ends_with(uri, plen, "/chat/completions");
    int resp = !chat && ends_with(uri, plen, "/responses");
    if ((!chat && !resp) || evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
        send_canned(req, 404, "application/json", &c_404);
        return;
    }

    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t blen = evbuffer_get_length(in);
    const char *body = blen ? (const char *)evbuffer_pullup(in, -1) : "";
    long hold = find_long(body, blen, "bench_hold_ms");
    const char *sv = find_value(body, blen, "stream");
    int stream = sv && (size_t)(body + blen - sv) >= 4 && memcmp(sv, "true", 4) == 0;
    long every = hold > 0 ? find_long(body, blen, "bench_interval_ms") : 0;
    if (hold > 0)
        start_hold(req, chat, hold, every > 0 ? every : find_long(body, blen, "bench_gap_ms"));
    else if (stream && g_hold_ms > 0)
        start_hold(req, chat, g_hold_ms, g_gap_ms);
    else if (stream)
        send_stream(req, chat);
    else
        send_canned(req, 200, "application/json", chat ? &c_chat_plain : &c_resp_plain);
}

/* ---------- --first-byte-ms: answers that start late ---------- */

typedef struct delay_job {
    struct evhttp_request *req;
    struct evhttp_connection *evcon;
    struct event *timer;
} delay_job;

static void delay_free(delay_job *d)
{
    evhttp_connection_set_closecb(d->evcon, NULL, NULL);
    event_free(d->timer);
    free(d);
}

static void delay_close_cb(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    delay_free(arg); /* the client went away before its answer started */
}

static void delay_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    delay_job *d = arg;
    struct evhttp_request *req = d->req;
    delay_free(d);
    handle_now(req);
}

static void handle(struct evhttp_request *req, void *arg)
{
    (void)arg;
    if (g_first_byte_ms <= 0) {
        handle_now(req);
        return;
    }
    delay_job *d = calloc(1, sizeof *d);
    if (!d)
        abort();
    d->req = req;
    d->evcon = evhttp_request_get_connection(req);
    d->timer = evtimer_new(g_base, delay_timer_cb, d);
    if (!d->timer)
        abort();
    evhttp_connection_set_closecb(d->evcon, delay_close_cb, d);
    struct timeval tv = {g_first_byte_ms / 1000, (g_first_byte_ms % 1000) * 1000};
    evtimer_add(d->timer, &tv);
}

/* Takes this program's own options out of argv (the rest is
 * tool_server_args'); returns -1 on a malformed one. */
static int own_args(int *argc, char **argv)
{
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        long *dst = !strcmp(argv[i], "--first-byte-ms") ? &g_first_byte_ms
                    : !strcmp(argv[i], "--hold-ms")     ? &g_hold_ms
                    : !strcmp(argv[i], "--gap-ms")      ? &g_gap_ms
                                                        : NULL;
        if (!dst) {
            argv[out++] = argv[i];
            continue;
        }
        char *end = NULL;
        if (i + 1 >= *argc || (*dst = strtol(argv[i + 1], &end, 10)) < 0 || *end) {
            fprintf(stderr, "fast_upstream: %s needs a number of milliseconds\n", argv[i]);
            return -1;
        }
        i++;
    }
    *argc = out;
    return 0;
}

int main(int argc, char **argv)
{
    const char *host;
    int port;
    if (own_args(&argc, argv) != 0 || tool_server_args(argc, argv, "fast_upstream", &host, &port) != 0)
        return 2;
    signal(SIGPIPE, SIG_IGN);
    build_canned();
    g_chunk = evbuffer_new();
    g_base = event_base_new();
    struct evhttp *http = g_base ? evhttp_new(g_base) : NULL;
    if (!http || !g_chunk) {
        fprintf(stderr, "fast_upstream: libevent init failed\n");
        return 1;
    }
    evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST);
    evhttp_set_timeout(http, 600);
    evhttp_set_gencb(http, handle, NULL);

    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sin.sin_addr) != 1) {
        fprintf(stderr, "fast_upstream: --host must be an IPv4 address\n");
        return 2;
    }
    /* a deep backlog: the benchmarks open 1000 connections at once */
    struct evconnlistener *lis =
        evconnlistener_new_bind(g_base, NULL, NULL, LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
                                4096, (struct sockaddr *)&sin, sizeof sin);
    if (!lis) {
        fprintf(stderr, "fast_upstream: cannot listen on %s:%d: %s\n", host, port, strerror(errno));
        return 1;
    }
    if (!evhttp_bind_listener(http, lis)) {
        fprintf(stderr, "fast_upstream: evhttp_bind_listener failed\n");
        return 1;
    }
    tool_server_announce(evconnlistener_get_fd(lis), port);
    tool_server_run(g_base);

    evhttp_free(http); /* runs the close callbacks of streams still open */
    evbuffer_free(g_chunk);
    event_base_free(g_base);
    return g_open_streams < 0; /* 0 unless the bookkeeping went wrong */
}
