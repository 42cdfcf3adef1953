/* redis_url.h: the --redis / SWITCHYARD_REDIS address, read into its parts
 * (docs/scale-out.md). Two forms:
 *
 *   redis://[[user]:password@]host[:port][/db][?pool=NAME]
 *   unix://[[user]:password@]/path/to/socket[?db=N][&pool=NAME]
 *
 * host is a name, an IPv4 address or an IPv6 one in brackets; port
 * defaults to 6379, db to 0; user and password may be percent-encoded.
 * pool names the key space the instances share (sy:{pool}:...), "default"
 * when not given. Pure: no network, no allocation; fuzzed. */
#ifndef SY_REDIS_URL_H
#define SY_REDIS_URL_H
#include <stddef.h>

#define REDIS_URL_MAX 1024     /* the whole address, bytes */
#define REDIS_URL_POOL_MAX 32  /* a pool name: [A-Za-z0-9_.-], 1..32 bytes */
#define REDIS_URL_DB_MAX 100000

typedef struct redis_url {
    int is_unix;         /* 1: path is the socket; host and port unused */
    char host[256];      /* without brackets */
    int port;
    char path[108];      /* the socket (sun_path's room) */
    char user[128];      /* "" none (AUTH password alone) */
    char pass[256];      /* "" none (no AUTH) */
    int db;              /* SELECT db when not 0 */
    char pool[REDIS_URL_POOL_MAX + 1];
} redis_url;

/* Reads s into u. Returns 0, or -1 with err saying what is wrong (never
 * quoting the password); u is zeroed first either way. */
int redis_url_parse(const char *s, redis_url *u, char *err, size_t n);

/* The address for logs and /health: the password left out
 * ("redis://app:***@10.0.0.5:6379/2 pool default"). */
void redis_url_describe(const redis_url *u, char *out, size_t n);

/* 1 when the address stays on this machine: a unix socket, localhost,
 * 127.0.0.0/8 or ::1 (a local TLS tunnel's end counts: docs/scale-out.md,
 * "Reaching a remote Redis safely"); 0 for any other host. Logins cross
 * the network in clear only to a Redis that is not local, so there
 * SWITCHYARD_REDIS_KEY is asked for by default (serve.c). */
int redis_url_is_local(const redis_url *u);

#endif
