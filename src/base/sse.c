/* sse.c: the incremental event-stream parser of sse.h (WHATWG HTML
 * "event stream interpretation"). Bytes may be split anywhere, including
 * between the CR and LF of a CRLF; only a partial line is carried over. */
#include "base/sse.h"
#include <string.h>

void sse_init(sse_parser *p, sse_event_fn fn, void *ud)
{
    memset(p, 0, sizeof *p);
    p->fn = fn;
    p->ud = ud;
}

void sse_free(sse_parser *p)
{
    sbuf_free(&p->line);
    sbuf_free(&p->event);
    sbuf_free(&p->data);
    p->dref = NULL;
    p->dref_len = 0;
    p->has_data = 0;
    p->last_cr = 0;
    p->drop = 0;
    p->open = 0;
}

/* Blank line: dispatch if any data: line was seen (even an empty one); the
 * event name never outlives its event. */
static void sse_dispatch(sse_parser *p)
{
    if (p->has_data && !p->drop && p->fn) {
        const char *data = p->dref ? p->dref : p->data.p;
        size_t len = p->dref ? p->dref_len : p->data.len;
        p->fn(p->ud, p->event.len ? p->event.p : "", len ? data : "", len);
    }
    sbuf_reset(&p->event);
    sbuf_reset(&p->data);
    p->dref = NULL;
    p->dref_len = 0;
    p->has_data = 0;
    p->drop = 0;
}

/* A borrowed data line becomes the parser's own copy: the feed whose bytes
 * it points into is ending, or a second data: line joins it. */
static void sse_own_data(sse_parser *p)
{
    if (!p->dref)
        return;
    sbuf_append(&p->data, p->dref, p->dref_len);
    p->dref = NULL;
    p->dref_len = 0;
}

size_t sse_open_bytes(const sse_parser *p) { return p->open; }

size_t sse_event_start(const sse_parser *p) { return p->ev_start; }

/* borrow: val lies in the caller's buffer for the rest of this feed. */
static void sse_field(sse_parser *p, const char *name, size_t nlen, const char *val, size_t vlen, int borrow)
{
    if (nlen == 5 && memcmp(name, "event", 5) == 0) {
        sbuf_reset(&p->event);
        sbuf_append(&p->event, val, vlen);
    } else if (nlen == 4 && memcmp(name, "data", 4) == 0) {
        if (p->drop)
            return;
        size_t have = p->dref ? p->dref_len : p->data.len;
        if (have + vlen + 1 > SSE_MAX_EVENT) {
            sbuf_free(&p->data); /* give the memory back now, not at the blank line */
            p->dref = NULL;
            p->dref_len = 0;
            p->drop = 1;
            return;
        }
        if (!p->has_data && borrow) {
            /* the usual event, one data: line: no copy, it is dispatched
             * from the caller's bytes (or copied if the feed ends first) */
            p->dref = val;
            p->dref_len = vlen;
            p->has_data = 1;
            return;
        }
        sse_own_data(p);
        if (p->has_data)
            sbuf_append(&p->data, "\n", 1);
        sbuf_append(&p->data, val, vlen);
        p->has_data = 1;
    }
    /* "id", "retry" and unknown fields: nothing the gateway needs */
}

static void sse_line(sse_parser *p, const char *s, size_t n, int borrow)
{
    if (n == 0) {
        sse_dispatch(p);
        return;
    }
    if (s[0] == ':')
        return; /* comment, e.g. keep-alive pings */
    const char *colon = memchr(s, ':', n);
    if (!colon) {
        sse_field(p, s, n, "", 0, borrow);
        return;
    }
    size_t nlen = (size_t)(colon - s);
    const char *v = colon + 1;
    size_t vlen = n - nlen - 1;
    if (vlen && *v == ' ') {
        v++;
        vlen--;
    }
    sse_field(p, s, nlen, v, vlen, borrow);
}

/* Finishes a line whose end was found at buf[start..end): joins it to any
 * carried partial line, copying only when one exists. Returns 1 for a
 * blank line (the end of an event). */
static int sse_finish_line(sse_parser *p, const char *buf, size_t start, size_t end)
{
    if (p->skip) {
        p->skip = 0;
        return 0;
    }
    if (p->line.len) {
        sbuf_append(&p->line, buf + start, end - start);
        sse_line(p, p->line.p, p->line.len, 0);
        sbuf_reset(&p->line);
        return 0;
    }
    sse_line(p, buf + start, end - start, 1);
    return end == start;
}

