/* pool.h: the serving-side snapshot of the account pool: accounts and
 * platform keys loaded from the store (reloaded when another process
 * changes them), each account's routing state (cooldown, ladder, usage,
 * health, in-flight count), balanced-strategy cursors and the map from
 * response ids to the account that produced them. All of it lives on the
 * loop thread; state changes are written through the store's writer. */
#ifndef SY_POOL_H
#define SY_POOL_H
#include <stdint.h>
#include "base/budget.h"
#include "route/health_window.h"
#include "route/ratelimit.h"
#include "store/store.h"

/* The quota guard's last verdict on an account and the usage it saw
 * (router.c). The other fields guard sees only change when pool_refresh
 * builds the account anew, which clears this. */
typedef struct pool_guard_memo {
    uint64_t policy_gen; /* policy_generation() of the engine that decided; 0: none */
    double primary_used_pct, secondary_used_pct;
    double primary_reset_at, secondary_reset_at;
    double primary_window_s, secondary_window_s;
    char plan_type[24];
    int has_credits, credits_unlimited;
    double credits_balance;
    int verdict;
} pool_guard_memo;

/* The circuit breaker's counters (breaker.c); in memory only. */
typedef struct pool_breaker {
    int state;               /* BREAKER_CLOSED / OPEN / HALF_OPEN (policy.h) */
    double open_until;       /* while open: unix seconds */
    double last_failure_at;  /* unix seconds, 0 none since start: health recovers from here */
    int fails_in_row, successes_in_row;
    uint32_t window;         /* the last outcomes, newest in bit 0; 1 = failure */
    int window_n;            /* outcomes in the window */
} pool_breaker;

/* The rest of an account as other gateways last heard of it (shared/shared.h):
 * pool_state_save tells the pool's rest hook when it moved. */
typedef struct pool_rest_mark {
    double cooldown_until, last_429_at, breaker_until;
    double fam_until[ACCOUNT_FAMILIES], fam_429_at[ACCOUNT_FAMILIES];
} pool_rest_mark;

typedef struct pool_account {
    account a;
    account_state st;
    int inflight;
    pool_breaker breaker;
    ratelimit rpm, tpm; /* local rate limits (account_limits.c) */
    budget_state budget; /* spent in the budget window (loaded when a budget is set) */
    health_window health; /* the last 60 s of attempts */
    pool_guard_memo guard;
    /* login refresh (oauth.c); kept across reloads like inflight */
    int refreshing;          /* a refresh is in flight or being committed */
    int refresh_failures;    /* transient failures in a row */
    double refresh_retry_at; /* no refresh before this (backoff), unix seconds */
    /* The models it serves, in memory, kept across reloads (a.models, the
     * operator's override, wins over both; upstream/model_list.h): */
    char *models_upstream;   /* learned from its GET {base}/models (model_poll.c; stored, read back at start), NULL unknown */
    char *models_codex_json; /* the Codex-form answer's "models" array text, NULL none */
    char *models_refused;    /* models the upstream refused for it this run; NULL none; reset clears */
    int prefill_refused;     /* no stream resume's assistant prefill goes here: its --prefill no, or a
                              * refusal learned (stored as "refused" for an auto account; reset
                              * forgets it), or one this run of an account declared yes */
    pool_rest_mark rest_mark; /* kept across reloads */
    /* An operator's reset across the gateways (docs/scale-out.md): */
    int rest_reset;          /* pool_account_reset was here: the rest hook tells a reset, not a rest;
                              * 2: the reset of a row's reset_gen (told with it, heard once per gen) */
    int64_t reset_heard;     /* the newest reset_gen another gateway's reset brought (kept across
                              * reloads): the row bringing it later is not a second reset */
} pool_account;

/* A platform key and its runtime state (kept across reloads by id). */
typedef struct pool_key {
    platform_key k;
    ratelimit rpm;     /* the key's requests-per-minute bucket (key_rules.c) */
    budget_state budget;
} pool_key;

typedef struct pool pool;

pool *pool_new(store *st); /* loads accounts, keys, states and owners; never fails */
void pool_free(pool *p);
/* Reloads accounts and keys when their config_version moved; keeps each
 * account's runtime state by id. Cheap when nothing changed. Returns 1 if
 * the configuration changed (accounts, keys or settings). */
int pool_refresh(pool *p);

size_t pool_count(const pool *p);
/* Moves each time the accounts are (re)loaded (pool_at's indexes and
 * pool_account pointers change then): who mirrors the accounts rebuilds. */
uint64_t pool_generation(const pool *p);
pool_account *pool_at(pool *p, size_t i);      /* in sort ASC, updated_at DESC, id ASC order */
pool_account *pool_find(pool *p, int64_t id);  /* NULL if gone */

size_t pool_key_count(const pool *p);
platform_key *pool_key_at(pool *p, size_t i);  /* NULL past the end */
pool_key *pool_key_entry(pool *p, size_t i);   /* the key with its runtime state; NULL past the end */

