/* shared.c: the interface's calls, and the local implementation (see
 * shared.h): a lone gateway, or one told no Redis, shares nothing. */
#include "shared/shared.h"
#include <stdlib.h>
#include <string.h>

static shared_call *shared_local_refresh_begin(shared *sh, const pool_account *pa, shared_refresh_fn fn, void *ud)
{
    fn(ud, SHARED_REFRESH_GO, NULL); /* oauth's single flight per account is enough in one process */
    return NULL;
}

static void shared_local_refresh_end(shared *sh, const char *account_name, const account *fresh) {}
static void shared_local_call_cancel(shared *sh, shared_call *c) {}
static void shared_local_rest_changed(shared *sh, pool_account *pa) {}
static void shared_local_owner_told(shared *sh, const char *key, int64_t account_id) {}
static void shared_local_session_told(shared *sh, const char *session, int64_t account_id) {}

static shared_call *shared_local_ask(shared *sh, shared_ask_build_fn build, shared_ask_done_fn done, void *ud)
{
    return NULL; /* nowhere to ask: the local copy is all there is */
}

static shared_call *shared_local_slot_take(shared *sh, const pool_account *pa, uint64_t *slot, shared_slot_fn fn,
                                           void *ud)
{
    *slot = 0; /* the local count (pa->inflight) is the whole count */
    return NULL;
}

static void shared_local_slot_give(shared *sh, uint64_t slot) {}

static int shared_local_degraded(const shared *sh, char *why, size_t n)
{
    if (n)
        why[0] = '\0';
    return 0;
}

static void shared_local_free(shared *sh) { free(sh); }
static void shared_local_turn_told(shared *sh, const conv_link *turn) {}
static void shared_local_turn_forgot(shared *sh, const char *response_id) {}

static shared_call *shared_local_chain_get(shared *sh, const char *response_id, size_t max_depth, size_t max_bytes,
                                           shared_chain_fn fn, void *ud)
{
    return NULL; /* the local record is all there is */
}

static shared_call *shared_local_lease_take(shared *sh, const char *job, const char *id, long ttl_ms,
                                            shared_lease_fn fn, void *ud)
{
    fn(ud, 1); /* a lone gateway does every job itself */
    return NULL;
}

static void shared_local_lease_release(shared *sh, const char *job, const char *id) {}
static void shared_local_usage_told(shared *sh, const pool_account *pa) {}

static shared_call *shared_local_cursor_take(shared *sh, const char *key, const char *model, int64_t *pos,
                                             shared_cursor_fn fn, void *ud)
{
    *pos = 0; /* the pool's cursor (pool_cursor_get) is the whole rotation */
    return NULL;
}

static const shared_ops shared_local_ops = {
    "local", shared_local_refresh_begin, shared_local_refresh_end, shared_local_call_cancel,
    shared_local_rest_changed, shared_local_owner_told, shared_local_session_told, shared_local_ask,
    shared_local_slot_take, shared_local_slot_give, shared_local_degraded, shared_local_free,
    shared_local_turn_told, shared_local_turn_forgot, shared_local_chain_get,
    shared_local_lease_take, shared_local_lease_release, shared_local_usage_told,
    shared_local_cursor_take,
};

shared *shared_local_new(gateway *gw)
{
    shared *sh = calloc(1, sizeof *sh);
    if (!sh)
        return NULL;
    sh->ops = &shared_local_ops;
    sh->gw = gw;
    return sh;
}

static void shared_on_rest(void *ud, pool_account *pa)
{
    shared *sh = ud;
    sh->ops->rest_changed(sh, pa);
}

static void shared_on_owner(void *ud, const char *key, int64_t account_id)
{
    shared *sh = ud;
    sh->ops->owner_told(sh, key, account_id);
}

void shared_attach(shared *sh)
{
    /* the local one leaves the hooks unset: not even a call per request */
    if (sh && sh->ops != &shared_local_ops) {
        pool_on_rest(sh->gw->pool, shared_on_rest, sh);
        pool_on_owner(sh->gw->pool, shared_on_owner, sh);
    }
}

void shared_free(shared *sh)
{
    if (!sh)
        return;
    if (sh->gw && sh->gw->pool) {
        pool_on_rest(sh->gw->pool, NULL, NULL);
        pool_on_owner(sh->gw->pool, NULL, NULL);
    }
    sh->ops->free(sh);
}

const char *shared_kind(const shared *sh) { return sh ? sh->ops->name : "local"; }

shared_call *shared_refresh_begin(shared *sh, const pool_account *pa, shared_refresh_fn fn, void *ud)
{
    if (!sh) {
        fn(ud, SHARED_REFRESH_GO, NULL);
        return NULL;
    }
    return sh->ops->refresh_begin(sh, pa, fn, ud);
}

void shared_refresh_end(shared *sh, const char *account_name, const account *fresh)
{
    if (sh)
        sh->ops->refresh_end(sh, account_name, fresh);
}

void shared_call_cancel(shared *sh, shared_call *c)
{
    if (sh && c)
        sh->ops->call_cancel(sh, c);
}

void shared_on_login(shared *sh, shared_login_fn fn, void *ud)
{
    if (!sh)
        return;
    sh->on_login = fn;
    sh->on_login_ud = ud;
}

