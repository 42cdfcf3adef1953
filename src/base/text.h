/* text.h: values from outside (a login file's names and ids, a token or
 * usage endpoint's claims, a client's model and headers, the admin API's
 * strings) on their way to becoming a header, a name, a log line or a
 * terminal line. The rule (docs/architecture.md, "Outside values"): refuse
 * control characters at entry (text_check), escape at output
 * (text_escape; sbuf_json_str for JSON), cut on character boundaries
 * (sbuf_utf8_cut, sbuf_copy_cstr). */
#ifndef SY_TEXT_H
#define SY_TEXT_H
#include <stddef.h>
#include "base/sbuf.h"

/* NULL when the n bytes at s may be a name, an id, a plan or a model:
 * valid UTF-8 without a control character (U+0000..U+001F, U+007F,
 * U+0080..U+009F); else why not, a short phrase ("contains a control
 * character", "is not valid UTF-8") to put after the value's name. */
const char *text_check(const char *s, size_t n);
/* text_check of a C string; NULL (nothing) passes. */
const char *text_check_str(const char *s);
/* 1 when s may be sent as an HTTP header value: no byte below 0x20 but
 * HTAB, no DEL (RFC 9110 5.5; a CR or LF would end the header and start
 * one of the sender's choosing). NULL is not a value: 0. */
int text_header_value_ok(const char *s);
/* Appends the n bytes at s for a log or terminal line: each control
 * character (C0, DEL, C1), each byte that is not part of valid UTF-8 and
 * each byte in also (NULL: none; e.g. "\"" inside a quoted field) as
 * \xNN, a backslash as \\; the rest as it is. The line shows what was
 * given, and nothing in it can end the line, move the cursor or start an
 * escape sequence. */
void text_escape(sbuf *out, const char *s, size_t n, const char *also);
/* How many of the n bytes at s text_escape copies as they are before the
 * first it does not (or is not sure of): printable ASCII other than the
 * backslash and the bytes of also. A caller may put those as they are and
 * escape only the rest (the trace's fields are almost always all plain). */
size_t text_plain_prefix(const char *s, size_t n, const char *also);

#endif
