/* proxy.h: one client request through the pool: ask the router for the
 * candidate order, try each candidate upstream, let the policy classify
 * failures (cooldown, fail over or return), hold streamed responses in
 * preflight until they carry output, then commit and stream through. After
 * commit a request is never replayed on another account. */
#ifndef SY_PROXY_H
#define SY_PROXY_H
#include <event2/http.h>
#include "core/gateway.h"
#include "http/request.h"

/* Takes over req and in (body, doc). Always answers the client eventually.
 * The server calls it as the handler serve.c gives it (server_start). */
void proxy_start(gateway *gw, struct evhttp_request *req, request_input *in);

/* Hands the client bytes gathered in this loop turn to libevent now
 * (server_reply_chunk) instead of at the end of the turn. Only where no
 * proxy or curl code is on the stack: after an upstream event (serve.c). */
void proxy_flush_pending(void);

#endif
