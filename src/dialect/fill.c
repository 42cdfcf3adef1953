/* fill.c: an empty output of a Responses terminal event filled with the
 * stream's items (see fill.h). Walks the SSE lines of whole events and,
 * in the data of a terminal event, only the spans of "response" and its
 * "output": linear in the bytes, nothing parsed into a tree. */
#include "dialect/fill.h"
#include "base/json.h"
#include "base/sse.h"
#include <string.h>

/* data (one event's data) with its response.output filled: 1 and out
 * written, 0 when it is no terminal event with an empty output. */
static int fill_event(const char *data, size_t len, const char *items, size_t ilen, sbuf *out)
{
    size_t ts, te, rs, re, os, oe;
    if (!memmem(data, len, "\"response.", 10) || json_member_span(data, len, "type", &ts, &te) != 0)
        return 0;
    int done = (te - ts == 20 && memcmp(data + ts, "\"response.completed\"", 20) == 0) ||
               (te - ts == 21 && memcmp(data + ts, "\"response.incomplete\"", 21) == 0);
    if (!done || json_member_span(data, len, "response", &rs, &re) != 0 ||
        json_member_span(data + rs, re - rs, "output", &os, &oe) != 0)
        return 0;
    os += rs, oe += rs;
    size_t i = os + 1;
    while (i < oe && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r'))
        i++;
    if (data[os] != '[' || i != oe - 1) /* not an empty array */
        return 0;
    sbuf_append(out, data, os);
    sbuf_append(out, items, ilen);
    sbuf_append(out, data + oe, len - oe);
    return 1;
}

typedef struct fill_items {
    const char *items;
    size_t len;
} fill_items;

static int fill_one(void *ud, const char *data, size_t len, sbuf *ev)
{
    const fill_items *f = ud;
    return fill_event(data, len, f->items, f->len, ev);
}

int fill_output_sse(const char *buf, size_t n, const char *items, size_t ilen, sbuf *out)
{
    if (!items || ilen < 2 || !memmem(buf, n, "\"output\"", 8))
        return 0;
    fill_items f = {items, ilen};
    return sse_rewrite_data(buf, n, fill_one, &f, out);
}
