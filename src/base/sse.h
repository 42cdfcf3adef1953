/* sse.h: an incremental Server-Sent Events parser (WHATWG event-stream rules:
 * LF, CRLF or CR line ends; "event:", "data:" (multi-line joined with \n),
 * comments ignored; an event is dispatched at a blank line). */
#ifndef SY_SSE_H
#define SY_SSE_H
#include <stddef.h>
#include "base/sbuf.h"

/* event is "" when the stream sent no event: field ("message" by spec).
 * data is data_len bytes, not NUL-terminated, valid only during the call
 * (see sse_feed). */
typedef void (*sse_event_fn)(void *ud, const char *event, const char *data, size_t data_len);

typedef struct sse_parser {
    sse_event_fn fn;
    void *ud;
    sbuf line;   /* partial line carried between feeds */
    sbuf event;
    sbuf data;
    const char *dref; /* the event's one data: line, still in the bytes being fed (not copied) */
    size_t dref_len;
    int has_data;
    int last_cr; /* previous chunk ended in CR: skip a leading LF */
    int skip;    /* the current line outgrew SSE_MAX_LINE: drop it whole */
    int drop;    /* the current event outgrew SSE_MAX_EVENT: drop it, up to its blank line */
    size_t open; /* bytes fed since the last blank line: the unfinished event */
    size_t fed;  /* bytes fed in all */
    size_t ev_start; /* where the event being read began (an offset into all that was fed) */
} sse_parser;

/* A longer line is dropped unparsed (the bytes still flow to the client;
 * only their inspection is lost), so a stream without newlines cannot grow
 * the parser's memory without bound. */
#define SSE_MAX_LINE (8u << 20)
/* An event whose data: lines add up to more is dropped undispatched (its
 * bytes still flow): many data: lines with no blank line between them must
 * not grow the parser without bound either. */
#define SSE_MAX_EVENT (8u << 20)

void sse_init(sse_parser *p, sse_event_fn fn, void *ud);
/* The borrowed-buffer contract: buf is the caller's, n bytes, NOT
 * NUL-terminated (a network buffer); the parser reads buf[0..n) only, and
 * keeps no pointer into it once sse_feed returns (what an unfinished line
 * or event needs is copied), so the caller may free or reuse it then.
 * Events found in this feed are dispatched during the call: their data may
 * point into buf (the usual one-data:-line event is not copied), is
 * data_len bytes, not NUL-terminated, and valid only during the callback;
 * event is a NUL-terminated name, valid as long. */
void sse_feed(sse_parser *p, const char *buf, size_t n);
void sse_free(sse_parser *p);
/* Bytes at the end of what was fed that belong to an event not finished
 * yet (0 when the input so far ends with a blank line). A relay that sends
 * only up to here never leaves a client with half an event. */
size_t sse_open_bytes(const sse_parser *p);
/* During an event's callback: the offset, counted over all the bytes fed
 * since sse_init, of that event's first byte (just after the blank line
 * that ended the one before). A relay that must not pass an event on
 * (an error it holds back) cuts its bytes there. */
size_t sse_event_start(const sse_parser *p);

/* Rewrites the data of the whole events in buf[0..n) (an unfinished last
 * event is left as it is): fn is called with each event that has one data
 * line; it returns 1 with the event's new data in ev (empty when called),
 * or 0 to keep it. Returns 1 with out holding all of buf's bytes, the
 * rewritten data in place, when any event changed; 0 (out untouched) when
 * none did. For a relay that changes an event or two of a stream without
 * parsing the rest. */
int sse_rewrite_data(const char *buf, size_t n, int (*fn)(void *ud, const char *data, size_t len, sbuf *ev),
                     void *ud, sbuf *out);

#endif
