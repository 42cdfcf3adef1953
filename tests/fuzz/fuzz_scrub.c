/* fuzz_scrub.c: a secret planted anywhere in any text, the text cut into
 * any chunks: the scrubbed stream never contains the secret and equals the
 * one-shot scrub of the whole text. The secret is drawn from [0-9A-Z], none
 * of which is in the marker, so the marker cannot spell part of it. */
#include "fuzz_common.h"
#include "base/scrub.h"
#include <string.h>

typedef struct ctx {
    scrub s;
    sbuf out;
} ctx;

static void feed(void *ud, const char *p, size_t len)
{
    ctx *c = ud;
    scrub_feed(&c->s, p, len, &c->out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    if (n < 3)
        return 0;
    static const char alpha[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    char secret[40];
    size_t sl = SCRUB_MIN_LEN + data[1] % 24;
    for (size_t i = 0; i < sl; i++)
        secret[i] = alpha[(data[2] + i * 7 + (i < n ? data[i] : 0)) % 36];
    secret[sl] = '\0';
    /* the text: the input with the secret planted at its start, middle and end */
    sbuf text = SBUF_INIT;
    const char *body = (const char *)data + 3;
    size_t bl = n - 3;
    sbuf_append(&text, secret, sl);
    sbuf_append(&text, body, bl / 2);
    sbuf_append(&text, secret, sl);
    sbuf_append(&text, secret, sl - 1); /* a look-alike */
    sbuf_append(&text, body + bl / 2, bl - bl / 2);
    sbuf_append(&text, secret, sl);
    ctx c;
    scrub_init(&c.s);
    c.out = (sbuf)SBUF_INIT;
    scrub_add(&c.s, secret);
    fuzz_chunks((const uint8_t *)text.p, text.len, data[0], feed, &c);
    scrub_flush(&c.s, &c.out);
    FUZZ_CHECK(!memmem(c.out.p ? c.out.p : "", c.out.len, secret, sl));
    sbuf whole = SBUF_INIT;
    scrub_text(&c.s, text.p, text.len, &whole);
    FUZZ_CHECK(whole.len == c.out.len && memcmp(whole.p, c.out.p, whole.len) == 0);
    sbuf_free(&whole);
    sbuf_free(&c.out);
    sbuf_free(&text);
    scrub_free(&c.s);
    return 0;
}
