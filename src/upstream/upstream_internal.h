/* upstream_internal.h: what upstream.c (libcurl's multi handle on the
 * libevent loop: sockets, the timer, the kick, completion) and
 * upstream_transfer.c (one transfer: its setup, deadlines, curl callbacks
 * and end, h2c) share; no other module includes it.
 *
 * The helpers both files call on a request's way are static inline here,
 * as they were static in one file before the split, so the compiler still
 * inlines them and a request costs the instructions it did
 * (docs/performance.md). */
#ifndef SY_UPSTREAM_INTERNAL_H
#define SY_UPSTREAM_INTERNAL_H
#include "upstream/upstream.h"
#include "base/log.h"
#include "base/sbuf.h"
#include <curl/curl.h>
#include <event2/event_struct.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define UP_SPARE_EASY 256
#define UP_URLS 64              /* parsed URLs kept (one per account and endpoint in use) */

/* A URL parsed once by curl and handed to every transfer to it
 * (CURLOPT_CURLU): curl otherwise parses the URL text again on every
 * transfer and writes it back out through its printf engine, about
 * 10 000 instructions per request. */
typedef struct up_url {
    char *url;     /* NULL: free slot */
    uint64_t hash;
    CURLU *h;
    unsigned refs; /* transfers using h: it is freed only when none is */
    uint64_t origin; /* http:// URLs: a hash of "host:port" (0: another scheme) */
} up_url;

/* An http:// origin (host and port) spoken to in h2c: its one connection
 * (see upstream_h2c_plan). */
enum { UP_H2C_NONE, UP_H2C_OPENING, UP_H2C_OPEN };
typedef struct up_origin {
    uint64_t key;          /* up_url.origin; 0: free slot */
    int state;
    upstream_req *opener;  /* OPENING: the transfer opening the connection */
    upstream_req *waiting; /* OPENING: transfers to start once it is open (linked by wait_next) */
    curl_socket_t fd;      /* OPEN: its socket */
} up_origin;

struct upstream {
    struct event_base *base;
    CURLM *multi;
    struct event *timer;
    struct event *kick;
    upstream_limits lim;
    size_t active;
    int in_curl;
    int due_now;              /* curl asked to be run at once (a zero timeout) */
    void (*after_io)(void *); /* upstream_set_after_io */
    void *after_io_arg;
    upstream_req *pending; /* linked by next: to add or to remove when curl is off the stack */
    upstream_req *settled; /* linked by settled_next: streams whose request headers go (upstream_drop_sent) */
    upstream_req *spare[UP_SPARE_EASY]; /* idle transfers with their easy handles (see upstream_req_take) */
    size_t n_spare;
    struct up_sock **socks;     /* by descriptor: sockets on the loop */
    size_t n_socks;
    uint64_t fd_failures;       /* socket() failed for want of descriptors (EMFILE/ENFILE) */
    upstream *next_live;        /* this thread's upstreams, for poll() */
    int proxy_env;              /* a proxy environment variable is set: curl reads them per transfer */
    char accept_encoding[64];   /* "Accept-Encoding: " + every encoding this libcurl decodes */
    up_url urls[UP_URLS];
    size_t url_next;            /* the next slot to reuse */
    up_origin origins[UP_URLS]; /* h2c origins (SWITCHYARD_UPSTREAM_H2C) */
};

struct upstream_req {
    upstream *u;
    CURL *easy;
    struct curl_slist *hdrs;
    up_url *url;             /* the parsed URL it uses, NULL if curl parses the text itself */
    upstream_callbacks cb;
    void *ud;
    struct event deadline;   /* connect backstop, then first-byte (from the request sent), then idle */
    struct timespec last_data; /* the idle limit runs from here (CLOCK_MONOTONIC); see upstream_on_deadline */
    long first_byte_ms;      /* this transfer's first-byte limit */
    long idle_ms;            /* this transfer's idle limit (upstream_set_idle; the limits' by default) */
    int sent;                /* connected; the request is being sent (curl's pre-request callback ran) */
    char errbuf[CURL_ERROR_SIZE];
    sbuf hbuf;               /* header storage: name\0value\0..., emptied once handed on */
    size_t n_headers;
    int status;
    int headers_done;
    int added;               /* in the multi handle */
    uint64_t fd_failures_at_start; /* u->fd_failures when this transfer started */
    int cancelled;           /* no callbacks any more; free when curl is off the stack */
    int paused;
    int on_pending;          /* queued for the kick: the kick owns freeing it */
    upstream_req *next;
    int small_reads;         /* a stream (upstream_spec) */
    int on_settled;          /* queued on u->settled */
    upstream_req *settled_next;
    up_origin *h2c;          /* an h2c transfer: its origin */
    upstream_req *wait_next; /* on h2c->waiting */
};

/* ---- defined in upstream.c ---- */

/* curl's socket open and close functions, set on every handle (upstream_req_take). */
curl_socket_t upstream_open_socket(void *uarg, curlsocktype purpose, struct curl_sockaddr *a);
int upstream_close_socket(void *uarg, curl_socket_t fd);
/* Detaches r from the multi, tells the user how it ended (once) and frees it. */
void upstream_end(upstream_req *r, up_result res, const char *msg);

/* ---- defined in upstream_transfer.c ---- */

/* Ends a transfer that curl is done with or that was cancelled: its handle
 * is kept for the next transfer (upstream_req_take) or freed. */
void upstream_req_free(upstream_req *r);
/* Frees a transfer and its handle: a kept one, or one whose start failed. */
void upstream_req_destroy(upstream_req *r);
/* The origin's connection opened (or its opener ended without one): its
 * waiting transfers go to curl through the kick (curl may be on the stack). */
void upstream_h2c_wake(up_origin *o);
/* For upstream_new: the Accept-Encoding header every transfer sends, and
 * whether a proxy variable is set (see upstream_transfer.c). */
void upstream_accept_encoding(upstream *u);
int upstream_proxy_env(void);

/* ---- inline: called by both files on a request's way ---- */

/* Frees a request's header list: one block (upstream_build_headers). */
static inline void upstream_headers_free(struct curl_slist *h) { free(h); }

/* Hands r to curl; 0 when it refused (r is then not in the multi handle). */
static inline int upstream_add_now(upstream_req *r)
{
    if (curl_multi_add_handle(r->u->multi, r->easy) != CURLM_OK) {
        log_warn("upstream: libcurl refused a transfer (curl_multi_add_handle failed)");
        return -1;
    }
    r->added = 1;
    return 0;
}

/* Queues r for the kick, which adds it to the multi handle (or frees it
 * if cancelled) once curl is off the stack. */
static inline void upstream_defer(upstream_req *r)
{
    if (r->on_pending)
        return;
    r->on_pending = 1;
    r->next = r->u->pending;
    r->u->pending = r;
    event_active(r->u->kick, EV_TIMEOUT, 1);
}

#endif
