/* router.h: turns the pool into the candidate list of one request: filters
 * out accounts that cannot serve it now (disabled, needing a login, held
 * until an operator acts, endpoint unsupported, cooling down, at their
 * concurrency limit, excluded by the quota guard),
 * pins requests that continue a stored response (previous_response_id) to
 * its owner, asks the order policy for the try order, and puts first the
 * account that issued a Codex turn state (x-codex-turn-state: a preference,
 * never a wall) or else a session's account (session affinity).
 * Pure decision: no I/O, no trace. */
#ifndef SY_ROUTER_H
#define SY_ROUTER_H
#include <stddef.h>
#include <stdint.h>
#include "core/gateway.h"
#include "route/pool.h"
#include "upstream/preflight.h"

typedef struct route_ctx {
    const char *endpoint;
    api_kind api;
    int is_get;
    const char *model;
    int64_t key_id;
    int64_t preferred;
    const char *previous_response_id;
    const char *turn_state;   /* x-codex-turn-state, NULL none */
    const char *session_id;   /* session-id / session_id, NULL none */
    char family[ACCOUNT_FAMILY_MAX]; /* the model's limit family if known (pool_family_of), "" none */
    int64_t cursor_pos;       /* balanced: the pool's position for this pick (the top asks shared_cursor_take), 0 none */
} route_ctx;

/* Room for a skip reason: a held account's names its state and the fix
 * (route/hold.h). */
#define ROUTER_WHY_MAX 256

typedef struct route_skip {
    int64_t account_id;
    char name[64];
    char reason[ROUTER_WHY_MAX];
} route_skip;

typedef struct route_plan {
    int64_t *ids;          /* try order */
    size_t n;
    route_skip *skips;     /* accounts left out, with why: the first ROUTER_SKIPS_MAX */
    size_t nskips, cap_skips;
    size_t skips_more;     /* further accounts left out, counted only (a pool of thousands) */
    size_t beyond;         /* candidates past the policy's max_attempts: not in ids */
    char strategy[32];
    int64_t pinned_owner;  /* owner of previous_response_id (the only account tried), 0 none */
    const char *pinned_by; /* "previous_response_id" | "x-codex-turn-state" (static), NULL none */
    int64_t turn_owner;    /* the account that issued the request's turn state, 0 none or unknown: it goes
                            * first while it can serve; any other account gets the request without it */
    int64_t affinity_prev; /* the account that served the session's last turn, 0 none */
    int affinity_first;    /* 1: affinity put affinity_prev first */
    int kept_first;        /* 1: the first account is kept for the request (pinned owner, turn state's
                            * issuer, session affinity), not picked: it takes no rotation position */
} route_plan;

void router_plan(gateway *gw, const route_ctx *ctx, route_plan *plan);
/* Balanced strategy: the top asks the pool's position for this request's
 * pick (shared/shared.h, shared_cursor_take) into ctx->cursor_pos before
 * router_plan, which then starts the rotation at the account of that
 * position, counted over the candidates by name (names are the pool's; ids
 * are each database's own). */
/* 1 when the request's first account is kept for it, not picked: the owner
 * of its previous_response_id, or (while it can serve now) the issuer of its
 * turn state or its session's last account. Such a turn takes no position
 * in the balanced rotation (the top asks for none), so
 * conversations, not turns, are what the rotation spreads. */
int router_kept(gateway *gw, const route_ctx *ctx);
void router_plan_free(route_plan *plan);

/* 1 if pa can take this request now; else 0 and the reason in why. */
int router_available(const pool_account *pa, const route_ctx *ctx, double now, char *why, size_t n);
/* 1 if pa could take this request now but for its concurrency limit: a
 * slot of it is what a waiting request waits for (its rest is no reason). */
int router_busy(const pool_account *pa, const route_ctx *ctx, double now);

/* When the soonest account that could serve ctx (pinned to `pinned` when
 * not 0) and is now only resting (cooling down) comes back: unix seconds,
 * with its name in name; 0 if none is resting. */
/* Until when the account rests (unix seconds; at most now when it does
 * not): its cooldown, its open breaker, or its local rate limits' refill. */
double router_rest_until(const pool_account *pa, double now);
/* Until when pa's limit family of this request's model rests (a 429 for
 * that family: only it cools, store.h account_family); 0 when it does not. */
double router_family_until(const pool_account *pa, const route_ctx *ctx, double now);
double router_soonest_return(gateway *gw, const route_ctx *ctx, int64_t pinned, double now, char *name, size_t n);

/* Appends a skip entry (the plan grows as needed, up to ROUTER_SKIPS_MAX
 * entries; past that skips_more counts them). */
#define ROUTER_SKIPS_MAX 32
void router_skip_add(route_plan *plan, const pool_account *pa, const char *reason);

/* The owner map's key of a turn state: "ts:" + its SHA-256 in hex. */
void router_turn_state_key(const char *turn_state, char key[72]);
/* Remembers that account_id issued a Codex turn state: a request carrying
 * it goes there first (persisted with the response owners). */
void router_turn_state_owner_set(gateway *gw, const char *turn_state, int64_t account_id);

#endif