void sse_feed(sse_parser *p, const char *buf, size_t n)
{
    size_t i = 0, start = 0, boundary = n + 1; /* none yet */
    if (n && p->last_cr && buf[0] == '\n') {
        i = start = 1; /* the LF of a CRLF split across feeds */
        if (p->open == 0) {
            boundary = 1; /* its CR ended an event: the LF belongs to that end */
            p->ev_start = p->fed + 1;
        }
    }
    if (n)
        p->last_cr = 0;
    /* line ends are found with memchr, not byte by byte: LF is the usual
     * one, and a buffer without any CR (the usual case) is searched for it once */
    const char *cr = n > i ? memchr(buf + i, '\r', n - i) : NULL;
    while (i < n) {
        if (cr && cr < buf + i)
            cr = memchr(buf + i, '\r', n - i);
        const char *lf = memchr(buf + i, '\n', n - i);
        const char *e = lf && (!cr || lf < cr) ? lf : cr;
        if (!e)
            break;
        size_t at = (size_t)(e - buf);
        char c = *e;
        int blank = sse_finish_line(p, buf, start, at);
        i = at + 1;
        if (c == '\r') {
            if (i == n)
                p->last_cr = 1;
            else if (buf[i] == '\n')
                i++;
        }
        start = i;
        if (blank) {
            boundary = i;
            p->ev_start = p->fed + i; /* the next event begins here */
        }
    }
    p->fed += n;
    p->open = boundary <= n ? n - boundary : p->open + n;
    sse_own_data(p); /* an event still open keeps its data past this feed */
    if (start < n && !p->skip)
        sbuf_append(&p->line, buf + start, n - start);
    if (p->line.len > SSE_MAX_LINE) {
        sbuf_reset(&p->line);
        p->skip = 1;
    }
    if (!p->open && !p->line.len && !p->has_data) {
        /* the feed ended between events: nothing is carried over, so no
         * buffer is kept either (a held-open stream's events come seconds
         * apart, and thousands of streams each keeping one add up) */
        sbuf_free(&p->event);
        sbuf_free(&p->data);
        sbuf_free(&p->line);
    }
}

/* The end of the line that starts at s (its terminator excluded) and, in
 * *next, where the following line starts (LF, CRLF or CR). */
static size_t sse_line_end(const char *buf, size_t n, size_t s, size_t *next)
{
    size_t e = s;
    while (e < n && buf[e] != '\n' && buf[e] != '\r')
        e++;
    *next = e < n && buf[e] == '\r' && e + 1 < n && buf[e + 1] == '\n' ? e + 2 : e < n ? e + 1 : n;
    return e;
}

int sse_rewrite_data(const char *buf, size_t n, int (*fn)(void *ud, const char *data, size_t len, sbuf *ev),
                     void *ud, sbuf *out)
{
    size_t copied = 0; /* buf[0..copied) is in out */
    size_t vs = 0, ve = 0;
    int ndata = 0, changed = 0;
    sbuf ev = SBUF_INIT;
    for (size_t s = 0, next; s < n; s = next) {
        size_t e = sse_line_end(buf, n, s, &next);
        if (e == n) /* a line buf does not end: its event is not whole */
            break;
        if (e > s) { /* a field: "data" alone or "data:" with an optional space */
            if (e - s >= 4 && memcmp(buf + s, "data", 4) == 0 && (e - s == 4 || buf[s + 4] == ':')) {
                vs = s + 4 + (e - s > 4);
                vs += vs < e && buf[vs] == ' ';
                ve = e;
                ndata++;
            }
            continue;
        }
        /* a blank line ends the event */
        if (ndata == 1 && ve > vs) {
            sbuf_reset(&ev);
            if (fn(ud, buf + vs, ve - vs, &ev)) {
                if (!changed)
                    sbuf_reset(out);
                changed = 1;
                sbuf_append(out, buf + copied, vs - copied);
                sbuf_append(out, ev.p, ev.len);
                copied = ve;
            }
        }
        ndata = 0;
    }
    sbuf_free(&ev);
    if (changed)
        sbuf_append(out, buf + copied, n - copied);
    return changed;
}
