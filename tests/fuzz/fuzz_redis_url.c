/* fuzz_redis_url.c: any bytes as a --redis address (redis_url_parse):
 * accepted, every part fits its room and holds what the form allows (a
 * port in 1..65535, a db in 0..100000, a pool of [A-Za-z0-9_.-], a host
 * or socket path without spaces or controls), and the description of it
 * never holds the password; refused, a reason and nothing kept. */
#include "fuzz_common.h"
#include "core/redis_url.h"
#include <string.h>

static int fuzz_plain(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == 0x7f)
            return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char s[REDIS_URL_MAX + 64];
    size_t len = n < sizeof s - 1 ? n : sizeof s - 1;
    memcpy(s, data, len);
    s[len] = '\0';
    redis_url u;
    char err[200];
    int rc = redis_url_parse(s, &u, err, sizeof err);
    if (rc != 0) {
        FUZZ_CHECK(rc == -1 && err[0] && strlen(err) < sizeof err);
        FUZZ_CHECK(!u.pass[0] && !u.user[0] && !u.host[0] && !u.path[0]);
        return 0;
    }
    FUZZ_CHECK(memchr(u.host, 0, sizeof u.host) && memchr(u.path, 0, sizeof u.path));
    FUZZ_CHECK(memchr(u.user, 0, sizeof u.user) && memchr(u.pass, 0, sizeof u.pass));
    FUZZ_CHECK(u.db >= 0 && u.db <= REDIS_URL_DB_MAX);
    size_t pl = strlen(u.pool);
    FUZZ_CHECK(pl >= 1 && pl <= REDIS_URL_POOL_MAX);
    for (size_t i = 0; i < pl; i++)
        FUZZ_CHECK(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.", u.pool[i]));
    if (u.is_unix) {
        FUZZ_CHECK(u.path[0] == '/' && strlen(u.path) >= 2 && fuzz_plain(u.path));
    } else {
        FUZZ_CHECK(u.host[0] && fuzz_plain(u.host) && u.port >= 1 && u.port <= 65535);
    }
    FUZZ_CHECK(!u.user[0] || u.pass[0]);
    /* the description never depends on the password: the same with another one
     * (a substring test gave false alarms when the scheme and the user spelled it) */
    char d[600], d2[600];
    redis_url_describe(&u, d, sizeof d);
    redis_url other = u;
    for (size_t i = 0; other.pass[i]; i++)
        other.pass[i] = other.pass[i] == 'x' ? 'y' : 'x';
    redis_url_describe(&other, d2, sizeof d2);
    FUZZ_CHECK(strcmp(d, d2) == 0);
    return 0;
}
