/* sbuf.c: growable byte strings (see sbuf.h). */
#include "base/sbuf.h"
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void sbuf_grow(sbuf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
        abort();
    b->p = p;
    b->cap = cap;
}

void sbuf_reserve(sbuf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return;
    if (!b->cap) { /* exact: a body's size is known up front */
        b->p = malloc(extra + 1);
        if (!b->p)
            abort();
        b->cap = extra + 1;
        b->p[0] = '\0';
        return;
    }
    sbuf_grow(b, extra);
}

void sbuf_free(sbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

void sbuf_reset(sbuf *b)
{
    b->len = 0;
    if (b->p)
        b->p[0] = '\0';
}

void sbuf_keep(sbuf *b, size_t max)
{
    if (b->cap > max)
        sbuf_free(b);
    else
        sbuf_reset(b);
}

void sbuf_append(sbuf *b, const void *p, size_t n)
{
    sbuf_grow(b, n);
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void sbuf_puts(sbuf *b, const char *s) { sbuf_append(b, s, strlen(s)); }

void sbuf_vprintf(sbuf *b, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n >= 0) {
        sbuf_grow(b, (size_t)n);
        vsnprintf(b->p + b->len, (size_t)n + 1, fmt, again);
        b->len += (size_t)n;
    }
    va_end(again);
}

void sbuf_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

void sbuf_put_int(sbuf *b, long long v)
{
    char tmp[24];
    size_t i = sizeof tmp;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do
        tmp[--i] = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        tmp[--i] = '-';
    sbuf_append(b, tmp + i, sizeof tmp - i);
}

void sbuf_put_fixed(sbuf *b, double v, int prec)
{
    static const uint64_t pow10[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};
    /* Below 2^40 the product's rounding error is under 2^-13, so a fraction
     * more than 1/1024 away from one half rounds as the exact value would
     * (printf rounds the exact binary value); the rest is printf's. */
    double a = prec >= 0 && prec <= 9 ? fabs(v) * (double)pow10[prec] : -1;
    if (!(a >= 0 && a < 1099511627776.0)) { /* also NaN */
        sbuf_printf(b, "%.*f", prec, v);
        return;
    }
    uint64_t u = (uint64_t)a;
    double frac = a - (double)u;
    if (frac > 0.5 - 1.0 / 1024 && frac < 0.5 + 1.0 / 1024) {
        sbuf_printf(b, "%.*f", prec, v);
        return;
    }
    if (frac > 0.5)
        u++;
    char tmp[32];
    size_t i = sizeof tmp;
    for (int d = 0; d < prec; d++, u /= 10)
        tmp[--i] = (char)('0' + u % 10);
    if (prec)
        tmp[--i] = '.';
    do
        tmp[--i] = (char)('0' + u % 10);
    while (u /= 10);
    if (signbit(v))
        tmp[--i] = '-';
    sbuf_append(b, tmp + i, sizeof tmp - i);
}

void sbuf_json_str(sbuf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    sbuf_grow(b, n + 2);
    sbuf_append(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': sbuf_append(b, "\\\"", 2); break;
        case '\\': sbuf_append(b, "\\\\", 2); break;
        case '\n': sbuf_append(b, "\\n", 2); break;
        case '\r': sbuf_append(b, "\\r", 2); break;
        case '\t': sbuf_append(b, "\\t", 2); break;
        default:
            if (c < 0x20 || c == 0x7f) { /* DEL too: the text may end up on a terminal */
                char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
                sbuf_append(b, esc, 6);
            } else if (c < 0x80) {
                sbuf_append(b, &s[i], 1);
            } else {
                /* JSON is UTF-8 (RFC 8259 8.1): bytes that are not (a name
                 * cut mid-character, a stored value from before the entry
                 * checks) become U+FFFD rather than an invalid document */
                size_t k = sbuf_utf8_len(s + i, n - i);
                if (k)
                    sbuf_append(b, &s[i], k), i += k - 1;
                else
                    sbuf_append(b, "\xEF\xBF\xBD", 3);
            }
        }
    }
    sbuf_append(b, "\"", 1);
}

void sbuf_consume(sbuf *b, size_t n)
{
    if (n >= b->len) {
        sbuf_reset(b);
        return;
    }
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
    b->p[b->len] = '\0';
}

void sbuf_copy_cstr(char *dst, size_t n, const char *src)
{
    size_t len = src ? strnlen(src, n - 1) : 0;
    if (len == n - 1 && src[len])
        len = sbuf_utf8_cut(src, len + 1, n - 1); /* cut short: never inside a character */
    if (len)
        memcpy(dst, src, len);
    dst[len] = '\0';
}

size_t sbuf_utf8_len(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    if (!n)
        return 0;
    unsigned char c = u[0];
    if (c < 0x80)
        return 1;
    size_t k;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        k = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        k = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* above U+10FFFF */
    } else {
        return 0;
    }
    if (n < k || u[1] < lo || u[1] > hi)
        return 0;
    for (size_t i = 2; i < k; i++)
        if (u[i] < 0x80 || u[i] > 0xBF)
            return 0;
    return k;
}

size_t sbuf_utf8_cut(const char *s, size_t n, size_t max)
{
    if (n <= max)
        return n;
    /* back over continuation bytes (at most three) to the lead byte of the
     * character the cut falls in, and leave that character out when its
     * lead says it goes on past max; only s[0..max] is read */
    size_t at = max;
    for (int back = 0; back < 3 && at > 0 && ((unsigned char)s[at] & 0xC0) == 0x80; back++)
        at--;
    unsigned char lead = (unsigned char)s[at];
    size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return at < max && want > max - at ? at : max;
}

size_t sbuf_utf8_encode(char out[4], unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int sbuf_hex_digit(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

void sbuf_fmt_into(char *dst, size_t n, const char *fmt, ...)
{
    if (!dst || !n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, n, fmt, ap);
    va_end(ap);
}

char *sbuf_strdup_nonempty(const char *s)
{
    if (!s || !*s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        abort();
    return d;
}

uint64_t sbuf_hash(const char *s)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a 64 */
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

void sbuf_secret_free(char *s)
{
    if (s)
        explicit_bzero(s, strlen(s));
    free(s);
}

void sbuf_secret_wipe(sbuf *b)
{
    if (b->p)
        explicit_bzero(b->p, b->cap);
    sbuf_free(b);
}
