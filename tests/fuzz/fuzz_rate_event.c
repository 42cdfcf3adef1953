/* fuzz_rate_event.c: codex.rate_limits events told in the pool's numbers
 * (route/rate_event.h), from any bytes, as one event's data and as a piece
 * of an SSE stream, with pool figures drawn from the first byte: a
 * rewritten event is JSON of type codex.rate_limits whose rate_limits is an
 * object; a stream rewritten holds the same events (count and names), and
 * rewriting it again changes nothing further; nothing rewritten leaves the
 * output untouched. */
#include "fuzz_common.h"
#include "base/json.h"
#include "base/sse.h"
#include "route/rate_event.h"
#include <string.h>

#define NOW 1700000000.0

static void count_event(void *ud, const char *event, const char *data, size_t len)
{
    (void)data, (void)len;
    sbuf *names = ud;
    sbuf_puts(names, event);
    sbuf_puts(names, "|");
}

static void events_of(const char *buf, size_t n, sbuf *names)
{
    sse_parser p;
    sse_init(&p, count_event, names);
    sse_feed(&p, buf, n);
    sse_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    if (n < 1)
        return 0;
    uint8_t k = data[0];
    pool_usage u;
    memset(&u, 0, sizeof u);
    u.primary = (pool_window){k & 1, (k >> 1) * 0.9, (k & 2) ? 18000 : 0, (k & 4) ? NOW + k * 7.3 : 0};
    u.secondary = (pool_window){(k >> 3) & 1, 100 - (k & 15), (k & 16) ? 604800 : 0, (k & 32) ? NOW - 5 : 0};
    const char *in = (const char *)data + 1;
    size_t len = n - 1;

    sbuf out = SBUF_INIT;
    sbuf_puts(&out, "x");
    if (rate_event_rewrite(in, len, &u, NOW, &out)) {
        json_value *doc = json_parse(out.p + 1, out.len - 1, NULL, 0);
        FUZZ_CHECK(doc && doc->type == JSON_OBJECT);
        FUZZ_CHECK(json_get_str(doc, "type") && strcmp(json_get_str(doc, "type"), "codex.rate_limits") == 0);
        const json_value *rl = json_get(doc, "rate_limits");
        FUZZ_CHECK(rl && rl->type == JSON_OBJECT);
        json_free(doc);
    } else {
        FUZZ_CHECK(out.len == 1);
    }

    sbuf_reset(&out);
    sbuf_puts(&out, "x");
    if (rate_event_rewrite_sse(in, len, &u, NOW, &out)) {
        sbuf a = SBUF_INIT, b = SBUF_INIT, again = SBUF_INIT;
        events_of(in, len, &a);
        events_of(out.p, out.len, &b);
        FUZZ_CHECK(a.len == b.len && (!a.len || memcmp(a.p, b.p, a.len) == 0));
        if (rate_event_rewrite_sse(out.p, out.len, &u, NOW, &again))
            FUZZ_CHECK(again.len == out.len && memcmp(again.p, out.p, out.len) == 0);
        sbuf_free(&a);
        sbuf_free(&b);
        sbuf_free(&again);
    } else {
        FUZZ_CHECK(out.len == 1 && out.p[0] == 'x');
    }
    sbuf_free(&out);
    return 0;
}
