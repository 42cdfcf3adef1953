/* router.h: turns the pool into the candidate list of one request: filters
 * out accounts that cannot serve it now (disabled, endpoint unsupported,
 * cooling down, at their concurrency limit, excluded by the quota guard),
 * pins requests that continue a stored response to its owner, and asks the
 * order policy for the try order. Pure decision: no I/O, no trace. */
#ifndef SY_ROUTER_H
#define SY_ROUTER_H
#include <stddef.h>
#include <stdint.h>
#include "gateway.h"
#include "preflight.h"

typedef struct route_ctx {
    const char *endpoint;
    api_kind api;
    int is_get;
    const char *model;
    int64_t key_id;
    int64_t preferred;
    const char *previous_response_id;
} route_ctx;

typedef struct route_skip {
    int64_t account_id;
    char name[64];
    char reason[160];
} route_skip;

typedef struct route_plan {
    int64_t *ids;          /* try order */
    size_t n;
    route_skip *skips;     /* accounts left out, with why */
    size_t nskips, cap_skips;
    char strategy[32];
    int64_t pinned_owner;  /* previous_response_id owner, 0 none */
} route_plan;

void router_plan(gateway *gw, const route_ctx *ctx, route_plan *plan);
void router_plan_free(route_plan *plan);

/* 1 if pa can take this request now; else 0 and the reason in why. */
int router_available(const pool_account *pa, const route_ctx *ctx, double now, char *why, size_t n);

/* Appends a skip entry (the plan grows as needed). */
void router_skip_add(route_plan *plan, const pool_account *pa, const char *reason);

#endif
