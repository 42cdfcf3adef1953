/* gateway.h: the one serving context shared by the modules of a running
 * gateway (config, loop, store, pool, policy, upstream client, trace). */
#ifndef SY_GATEWAY_H
#define SY_GATEWAY_H
#include <stdint.h>
#include <event2/event.h>
#include <event2/http.h>
#include "affinity.h"
#include "config.h"
#include "policy.h"
#include "pool.h"
#include "store.h"
#include "trace.h"
#include "upstream.h"

typedef struct gateway {
    sy_config cfg;
    struct event_base *base;
    struct evhttp *http;
    store *st;
    pool *pool;
    policy_engine *policy;
    upstream *up;
    trace *trace;
    affinity *affinity;       /* session id -> account of its last turn (router.c, proxy.c) */
    size_t affinity_max;      /* the size it was made with */
    struct usage_poll *usage; /* usage_poll.c */
    struct evbuffer *chunk;   /* proxy.c: hands each client chunk to libevent (left empty) */
    uint64_t next_req_id;
    size_t active;            /* client requests in progress */
    int draining;             /* SIGTERM: stop when active reaches 0 */
} gateway;

double gateway_now(void);     /* unix seconds, fractional */

#endif
