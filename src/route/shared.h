/* shared.h: what several gateways serving one pool share, behind one
 * interface (docs/scale-out.md). Two implementations:
 *
 *   local (the default, no --redis): today's behaviour. Nothing leaves the
 *   process; a lease is always granted (oauth's single flight per account
 *   is all a lone gateway needs); nothing is ever degraded.
 *
 *   redis (shared_redis.c): the same calls over Redis. The rest of an
 *   account (cooldown, 429 ladder, open breaker, family cooldowns) is told
 *   to the others as it changes and applied from theirs; one refresh per
 *   login across the instances; the refreshed login handed to the others.
 *
 * The wings call these and never ask which one is behind: no `if (redis)`
 * anywhere else. Everything here runs on the loop and returns at once;
 * answers that need Redis come back through callbacks. Decisions on the
 * request path never wait for Redis: the local pool is the copy they read,
 * kept current by messages. */
#ifndef SY_SHARED_H
#define SY_SHARED_H
#include <stddef.h>
#include <stdint.h>
#include "core/gateway.h"
#include "route/pool.h"
#include "store/store.h"

typedef struct shared shared;
typedef struct shared_call shared_call; /* a callback not called yet; shared_call_cancel */

/* --- the refresh of a login: one instance refreshes, the others take its result --- */
typedef enum shared_refresh_verdict {
    SHARED_REFRESH_GO,      /* this instance refreshes (the lease is its, or no lease is needed) */
    SHARED_REFRESH_ADOPT,   /* a newer login is already shared: use `login` instead of refreshing */
    SHARED_REFRESH_WAIT,    /* another instance is refreshing: its login arrives by shared_login_fn */
} shared_refresh_verdict;
/* login: the shared login for ADOPT (the tokens: secrets), else NULL. */
typedef void (*shared_refresh_fn)(void *ud, shared_refresh_verdict v, const account *login);
/* A login another instance refreshed (or one found newer at a resync). */
typedef void (*shared_login_fn)(void *ud, const char *account_name, const account *login);

typedef struct shared_ops {
    const char *name; /* "local", "redis" */
    /* call fn now (and return NULL) or later (and return a handle) */
    shared_call *(*refresh_begin)(shared *sh, const pool_account *pa, shared_refresh_fn fn, void *ud);
    void (*refresh_end)(shared *sh, const char *account_name, const account *fresh);
    void (*call_cancel)(shared *sh, shared_call *c);
    void (*rest_changed)(shared *sh, pool_account *pa);
    int (*degraded)(const shared *sh, char *why, size_t n);
    void (*free)(shared *sh);
} shared_ops;

/* The common part; an implementation's own struct begins with it. */
struct shared {
    const shared_ops *ops;
    gateway *gw;
    shared_login_fn on_login;
    void *on_login_ud;
};

/* The local implementation. */
shared *shared_local_new(gateway *gw);
/* Installs sh as the pool's rest hook (pool_on_rest) when it shares
 * rests; the top calls it once gw->pool and gw->shared exist. */
void shared_attach(shared *sh);
void shared_free(shared *sh);
const char *shared_kind(const shared *sh);

/* Before refreshing pa's login (accounts/oauth.c): fn says whether to go
 * on, to take a login already shared, or to wait for another instance's
 * (then on_login brings it). fn may be called before this returns (then
 * NULL is returned); otherwise the handle cancels it. */
shared_call *shared_refresh_begin(shared *sh, const pool_account *pa, shared_refresh_fn fn, void *ud);
/* After a refresh begun with GO: fresh is the committed new login (told
 * to the others), NULL when the refresh failed (the others may try). */
void shared_refresh_end(shared *sh, const char *account_name, const account *fresh);
void shared_call_cancel(shared *sh, shared_call *c); /* its fn is not called; NULL is fine */
void shared_on_login(shared *sh, shared_login_fn fn, void *ud);

/* 1 when the shared state is out of reach (this instance serves on its
 * own state meanwhile), with why for /health; 0 (why "") otherwise. */
int shared_degraded(const shared *sh, char *why, size_t n);

#endif
