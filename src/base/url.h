/* url.h: an account's base URL checked before it is stored. The gateway
 * appends the endpoint's path to the base (…/v1 + /chat/completions), so a
 * base that already ends in an endpoint, holds a space or has no host
 * sends every request somewhere wrong; `account add`, `account update`
 * and `account import` all refuse one here (through the store's checks). */
#ifndef SY_URL_H
#define SY_URL_H
#include <stddef.h>

/* The longest base URL taken. */
#define URL_BASE_MAX 2048

/* 0 when url is a well-formed http:// or https:// base: a host (a name, an
 * IPv4 address or a [bracketed] IPv6 one), an optional port 1..65535, an
 * optional path; printable ASCII only, no user:password@, no ?query or
 * #fragment, and a path that does not end in an endpoint
 * (/chat/completions, /responses, /models, /completions, /embeddings).
 * Else -1 with why (n bytes) saying what is wrong, after "base_url", e.g.
 * "has no host", or for an endpoint "ends in the endpoint /chat/completions:
 * give the base, e.g. https://api.example.com/v1". */
int url_base_check(const char *url, char *why, size_t n);

#endif
