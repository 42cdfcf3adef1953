/* sse.h: an incremental Server-Sent Events parser (WHATWG event-stream rules:
 * LF, CRLF or CR line ends; "event:", "data:" (multi-line joined with \n),
 * comments ignored; an event is dispatched at a blank line). */
#ifndef SY_SSE_H
#define SY_SSE_H
#include <stddef.h>
#include "sbuf.h"

/* event is "" when the stream sent no event: field ("message" by spec). */
typedef void (*sse_event_fn)(void *ud, const char *event, const char *data, size_t data_len);

typedef struct sse_parser {
    sse_event_fn fn;
    void *ud;
    sbuf line;   /* partial line carried between feeds */
    sbuf event;
    sbuf data;
    int has_data;
    int last_cr; /* previous chunk ended in CR: skip a leading LF */
    int skip;    /* the current line outgrew SSE_MAX_LINE: drop it whole */
} sse_parser;

/* A longer line is dropped unparsed (the bytes still flow to the client;
 * only their inspection is lost), so a stream without newlines cannot grow
 * the parser's memory without bound. */
#define SSE_MAX_LINE (8u << 20)

void sse_init(sse_parser *p, sse_event_fn fn, void *ud);
void sse_feed(sse_parser *p, const char *buf, size_t n);
void sse_free(sse_parser *p);

#endif
