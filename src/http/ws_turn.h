/* ws_turn.h: what a Responses WebSocket frame asks for, as the HTTP request
 * the gateway serves for it, and what a connection keeps of its last turn.
 * Pure: no I/O, bounded work; fuzzed (tests/fuzz/fuzz_ws_turn.c).
 *
 * Codex's WebSocket transport (OpenAI-Beta: responses_websockets=2026-02-06)
 * sends text frames {"type":"response.create", ...the fields of a
 * Responses request...}. The HTTP request made of one is that object
 * without "type", "generate" and "client_metadata", with "stream": true.
 * client_metadata carries, over the socket, what Codex sends as headers
 * over HTTP (x-codex-turn-state, x-codex-turn-metadata, x-openai-subagent,
 * ...): those of them the proxy forwards become the request's headers.
 *
 * A later turn of the same conversation names the connection's last
 * response in previous_response_id and sends only the items that follow
 * it. The upstream is HTTP, and any account may serve the turn, so the
 * gateway sends the whole conversation instead: the last turn's input,
 * its output, then the new items, without previous_response_id
 * (upstream/conversation.h writes that body). A previous_response_id the
 * connection does not know passes unchanged (the HTTP path decides).
 *
 * "generate": false is Codex's warm-up (a turn that only prepares the
 * conversation): answered by the endpoint without an upstream, its input
 * kept as the conversation so far. "response.processed" (Codex's
 * acknowledgement of a finished response) asks for nothing. The v1
 * "response.append" is not served: Codex sends v2 frames. */
#ifndef SY_WS_TURN_H
#define SY_WS_TURN_H
#include <stddef.h>
#include "base/conv_link.h"
#include "base/sbuf.h"

typedef enum {
    WS_FRAME_CREATE = 0, /* a turn to serve: body and headers are set */
    WS_FRAME_WARMUP,     /* generate: false: answer locally; body is set (input is recorded from it) */
    WS_FRAME_IGNORE,     /* nothing to answer (response.processed) */
    WS_FRAME_BAD,        /* answered with an error event: error_* are set */
} ws_frame_kind;

#define WS_TURN_MAX_HEADERS 10
#define WS_TURN_HEADER_MAX 4096 /* a client_metadata value longer than this is not made a header */

typedef struct ws_header {
    const char *name; /* a static string */
    char *value;      /* heap */
} ws_header;

typedef struct ws_request {
    sbuf body;                 /* the POST /v1/responses body */
    ws_header headers[WS_TURN_MAX_HEADERS];
    size_t n_headers;
    int chained;               /* it continued the connection's last response: rebuilt whole */
    char model[128];           /* the request's model ("" if none or not a string) */
    int error_status;          /* WS_FRAME_BAD: 400 */
    const char *error_code;    /* WS_FRAME_BAD: a static string */
    char error_message[256];
} ws_request;

/* Reads *message (a text message) and takes it: the request body is written
 * over the message in its own buffer (no second copy of a large message),
 * and *message is left empty whatever the result. last is the connection's
 * last response (its response_id, input_json and output_json; NULL or a
 * NULL response_id: none). Fills out (zeroed first; ws_request_free it
 * whatever the result). */
ws_frame_kind ws_frame_request(sbuf *message, const conv_link *last, ws_request *out);
void ws_request_free(ws_request *r);

/* The value of header name among r's headers, NULL if none. */
const char *ws_request_header(const ws_request *r, const char *name);

/* An event of the answer's stream (its data), seen by the collector of a
 * turn: the output items of response.output_item.done, as a JSON array
 * text, for a response.completed whose own output is empty (the ChatGPT
 * backend sends it so), and whether a terminal event passed. */
typedef struct ws_collect {
    sbuf items;         /* "[" item "," item ... (no closing bracket) */
    size_t n_items;
    size_t max_bytes;   /* past this the items are dropped and overflow set */
    int overflow;
    int terminal;       /* response.completed, .failed, .incomplete or error went by */
    int completed;      /* response.completed went by and its id and output were read */
    char response_id[128];
    sbuf output;        /* the response's output items: a JSON array text (when completed) */
} ws_collect;

void ws_collect_init(ws_collect *c, size_t max_bytes);
void ws_collect_event(ws_collect *c, const char *data, size_t len);
void ws_collect_free(ws_collect *c);

/* The type of an event's data ({"type":"..."} near its start) into out;
 * "" when there is none. Reads at most the first 256 bytes. */
void ws_event_type(const char *data, size_t len, char *out, size_t n);

#endif
