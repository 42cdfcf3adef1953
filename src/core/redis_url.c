/* redis_url.c: the Redis address in its parts (see redis_url.h). Every part
 * is checked against its room and its characters before it is copied; an
 * error names the part, never the password. */
#include "core/redis_url.h"
#include <arpa/inet.h>
#include <strings.h>
#include <stdio.h>
#include <string.h>

static int redis_url_fail(char *err, size_t n, const char *what)
{
    if (err && n)
        snprintf(err, n, "%s", what);
    return -1;
}

static int redis_url_hex(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decodes s[0..len) into out (cap bytes, NUL-terminated). -1 on a
 * bad escape, an encoded NUL or no room. */
static int redis_url_decode(const char *s, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= len)
                return -1;
            int hi = redis_url_hex(s[i + 1]), lo = redis_url_hex(s[i + 2]);
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                return -1;
            c = (char)(hi * 16 + lo);
            i += 2;
        }
        if (o + 1 >= cap)
            return -1;
        out[o++] = c;
    }
    out[o] = '\0';
    return 0;
}

/* A whole decimal number in [min, max] from s[0..len). */
static int redis_url_number(const char *s, size_t len, long min, long max, long *v)
{
    if (!len || len > 9)
        return -1;
    long x = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        x = x * 10 + (s[i] - '0');
    }
    if (x < min || x > max)
        return -1;
    *v = x;
    return 0;
}

static int redis_url_pool_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.';
}

/* The query's parameters: pool always, db where db_ok (unix sockets). */
static int redis_url_query(const char *q, redis_url *u, int db_ok, char *err, size_t n)
{
    int seen_pool = 0, seen_db = 0;
    while (*q) {
        const char *amp = strchr(q, '&');
        size_t len = amp ? (size_t)(amp - q) : strlen(q);
        const char *eq = memchr(q, '=', len);
        if (!eq)
            return redis_url_fail(err, n, "a query parameter without '=' (expected pool=NAME or db=N)");
        size_t klen = (size_t)(eq - q), vlen = len - klen - 1;
        const char *v = eq + 1;
        if (klen == 4 && memcmp(q, "pool", 4) == 0 && !seen_pool) {
            if (!vlen || vlen > REDIS_URL_POOL_MAX)
                return redis_url_fail(err, n, "pool: expected 1 to 32 characters");
            for (size_t i = 0; i < vlen; i++)
                if (!redis_url_pool_char(v[i]))
                    return redis_url_fail(err, n, "pool: only letters, digits, '_', '-' and '.'");
            memcpy(u->pool, v, vlen);
            u->pool[vlen] = '\0';
            seen_pool = 1;
        } else if (klen == 2 && memcmp(q, "db", 2) == 0 && db_ok && !seen_db) {
            long db;
            if (redis_url_number(v, vlen, 0, REDIS_URL_DB_MAX, &db) != 0)
                return redis_url_fail(err, n, "db: expected a whole number from 0 to 100000");
            u->db = (int)db;
            seen_db = 1;
        } else {
            return redis_url_fail(err, n, db_ok ? "unknown or repeated query parameter (expected pool=NAME, db=N)"
                                                 : "unknown or repeated query parameter (expected pool=NAME; the "
                                                   "database is the path: redis://host:port/DB)");
        }
        q += len + (amp ? 1 : 0);
        if (amp && !*q)
            return redis_url_fail(err, n, "the query ends with '&'");
    }
    return 0;
}

/* user:password (either may be empty) from s[0..len). */
static int redis_url_userinfo(const char *s, size_t len, redis_url *u, char *err, size_t n)
{
    const char *colon = memchr(s, ':', len);
    if (!colon)
        return redis_url_fail(err, n, "the part before '@' must be user:password or :password");
    size_t ulen = (size_t)(colon - s);
    if (redis_url_decode(s, ulen, u->user, sizeof u->user) != 0)
        return redis_url_fail(err, n, "the user name is too long or has a bad %-escape");
    if (redis_url_decode(colon + 1, len - ulen - 1, u->pass, sizeof u->pass) != 0)
        return redis_url_fail(err, n, "the password is too long or has a bad %-escape");
    if (u->user[0] && !u->pass[0])
        return redis_url_fail(err, n, "a user name without a password");
    return 0;
}

static int redis_url_host_char(char c, int bracketed)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
        c == '_')
        return 1;
    return bracketed && (c == ':' || c == '%');
}

