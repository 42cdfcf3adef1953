/* test_scrub.c: an account's secrets never survive the scrubber, wherever a
 * stream is cut into chunks (every split of a text holding the secret is
 * tried), in whole texts and C strings, in JSON-escaped spelling, while
 * ordinary text and held-back look-alikes come out unchanged. */
#include "check.h"
#include "base/scrub.h"

#define SECRET "sk-live-0123456789abcdef"

static void feed_split(scrub *s, const char *text, size_t a, size_t b, sbuf *out)
{
    size_t n = strlen(text);
    scrub_feed(s, text, a, out);
    scrub_feed(s, text + a, b - a, out);
    scrub_feed(s, text + b, n - b, out);
    scrub_flush(s, out);
}

static void test_secret_split_anywhere_across_chunks_is_redacted(void)
{
    const char *text = "data: {\"delta\":\"Bearer " SECRET " and again " SECRET "\"}\n\n";
    const char *want = "data: {\"delta\":\"Bearer " SCRUB_MARK " and again " SCRUB_MARK "\"}\n\n";
    size_t n = strlen(text);
    int bad = 0;
    for (size_t a = 0; a <= n; a++)
        for (size_t b = a; b <= n; b++) {
            scrub s;
            scrub_init(&s);
            scrub_add(&s, SECRET);
            sbuf out = SBUF_INIT;
            feed_split(&s, text, a, b, &out);
            if (!out.p || strcmp(out.p, want) != 0)
                bad++;
            sbuf_free(&out);
            scrub_free(&s);
        }
    CHECK_EQ_INT(bad, 0);
}

static void test_look_alike_prefix_is_held_then_released(void)
{
    scrub s;
    scrub_init(&s);
    scrub_add(&s, SECRET);
    sbuf out = SBUF_INIT;
    scrub_feed(&s, "abc sk-live-0123", 16, &out);
    CHECK_EQ_STR(out.p, "abc "); /* the rest could be the secret's start */
    scrub_feed(&s, "XYZ", 3, &out);
    CHECK_EQ_STR(out.p, "abc sk-live-0123XYZ");
    scrub_feed(&s, " sk-l", 5, &out);
    scrub_flush(&s, &out);         /* the stream ended: a short held start goes out as it is */
    CHECK_EQ_STR(out.p, "abc sk-live-0123XYZ sk-l");
    sbuf_reset(&out);
    scrub_feed(&s, "died in sk-live-0123", 20, &out);
    scrub_flush(&s, &out);         /* 12 bytes of the token: redacted, not revealed */
    CHECK_EQ_STR(out.p, "died in " SCRUB_MARK);
    sbuf_free(&out);
    scrub_free(&s);
}

static void test_whole_texts_json_escapes_and_short_secrets(void)
{
    scrub s;
    scrub_init(&s);
    scrub_add(&s, "tok\"with/quote\\x");  /* echoed inside JSON as tok\"with/quote\\x */
    scrub_add(&s, "short");                /* below SCRUB_MIN_LEN: ignored */
    scrub_add(&s, NULL);
    sbuf out = SBUF_INIT;
    const char *body = "{\"message\":\"bad key tok\\\"with/quote\\\\x; short\"} raw: tok\"with/quote\\x";
    scrub_text(&s, body, strlen(body), &out);
    CHECK_EQ_STR(out.p, "{\"message\":\"bad key " SCRUB_MARK "; short\"} raw: " SCRUB_MARK);
    sbuf_free(&out);
    char hdr[32] = "req-tok\"with/quote\\x";
    scrub_cstr(&s, hdr, sizeof hdr);
    CHECK_EQ_STR(hdr, "req-" SCRUB_MARK);
    char cut[32] = "code tok\"with/qu";   /* a field cut short inside the token */
    scrub_cstr(&s, cut, sizeof cut);
    CHECK_EQ_STR(cut, "code " SCRUB_MARK);
    scrub_free(&s);
}

