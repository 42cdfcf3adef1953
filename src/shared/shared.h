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
 *   Who holds what (the account that produced a response, issued a turn
 *   state, minted a blob, served a session's last turn) is written out as
 *   it is recorded here, and asked for once when a request names something
 *   the local copy does not know (a turn that reached another instance).
 *   An account's max_concurrency holds across the instances: a slot is a
 *   lease in Redis, taken before the attempt, renewed while it runs, given
 *   back at its end, expiring when its instance dies.
 *
 * The wings call these and never ask which one is behind: no `if (redis)`
 * anywhere else. Everything here runs on the loop and returns at once;
 * answers that need Redis come back through callbacks. Decisions on the
 * request path read the local copy, kept current by messages; the two
 * exceptions wait at most SHARED_ASK_MS, and only where the local copy
 * cannot decide: shared_ask (records it does not know) and shared_slot_take
 * (a slot of an account with a limit the local count still allows). */
#ifndef SY_SHARED_H
#define SY_SHARED_H
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>
#include "base/conv_link.h"
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

/* --- who holds what: a request's question for the records it misses --- */
#define SHARED_ASK_MAX 32  /* records one request asks for; more are left unknown */
#define SHARED_ASK_KEY 128 /* longest key asked for (response ids, "ts:"/"bl:" keys, session ids) */
typedef enum shared_ask_kind {
    SHARED_ASK_OWNER,   /* the pool's owner map (pool_owner_get): response id, "ts:" turn state, "bl:" blob */
    SHARED_ASK_SESSION, /* session affinity (affinity_get): a session id */
} shared_ask_kind;
typedef struct shared_ask {
    size_t n;
    unsigned char kind[SHARED_ASK_MAX];
    char key[SHARED_ASK_MAX][SHARED_ASK_KEY];
} shared_ask;
/* Adds one record to ask for; 0, or -1 (full, too long or empty: left unknown). */
int shared_ask_add(shared_ask *q, shared_ask_kind kind, const char *key);
/* Fills q with the records the request needs and the local copy misses. */
typedef void (*shared_ask_build_fn)(void *ud, shared_ask *q);
/* The answers are in the local copies (or none came in time). */
typedef void (*shared_ask_done_fn)(void *ud);

/* --- a slot of an account's max_concurrency across the gateways --- */
/* granted 1: the attempt may start (the slot is its, or the shared count
 * could not be had and the local count decided: then inflight says why,
 * SHARED_SLOT_LATE or SHARED_SLOT_FAILED); 0: the account is at its limit
 * across the gateways, inflight slots held there. */
#define SHARED_SLOT_LATE -1   /* no answer within SHARED_ASK_MS */
#define SHARED_SLOT_FAILED -2 /* the link dropped before the answer, or Redis answered an error */
typedef void (*shared_slot_fn)(void *ud, int granted, int inflight);

/* --- stored conversations: a chain read from the other gateways --- */
/* chain (n turns, oldest first, valid during the call; each account_id
 * this instance's, 0 for an account it does not have) and missing (""
 * when chain[0] is the conversation's first turn, else the id it continued
 * that the pool does not hold), or chain NULL and err saying why. */
typedef void (*shared_chain_fn)(void *ud, const conv_link *chain, size_t n, const char *missing, const char *err);
/* --- the balanced strategy's rotation across the gateways --- */
/* pos: the pool's position for this pick (1, 2, ...), 0 none (the local
 * cursor decides). */
typedef void (*shared_cursor_fn)(void *ud, int64_t pos);

typedef struct shared_ops {
    const char *name; /* "local", "redis" */
    /* call fn now (and return NULL) or later (and return a handle) */
    shared_call *(*refresh_begin)(shared *sh, const pool_account *pa, shared_refresh_fn fn, void *ud);
    void (*refresh_end)(shared *sh, const char *account_name, const account *fresh);
    void (*call_cancel)(shared *sh, shared_call *c);
    void (*rest_changed)(shared *sh, pool_account *pa);
    void (*owner_told)(shared *sh, const char *key, int64_t account_id);
    void (*session_told)(shared *sh, const char *session, int64_t account_id);
    shared_call *(*ask)(shared *sh, shared_ask_build_fn build, shared_ask_done_fn done, void *ud);
    shared_call *(*slot_take)(shared *sh, const pool_account *pa, uint64_t *slot, shared_slot_fn fn, void *ud);
    void (*slot_give)(shared *sh, uint64_t slot);
    int (*degraded)(const shared *sh, char *why, size_t n);
    void (*free)(shared *sh);
    /* stored conversations (shared_turn_tell, shared_turn_forget, shared_chain_get) */
    void (*turn_told)(shared *sh, const conv_link *turn);
    void (*turn_forgot)(shared *sh, const char *response_id);
    shared_call *(*chain_get)(shared *sh, const char *response_id, size_t max_depth, size_t max_bytes,
                              shared_chain_fn fn, void *ud);
    /* once per pool: a job's lease, and the usage numbers a poll got (shared_lease_take) */
    shared_call *(*lease_take)(shared *sh, const char *job, const char *id, long ttl_ms,
                               void (*fn)(void *ud, int granted), void *ud);
    void (*lease_release)(shared *sh, const char *job, const char *id);
    void (*usage_told)(shared *sh, const pool_account *pa);
    /* the balanced rotation (shared_cursor_take) */
    shared_call *(*cursor_take)(shared *sh, const char *key, const char *model, int64_t *pos, shared_cursor_fn fn,
                                void *ud);
} shared_ops;

/* The common part; an implementation's own struct begins with it. */
struct shared {
    const shared_ops *ops;
    gateway *gw;
    shared_login_fn on_login;
    void *on_login_ud;
    /* rate limits and budgets across the gateways (shared_limits_install; NULL: the local behaviour) */
    const struct shared_limits_ops *limits;
    void *limits_impl;
};

/* The local implementation. */
shared *shared_local_new(gateway *gw);
/* Installs sh as the pool's rest and owner hooks (pool_on_rest,
 * pool_on_owner) when it shares them; the top calls it once gw->pool and
 * gw->shared exist. */
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

/* Records the local copy misses, asked for once (a request's one round
 * trip): build is called only when there is somewhere to ask (never by the
 * local implementation, nor while Redis is out of reach); NULL is returned
 * when nothing is asked (go on at once: done is not called). Otherwise done
 * is called once, within SHARED_ASK_MS, after what was found went into the
 * pool's owner map and the affinity table (a late answer still goes there,
 * for the next request); shared_call_cancel stops it. */
#define SHARED_ASK_MS 50 /* the default of SWITCHYARD_REDIS_WAIT_MS (shared_wait) */
shared_call *shared_ask_send(shared *sh, shared_ask_build_fn build, shared_ask_done_fn done, void *ud);
/* The session now belongs to account_id (affinity_put said it is worth
 * telling): the other gateways can ask for it. Owner records are told by
 * the pool's owner hook (pool_on_owner), installed by shared_attach. */
void shared_session_tell(shared *sh, const char *session, int64_t account_id);

/* Before an attempt on pa, an account with a max_concurrency that the
 * local count (pa->inflight) still allows: takes one of its slots across
 * the gateways (the request's round trip). NULL: go on now (the local
 * count decides: a lone gateway, Redis out of reach); otherwise fn is
 * called once within SHARED_ASK_MS (an answer too late counts as none:
 * the local count decides). *slot is set either way: hand it to
 * shared_slot_give when the attempt ends, or at once when fn says 0 or
 * the call is cancelled (0: nothing to give). */
shared_call *shared_slot_take(shared *sh, const pool_account *pa, uint64_t *slot, shared_slot_fn fn, void *ud);
void shared_slot_give(shared *sh, uint64_t slot);

/* 1 when the shared state is out of reach (this instance serves on its
 * own state meanwhile), 2 when it is reachable but slower than a request
 * waits for it (each wait runs out: the local copy decides), with why for
 * /health; 0 (why "") otherwise. */
int shared_degraded(const shared *sh, char *why, size_t n);

/* --- stored conversations across the gateways (docs/scale-out.md, "Stored conversations") ---
 * A turn recorded here (proxy_move.c, beside the store's record) is told
 * to the others, no answer awaited; a request whose stored conversation
 * must move to another account and that this instance cannot rebuild on
 * its own record asks for the chain once, and only then: a continuation
 * whose owner serves it never reads it. The local implementation tells
 * nothing and has nothing to ask (shared_chain_get returns NULL). */
#define SHARED_CHAIN_MS 250 /* a chain carries up to its byte limit, not a few names: longer than SHARED_ASK_MS */
void shared_turn_tell(shared *sh, const conv_link *turn);
/* The turn of response_id was deleted (DELETE /v1/responses/{id}). */
void shared_turn_forget(shared *sh, const char *response_id);
/* The chain that ends at response_id, from the other gateways' record
 * (at most max_depth turns, max_bytes of input and output). NULL: nowhere
 * to ask (fn is not called); otherwise fn is called once, within
 * SHARED_CHAIN_MS (no answer by then: chain NULL, err says so), unless
 * shared_call_cancel stops it. */
shared_call *shared_chain_get(shared *sh, const char *response_id, size_t max_depth, size_t max_bytes,
                              shared_chain_fn fn, void *ud);
/* --- once per pool: what one instance does for all (docs/scale-out.md, "Once per pool") --- */
/* granted 1: this instance does the job now (the lease is its, or Redis is
 * out of reach and each instance does its own, as a lone gateway would);
 * 0: another instance holds the lease and does it. */
typedef void (*shared_lease_fn)(void *ud, int granted);
/* The lease of a job (`usage`, `migrate`, ...) on id (an account name, a
 * key), sy:{POOL}:lease:JOB:ID in Redis: granted when nobody holds it or
 * this instance already does (then it is renewed), held for ttl_ms unless
 * released sooner, so it ends with its instance. The local implementation
 * always grants. fn is called once: now (NULL is returned) or later
 * (shared_call_cancel stops it). Not for the request path: it may wait a
 * round trip, or the first seconds of a start for the link. */
shared_call *shared_lease_take(shared *sh, const char *job, const char *id, long ttl_ms, shared_lease_fn fn,
                               void *ud);
/* Gives the lease back before its time; only this instance's own lease is
 * deleted (a compare-and-delete), never one another instance took since. */
void shared_lease_release(shared *sh, const char *job, const char *id);
/* pa's usage numbers (plan, windows, credits) were just polled here: the
 * other instances take them (newer than theirs) instead of polling. */
void shared_usage_tell(shared *sh, const pool_account *pa);
/* --- rate limits and budgets across the gateways (shared/shared_limits.c) ---
 * A platform key's rpm and an account's rpm and tpm are token buckets in
 * the pool, taken from by one script per request (atomic across the
 * gateways, on Redis's clock); what a finished request cost is added to
 * the pool's total of each budget it was charged to. The local buckets and
 * totals stay what the request path reads: every answer (a late one too)
 * brings them to the pool's, so a local "no" needs no round trip (the
 * pool's level is never above the local one), and while Redis is out of
 * reach the local ones decide alone. Installed at run time by the module
 * that shares them (its Redis code lives apart from shared_redis.c, which
 * it needs); until then, and for a lone gateway, nothing is asked: a take
 * returns NULL and the local bucket has decided. */
typedef struct shared_limits_call shared_limits_call; /* a take awaiting the pool's answer */
typedef enum shared_bucket_verdict {
    SHARED_BUCKET_TAKEN, /* the pool's buckets took this request */
    SHARED_BUCKET_LOCAL, /* no answer within SHARED_ASK_MS: the local bucket decides */
    SHARED_BUCKET_EMPTY, /* the pool's bucket is used up; wait_s until it holds a request again */
    SHARED_BUCKET_FAILED, /* the link dropped before the answer, or Redis answered an error: the local bucket decides */
} shared_bucket_verdict;
typedef void (*shared_bucket_fn)(void *ud, shared_bucket_verdict v, double wait_s);
typedef struct shared_limits_ops {
    shared_limits_call *(*key_take)(void *impl, int64_t key_id, shared_bucket_fn fn, void *ud);
    shared_limits_call *(*account_take)(void *impl, const pool_account *pa, shared_bucket_fn fn, void *ud);
    void (*account_give)(void *impl, const pool_account *pa);
    void (*account_tokens)(void *impl, const pool_account *pa, long tokens);
    void (*spend)(void *impl, int64_t key_id, int64_t account_id, double usd);
    void (*cancel)(void *impl, shared_limits_call *c);
    int (*reachable)(void *impl); /* 1: the link is up now */
} shared_limits_ops;
/* ops on impl answer the calls below from now on (NULL, NULL: no more). */
void shared_limits_install(shared *sh, const shared_limits_ops *ops, void *impl);

/* After the key's own rules passed locally (key_rules_check took from its
 * local bucket): a key with an rpm limit takes from the pool's bucket too.
 * NULL: go on now (fn is never called); otherwise fn is called once within
 * SHARED_ASK_MS unless cancelled. */
shared_limits_call *shared_key_bucket_take(shared *sh, int64_t key_id, shared_bucket_fn fn, void *ud);
/* Before an attempt on pa, an account with an rpm or tpm limit its local
 * buckets allow: one request from the pool's rpm bucket (the tpm bucket
 * must hold a token). TAKEN in time leaves the local rpm bucket one
 * request above the pool's: the attempt takes it (account_limits_start);
 * an attempt that does not start after TAKEN gives it back. */
shared_limits_call *shared_account_bucket_take(shared *sh, const pool_account *pa, shared_bucket_fn fn, void *ud);
void shared_account_bucket_give(shared *sh, const pool_account *pa);
/* pa's answer used tokens (after account_limits_usage): from the pool's tpm bucket too. */
void shared_account_tokens(shared *sh, const pool_account *pa, long tokens);
/* A finished request cost usd (after spend_charge): added to the pool's
 * total of its key's and account's budgets; the local totals rise to the
 * pool's as its answer comes (no request waits for it). */
void shared_spend_tell(shared *sh, int64_t key_id, int64_t account_id, double usd);
void shared_limits_cancel(shared *sh, shared_limits_call *c); /* fn is not called; NULL is fine */
/* Whether the pool's word on a limit can be asked for now: -1 the limits
 * are not shared (a lone gateway: the local buckets and counts are the
 * whole story), 1 the link is up, 0 it is down (a take returns NULL and the
 * local copy decides; shared/limits_fail.h refuses instead when closed). */
int shared_limits_reachable(const shared *sh);
/* --- the balanced rotation, shared (docs/scale-out.md, "Routing") --- */
/* The position of this pick of the balanced rotation of key (a platform
 * key's hash, "" none) and model, counted for the whole pool by INCR
 * (shared/shared_rotation.h), so that gateways behind a round-robin
 * balancer do not each restart the rotation. Each pick uses a position
 * reserved by an earlier INCR, sent without waiting, and sends the INCR
 * for the next: *pos is set and NULL returned (*pos 0: none, the local
 * cursor decides: a lone gateway, Redis out of reach, fn NULL and nothing
 * reserved). Only when nothing is reserved (the first pick of this key and
 * model here, or a burst that used the reserve up) and fn is given does it
 * wait: fn is called once within SHARED_ASK_MS with the position (0 when
 * none came in time); shared_call_cancel stops it. */
shared_call *shared_cursor_take(shared *sh, const char *key, const char *model, int64_t *pos, shared_cursor_fn fn,
                                void *ud);

/* How long the request path waits for a Redis answer: SWITCHYARD_REDIS_WAIT_MS
 * (default SHARED_ASK_MS; more for a Redis across a slow network), as a
 * timeval for evtimer_add. */
struct timeval shared_wait(const shared *sh);

#endif