static int redis_url_tcp(const char *rest, redis_url *u, char *err, size_t n)
{
    const char *q = strchr(rest, '?');
    size_t mainlen = q ? (size_t)(q - rest) : strlen(rest);
    const char *slash = memchr(rest, '/', mainlen);
    size_t alen = slash ? (size_t)(slash - rest) : mainlen;
    /* the last '@' of the authority: a password may hold one unencoded */
    const char *at = NULL;
    for (size_t i = 0; i < alen; i++)
        if (rest[i] == '@')
            at = rest + i;
    const char *h = rest;
    if (at) {
        if (redis_url_userinfo(rest, (size_t)(at - rest), u, err, n) != 0)
            return -1;
        h = at + 1;
    }
    const char *hend = rest + alen, *port = NULL;
    size_t hlen;
    int bracketed = 0;
    if (h < hend && *h == '[') {
        const char *close = memchr(h, ']', (size_t)(hend - h));
        if (!close)
            return redis_url_fail(err, n, "an IPv6 host without its closing ']'");
        bracketed = 1;
        hlen = (size_t)(close - h - 1);
        if (close + 1 < hend) {
            if (close[1] != ':')
                return redis_url_fail(err, n, "after the IPv6 host ']' only ':PORT' may follow");
            port = close + 2;
        }
        h++;
    } else {
        const char *colon = memchr(h, ':', (size_t)(hend - h));
        hlen = colon ? (size_t)(colon - h) : (size_t)(hend - h);
        if (colon)
            port = colon + 1;
    }
    if (!hlen)
        return redis_url_fail(err, n, "no host (redis://HOST:PORT/DB)");
    if (hlen >= sizeof u->host)
        return redis_url_fail(err, n, "the host name is too long");
    for (size_t i = 0; i < hlen; i++)
        if (!redis_url_host_char(h[i], bracketed))
            return redis_url_fail(err, n, bracketed ? "the IPv6 host has a character it cannot have"
                                                    : "the host has a character it cannot have (IPv6: [addr])");
    memcpy(u->host, h, hlen);
    u->host[hlen] = '\0';
    u->port = 6379;
    if (port) {
        long p;
        if (redis_url_number(port, (size_t)(hend - port), 1, 65535, &p) != 0)
            return redis_url_fail(err, n, "the port: expected a number from 1 to 65535");
        u->port = (int)p;
    }
    if (slash && slash + 1 < rest + mainlen) {
        long db;
        if (redis_url_number(slash + 1, (size_t)(rest + mainlen - slash - 1), 0, REDIS_URL_DB_MAX, &db) != 0)
            return redis_url_fail(err, n, "the database (the path): expected a whole number from 0 to 100000");
        u->db = (int)db;
    }
    return q ? redis_url_query(q + 1, u, 0, err, n) : 0;
}

static int redis_url_unix(const char *rest, redis_url *u, char *err, size_t n)
{
    const char *q = strchr(rest, '?');
    size_t mainlen = q ? (size_t)(q - rest) : strlen(rest);
    const char *p = rest;
    if (mainlen && *rest != '/') { /* user:password@/path */
        const char *at = NULL;
        for (size_t i = 0; i < mainlen; i++)
            if (rest[i] == '@' && i + 1 < mainlen && rest[i + 1] == '/')
                at = rest + i;
        if (!at)
            return redis_url_fail(err, n, "expected unix:///path/to/socket (or unix://:password@/path)");
        if (redis_url_userinfo(rest, (size_t)(at - rest), u, err, n) != 0)
            return -1;
        p = at + 1;
    }
    size_t plen = (size_t)(rest + mainlen - p);
    if (plen < 2 || *p != '/')
        return redis_url_fail(err, n, "expected an absolute socket path: unix:///path/to/socket");
    if (plen >= sizeof u->path)
        return redis_url_fail(err, n, "the socket path is longer than a unix socket address holds (107 bytes)");
    memcpy(u->path, p, plen);
    u->path[plen] = '\0';
    u->is_unix = 1;
    return q ? redis_url_query(q + 1, u, 1, err, n) : 0;
}

int redis_url_parse(const char *s, redis_url *u, char *err, size_t n)
{
    memset(u, 0, sizeof *u);
    if (err && n)
        err[0] = '\0';
    if (!s || !*s)
        return redis_url_fail(err, n, "empty address");
    size_t len = strnlen(s, REDIS_URL_MAX + 1);
    if (len > REDIS_URL_MAX)
        return redis_url_fail(err, n, "the address is longer than 1024 bytes");
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
            return redis_url_fail(err, n, "the address has a space or a control character");
    snprintf(u->pool, sizeof u->pool, "default");
    int rc;
    if (strncasecmp(s, "redis://", 8) == 0)
        rc = redis_url_tcp(s + 8, u, err, n);
    else if (strncasecmp(s, "unix://", 7) == 0)
        rc = redis_url_unix(s + 7, u, err, n);
    else
        rc = redis_url_fail(err, n, "expected redis://[user:password@]host:port/db or unix:///path/to/socket?db=N "
                                    "(rediss:// with TLS is not supported)");
    if (rc != 0) {
        char keep[256] = "";
        if (err && n)
            snprintf(keep, sizeof keep, "%s", err);
        memset(u, 0, sizeof *u); /* nothing half-read, no password left behind */
        if (err && n)
            snprintf(err, n, "%s", keep);
    }
    return rc;
}

void redis_url_describe(const redis_url *u, char *out, size_t n)
{
    char auth[200] = "";
    if (u->pass[0])
        snprintf(auth, sizeof auth, "%.128s:***@", u->user);
    if (u->is_unix)
        snprintf(out, n, "unix://%s%s?db=%d pool %s", auth, u->path, u->db, u->pool);
    else if (strchr(u->host, ':'))
        snprintf(out, n, "redis://%s[%s]:%d/%d pool %s", auth, u->host, u->port, u->db, u->pool);
    else
        snprintf(out, n, "redis://%s%s:%d/%d pool %s", auth, u->host, u->port, u->db, u->pool);
}

int redis_url_is_local(const redis_url *u)
{
    if (u->is_unix)
        return 1;
    if (strcasecmp(u->host, "localhost") == 0 || strcmp(u->host, "::1") == 0)
        return 1;
    struct in_addr a;
    return inet_pton(AF_INET, u->host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}