static void test_longer_secret_wins_over_one_inside_it(void)
{
    scrub s;
    scrub_init(&s);
    scrub_add(&s, "abcdefgh");
    scrub_add(&s, "xxabcdefghyy");
    sbuf out = SBUF_INIT;
    scrub_feed(&s, "1 xxabcdefghyy 2 abcdefgh 3", 27, &out);
    scrub_flush(&s, &out);
    CHECK_EQ_STR(out.p, "1 " SCRUB_MARK " 2 " SCRUB_MARK " 3");
    sbuf_free(&out);
    scrub_reset(&s);               /* no secrets: bytes pass untouched */
    scrub_feed(&s, "abcdefgh", 8, &out);
    CHECK_EQ_STR(out.p, "abcdefgh");
    sbuf_free(&out);
    scrub_free(&s);
}

/* Candidates are found sixteen places at a time by the secret's first two
 * bytes; a text dense with the first byte and with look-alike prefixes,
 * the secret at every offset, whole and split at every place, comes out
 * with the secret replaced and everything else as it was. */
static void test_secret_at_every_offset_in_text_full_of_its_first_bytes(void)
{
    static const char *const secrets[][2] = {
        {"eyJhbGciOiJSUzI1NiJ9.payload", NULL},
        {"eyJhbGciOiJSUzI1NiJ9.payload", "eXJhbGciOiJother1"}, /* first byte shared, second not */
    };
    const char *filler = "eye e ey eyJ eyJh eeyyJJ eyJhbGciOiJSUzI1NiJ9.paylo the end e";
    int bad = 0;
    for (size_t k = 0; k < sizeof secrets / sizeof secrets[0]; k++)
        for (size_t off = 0; off <= 40; off++) {
            char text[256], want[256];
            snprintf(text, sizeof text, "%.*s%s%s", (int)off, filler, secrets[k][0], filler + off);
            snprintf(want, sizeof want, "%.*s%s%s", (int)off, filler, SCRUB_MARK, filler + off);
            size_t n = strlen(text);
            for (size_t cut = 0; cut <= n; cut += 7) {
                scrub s;
                scrub_init(&s);
                scrub_add(&s, secrets[k][0]);
                scrub_add(&s, secrets[k][1]);
                sbuf out = SBUF_INIT;
                feed_split(&s, text, cut, cut, &out);
                bad += out.len != strlen(want) || memcmp(out.p, want, out.len) != 0;
                sbuf_free(&out);
                scrub_free(&s);
            }
        }
    CHECK_EQ_INT(bad, 0);
}

/* The first bytes of the secrets are kept as bits: secrets starting at the
 * lowest and highest bit of one byte of that set, and at the top of the
 * byte range, are each found among text whose other bytes share their
 * set byte; after a reset none is. */
static void test_secrets_with_different_first_bytes_are_each_redacted(void)
{
    scrub s;
    scrub_init(&s);
    scrub_add(&s, "@first-secret-1");     /* 0x40: bit 0 of its byte */
    scrub_add(&s, "Gsecond-secret-2");    /* 0x47: bit 7 of the same byte */
    scrub_add(&s, "\xff" "third-secret-3"); /* 0xff: the last bit */
    const char *text = "A@B G@first-secret-1 FGsecond-secret-2 \xfe\xff" "third-secret-3 @firsT";
    sbuf out = SBUF_INIT;
    scrub_feed(&s, text, strlen(text), &out);
    scrub_flush(&s, &out);
    CHECK_EQ_STR(out.p, "A@B G" SCRUB_MARK " F" SCRUB_MARK " \xfe" SCRUB_MARK " @firsT");
    sbuf_free(&out);
    scrub_reset(&s);
    scrub_feed(&s, "@first-secret-1", 15, &out);
    scrub_flush(&s, &out);
    CHECK_EQ_STR(out.p, "@first-secret-1");
    sbuf_free(&out);
    scrub_free(&s);
}

int main(void)
{
    RUN(test_secret_split_anywhere_across_chunks_is_redacted);
    RUN(test_look_alike_prefix_is_held_then_released);
    RUN(test_whole_texts_json_escapes_and_short_secrets);
    RUN(test_longer_secret_wins_over_one_inside_it);
    RUN(test_secret_at_every_offset_in_text_full_of_its_first_bytes);
    RUN(test_secrets_with_different_first_bytes_are_each_redacted);
    return check_summary();
}
