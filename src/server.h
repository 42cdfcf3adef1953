/* server.h: the client-facing HTTP side on libevent's evhttp: routes,
 * platform-key authentication, body limits, JSON validation, and errors in
 * OpenAI's {"error":{"message","type","code"}} shape. */
#ifndef SY_SERVER_H
#define SY_SERVER_H
#include <event2/http.h>
#include "gateway.h"

/* Binds the listener and installs the request handler. -1 on failure. */
int server_start(gateway *gw);

/* Sends an OpenAI-style error reply. code may be NULL (JSON null). */
void server_send_error(struct evhttp_request *req, int status, const char *type, const char *code,
                       const char *message);

/* Adds the Date header evhttp would add, from a string formatted once a
 * second instead of once a reply (loop thread only). */
void server_date_header(struct evkeyvalq *headers);

#endif
