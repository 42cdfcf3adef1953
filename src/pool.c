/* pool.c: in-memory account pool, keys, state, cursors and response owners
 * (see pool.h). */
#include "pool.h"
#include "log.h"
#include "sha256.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL_OWNERS 65536u          /* remembered response ids (FIFO) */
#define POOL_OWNER_BUCKETS 131072u
#define POOL_CURSORS 1024u

typedef struct pool_owner {
    uint64_t h;
    int64_t account_id;
    int32_t next; /* chain in its bucket, -1 end */
} pool_owner;

typedef struct pool_cursor {
    int64_t key_id;
    char model[128];
    int64_t account_id;
} pool_cursor;

struct pool {
    store *st;
    pool_account *accts;
    size_t n;
    platform_key *keys;
    size_t nkeys;
    int64_t config_version;
    pool_cursor cursors[POOL_CURSORS];
    size_t ncursors, cursor_next;
    pool_owner *owners;
    int32_t *buckets;
    uint32_t owner_next;
};

static void pool_owner_loaded(void *ud, const char *response_id, int64_t account_id);

static uint64_t pool_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h ? h : 1;
}

static void pool_state_default(account_state *st, int64_t id)
{
    memset(st, 0, sizeof *st);
    st->account_id = id;
    st->primary_used_pct = -1;
    st->secondary_used_pct = -1;
    st->has_credits = st->credits_unlimited = -1;
    st->credits_balance = -1;
    st->success_ema = 1.0;
}

static void pool_accounts_clear(pool *p)
{
    for (size_t i = 0; i < p->n; i++)
        store_account_clear(&p->accts[i].a);
    free(p->accts);
    p->accts = NULL;
    p->n = 0;
}

void pool_account_reset(pool_account *pa)
{
    pa->st.cooldown_until = pa->st.last_429_at = 0;
    pa->st.ladder_step = 0;
    pa->st.last_error[0] = '\0';
    pa->st.success_ema = 1.0;
    memset(&pa->breaker, 0, sizeof pa->breaker);
}

static void pool_load(pool *p)
{
    account *a = NULL;
    size_t n = 0;
    platform_key *k = NULL;
    size_t nk = 0;
    if (store_accounts_load(p->st, &a, &n) != 0 || store_keys_load(p->st, &k, &nk) != 0) {
        log_warn("pool: could not reload accounts/keys; keeping the previous snapshot");
        store_accounts_free(a, n);
        return;
    }
    pool_account *pa = calloc(n ? n : 1, sizeof *pa);
    for (size_t i = 0; i < n; i++) {
        pa[i].a = a[i];
        pool_account *old = pool_find(p, a[i].id);
        if (old) { /* a login refresh in flight (or backing off) survives any reload */
            pa[i].st = old->st;
            pa[i].inflight = old->inflight;
            pa[i].refreshing = old->refreshing;
            pa[i].refresh_failures = old->refresh_failures;
            pa[i].refresh_retry_at = old->refresh_retry_at;
        }
        if (old && old->a.reset_gen != a[i].reset_gen) {
            /* `switchyard account reset`: cooldown, ladder, health and breaker start over */
            pool_account_reset(&pa[i]);
            log_info("account %s: reset (cooldown, ladder and breaker cleared)", a[i].name);
        } else if (old) {
            pa[i].breaker = old->breaker;
        } else {
            pool_state_default(&pa[i].st, a[i].id);
        }
    }
    free(a); /* members now owned by pa */
    pool_accounts_clear(p);
    p->accts = pa;
    p->n = n;
    store_keys_free(p->keys, p->nkeys);
    p->keys = k;
    p->nkeys = nk;
}

static void pool_states_apply(pool *p)
{
    account_state *s = NULL;
    size_t n = 0;
    if (store_states_load(p->st, &s, &n) != 0)
        return;
    for (size_t i = 0; i < n; i++) {
        pool_account *pa = pool_find(p, s[i].account_id);
        if (pa)
            pa->st = s[i];
    }
    free(s);
}

pool *pool_new(store *st)
{
    pool *p = calloc(1, sizeof *p);
    p->st = st;
    p->owners = calloc(POOL_OWNERS, sizeof *p->owners);
    p->buckets = malloc(POOL_OWNER_BUCKETS * sizeof *p->buckets);
    memset(p->buckets, 0xff, POOL_OWNER_BUCKETS * sizeof *p->buckets);
    p->config_version = store_config_version(st);
    pool_load(p);
    pool_states_apply(p);
    store_owners_load(st, POOL_OWNERS, pool_owner_loaded, p);
    return p;
}

