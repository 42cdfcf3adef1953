/* server.c: client-facing HTTP (see server.h). Everything here runs on the
 * loop and only validates and dispatches; proxy.c does the upstream work. */
#include "server.h"
#include "key_rules.h"
#include "log.h"
#include "metrics.h"
#include "proxy.h"
#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct server_route {
    const char *path;
    const char *suffix;
    api_kind api;
    int is_get;
} server_route;

static const server_route server_routes[] = {
    {"/v1/chat/completions", "/chat/completions", API_CHAT, 0},
    {"/v1/responses", "/responses", API_RESPONSES, 0},
    {"/v1/models", "/models", API_CHAT, 1},
};

void server_send_error(struct evhttp_request *req, int status, const char *type, const char *code,
                       const char *message)
{
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"error\":{\"message\":");
    sbuf_json_str(&b, message, strlen(message));
    sbuf_puts(&b, ",\"type\":");
    sbuf_json_str(&b, type, strlen(type));
    sbuf_puts(&b, ",\"code\":");
    if (code)
        sbuf_json_str(&b, code, strlen(code));
    else
        sbuf_puts(&b, "null");
    sbuf_puts(&b, "}}\n");
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", "application/json");
    struct evbuffer *out = evbuffer_new();
    evbuffer_add(out, b.p, b.len);
    evhttp_send_reply(req, status, NULL, out);
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
    return NULL;
}

static void server_health(struct evhttp_request *req, gateway *gw)
{
    struct evbuffer *out = evbuffer_new();
    evbuffer_add_printf(out, "{\"status\":\"ok\",\"accounts\":%zu,\"active_requests\":%zu,\"policy\":\"%s\"}\n",
                        pool_count(gw->pool), gw->active, policy_source(gw->policy));
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, 200, "OK", out);
    evbuffer_free(out);
}

/* Reads the fields routing needs; replies 400 and returns -1 if the body is bad. */
static int server_parse_body(struct evhttp_request *req, gateway *gw, proxy_input *in)
{
    struct evbuffer *ib = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(ib);
    if (len > gw->cfg.max_body) {
        char msg[128];
        snprintf(msg, sizeof msg, "request body is %zu bytes; the limit is %zu", len, gw->cfg.max_body);
        server_refuse(req, in->endpoint, 413, "invalid_request_error", "request_too_large", msg);
        return -1;
    }
    sbuf_append(&in->body, evbuffer_pullup(ib, -1), len);
    char err[160];
    in->doc = json_parse(in->body.p, in->body.len, err, sizeof err);
    if (!in->doc || in->doc->type != JSON_OBJECT) {
        char msg[256];
        snprintf(msg, sizeof msg, "request body is not a JSON object: %s", in->doc ? "wrong type" : err);
        server_refuse(req, in->endpoint, 400, "invalid_request_error", "invalid_json", msg);
        return -1;
    }
    const char *model = json_get_str(in->doc, "model");
    json_value *mv = json_get(in->doc, "model");
    if (mv && !model) {
        server_refuse(req, in->endpoint, 400, "invalid_request_error", "invalid_value", "'model' must be a string");
        return -1;
    }
    snprintf(in->model, sizeof in->model, "%s", model ? model : "");
    json_value *sv = json_get(in->doc, "stream");
    if (sv && sv->type != JSON_TRUE && sv->type != JSON_FALSE && sv->type != JSON_NULL) {
        server_refuse(req, in->endpoint, 400, "invalid_request_error", "invalid_value", "'stream' must be a boolean");
        return -1;
    }
    in->stream = json_get_bool(in->doc, "stream", 0);
    const char *prev = json_get_str(in->doc, "previous_response_id");
    snprintf(in->previous_response_id, sizeof in->previous_response_id, "%s", prev ? prev : "");
    return 0;
}

/* The key's own rules (expiry, models, budget, rpm); replies and returns -1
 * when the request is outside them. */
static int server_key_rules(struct evhttp_request *req, const char *endpoint, pool_key *pk, const char *model)
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
    return -1;
}

static void server_handle(struct evhttp_request *req, void *arg)
{
    gateway *gw = arg;
    const char *uri = evhttp_request_get_uri(req);
    char path[256];
    size_t plen = strcspn(uri, "?");
    snprintf(path, sizeof path, "%.*s", (int)(plen < sizeof path ? plen : sizeof path - 1), uri);
    enum evhttp_cmd_type method = evhttp_request_get_command(req);

    if (strcmp(path, "/health") == 0 || strcmp(path, "/healthz") == 0)
        return server_health(req, gw);
    const server_route *r = server_route_find(path);
    if (!r)
        return server_refuse(req, path, 404, "invalid_request_error", "unknown_url",
                             "unknown path; this gateway serves /v1/responses, /v1/chat/completions and /v1/models");
    if ((r->is_get && method != EVHTTP_REQ_GET) || (!r->is_get && method != EVHTTP_REQ_POST))
        return server_refuse(req, r->path, 405, "invalid_request_error", "method_not_allowed",
                             r->is_get ? "use GET for this path" : "use POST for this path");
    if (gw->draining)
        return server_refuse(req, r->path, 503, "server_error", "shutting_down", "the gateway is shutting down");

    const char *presented = server_presented_key(req);
    if (!presented)
        return server_refuse(req, r->path, 401, "invalid_request_error", "missing_api_key",
                             "missing platform key: send 'Authorization: Bearer <key>' (create one with 'switchyard key add')");
    pool_key *pk = pool_auth(gw->pool, presented);
    if (!pk)
        return server_refuse(req, r->path, 401, "invalid_request_error", "invalid_api_key", "invalid platform key");
    const platform_key *key = &pk->k;

    proxy_input in;
    memset(&in, 0, sizeof in);
    in.key_id = key->id;
    in.preferred_account = key->preferred_account_id;
    in.api = r->api;
    in.endpoint = r->path;
    in.suffix = r->suffix;
    in.is_get = r->is_get;
    if (!r->is_get && server_parse_body(req, gw, &in) < 0) {
        json_free(in.doc);
        sbuf_free(&in.body);
        return;
    }
    if (server_key_rules(req, r->path, pk, r->is_get ? NULL : in.model) < 0) {
        json_free(in.doc);
        sbuf_free(&in.body);
        return;
    }
    proxy_start(gw, req, &in);
}

int server_start(gateway *gw)
{
    gw->http = evhttp_new(gw->base);
    if (!gw->http)
        return -1;
    /* libevent answers bodies beyond its own cap with a bare 413; keep that
     * cap above ours so clients normally get our JSON error. */
    size_t cap = gw->cfg.max_body > ((size_t)1 << 29) ? gw->cfg.max_body : gw->cfg.max_body * 2 + 65536;
    evhttp_set_max_body_size(gw->http, (ev_ssize_t)cap);
    evhttp_set_max_headers_size(gw->http, 256 * 1024);
    evhttp_set_timeout(gw->http, 3600);
    evhttp_set_allowed_methods(gw->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
                                             EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    evhttp_set_gencb(gw->http, server_handle, gw);
    if (!evhttp_bind_socket_with_handle(gw->http, gw->cfg.listen_host, (ev_uint16_t)gw->cfg.listen_port)) {
        log_error("cannot listen on %s:%d", gw->cfg.listen_host, gw->cfg.listen_port);
        return -1;
    }
    return 0;
}