int shared_degraded(const shared *sh, char *why, size_t n)
{
    if (!sh) {
        if (n)
            why[0] = '\0';
        return 0;
    }
    return sh->ops->degraded(sh, why, n);
}

int shared_ask_add(shared_ask *q, shared_ask_kind kind, const char *key)
{
    size_t len = key ? strlen(key) : 0;
    if (!len || len >= SHARED_ASK_KEY || q->n >= SHARED_ASK_MAX)
        return -1;
    for (size_t i = 0; i < q->n; i++) /* a blob carried twice is asked for once */
        if (q->kind[i] == kind && strcmp(q->key[i], key) == 0)
            return 0;
    q->kind[q->n] = (unsigned char)kind;
    memcpy(q->key[q->n++], key, len + 1);
    return 0;
}

shared_call *shared_ask_send(shared *sh, shared_ask_build_fn build, shared_ask_done_fn done, void *ud)
{
    return sh ? sh->ops->ask(sh, build, done, ud) : NULL;
}

void shared_session_tell(shared *sh, const char *session, int64_t account_id)
{
    if (sh)
        sh->ops->session_told(sh, session, account_id);
}

shared_call *shared_slot_take(shared *sh, const pool_account *pa, uint64_t *slot, shared_slot_fn fn, void *ud)
{
    *slot = 0;
    return sh ? sh->ops->slot_take(sh, pa, slot, fn, ud) : NULL;
}

void shared_slot_give(shared *sh, uint64_t slot)
{
    if (sh && slot)
        sh->ops->slot_give(sh, slot);
}

void shared_turn_tell(shared *sh, const conv_link *turn)
{
    if (sh)
        sh->ops->turn_told(sh, turn);
}

void shared_turn_forget(shared *sh, const char *response_id)
{
    if (sh)
        sh->ops->turn_forgot(sh, response_id);
}

shared_call *shared_chain_get(shared *sh, const char *response_id, size_t max_depth, size_t max_bytes,
                              shared_chain_fn fn, void *ud)
{
    return sh ? sh->ops->chain_get(sh, response_id, max_depth, max_bytes, fn, ud) : NULL;
}

shared_call *shared_lease_take(shared *sh, const char *job, const char *id, long ttl_ms, shared_lease_fn fn,
                               void *ud)
{
    if (!sh) {
        fn(ud, 1);
        return NULL;
    }
    return sh->ops->lease_take(sh, job, id, ttl_ms, fn, ud);
}

void shared_lease_release(shared *sh, const char *job, const char *id)
{
    if (sh)
        sh->ops->lease_release(sh, job, id);
}

void shared_usage_tell(shared *sh, const pool_account *pa)
{
    if (sh)
        sh->ops->usage_told(sh, pa);
}

/* ---------- rate limits and budgets across the gateways (shared_limits.c) ---------- */

void shared_limits_install(shared *sh, const shared_limits_ops *ops, void *impl)
{
    if (!sh)
        return;
    sh->limits = ops;
    sh->limits_impl = impl;
}

shared_limits_call *shared_key_bucket_take(shared *sh, int64_t key_id, shared_bucket_fn fn, void *ud)
{
    return sh && sh->limits && key_id ? sh->limits->key_take(sh->limits_impl, key_id, fn, ud) : NULL;
}

shared_limits_call *shared_account_bucket_take(shared *sh, const pool_account *pa, shared_bucket_fn fn, void *ud)
{
    if (!sh || !sh->limits || (pa->a.max_rpm <= 0 && pa->a.max_tpm <= 0))
        return NULL;
    return sh->limits->account_take(sh->limits_impl, pa, fn, ud);
}

void shared_account_bucket_give(shared *sh, const pool_account *pa)
{
    if (sh && sh->limits && pa->a.max_rpm > 0)
        sh->limits->account_give(sh->limits_impl, pa);
}

void shared_account_tokens(shared *sh, const pool_account *pa, long tokens)
{
    if (sh && sh->limits && pa->a.max_tpm > 0 && tokens > 0)
        sh->limits->account_tokens(sh->limits_impl, pa, tokens);
}

void shared_spend_tell(shared *sh, int64_t key_id, int64_t account_id, double usd)
{
    if (sh && sh->limits && usd > 0)
        sh->limits->spend(sh->limits_impl, key_id, account_id, usd);
}

int shared_limits_reachable(const shared *sh)
{
    return sh && sh->limits ? (sh->limits->reachable(sh->limits_impl) ? 1 : 0) : -1;
}

void shared_limits_cancel(shared *sh, shared_limits_call *c)
{
    if (sh && sh->limits && c)
        sh->limits->cancel(sh->limits_impl, c);
}

shared_call *shared_cursor_take(shared *sh, const char *key, const char *model, int64_t *pos, shared_cursor_fn fn,
                                void *ud)
{
    *pos = 0;
    return sh ? sh->ops->cursor_take(sh, key ? key : "", model ? model : "", pos, fn, ud) : NULL;
}

struct timeval shared_wait(const shared *sh)
{
    long ms = sh && sh->gw ? sh->gw->cfg.redis_wait_ms : SHARED_ASK_MS;
    return (struct timeval){ms / 1000, (ms % 1000) * 1000};
}
