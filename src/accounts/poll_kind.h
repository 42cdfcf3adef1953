/* poll_kind.h: what one kind of per-account poll is, for the poller that
 * runs them (account_poll.c): which accounts it wants, how often, the URL
 * it GETs and what its answer means. usage_poll.c and model_poll.c each
 * define one; the poller owns the when and the how many. */
#ifndef SY_POLL_KIND_H
#define SY_POLL_KIND_H
#include "core/gateway.h"
#include "route/pool.h"
#include "base/sbuf.h"
#include "upstream/upstream.h"
#include <stddef.h>

typedef struct poll_kind {
    const char *what;        /* "usage poll", for the log */
    const char *lease_job;   /* its periodic polls take the pool's lease of this job (one instance polls), NULL none */
    size_t body_max;         /* an answer past this is cut and flagged too_large */
    long timeout_ms;
    /* seconds between polls (the setting; <= 0 off) */
    long (*every)(const gateway *gw);
    /* 1 when pa is polled at all (its kind, enabled, no operator's list, not held or refreshing) */
    int (*wanted)(const pool_account *pa);
    void (*url)(const gateway *gw, const pool_account *pa, char *out, size_t n);
    /* the answer: r and status (0 on a network error), the body (at most body_max; too_large when cut) */
    void (*answer)(gateway *gw, pool_account *pa, up_result r, int status, int too_large, const sbuf *body,
                   const char *errmsg);
} poll_kind;

#endif
