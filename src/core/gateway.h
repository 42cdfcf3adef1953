/* core/gateway.h: the one serving context shared by the wings of a running
 * gateway (config, loop, store, pool, policy, upstream client, trace), and
 * the clock. It sits low (core/) so that the wings can see the context
 * without including the top; it names the wings' types only as incomplete
 * structs, so it includes none of them: a module that calls a wing includes
 * that wing's header itself. serve.c fills it in. */
#ifndef SY_GATEWAY_H
#define SY_GATEWAY_H
#include <stddef.h>
#include <stdint.h>
#include <event2/event.h>
#include <event2/http.h>
#include "core/config.h"

struct affinity;
struct alert_sender;
struct conn_limit;
struct oauth;
struct policy_engine;
struct pool;
struct shared;
struct store;
struct trace;
struct upstream;
struct account_poll;

typedef struct gateway {
    sy_config cfg;
    struct event_base *base;
    struct evhttp *http;
    struct evhttp *admin_http; /* --admin-listen, or NULL */
    struct store *st;
    struct pool *pool;
    struct policy_engine *policy;
    struct upstream *up;
    struct trace *trace;
    struct affinity *affinity;       /* session id -> account of its last turn (router.c, proxy.c) */
    size_t affinity_max;      /* the size it was made with */
    struct account_poll *polls; /* account_poll.c: the usage and model polls */
    struct oauth *oauth;      /* login refresh (oauth.c) */
    struct alert_sender *alerts; /* webhook alerts, sent off the loop (obs/alert.h); NULL none */
    struct shared *shared;    /* what the gateways of one pool share (shared/shared.h): local unless --redis */
    struct evbuffer *chunk;   /* proxy.c: hands each client chunk to libevent (left empty) */
    struct conn_limit *conns;        /* client connection count, cap, accept back-off */
    uint64_t next_req_id;
    size_t active;            /* client requests in progress */
    size_t body_bytes;        /* request bodies held by requests in progress */
    size_t body_reserved;     /* of which: reserved for a WebSocket turn's loopback copy (http/ws.c) */
    uint64_t refused_bodies;  /* requests refused because body_bytes would pass its budget */
    uint64_t fb_gen, fb_seen; /* health.c: policy fallbacks seen for the engine of generation fb_gen */
    double fb_at;             /* when the latest fallback was noticed, 0 never */
    int trim_due;             /* a large body was freed: give memory back to the system at the next tick */
    int draining;             /* SIGTERM: stop when active reaches 0 */
    double started_at;
    char instance[24];        /* random per start: /health says it, the run file beside the db names it */
    char admin_hash[65];      /* sha256 hex of the admin token; "" none set */
    char codex_version[32];   /* the latest client_version a client sent to GET /models (digits, letters,
                               * '.', '-', '+'); the model poll asks the ChatGPT backend with it; "" none */
    /* policy reloads (SIGHUP, admin API) */
    uint64_t policy_fallbacks_retired; /* fallbacks counted by engines since replaced */
    double policy_loaded_at;
    double policy_reload_at;  /* last attempt, 0 none */
    int policy_reload_ok;
    char policy_reload_error[512];
    /* Builds a fresh policy engine from the configured source and swaps it
     * in only if it loads and passes its self-check; the old one keeps
     * serving otherwise. Records the result for the admin API and metrics;
     * logs it as "<who>: ...". 0 / -1. Set by the top (serve.c), which
     * owns the whole gateway; the admin API calls it through here. */
    int (*reload_policies)(struct gateway *gw, const char *who);
    /* Answers a /admin/api/ path the admin API does not serve (a 404
     * listing the ones it does). Set by admin_start when the admin surface
     * shares the gateway listener, whose own 404 would list /v1 paths; the
     * server calls it through here. NULL otherwise. */
    void (*admin_unknown)(struct evhttp_request *req);
} gateway;

#define GATEWAY_TRIM_BODY ((size_t)1 << 20) /* freeing a body this large schedules a malloc_trim */

double gateway_now(void);     /* unix seconds, fractional */

#endif
