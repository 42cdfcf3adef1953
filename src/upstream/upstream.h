/* upstream.h: HTTP requests to upstream providers over libcurl's multi
 * interface, driven by the libevent loop (CURLMOPT_SOCKETFUNCTION and
 * CURLMOPT_TIMERFUNCTION). Connections are reused across requests. Each
 * transfer has connect, first-byte and idle timeouts; nothing blocks. */
#ifndef SY_UPSTREAM_H
#define SY_UPSTREAM_H
#include <stddef.h>
#include <event2/event.h>

typedef struct upstream upstream;
typedef struct upstream_req upstream_req;

typedef struct upstream_limits {
    long connect_timeout_ms;
    long first_byte_timeout_ms; /* request sent -> response headers */
    long idle_timeout_ms;       /* max gap between body bytes */
    int h2c;                    /* 1: http:// upstreams speak HTTP/2 without TLS (prior knowledge), so
                                 * transfers to one share connections; https:// is unchanged (ALPN) */
} upstream_limits;

typedef struct upstream_header { const char *name, *value; } upstream_header;

typedef struct upstream_spec {
    const char *url;
    const char *body;
    size_t body_len;
    const upstream_header *headers; /* extra request headers */
    size_t n_headers;
    long first_byte_timeout_ms;     /* 0: the limit given to upstream_new */
    int small_reads;                /* a stream: a 2 KiB receive buffer (1 KiB in a crowd, see upstream_transfer.c) */
    const char *method;             /* "DELETE"; NULL: POST with a body, GET without */
} upstream_spec;

/* UP_LOCAL: the gateway itself ran out of a resource (file descriptors);
 * UP_INTERNAL: the transfer could not be started (out of memory, libcurl
 * refused it). Neither is the account's fault: no cooldown, no failover. */
typedef enum {
    UP_OK = 0, UP_NETWORK, UP_TIMEOUT_CONNECT, UP_TIMEOUT_FIRST_BYTE, UP_TIMEOUT_IDLE, UP_LOCAL, UP_INTERNAL
} up_result;

typedef struct upstream_callbacks {
    /* Status line and all headers received. Return 0 to go on, -1 to abort (no more callbacks). */
    int (*on_headers)(void *ud, int status, const upstream_header *h, size_t n);
    /* Body bytes. Return 0 to go on, 1 to pause (call upstream_resume later). */
    int (*on_data)(void *ud, const char *p, size_t n);
    /* The transfer ended; the request object is freed right after. */
    void (*on_done)(void *ud, up_result r, const char *errmsg);
} upstream_callbacks;

upstream *upstream_new(struct event_base *base, const upstream_limits *lim);
void upstream_free(upstream *u);

/* Starts a transfer. NULL when it cannot start now (out of memory, libcurl
 * refused it): then no callback ever runs and the caller ends its work with
 * an error of its own. Otherwise on_done runs exactly once, never before
 * this returns (a start that fails later reports UP_INTERNAL there). */
upstream_req *upstream_start(upstream *u, const upstream_spec *spec, const upstream_callbacks *cb, void *ud);
/* Aborts; no callback runs afterwards and the request is freed. */
void upstream_cancel(upstream_req *r);
void upstream_resume(upstream_req *r);
/* This transfer's idle limit (the longest silence between body bytes) from
 * now on, in ms; > 0. A stream that delivered output gets its own (the
 * first_token policy's after_output): the deadline is set again for it. */
void upstream_set_idle(upstream_req *r, long ms);
size_t upstream_active(const upstream *u);
/* How many connections curl keeps for reuse (CURLMOPT_MAXCONNECTS): one per
 * client connection the server accepts. Transfers are not limited by it. */
void upstream_set_max_connections(upstream *u, long n);
/* Runs what curl asked to run at once (a transfer just added: its
 * connection and request) now rather than at the end of the loop turn.
 * Only where no caller of upstream_start or transfer callback is on the
 * stack: it may call back any transfer, the new one included. */
void upstream_run_due(upstream *u);
/* fn(arg) runs after each socket event or timeout curl has handled, with
 * curl and every transfer callback off the stack: where what the event
 * brought can be sent on at once rather than at the end of the loop turn. */
void upstream_set_after_io(upstream *u, void (*fn)(void *), void *arg);

#endif
