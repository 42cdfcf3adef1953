/* refuse.c: filling a dialect_error and reading the rules' name lists
 * (see refuse.h). Everything written into the error is cut to its field on
 * a UTF-8 boundary, so a long path or a client's odd type name never
 * overflows it nor leaves half a character at its end. */
#include "dialect/refuse.h"
#include "base/sbuf.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* printf of fmt into dst[n], cut on a UTF-8 boundary: formatted into a
 * larger buffer first, then copied by sbuf_copy_cstr, because vsnprintf
 * itself cuts at a byte, which may fall inside a character of a quoted
 * name. (Should the larger buffer be cut too, its broken end lies past
 * what dst can hold.) */
static void refuse_vformat(char *dst, size_t n, const char *fmt, va_list ap)
{
    char tmp[1024];
    if (vsnprintf(tmp, sizeof tmp, fmt, ap) < 0)
        tmp[0] = '\0';
    sbuf_copy_cstr(dst, n, tmp);
}

void refuse_param(dialect_error *err, const char *fmt, ...)
{
    if (!err)
        return;
    va_list ap;
    va_start(ap, fmt);
    refuse_vformat(err->param, sizeof err->param, fmt, ap);
    va_end(ap);
}

int refuse_set(dialect_error *err, const char *code, const char *fmt, ...)
{
    if (!err)
        return -1;
    err->status = 400;
    sbuf_copy_cstr(err->code, sizeof err->code, code);
    va_list ap;
    va_start(ap, fmt);
    refuse_vformat(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return -1;
}

int refuse_listed(const char (*list)[POLICY_DIALECT_NAME_MAX], size_t n, const char *name)
{
    if (!list || !name)
        return 0;
    if (n > POLICY_DIALECT_NAMES)
        n = POLICY_DIALECT_NAMES; /* a count past the rows is the policy's bug, not a reason to read past them */
    size_t len = strlen(name);
    if (len >= POLICY_DIALECT_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(list[i], name, len + 1) == 0)
            return 1;
    return 0;
}

int refuse_ignores(const policy_dialect *rules, const char *name)
{
    return rules && refuse_listed((const char (*)[POLICY_DIALECT_NAME_MAX])rules->ignore, rules->n_ignore, name);
}

int refuse_ignores2(const policy_dialect *rules, const char *prefix, const char *name)
{
    if (!rules || !rules->n_ignore || !prefix || !name)
        return 0;
    char full[POLICY_DIALECT_NAME_MAX];
    size_t a = strlen(prefix), b = strlen(name);
    if (a + b >= sizeof full)
        return 0;
    memcpy(full, prefix, a);
    memcpy(full + a, name, b + 1);
    return refuse_ignores(rules, full);
}

const char *refuse_quote(char *dst, size_t n, const char *s)
{
    if (!n)
        return dst;
    sbuf_copy_cstr(dst, n, s ? s : "");
    for (char *p = dst; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    return dst;
}
