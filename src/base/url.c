/* url.c: an account's base URL checked (see url.h). Only the shape is
 * checked, never whether the host answers: that is the upstream's. */
#include "base/url.h"
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* What the gateway appends to a base: a base ending in one of these is an
 * endpoint's URL given by mistake (…/v1/chat/completions became
 * …/v1/chat/completions/chat/completions). Longest first, so the hint
 * strips all of "/chat/completions", not only "/completions". */
static const char *const url_endpoints[] = {"/chat/completions", "/completions", "/responses", "/embeddings",
                                            "/models"};

static int url_host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_';
}

/* The authority [host][:port] in a[0..n): -1 with why when it is not one. */
static int url_authority_check(const char *a, size_t n, char *why, size_t wn)
{
    if (memchr(a, '@', n)) {
        snprintf(why, wn, "holds a user:password@ (give the token with --token instead)");
        return -1;
    }
    size_t h = 0;
    if (n && a[0] == '[') { /* an IPv6 literal */
        const char *close = memchr(a, ']', n);
        if (!close || close == a + 1) {
            snprintf(why, wn, "has an unclosed or empty [IPv6] host");
            return -1;
        }
        for (const char *p = a + 1; p < close; p++)
            if (!strchr("0123456789abcdefABCDEF:.", *p)) {
                snprintf(why, wn, "has an invalid [IPv6] host");
                return -1;
            }
        h = (size_t)(close - a) + 1;
    } else {
        while (h < n && a[h] != ':') {
            if (!url_host_char(a[h])) {
                snprintf(why, wn, "has an invalid character '%c' in its host", a[h]);
                return -1;
            }
            h++;
        }
    }
    if (h == 0) {
        snprintf(why, wn, "has no host (e.g. https://api.openai.com/v1)");
        return -1;
    }
    /* a name's labels are not empty and do not start with a hyphen */
    for (size_t i = 0; a[0] != '[' && i < h; i++)
        if ((a[i] == '.' && (i == 0 || a[i - 1] == '.')) || (a[i] == '-' && (i == 0 || a[i - 1] == '.'))) {
            snprintf(why, wn, "has an invalid host name");
            return -1;
        }
    if (h == n)
        return 0;
    if (a[h] != ':') {
        snprintf(why, wn, "has an invalid host");
        return -1;
    }
    long port = 0;
    size_t digits = n - h - 1;
    for (size_t i = h + 1; i < n; i++) {
        if (a[i] < '0' || a[i] > '9' || port > 65535) {
            port = -1;
            break;
        }
        port = port * 10 + (a[i] - '0');
    }
    if (digits == 0 || port < 1 || port > 65535) {
        snprintf(why, wn, "has an invalid port (1 to 65535)");
        return -1;
    }
    return 0;
}

int url_base_check(const char *url, char *why, size_t n)
{
    char tmp[8];
    if (!why || n == 0)
        why = tmp, n = sizeof tmp;
    if (!url || !*url) {
        snprintf(why, n, "is empty");
        return -1;
    }
    size_t len = strlen(url);
    if (len > URL_BASE_MAX) {
        snprintf(why, n, "is longer than %d bytes", URL_BASE_MAX);
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)url[i];
        if (c == ' ') {
            snprintf(why, n, "contains a space");
            return -1;
        }
        if (c < ' ' || c >= 0x7f) {
            snprintf(why, n, "contains a control character or a non-ASCII byte (percent-encode it)");
            return -1;
        }
    }
    size_t scheme = strncmp(url, "https://", 8) == 0 ? 8 : strncmp(url, "http://", 7) == 0 ? 7 : 0;
    if (!scheme) {
        snprintf(why, n, "must start with http:// or https://");
        return -1;
    }
    if (strpbrk(url, "?#")) {
        snprintf(why, n, "takes no ?query or #fragment (the endpoint's path is appended to it)");
        return -1;
    }
    const char *auth = url + scheme;
    size_t alen = strcspn(auth, "/");
    if (url_authority_check(auth, alen, why, n) != 0)
        return -1;
    /* the path, without the trailing slashes the gateway drops too */
    const char *path = auth + alen;
    size_t plen = strlen(path);
    while (plen && path[plen - 1] == '/')
        plen--;
    for (size_t i = 0; i < sizeof url_endpoints / sizeof *url_endpoints; i++) {
        size_t el = strlen(url_endpoints[i]);
        if (plen >= el && strncasecmp(path + plen - el, url_endpoints[i], el) == 0) {
            int keep = (int)(path + plen - el - url);
            snprintf(why, n, "ends in the endpoint %s: give the base, e.g. %.*s (the endpoint is appended to it)",
                     url_endpoints[i], keep, url);
            return -1;
        }
    }
    return 0;
}