void pool_free(pool *p)
{
    if (!p)
        return;
    pool_accounts_clear(p);
    store_keys_free(p->keys, p->nkeys);
    free(p->owners);
    free(p->buckets);
    free(p);
}

int pool_refresh(pool *p)
{
    int64_t v = store_config_version(p->st);
    if (v < 0 || v == p->config_version)
        return 0;
    p->config_version = v;
    pool_load(p);
    log_info("pool: reloaded %zu accounts, %zu platform keys", p->n, p->nkeys);
    return 1;
}

size_t pool_count(const pool *p) { return p->n; }
pool_account *pool_at(pool *p, size_t i) { return i < p->n ? &p->accts[i] : NULL; }

pool_account *pool_find(pool *p, int64_t id)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->accts[i].a.id == id)
            return &p->accts[i];
    return NULL;
}

size_t pool_key_count(const pool *p) { return p->nkeys; }
platform_key *pool_key_at(pool *p, size_t i) { return i < p->nkeys ? &p->keys[i] : NULL; }

const platform_key *pool_auth(const pool *p, const char *presented)
{
    char hex[65];
    sha256_hex(presented, strlen(presented), hex);
    for (size_t i = 0; i < p->nkeys; i++)
        if (!p->keys[i].revoked && strcmp(p->keys[i].hash, hex) == 0)
            return &p->keys[i];
    return NULL;
}

void pool_state_save(pool *p, pool_account *pa) { store_writer_put_state(p->st, &pa->st); }

static pool_cursor *pool_cursor_find(const pool *p, int64_t key_id, const char *model)
{
    for (size_t i = 0; i < p->ncursors; i++)
        if (p->cursors[i].key_id == key_id && strcmp(p->cursors[i].model, model) == 0)
            return (pool_cursor *)&p->cursors[i];
    return NULL;
}

int64_t pool_cursor_get(const pool *p, int64_t key_id, const char *model)
{
    const pool_cursor *c = pool_cursor_find(p, key_id, model ? model : "");
    return c ? c->account_id : 0;
}

void pool_cursor_set(pool *p, int64_t key_id, const char *model, int64_t account_id)
{
    model = model ? model : "";
    pool_cursor *c = pool_cursor_find(p, key_id, model);
    if (!c) {
        /* bounded: the oldest slot is reused once the table is full */
        if (p->ncursors < POOL_CURSORS)
            c = &p->cursors[p->ncursors++];
        else
            c = &p->cursors[p->cursor_next++ % POOL_CURSORS];
        c->key_id = key_id;
        snprintf(c->model, sizeof c->model, "%s", model);
    }
    c->account_id = account_id;
}

static void pool_owner_unlink(pool *p, uint32_t slot)
{
    pool_owner *o = &p->owners[slot];
    if (!o->h)
        return;
    int32_t *link = &p->buckets[o->h % POOL_OWNER_BUCKETS];
    while (*link >= 0 && (uint32_t)*link != slot)
        link = &p->owners[*link].next;
    if (*link >= 0)
        *link = o->next;
    o->h = 0;
}

static void pool_owner_put(pool *p, const char *response_id, int64_t account_id)
{
    uint32_t slot = p->owner_next++ % POOL_OWNERS;
    pool_owner_unlink(p, slot);
    pool_owner *o = &p->owners[slot];
    o->h = pool_hash(response_id);
    o->account_id = account_id;
    int32_t *b = &p->buckets[o->h % POOL_OWNER_BUCKETS];
    o->next = *b;
    *b = (int32_t)slot;
}

void pool_owner_set(pool *p, const char *response_id, int64_t account_id)
{
    if (!response_id || !*response_id)
        return;
    pool_owner_put(p, response_id, account_id);
    store_writer_put_owner(p->st, response_id, account_id);
}

static void pool_owner_loaded(void *ud, const char *response_id, int64_t account_id)
{
    pool *p = ud;
    if (pool_find(p, account_id))
        pool_owner_put(p, response_id, account_id);
}

int64_t pool_owner_get(const pool *p, const char *response_id)
{
    if (!response_id || !*response_id)
        return 0;
    uint64_t h = pool_hash(response_id);
    for (int32_t i = p->buckets[h % POOL_OWNER_BUCKETS]; i >= 0; i = p->owners[i].next)
        if (p->owners[i].h == h)
            return p->owners[i].account_id;
    return 0;
}
