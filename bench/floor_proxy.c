/* floor_proxy.c: the least a proxy built like switchyard can cost.
 *
 * The same plumbing as the gateway (libevent's evhttp server on one loop,
 * src/upstream/upstream.c driving libcurl's multi interface on that loop, kept-alive
 * upstream connections) and nothing else: no platform-key check, no JSON
 * parse, no policy, no request log, no trace, no failover, no preflight.
 * Each client request is forwarded to one upstream URL prefix (the client's
 * path appended) and the upstream's status and body are sent back once
 * complete. bench/run.sh measures it beside the gateway, so the figures
 * show how much of the gateway's cost is its own logic and how much is the
 * evhttp + libcurl floor under it.
 *
 * usage: floor_proxy --port N --upstream http://127.0.0.1:P[/prefix]
 *        (port 0 picks a free one; prints "listening on PORT") */
#include "base/sbuf.h"
#include "tool_server.h"
#include "upstream/upstream.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct floor_req {
    struct evhttp_request *req;
    int status;
    sbuf body;
} floor_req;

static upstream *g_up;
static const char *g_prefix;

static int floor_on_headers(void *ud, int status, const upstream_header *h, size_t n)
{
    (void)h, (void)n;
    ((floor_req *)ud)->status = status;
    return 0;
}

static int floor_on_data(void *ud, const char *p, size_t n)
{
    sbuf_append(&((floor_req *)ud)->body, p, n);
    return 0;
}

static void floor_on_done(void *ud, up_result r, const char *errmsg)
{
    floor_req *f = ud;
    (void)errmsg;
    struct evbuffer *b = evbuffer_new();
    evbuffer_add(b, f->body.p ? f->body.p : "", f->body.len);
    evhttp_add_header(evhttp_request_get_output_headers(f->req), "Content-Type", "application/json");
    evhttp_send_reply(f->req, r == UP_OK ? f->status : 502, NULL, b);
    evbuffer_free(b);
    sbuf_free(&f->body);
    free(f);
}

static const upstream_callbacks floor_cb = {floor_on_headers, floor_on_data, floor_on_done};

static void floor_handle(struct evhttp_request *req, void *arg)
{
    (void)arg;
    floor_req *f = calloc(1, sizeof *f);
    f->req = req;
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    char url[2048];
    snprintf(url, sizeof url, "%s%s", g_prefix, evhttp_request_get_uri(req));
    static const upstream_header hdrs[] = {{"Content-Type", "application/json"}, {"Authorization", "Bearer floor"}};
    const char *body = (const char *)evbuffer_pullup(in, -1);
    /* streams read in small pieces, as the gateway does (the bench bodies spell it so) */
    int stream = body && memmem(body, len, "\"stream\":true", 14) != NULL;
    upstream_spec spec = {url, body, len, hdrs, 2, 0, stream, NULL};
    if (!upstream_start(g_up, &spec, &floor_cb, f)) {
        evhttp_send_error(req, 502, NULL);
        free(f);
    }
}

int main(int argc, char **argv)
{
    int port = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--port") == 0)
            port = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--upstream") == 0)
            g_prefix = argv[i + 1];
    }
    if (port < 0 || !g_prefix) {
        fprintf(stderr, "usage: floor_proxy --port N --upstream http://HOST:PORT[/prefix]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct event_config *cfg = event_config_new();
    event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    struct event_base *base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    upstream_limits lim = {5000, 60000, 60000, 0};
    g_up = upstream_new(base, &lim);
    struct evhttp *http = evhttp_new(base);
    evhttp_set_gencb(http, floor_handle, NULL);
    struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(http, "127.0.0.1", (ev_uint16_t)port);
    if (!bs) {
        fprintf(stderr, "floor_proxy: cannot listen on 127.0.0.1:%d\n", port);
        return 1;
    }
    tool_server_announce(evhttp_bound_socket_get_fd(bs), port);
    tool_server_run(base);
    evhttp_free(http);
    upstream_free(g_up);
    event_base_free(base);
    curl_global_cleanup();
    return 0;
}
