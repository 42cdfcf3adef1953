/* text.c: checking and escaping outside values (see text.h). */
#include "base/text.h"
#include <string.h>

/* The control character (C0, DEL or C1) at s[0..k) of a well-formed
 * character of k bytes: 1 if it is one. */
static int text_is_control(const unsigned char *s, size_t k)
{
    if (k == 1)
        return s[0] < 0x20 || s[0] == 0x7f;
    return k == 2 && s[0] == 0xC2 && s[1] < 0xA0; /* U+0080..U+009F: 0xC2 0x80..0x9F */
}

const char *text_check(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t k = sbuf_utf8_len(s + i, n - i);
        if (!k)
            return "is not valid UTF-8";
        if (text_is_control((const unsigned char *)s + i, k))
            return "contains a control character";
        i += k;
    }
    return NULL;
}

const char *text_check_str(const char *s) { return s ? text_check(s, strlen(s)) : NULL; }

int text_header_value_ok(const char *s)
{
    if (!s)
        return 0;
    for (const unsigned char *u = (const unsigned char *)s; *u; u++)
        if (*u < 0x20 ? *u != '\t' : *u == 0x7f) /* one compare for the usual byte: 7 instructions, not 11 */
            return 0;
    return 1;
}

static void text_put_hex(sbuf *out, unsigned char c)
{
    static const char hex[] = "0123456789abcdef";
    char esc[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
    sbuf_append(out, esc, 4);
}

/* 1 when the byte c is printable ASCII that text_escape copies as it is:
 * the common case, tested without a character decode or a strchr */
static int text_plain_ascii(unsigned char c, const char *also)
{
    if (c < 0x20 || c >= 0x7f || c == '\\')
        return 0;
    for (; also && *also; also++)
        if ((unsigned char)*also == c)
            return 0;
    return 1;
}

size_t text_plain_prefix(const char *s, size_t n, const char *also)
{
    size_t i = 0;
    while (i < n && text_plain_ascii((unsigned char)s[i], also))
        i++;
    return i;
}

void text_escape(sbuf *out, const char *s, size_t n, const char *also)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t run = i; /* the plain run goes in one append */
        while (run < n) {
            if (text_plain_ascii(u[run], also)) {
                run++;
                continue;
            }
            if (u[run] < 0x80) /* a control, a backslash or a byte of also */
                break;
            size_t m = sbuf_utf8_len(s + run, n - run);
            if (!m || text_is_control(u + run, m))
                break;
            run += m;
        }
        if (run > i) {
            sbuf_append(out, s + i, run - i);
            i = run;
            continue;
        }
        size_t k = sbuf_utf8_len(s + i, n - i);
        if (u[i] == '\\') {
            sbuf_append(out, "\\\\", 2);
            i++;
        } else { /* a control character, a byte that is not UTF-8, or one of also */
            for (size_t j = 0; j < (k ? k : 1); j++)
                text_put_hex(out, u[i + j]);
            i += k ? k : 1;
        }
    }
}
