/* ws.h: the Responses API over WebSocket (GET /v1/responses with Upgrade:
 * websocket), as Codex's WebSocket transport speaks it. The connection is
 * taken over from evhttp after the handshake; wslay frames it. Each
 * response.create message is served as a streamed POST /v1/responses made
 * to the gateway's own listener (so routing, failover, preflight,
 * cooldowns, logs and metrics are the HTTP path's), on one loopback
 * connection kept alive for the socket's life, and each event of
 * that stream goes back as one text message. What a message becomes is
 * ws_turn.h's. docs/codex.md ("WebSocket transport") tells the rest. */
#ifndef SY_WS_H
#define SY_WS_H
#include <stddef.h>
#include <event2/http.h>
#include "core/gateway.h"

/* 1 when req asks to be upgraded to a WebSocket (an Upgrade header naming
 * websocket). */
int ws_is_upgrade(struct evhttp_request *req);

typedef struct ws_refusal {
    int status;          /* 400, 426 or 500 */
    const char *code;
    const char *message;
} ws_refusal;

/* Takes req's connection over (req: an authenticated GET /v1/responses
 * that asks for the upgrade): answers 101 and serves the socket until it
 * closes. Returns 0, or -1 with why filled when the handshake is not a
 * valid one (the caller answers it; a 426 carries Sec-WebSocket-Version
 * already). */
int ws_upgrade(gateway *gw, struct evhttp_request *req, ws_refusal *why);

/* Closes every WebSocket at once and frees what the module holds: the
 * loop is ending (before evhttp_free). */
void ws_stop_all(void);

/* WebSocket connections open. */
size_t ws_open_count(void);
/* The server took a WebSocket turn's request (the value of its
 * X-Switchyard-Ws-Turn header, on one of the gateway's own connections):
 * the share of the body budget reserved for it at the WebSocket is the
 * server's to count now. */
void ws_turn_claim(const char *id);

#endif
