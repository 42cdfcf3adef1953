/* fuzz_sse.c: the event-stream parser on any bytes, cut anywhere: no crash,
 * the same events whatever the cuts, open bytes never more than was fed.
 * Each feed gets its own copy of exactly its bytes, not NUL-terminated and
 * freed when sse_feed returns, as the proxy's network buffers are (sse.h,
 * "borrowed"): ASan then catches a read past a chunk's end (the fuzzer's
 * and the replayer's input buffers are larger, or run on into the next
 * chunk) and a pointer kept into a feed after it returned. */
#include "fuzz_common.h"
#include "base/sbuf.h"
#include "base/sse.h"
#include <stdlib.h>
#include <string.h>

typedef struct seen {
    sbuf log;      /* every event, serialised */
    size_t fed;
    sse_parser p;
} seen;

static void on_event(void *ud, const char *event, const char *data, size_t len)
{
    seen *s = ud;
    sbuf_printf(&s->log, "%zu:%s|", len, event);
    sbuf_append(&s->log, data, len);
    FUZZ_CHECK(len <= SSE_MAX_EVENT);
}

static void feed(void *ud, const char *p, size_t len)
{
    seen *s = ud;
    char *copy = malloc(len ? len : 1);
    FUZZ_CHECK(copy != NULL);
    if (len)
        memcpy(copy, p, len);
    sse_feed(&s->p, copy, len);
    memset(copy, 0xA5, len); /* a stale borrowed pointer reads garbage, not the event */
    free(copy);
    s->fed += len;
    FUZZ_CHECK(sse_open_bytes(&s->p) <= s->fed);
}

static void run(seen *s, const uint8_t *data, size_t n, int seed)
{
    memset(s, 0, sizeof *s);
    sse_init(&s->p, on_event, s);
    if (seed < 0)
        feed(s, (const char *)data, n);
    else
        fuzz_chunks(data, n, (uint8_t)seed, feed, s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    if (n < 1)
        return 0;
    seen whole, cut;
    run(&whole, data + 1, n - 1, -1);
    run(&cut, data + 1, n - 1, data[0]);
    FUZZ_CHECK(whole.log.len == cut.log.len && (!whole.log.len || memcmp(whole.log.p, cut.log.p, whole.log.len) == 0));
    FUZZ_CHECK(sse_open_bytes(&whole.p) == sse_open_bytes(&cut.p));
    sse_free(&whole.p);
    sse_free(&cut.p);
    sbuf_free(&whole.log);
    sbuf_free(&cut.log);
    return 0;
}
