/* host_check.c: is the Host header one of the gateway's own names (see
 * host_check.h)? */
#include "http/host_check.h"
#include "base/text.h"
#include "base/sbuf.h"
#include <arpa/inet.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define HOST_NAME_MAX_LEN 255

/* name[0..n) equals one of the comma-separated names of list (no case). */
static int host_in_list(const char *list, const char *name, size_t n)
{
    for (const char *p = list; p && *p;) {
        size_t k = strcspn(p, ",");
        if (k == n && strncasecmp(p, name, n) == 0)
            return 1;
        p += k;
        p += *p == ',';
    }
    return 0;
}

/* name[0..n) equals the listen host cfg (which may be written [::1] or ::1). */
static int host_is(const char *cfg, const char *name, size_t n)
{
    size_t cl = strlen(cfg);
    if (cl >= 2 && cfg[0] == '[' && cfg[cl - 1] == ']') {
        cfg++;
        cl -= 2;
    }
    return cl && cl == n && strncasecmp(cfg, name, n) == 0;
}

int host_check_allowed(const sy_config *c, const char *host)
{
    if (!host)
        return 1;
    size_t len = strlen(host);
    if (!len || len > HOST_NAME_MAX_LEN)
        return 0;
    char name[HOST_NAME_MAX_LEN + 1];
    const char *port = NULL;
    if (host[0] == '[') { /* [v6]:port */
        const char *close = strchr(host, ']');
        if (!close)
            return 0;
        snprintf(name, sizeof name, "%.*s", (int)(close - host - 1), host + 1);
        if (close[1] == ':')
            port = close + 2;
        else if (close[1])
            return 0;
        unsigned char a[16];
        if (inet_pton(AF_INET6, name, a) != 1)
            return 0;
        return !port || (*port && strspn(port, "0123456789") == strlen(port));
    }
    const char *colon = strchr(host, ':');
    if (colon && strchr(colon + 1, ':')) /* an IPv6 address without brackets is no Host */
        return 0;
    size_t n = colon ? (size_t)(colon - host) : len;
    if (colon && (!colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1)))
        return 0;
    if (n && host[n - 1] == '.') /* "localhost." is localhost */
        n--;
    if (!n)
        return 0;
    snprintf(name, sizeof name, "%.*s", (int)n, host);
    unsigned char a[4];
    if (inet_pton(AF_INET, name, a) == 1) /* an address: no name anybody could re-point */
        return 1;
    return host_is("localhost", name, n) || host_is(c->listen_host, name, n) || host_is(c->admin_host, name, n) ||
           host_in_list(c->allowed_hosts, name, n);
}

int host_check_request(const sy_config *c, struct evhttp_request *req, char *msg, size_t n)
{
    const char *host = evhttp_find_header(evhttp_request_get_input_headers(req), "Host");
    if (host_check_allowed(c, host))
        return 1;
    sbuf shown = SBUF_INIT;
    text_escape(&shown, host, strlen(host) > 80 ? 80 : strlen(host), NULL);
    snprintf(msg, n,
             "the Host header '%s' is not a name of this gateway (a guard against DNS rebinding); use "
             "127.0.0.1, localhost or the listen address, or start the gateway with --allowed-host NAME",
             shown.p ? shown.p : "");
    sbuf_free(&shown);
    return 0;
}
