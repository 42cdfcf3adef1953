/* scrub.c: secrets out of client-bound bytes (see scrub.h). */
#include "base/scrub.h"
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

void scrub_init(scrub *s)
{
    memset(s, 0, sizeof *s);
    s->only_first = s->only_second = -1;
}

void scrub_reset(scrub *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->sec[i]);
    s->n = 0;
    s->only_first = s->only_second = -1;
    memset(s->first, 0, sizeof s->first);
    sbuf_reset(&s->tail);
}

void scrub_free(scrub *s)
{
    scrub_reset(s);
    sbuf_free(&s->tail);
}

static void scrub_add_one(scrub *s, const char *p, size_t n)
{
    if (n < SCRUB_MIN_LEN || s->n >= SCRUB_MAX_SECRETS)
        return;
    for (size_t i = 0; i < s->n; i++)
        if (s->len[i] == n && memcmp(s->sec[i], p, n) == 0)
            return;
    char *c = malloc(n);
    if (!c)
        abort();
    memcpy(c, p, n);
    size_t at = s->n++;
    while (at > 0 && s->len[at - 1] < n) { /* longest first: a secret inside another loses */
        s->sec[at] = s->sec[at - 1];
        s->len[at] = s->len[at - 1];
        at--;
    }
    s->sec[at] = c;
    s->len[at] = n;
    s->first[(unsigned char)c[0] >> 3] |= (uint8_t)(1u << ((unsigned char)c[0] & 7));
    int same = 1, same2 = 1;
    for (size_t i = 0; i < s->n; i++) {
        same &= s->sec[i][0] == c[0];
        same2 &= s->sec[i][1] == c[1]; /* every secret has SCRUB_MIN_LEN bytes */
    }
    s->only_first = same ? (unsigned char)c[0] : -1;
    s->only_second = same && same2 ? (unsigned char)c[1] : -1;
}

void scrub_add(scrub *s, const char *secret)
{
    if (!secret)
        return;
    size_t n = strlen(secret);
    scrub_add_one(s, secret, n);
    int plain = 1; /* the usual token needs no JSON escape: skip building its twin */
    for (size_t i = 0; i < n && plain; i++)
        plain = (unsigned char)secret[i] >= 0x20 && secret[i] != '"' && secret[i] != '\\' && (unsigned char)secret[i] < 0x7f;
    if (plain)
        return;
    sbuf esc = SBUF_INIT;
    sbuf_json_str(&esc, secret, n);
    if (esc.len >= 2)
        scrub_add_one(s, esc.p + 1, esc.len - 2); /* without the quotes */
    sbuf_free(&esc);
}

/* memchr stops for the first byte in one text before the search goes over
 * to both first bytes sixteen places at a time: memchr is the faster while
 * stops are few (a token's first byte is often rare: "bench-...") */
#define SCRUB_STOPS_SIMD 8

/* Appends w[0..len) to out with secrets replaced. Unless final, stops at
 * the first position where the rest of w is a proper prefix of a secret
 * and returns how many bytes it left (0 when it emitted everything). */
static size_t scrub_scan(const scrub *s, const char *w, size_t len, sbuf *out, int final)
{
    size_t i = 0, run = 0, stops = 0;
    while (i < len) {
        if (s->only_first >= 0) { /* the usual case: jump to the next candidate */
            size_t at = len;
#ifdef __SSE2__
            if (s->only_second >= 0 && stops >= SCRUB_STOPS_SIMD) {
                /* the first byte is common in this text ('e' begins every
                 * JWT): both first bytes, sixteen places at a time */
                const __m128i b0 = _mm_set1_epi8((char)s->only_first), b1 = _mm_set1_epi8((char)s->only_second);
                for (; len - i >= 17; i += 16) {
                    __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(w + i));
                    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(w + i + 1));
                    unsigned m = (unsigned)_mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(a, b0), _mm_cmpeq_epi8(b, b1)));
                    if (m) {
                        at = i + (size_t)__builtin_ctz(m);
                        break;
                    }
                }
            }
#endif
            if (at == len) { /* memchr: fastest while the first byte is rare */
                const char *q = memchr(w + i, s->only_first, len - i);
                if (!q)
                    break;
                at = (size_t)(q - w);
            }
            i = at;
            stops++;
            /* where the next byte is there to look at, one that differs
             * rules the place out for every secret and every prefix */
            if (s->only_second >= 0 && i + 1 < len && (unsigned char)w[i + 1] != s->only_second) {
                i++;
                continue;
            }
        } else if (!(s->first[(unsigned char)w[i] >> 3] & (1u << ((unsigned char)w[i] & 7)))) {
            i++;
            continue;
        }
        size_t left = len - i, hit = 0;
        int partial = 0;
        for (size_t k = 0; k < s->n && !hit; k++) {
            if (left >= s->len[k])
                hit = memcmp(w + i, s->sec[k], s->len[k]) == 0 ? s->len[k] : 0;
            else if (memcmp(w + i, s->sec[k], left) == 0) {
                /* the text ends inside a secret: hold it (streams), or, at
                 * the very end, redact a start long enough to matter (a
                 * value cut short before it reached us) */
                if (!final)
                    partial = 1;
                else if (left >= SCRUB_MIN_LEN)
                    hit = left;
            }
        }
        if (hit) {
            sbuf_append(out, w + run, i - run);
            sbuf_puts(out, SCRUB_MARK);
            i += hit;
            run = i;
        } else if (partial) {
            sbuf_append(out, w + run, i - run);
            return len - i;
        } else {
            i++;
        }
    }
    sbuf_append(out, w + run, len - run);
    return 0;
}

void scrub_feed(scrub *s, const char *buf, size_t n, sbuf *out)
{
    if (!s->n) {
        sbuf_append(out, buf, n);
        return;
    }
    if (!s->tail.len) {
        size_t keep = scrub_scan(s, buf, n, out, 0);
        if (keep) /* (an empty append would still allocate the buffer) */
            sbuf_append(&s->tail, buf + n - keep, keep);
        return;
    }
    sbuf_append(&s->tail, buf, n);
    size_t keep = scrub_scan(s, s->tail.p, s->tail.len, out, 0);
    sbuf_consume(&s->tail, s->tail.len - keep);
}

void scrub_flush(scrub *s, sbuf *out)
{
    if (!s->tail.len)
        return;
    scrub_scan(s, s->tail.p, s->tail.len, out, 1);
    sbuf_reset(&s->tail);
}

void scrub_text(const scrub *s, const char *in, size_t n, sbuf *out)
{
    if (in && n)
        scrub_scan(s, in, n, out, 1);
}

void scrub_cstr(const scrub *s, char *str, size_t cap)
{
    if (!s->n || !cap)
        return;
    sbuf o = SBUF_INIT;
    scrub_text(s, str, strlen(str), &o);
    sbuf_copy_cstr(str, cap, o.len ? o.p : "");
    sbuf_free(&o);
}
