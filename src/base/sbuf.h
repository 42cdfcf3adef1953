/* sbuf.h: a growable byte string, used for bodies, JSON output and buffers.
 * Allocation failure aborts (the gateway cannot do useful work without memory). */
#ifndef SY_SBUF_H
#define SY_SBUF_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sbuf {
    char *p;    /* always NUL-terminated when cap > 0 */
    size_t len;
    size_t cap;
} sbuf;

#define SBUF_INIT {0, 0, 0}

void sbuf_free(sbuf *b);
void sbuf_reset(sbuf *b); /* len = 0, keeps memory */
/* Empties b, keeping its memory only when it is at most max bytes (a
 * buffer kept for reuse: a small one saves the next fill its allocations,
 * a large one is not held on to). */
void sbuf_keep(sbuf *b, size_t max);
void sbuf_append(sbuf *b, const void *p, size_t n);
/* Makes room for extra more bytes (and the NUL) without changing len. */
void sbuf_reserve(sbuf *b, size_t extra);
void sbuf_puts(sbuf *b, const char *s);
void sbuf_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sbuf_vprintf(sbuf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Appends v in decimal: sbuf_printf(b, "%lld", v) without the format engine. */
void sbuf_put_int(sbuf *b, long long v);
/* Appends v as printf's "%.*f" would (prec 0..9): the usual magnitudes
 * without the format engine, the rest (and exact ties) through it. */
void sbuf_put_fixed(sbuf *b, double v, int prec);
/* Appends s (n bytes) as a JSON string literal, quotes included: control
 * characters and DEL escaped, bytes that are not valid UTF-8 written as
 * U+FFFD, so the output is always valid JSON text. */
void sbuf_json_str(sbuf *b, const char *s, size_t n);
void sbuf_consume(sbuf *b, size_t n); /* drops the first n bytes */
/* Copies the C string src into dst[n] (n > 0), always NUL-terminated: as
 * snprintf(dst, n, "%s", src), but cut short (when it does not fit) on a
 * UTF-8 character boundary, never inside a character. */
void sbuf_copy_cstr(char *dst, size_t n, const char *src);
/* The length of the well-formed UTF-8 character at s[0..n): 1 for ASCII,
 * 2..4, or 0 when it is none (a stray or cut-short sequence, an overlong
 * form, a surrogate, above U+10FFFF). */
size_t sbuf_utf8_len(const char *s, size_t n);
/* How many of the n bytes at s to keep when at most max may stay: max, or less
 * so as not to end inside a UTF-8 character (for "%.*s" and fixed-size
 * copies of names and models). n itself when n <= max. */
size_t sbuf_utf8_cut(const char *s, size_t n, size_t max);
/* snprintf(dst, n, fmt, ...) that does nothing when dst is NULL or n is 0:
 * for the optional "char *err, size_t errlen" of APIs that explain failures. */
void sbuf_fmt_into(char *dst, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The UTF-8 bytes of code point cp (<= U+10FFFF) into out; returns 1..4. */
size_t sbuf_utf8_encode(char out[4], unsigned cp);
/* The value of a hex digit, -1 if c is not one. */
int sbuf_hex_digit(int c);
/* FNV-1a of the C string s (NULL hashes as ""): for hash tables and for
 * noticing a change, never for secrecy. */
uint64_t sbuf_hash(const char *s);
/* A heap copy of s, or NULL when s is NULL or empty (aborts without memory). */
char *sbuf_strdup_nonempty(const char *s);
/* Zeroes a heap string (a token, a key) and frees it; NULL is fine. */
void sbuf_secret_free(char *s);
/* Zeroes b's whole buffer and frees it. */
void sbuf_secret_wipe(sbuf *b);

#endif