/* The key with that id, or NULL. */
const platform_key *pool_key_find(const pool *p, int64_t id);
/* The key record for a presented platform key, or NULL. */
pool_key *pool_auth(pool *p, const char *presented);

/* An attempt on pa finished (ok with its latency, or failed): into its
 * 60 s window, and the window's figures into its state. */
void pool_health_record(pool_account *pa, double now, int ok, double latency_ms);

/* Cooldown, 429 ladder, health and breaker back to a fresh account's (usage
 * figures kept): `switchyard account reset` and the admin API's reset. */
void pool_account_reset(pool_account *pa);

/* The list of models pa serves: the override, else the learned list; NULL
 * unknown (it serves everything but what it refused). */
const char *pool_account_models(const pool_account *pa);
/* 1 if pa may be sent model: listed (or no list known) and not refused. */
int pool_account_serves(const pool_account *pa, const char *model);
/* The model pa is sent for the client's model: what its model map
 * (--model-map) turns it into, else the same name; into out (n bytes).
 * 1 if mapped. */
int pool_account_model_for(const pool_account *pa, const char *model, char *out, size_t n);
/* 1 if pa may be sent a request for the client's model: the name it would
 * be sent (pool_account_model_for) is in the operator's --models list, or
 * the operator gave none, and its upstream did not refuse the client's
 * model (refusals are kept by the client's name). What routing asks; the
 * upstream's own /models list is no wall (pool_account_lists), and
 * pool_account_serves is the catalog's question about a name of a list. */
int pool_account_serves_request(const pool_account *pa, const char *model);
/* 1 unless pa's upstream /models list is known and lacks the name pa would
 * be sent (and the operator gave no --models): a hint for the order only. */
int pool_account_lists(const pool_account *pa, const char *model);
/* Remembers (in memory) that the upstream refused model for pa. */
void pool_account_refuse_model(pool_account *pa, const char *model);

/* --- limit families (store.h, account_family; docs/codex.md) --- */
/* Which family a model is metered in, learned from answers that name it
 * (x-codex-active-limit), pool-wide (the backend's families are the same
 * for every account) and in memory: a bounded table, the oldest entry
 * giving way. family "" (or the main family's "codex") forgets the model. */
void pool_family_learn(pool *p, const char *model, const char *family);
/* Copies the model's family into out (cap bytes); 0 (out "") when unknown. */
int pool_family_of(const pool *p, const char *model, char *out, size_t cap);
/* The slot of pa resting now for a request of model (whose family is
 * family, "" or NULL unknown): a slot of that family, or of that model;
 * NULL when none rests. */
const account_family *pool_family_cooling(const pool_account *pa, const char *model, const char *family,
                                          double now);
/* The slot for family: its own, else a free one, else the one whose
 * cooldown ended first (cleared, windows unknown). Never NULL. */
account_family *pool_family_slot(pool_account *pa, const char *family);

/* Writes the account's state through the store writer; when its rest
 * (cooldown, ladder, open breaker, family cooldowns) moved since the last
 * save, or it was reset (pa->rest_reset, cleared here), calls the rest
 * hook first. A few compares: it runs per request. */
void pool_state_save(pool *p, pool_account *pa);

/* The rest hook: shared/shared.c installs it when several gateways share
 * state, to tell the others. NULL (the default): nothing is called. */
typedef void (*pool_rest_fn)(void *ud, pool_account *pa);
void pool_on_rest(pool *p, pool_rest_fn fn, void *ud);
/* Takes pa's rest as heard (a rest learned from another gateway is not
 * told back). Returns 1 if it had moved. */
int pool_rest_mark_take(pool_account *pa);

int64_t pool_cursor_get(const pool *p, int64_t key_id, const char *model);
void pool_cursor_set(pool *p, int64_t key_id, const char *model, int64_t account_id);

/* Weighted strategy: the smooth weighted round-robin "current" value of
 * each account in ids for this key + model (0 for one not seen yet), and
 * the step after a pick: every candidate gains its weight, the chosen one
 * gives back the total. Accounts that were not candidates keep their value. */
void pool_swrr_get(const pool *p, int64_t key_id, const char *model, const int64_t *ids, double *current, size_t n);
void pool_swrr_advance(pool *p, int64_t key_id, const char *model, const int64_t *ids, const int *weights, size_t n,
                       int64_t chosen);

/* Remembers (and persists) which account holds a stored response. */
void pool_owner_set(pool *p, const char *response_id, int64_t account_id);
int64_t pool_owner_get(const pool *p, const char *response_id); /* 0 unknown */
/* The same record learned from another gateway (shared/shared.h): kept and
 * persisted, not told back. */
void pool_owner_learn(pool *p, const char *response_id, int64_t account_id);
/* The owner hook: called by pool_owner_set with each new record (a
 * response id, a turn state's "ts:" key, a blob's "bl:" key); installed by
 * shared/shared.c when several gateways share state. NULL: nothing called. */
typedef void (*pool_owner_fn)(void *ud, const char *key, int64_t account_id);
void pool_on_owner(pool *p, pool_owner_fn fn, void *ud);

#endif
