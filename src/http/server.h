/* server.h: the client-facing HTTP side on libevent's evhttp: routes,
 * platform-key authentication, body limits, JSON validation, and errors in
 * OpenAI's {"error":{"message","type","code"}} shape. */
#ifndef SY_SERVER_H
#define SY_SERVER_H
#include <event2/http.h>
#include "core/gateway.h"
#include "http/request.h"

/* What serves a request the server accepted: it takes over req and in
 * (body, doc) and answers the client eventually. The edge never names the
 * proxy; the top hands it proxy_start here. */
typedef void (*server_handler_fn)(gateway *gw, struct evhttp_request *req, request_input *in);

/* Binds the listener and installs handle as the request handler. -1 on
 * failure. */
int server_start(gateway *gw, server_handler_fn handle);

/* Drops the replies still queued for the flush (the loop is over: nothing
 * more is written; serve.c resets connections left with unsent bytes),
 * lets go of the WebSockets still open (http/ws.h) and frees the flush
 * event (before the loop's base is freed; before evhttp_free). */
void server_stop(void);

/* evhttp_send_reply, evhttp_send_reply_chunk_with_cb and
 * evhttp_send_reply_end, with the bytes written on the socket in this loop
 * turn, right after the current callback, when it takes them all
 * (server.c says why). */
void server_reply(struct evhttp_request *req, int status, struct evbuffer *body);
void server_reply_chunk(struct evhttp_request *req, struct evbuffer *chunk,
                        void (*written)(struct evhttp_connection *, void *), void *arg);
void server_reply_end(struct evhttp_request *req);

/* Writes the replies queued so far now rather than at the end of the loop
 * turn; only where no evhttp or proxy code is on the stack (serve.c). */
void server_flush_pending(void);

/* Sends an OpenAI-style error reply. code may be NULL (JSON null). */
/* 1 for a request of the Anthropic Messages API (/v1/messages...): its
 * errors go in Anthropic's shape (server_send_error does so). */
int server_is_messages(struct evhttp_request *req);
/* POST /v1/messages/count_tokens answered with an estimate of the
 * request's input tokens (dialect/messages_count.h), said to be one in the
 * x-switchyard-token-count header: where no anthropic account of the pool
 * can count them (docs/claude.md). */
int server_count_tokens_reply(struct evhttp_request *req, const char *body, size_t len); /* the status sent */
void server_send_error(struct evhttp_request *req, int status, const char *type, const char *code,
                       const char *message);
/* The same, naming the request field it is about ("param", as OpenAI's errors do; NULL or "": none). */
void server_send_error_param(struct evhttp_request *req, int status, const char *type, const char *code,
                             const char *param, const char *message);

/* Adds the Date header evhttp would add, from a string formatted once a
 * second instead of once a reply (loop thread only). */
void server_date_header(struct evkeyvalq *headers);

#endif
