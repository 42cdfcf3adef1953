/* fuzz_body_decode.c: compressed request bodies (http/body_decode.c) on any
 * bytes. Byte 0 picks the mode: with its top bit set the rest is a
 * Content-Encoding value for body_decode_codings; else its low two bit
 * pairs are the codings (1 gzip, 2 deflate, 3 zstd; the first 0 means
 * identity, the second 0 one coding only), byte 1 the limit (256 B to
 * 1 MiB), and the rest the body. What must hold: no stage's output passes
 * the limit by more than a byte; a decoded body is NUL-terminated within
 * limit + 2 bytes of memory; and the limit is exact: the same body decodes
 * to the same bytes with the limit at its size (one coding), and is too
 * large one byte below; decoded a slice at a time (body_decoder_run, as
 * the server does), the result is the same. */
#include "fuzz_common.h"
#include "http/body_decode.h"
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    if (n < 2)
        return 0;
    char why[256];
    if (data[0] & 0x80) {
        char value[512];
        size_t vl = n - 1 < sizeof value - 1 ? n - 1 : sizeof value - 1;
        memcpy(value, data + 1, vl);
        value[vl] = '\0';
        body_codings c = {0};
        body_decode_rc rc = body_decode_codings(value, &c, why, sizeof why);
        FUZZ_CHECK(rc == BODY_DECODE_OK || rc == BODY_DECODE_UNSUPPORTED);
        FUZZ_CHECK(c.n >= 0 && c.n <= BODY_MAX_CODINGS);
        for (int i = 0; i < c.n; i++)
            FUZZ_CHECK(c.c[i] == BODY_GZIP || c.c[i] == BODY_DEFLATE || c.c[i] == BODY_ZSTD);
        if (rc != BODY_DECODE_OK)
            FUZZ_CHECK(why[0] && strlen(why) < sizeof why);
        return 0;
    }
    body_codings c = {0};
    int first = data[0] & 3, second = (data[0] >> 2) & 3;
    if (first) {
        c.c[c.n++] = (body_coding)first;
        if (second)
            c.c[c.n++] = (body_coding)second;
    }
    size_t limit = (size_t)256 << (data[1] % 13);
    const char *body = (const char *)data + 2;
    size_t len = n - 2;
    sbuf out = SBUF_INIT;
    body_decode_rc rc = body_decode(&c, body, len, limit, &out, why, sizeof why);
    FUZZ_CHECK(out.len <= limit + 1);
    /* a slice at a time (as the server decodes) comes to the same */
    body_decoder *d = body_decoder_new(&c, body, len, limit);
    int done = 0, slices = 0;
    body_decode_rc sliced = BODY_DECODE_OK;
    while (!done && slices++ < 1000000)
        sliced = body_decoder_run(d, 1 + (size_t)data[1] * 61 % 8192, &done, why, sizeof why);
    FUZZ_CHECK(done && sliced == rc);
    sbuf piecewise = SBUF_INIT;
    body_decoder_take(d, &piecewise);
    body_decoder_free(d);
    if (rc == BODY_DECODE_OK)
        FUZZ_CHECK(piecewise.len == out.len && memcmp(piecewise.p, out.p, out.len) == 0);
    sbuf_free(&piecewise);
    if (rc != BODY_DECODE_OK) {
        FUZZ_CHECK(rc == BODY_DECODE_CORRUPT || rc == BODY_DECODE_TOO_LARGE);
        FUZZ_CHECK(why[0]);
        sbuf_free(&out);
        return 0;
    }
    FUZZ_CHECK(out.p && out.p[out.len] == '\0' && out.cap <= limit + 2);
    /* the limit is exact: at the body's own size it still decodes, the
     * same (one coding: a list's middle stage may be larger than the body) */
    sbuf again = SBUF_INIT;
    if (c.n <= 1) {
        FUZZ_CHECK(body_decode(&c, body, len, out.len, &again, why, sizeof why) == BODY_DECODE_OK);
        FUZZ_CHECK(again.len == out.len && memcmp(again.p, out.p, out.len) == 0);
    }
    /* and one byte less is too large (in a list, perhaps at an earlier stage) */
    if (out.len > 0)
        FUZZ_CHECK(body_decode(&c, body, len, out.len - 1, &again, why, sizeof why) == BODY_DECODE_TOO_LARGE);
    sbuf_free(&again);
    sbuf_free(&out);
    return 0;
}
