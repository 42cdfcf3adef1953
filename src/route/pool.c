/* pool.c: in-memory account pool, keys, state, cursors and response owners
 * (see pool.h). */
#include "route/pool.h"
#include "base/json.h"
#include "base/log.h"
#include "base/sbuf.h"
#include "base/sha256.h"
#include "policy/policy.h"
#include "upstream/model_list.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POOL_OWNERS 65536u          /* remembered response ids (FIFO) */
#define POOL_OWNER_BUCKETS 131072u
#define POOL_CURSORS 1024u
#define POOL_AUTH_CACHE 16u         /* presented keys remembered by pool_auth */
#define POOL_MODEL_FAMILIES 32u     /* models whose limit family is known (pool_family_learn) */

typedef struct pool_model_family {
    char model[ACCOUNT_FAMILY_MODEL_MAX]; /* "" free */
    char family[ACCOUNT_FAMILY_MAX];
} pool_model_family;

typedef struct pool_owner {
    uint64_t h;
    int64_t account_id;
    int32_t next; /* chain in its bucket, -1 end */
} pool_owner;

typedef struct pool_swrr {
    int64_t account_id;
    double current;
} pool_swrr;

/* Per platform key + model: the balanced cursor and the weighted
 * strategy's smooth weighted round-robin state. */
typedef struct pool_cursor {
    int64_t key_id;
    char model[128];
    int64_t account_id;
    pool_swrr *swrr;
    size_t nswrr;
} pool_cursor;

/* A platform key presented before and which key it proved to be: the
 * SHA-256 of the presented key (keys are stored only as hashes) was
 * ~5 000 instructions of every request, a compare is a few dozen. The
 * bytes are the secret itself, held as the request's own header holds
 * it; they are wiped whenever the keys are reloaded and on shutdown. */
typedef struct pool_auth_hit {
    char *presented; /* NULL: empty slot */
    size_t len;
    size_t idx;      /* into keys */
} pool_auth_hit;

struct pool {
    store *st;
    pool_account *accts;
    size_t n;
    uint32_t *by_id; /* indexes of accts by account id ascending: pool_find is a binary search */
    pool_key *keys;
    size_t nkeys;
    int64_t config_version;
    uint64_t generation; /* pool_load's: the accounts were (re)loaded */
    int reload_waits; /* a reload is due and waits for changes applied here to be written */
    pool_cursor cursors[POOL_CURSORS];
    size_t ncursors, cursor_next;
    pool_owner *owners;
    int32_t *buckets;
    uint32_t owner_next;
    pool_auth_hit auth[POOL_AUTH_CACHE];
    size_t auth_next;
    pool_model_family families[POOL_MODEL_FAMILIES];
    size_t nfamilies, family_next;
    pool_rest_fn on_rest; /* pool_on_rest */
    void *on_rest_ud;
    pool_owner_fn on_owner; /* pool_on_owner */
    void *on_owner_ud;
};

static void pool_owner_loaded(void *ud, const char *response_id, int64_t account_id);

static uint64_t pool_hash(const char *s)
{
    uint64_t h = sbuf_hash(s);
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
    st->success_rate_60s = st->latency_60s_ms = -1;
}

static void pool_accounts_clear(pool *p)
{
    for (size_t i = 0; i < p->n; i++) {
        store_account_clear(&p->accts[i].a);
        free(p->accts[i].models_upstream);
        free(p->accts[i].models_codex_json);
        free(p->accts[i].models_refused);
    }
    free(p->accts);
    free(p->by_id);
    p->accts = NULL;
    p->by_id = NULL;
    p->n = 0;
}

static const pool_account *pool_sort_base; /* qsort has no context argument; loop thread only */
static int pool_by_id_cmp(const void *x, const void *y)
{
    int64_t a = pool_sort_base[*(const uint32_t *)x].a.id, b = pool_sort_base[*(const uint32_t *)y].a.id;
    return (a > b) - (a < b);
}

/* accts stays in the sort order (the router's default order); by_id finds
 * an account by id in O(log n) for the many lookups per request (a failover
 * over a 20 000-account pool looked every candidate up linearly) */
static uint32_t *pool_index(const pool_account *accts, size_t n)
{
    uint32_t *ix = malloc((n ? n : 1) * sizeof *ix);
    if (!ix)
        abort();
    for (size_t i = 0; i < n; i++)
        ix[i] = (uint32_t)i;
    pool_sort_base = accts;
    qsort(ix, n, sizeof *ix, pool_by_id_cmp);
    return ix;
}

void pool_account_reset(pool_account *pa)
{
    memset(pa->st.fam, 0, sizeof pa->st.fam);
    pa->st.cooldown_until = pa->st.last_429_at = 0;
    pa->st.ladder_step = 0;
    pa->st.last_error[0] = '\0';
    pa->st.success_ema = 1.0;
    memset(&pa->breaker, 0, sizeof pa->breaker);
    memset(&pa->health, 0, sizeof pa->health); /* the last 60 s start over too */
    free(pa->models_refused); /* a refusal may have been a plan's: the operator asks again */
    pa->models_refused = NULL;
    pa->prefill_refused = 0;
    pa->st.dialects_refused = 0; /* a wrong base URL fixed meanwhile answers every endpoint again */
    pa->rest_reset = 1;
}

const char *pool_account_models(const pool_account *pa)
{
    return pa->a.models && *pa->a.models ? pa->a.models : pa->models_upstream;
}

int pool_account_serves(const pool_account *pa, const char *model)
{
    if (!model || !*model)
        return 1;
    if (model_list_has(pa->models_refused, model))
        return 0;
    const char *list = pool_account_models(pa);
    return !list || model_list_has(list, model);
}

int pool_account_model_for(const pool_account *pa, const char *model, char *out, size_t n)
{
    sbuf_copy_cstr(out, n, model ? model : "");
    if (!pa->a.model_map || !model || !*model)
        return 0;
    json_value *map = json_parse(pa->a.model_map, strlen(pa->a.model_map), NULL, 0);
    const char *to = map ? json_get_str(map, model) : NULL;
    if (to)
        sbuf_copy_cstr(out, n, to);
    json_free(map);
    return to != NULL;
}

int pool_account_serves_request(const pool_account *pa, const char *model)
{
    if (!model || !*model)
        return 1;
    if (model_list_has(pa->models_refused, model))
        return 0;
    const char *list = pa->a.models && *pa->a.models ? pa->a.models : NULL; /* the operator's word only */
    if (!list)
        return 1;
    if (!pa->a.model_map) /* the usual: the name goes upstream as it came */
        return model_list_has(list, model);
    char to[MODEL_LIST_NAME_MAX + 1];
    pool_account_model_for(pa, model, to, sizeof to);
    return model_list_has(list, to);
}

int pool_account_lists(const pool_account *pa, const char *model)
{
    if (!model || !*model || !pa->models_upstream || (pa->a.models && *pa->a.models))
        return 1;
    char to[MODEL_LIST_NAME_MAX + 1];
    pool_account_model_for(pa, model, to, sizeof to);
    return model_list_has(pa->models_upstream, to);
}

/* At most this many refused models are remembered per account (a client
 * naming a new model each time must not grow it without bound). */
#define POOL_REFUSED_MAX 64

void pool_account_refuse_model(pool_account *pa, const char *model)
{
    if (!model || !*model || strlen(model) > MODEL_LIST_NAME_MAX || strchr(model, ',') ||
        model_list_has(pa->models_refused, model))
        return;
    size_t count = 0;
    for (const char *c = pa->models_refused; c && *c; c++)
        count += *c == ',';
    if (pa->models_refused && count + 1 >= POOL_REFUSED_MAX) { /* full: forget the oldest */
        char *comma = strchr(pa->models_refused, ',');
        memmove(pa->models_refused, comma + 1, strlen(comma + 1) + 1);
    }
    sbuf b = SBUF_INIT;
    if (pa->models_refused && *pa->models_refused) {
        sbuf_puts(&b, pa->models_refused);
        sbuf_puts(&b, ",");
    }
    sbuf_puts(&b, model);
    free(pa->models_refused);
    pa->models_refused = b.p;
}

static void pool_auth_forget(pool *p)
{
    for (size_t i = 0; i < POOL_AUTH_CACHE; i++) {
        sbuf_secret_free(p->auth[i].presented);
        p->auth[i].presented = NULL;
    }
}

static void pool_keys_clear(pool *p)
{
    pool_auth_forget(p); /* the indexes point into keys */
    for (size_t i = 0; i < p->nkeys; i++)
        free(p->keys[i].k.name), free(p->keys[i].k.allowed_models);
    free(p->keys);
    p->keys = NULL;
    p->nkeys = 0;
}

/* The spent-so-far of a budget, kept from the previous snapshot when the
 * budget's period is unchanged, else summed from the request log. */
static void pool_budget_load(pool *p, budget_state *b, const budget_state *old, const char *old_period,
                             double usd, const char *period, int by_key, int64_t id)
{
    memset(b, 0, sizeof *b);
    if (usd <= 0 || budget_period_valid(period) != 0)
        return;
    double now = (double)time(NULL);
    if (old && old->end > 0 && strcmp(old_period, period) == 0) {
        *b = *old;
        budget_charge(b, period, 0, now); /* rolls over a finished window */
        return;
    }
    budget_window(period, now, &b->start, &b->end);
    int64_t priced = 0;
    if (store_spend_since(p->st, by_key, id, b->start, &b->spent, &priced) != 0)
        log_warn("pool: cannot read what %s %lld spent; its budget starts from 0 this time",
                 by_key ? "key" : "account", (long long)id);
    else if (priced > 0) /* its typical request cost from the start: the first burst after a start reserves too */
        b->typical = b->spent / (double)priced;
}

static const pool_key *pool_key_by_id(const pool *p, int64_t id);

const platform_key *pool_key_find(const pool *p, int64_t id)
{
    const pool_key *k = pool_key_by_id(p, id);
    return k ? &k->k : NULL;
}

/* keys are loaded by id ascending (store_keys_load) */
static const pool_key *pool_key_by_id(const pool *p, int64_t id)
{
    size_t lo = 0, hi = p->nkeys;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->keys[mid].k.id == id)
            return &p->keys[mid];
        if (p->keys[mid].k.id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
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
            pa[i].models_upstream = old->models_upstream; /* moved: the old snapshot is cleared below */
            pa[i].models_codex_json = old->models_codex_json;
            pa[i].models_refused = old->models_refused;
            /* a refusal learned this run, while the operator's word is unchanged */
            pa[i].prefill_refused = old->prefill_refused && old->a.prefill == a[i].prefill;
            old->models_upstream = old->models_codex_json = old->models_refused = NULL;
            pa[i].rest_mark = old->rest_mark;
            pa[i].reset_heard = old->reset_heard;
            pa[i].rpm = old->rpm; /* local rate limits are load, not health: a reset keeps them */
            pa[i].tpm = old->tpm;
        }
        if (old && old->a.reset_gen != a[i].reset_gen && a[i].reset_gen > old->reset_heard) {
            /* `switchyard account reset`: cooldown, ladder, health and breaker start over */
            pool_account_reset(&pa[i]);
            pa[i].rest_reset = 2;
            /* written back: a state update queued before the reset (the
             * writer is behind the CLI) would otherwise leave the old
             * cooldown in the database for the next start; and told, so
             * the other gateways clear it too */
            pool_state_save(p, &pa[i]);
            log_info("account %s: reset (cooldown, ladder and breaker cleared)", a[i].name);
        } else if (old) { /* (a reset another gateway told first was applied when heard) */
            pa[i].breaker = old->breaker;
            pa[i].health = old->health;
        } else {
            pool_state_default(&pa[i].st, a[i].id);
        }
        if (a[i].prefill == PREFILL_NO || a[i].prefill == PREFILL_REFUSED) /* declared, or learned and stored */
            pa[i].prefill_refused = 1;
        if (old && (old->a.speaks != a[i].speaks || strcmp(old->a.base_url, a[i].base_url) != 0) &&
            pa[i].st.dialects_refused) { /* the operator's word (or another upstream) replaces what was learned */
            pa[i].st.dialects_refused = 0;
            pool_state_save(p, &pa[i]);
        }
        pool_budget_load(p, &pa[i].budget, old ? &old->budget : NULL, old ? old->a.budget_period : "",
                         a[i].budget_usd, a[i].budget_period, 0, a[i].id);
    }
    free(a); /* members now owned by pa */
    uint32_t *ix = pool_index(pa, n);
    pool_accounts_clear(p);
    p->accts = pa;
    p->by_id = ix;
    p->n = n;
    p->generation++;
    pool_key *pk = calloc(nk ? nk : 1, sizeof *pk);
    for (size_t i = 0; i < nk; i++) {
        pk[i].k = k[i];
        const pool_key *old = pool_key_by_id(p, k[i].id);
        if (old)
            pk[i].rpm = old->rpm;
        pool_budget_load(p, &pk[i].budget, old ? &old->budget : NULL, old ? old->k.budget_period : "",
                         k[i].budget_usd, k[i].budget_period, 1, k[i].id);
    }
    free(k); /* members now owned by pk */
    pool_keys_clear(p);
    p->keys = pk;
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

/* A learned model list kept from the last run (store_models_load). */
static void pool_models_loaded(void *ud, int64_t account_id, const char *ids, const char *codex)
{
    pool_account *pa = pool_find(ud, account_id);
    if (!pa)
        return;
    free(pa->models_upstream);
    free(pa->models_codex_json);
    pa->models_upstream = ids ? strdup(ids) : NULL;
    pa->models_codex_json = codex && *codex ? strdup(codex) : NULL;
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
    store_models_load(st, pool_models_loaded, p);
    store_owners_load(st, POOL_OWNERS, pool_owner_loaded, p);
    return p;
}

void pool_free(pool *p)
{
    if (!p)
        return;
    pool_accounts_clear(p);
    pool_keys_clear(p);
    for (size_t i = 0; i < p->ncursors; i++)
        free(p->cursors[i].swrr);
    free(p->owners);
    free(p->buckets);
    free(p);
}

int pool_refresh(pool *p)
{
    int64_t v = store_config_version(p->st);
    if (v < 0 || v == p->config_version)
        return 0;
    if (store_writer_unwritten_changes(p->st)) {
        /* an admin change (or a hold) applied here is still on its way to
         * the database: reloading now would read its row as it was and undo
         * it until the next reload. Its commit moves config_version too, so
         * the reload after it brings everything. */
        if (!p->reload_waits)
            log_debug("pool: the reload waits for changes made here to be written");
        p->reload_waits = 1;
        return 0;
    }
    p->reload_waits = 0;
    p->config_version = v;
    pool_load(p);
    log_info("pool: reloaded %zu accounts, %zu platform keys", p->n, p->nkeys);
    return 1;
}

uint64_t pool_generation(const pool *p) { return p->generation; }

size_t pool_count(const pool *p) { return p->n; }
pool_account *pool_at(pool *p, size_t i) { return i < p->n ? &p->accts[i] : NULL; }

pool_account *pool_find(pool *p, int64_t id)
{
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int64_t m = p->accts[p->by_id[mid]].a.id;
        if (m == id)
            return &p->accts[p->by_id[mid]];
        if (m < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

size_t pool_key_count(const pool *p) { return p->nkeys; }
platform_key *pool_key_at(pool *p, size_t i) { return i < p->nkeys ? &p->keys[i].k : NULL; }
pool_key *pool_key_entry(pool *p, size_t i) { return i < p->nkeys ? &p->keys[i] : NULL; }

/* a == b over n bytes, in a time that depends on n only */
static int pool_bytes_equal(const char *a, const char *b, size_t n)
{
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

pool_key *pool_auth(pool *p, const char *presented)
{
    size_t len = strlen(presented);
    for (size_t i = 0; i < POOL_AUTH_CACHE; i++) {
        const pool_auth_hit *h = &p->auth[i];
        if (h->presented && h->len == len && pool_bytes_equal(h->presented, presented, len))
            return p->keys[h->idx].k.revoked ? NULL : &p->keys[h->idx];
    }
    char hex[65];
    sha256_hex(presented, len, hex);
    for (size_t i = 0; i < p->nkeys; i++)
        if (!p->keys[i].k.revoked && strcmp(p->keys[i].k.hash, hex) == 0) {
            pool_auth_hit *h = &p->auth[p->auth_next];
            p->auth_next = (p->auth_next + 1) % POOL_AUTH_CACHE;
            sbuf_secret_free(h->presented);
            h->presented = malloc(len + 1);
            if (!h->presented)
                return &p->keys[i];
            memcpy(h->presented, presented, len + 1);
            h->len = len;
            h->idx = i;
            return &p->keys[i];
        }
    return NULL;
}

void pool_health_record(pool_account *pa, double now, int ok, double latency_ms)
{
    health_figures f;
    health_window_record(&pa->health, now, ok, latency_ms);
    health_window_read(&pa->health, now, &f);
    pa->st.success_rate_60s = f.success_rate;
    pa->st.latency_60s_ms = f.latency_ms;
    pa->st.attempts_60s = f.attempts;
}

int pool_rest_mark_take(pool_account *pa)
{
    pool_rest_mark m = {pa->st.cooldown_until, pa->st.last_429_at,
                        pa->breaker.state == BREAKER_OPEN ? pa->breaker.open_until : 0, {0}, {0}};
    for (int i = 0; i < ACCOUNT_FAMILIES; i++) {
        m.fam_until[i] = pa->st.fam[i].until;
        m.fam_429_at[i] = pa->st.fam[i].last_429_at;
    }
    if (memcmp(&m, &pa->rest_mark, sizeof m) == 0)
        return 0;
    pa->rest_mark = m;
    return 1;
}

void pool_on_rest(pool *p, pool_rest_fn fn, void *ud)
{
    p->on_rest = fn;
    p->on_rest_ud = ud;
}

void pool_state_save(pool *p, pool_account *pa)
{
    if (p->on_rest && (pool_rest_mark_take(pa) || pa->rest_reset))
        p->on_rest(p->on_rest_ud, pa);
    pa->rest_reset = 0;
    store_writer_put_state(p->st, &pa->st);
}

/* ---------- limit families ---------- */

static pool_model_family *pool_family_find(const pool *p, const char *model)
{
    for (size_t i = 0; i < p->nfamilies; i++)
        if (strcmp(p->families[i].model, model) == 0)
            return (pool_model_family *)&p->families[i];
    return NULL;
}

void pool_family_learn(pool *p, const char *model, const char *family)
{
    if (!model || !*model || strlen(model) >= ACCOUNT_FAMILY_MODEL_MAX)
        return;
    int main_family = !family || !*family || strcmp(family, "codex") == 0;
    pool_model_family *f = pool_family_find(p, model);
    if (main_family) {
        if (f)
            f->family[0] = '\0'; /* kept as a slot; an empty family is no family */
        return;
    }
    if (strlen(family) >= ACCOUNT_FAMILY_MAX)
        return;
    if (!f)
        f = p->nfamilies < POOL_MODEL_FAMILIES ? &p->families[p->nfamilies++]
                                               : &p->families[p->family_next++ % POOL_MODEL_FAMILIES];
    snprintf(f->model, sizeof f->model, "%s", model);
    snprintf(f->family, sizeof f->family, "%s", family);
}

int pool_family_of(const pool *p, const char *model, char *out, size_t cap)
{
    const pool_model_family *f = p->nfamilies && model ? pool_family_find(p, model) : NULL;
    sbuf_copy_cstr(out, cap, f ? f->family : ""); /* not snprintf: 500 instructions a request for "" */
    return out[0] != '\0';
}

const account_family *pool_family_cooling(const pool_account *pa, const char *model, const char *family,
                                          double now)
{
    for (int i = 0; i < ACCOUNT_FAMILIES; i++) {
        const account_family *f = &pa->st.fam[i];
        if (f->family[0] && f->until > now &&
            ((family && *family && strcmp(f->family, family) == 0) ||
             (model && *model && f->model[0] && strcmp(f->model, model) == 0)))
            return f;
    }
    return NULL;
}

account_family *pool_family_slot(pool_account *pa, const char *family)
{
    account_family *pick = NULL;
    for (int i = 0; i < ACCOUNT_FAMILIES; i++) {
        account_family *f = &pa->st.fam[i];
        if (f->family[0] && strcmp(f->family, family) == 0)
            return f;
        if (!f->family[0]) {
            if (!pick || pick->family[0])
                pick = f;
        } else if (!pick || (pick->family[0] && f->until < pick->until)) {
            pick = f;
        }
    }
    memset(pick, 0, sizeof *pick);
    snprintf(pick->family, sizeof pick->family, "%s", family);
    pick->primary_used_pct = pick->secondary_used_pct = -1;
    return pick;
}

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

static pool_cursor *pool_cursor_make(pool *p, int64_t key_id, const char *model)
{
    model = model ? model : "";
    pool_cursor *c = pool_cursor_find(p, key_id, model);
    if (!c) {
        /* bounded: the oldest slot is reused once the table is full */
        if (p->ncursors < POOL_CURSORS)
            c = &p->cursors[p->ncursors++];
        else
            c = &p->cursors[p->cursor_next++ % POOL_CURSORS];
        free(c->swrr);
        memset(c, 0, sizeof *c);
        c->key_id = key_id;
        snprintf(c->model, sizeof c->model, "%s", model);
    }
    return c;
}

void pool_cursor_set(pool *p, int64_t key_id, const char *model, int64_t account_id)
{
    pool_cursor_make(p, key_id, model)->account_id = account_id;
}

static pool_swrr *pool_swrr_find(const pool_cursor *c, int64_t account_id)
{
    for (size_t i = 0; c && i < c->nswrr; i++)
        if (c->swrr[i].account_id == account_id)
            return &c->swrr[i];
    return NULL;
}

void pool_swrr_get(const pool *p, int64_t key_id, const char *model, const int64_t *ids, double *current, size_t n)
{
    const pool_cursor *c = pool_cursor_find(p, key_id, model ? model : "");
    for (size_t i = 0; i < n; i++) {
        const pool_swrr *e = pool_swrr_find(c, ids[i]);
        current[i] = e ? e->current : 0;
    }
}

void pool_swrr_advance(pool *p, int64_t key_id, const char *model, const int64_t *ids, const int *weights, size_t n,
                       int64_t chosen)
{
    pool_cursor *c = pool_cursor_make(p, key_id, model);
    double total = 0;
    size_t pick = SIZE_MAX; /* an index: the array may move as entries are added */
    for (size_t i = 0; i < n; i++) {
        pool_swrr *e = pool_swrr_find(c, ids[i]);
        if (!e) {
            c->swrr = realloc(c->swrr, (c->nswrr + 1) * sizeof *c->swrr);
            e = &c->swrr[c->nswrr++];
            e->account_id = ids[i];
            e->current = 0;
        }
        int w = weights[i] > 0 ? weights[i] : 0;
        e->current += w;
        total += w;
        if (ids[i] == chosen)
            pick = (size_t)(e - c->swrr);
    }
    if (pick != SIZE_MAX)
        c->swrr[pick].current -= total;
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
    if (!response_id || !*response_id || pool_owner_get(p, response_id) == account_id)
        return; /* known already: no second slot, no second row (a turn state comes back every turn) */
    pool_owner_put(p, response_id, account_id);
    store_writer_put_owner(p->st, response_id, account_id);
    if (p->on_owner)
        p->on_owner(p->on_owner_ud, response_id, account_id);
}

void pool_owner_learn(pool *p, const char *response_id, int64_t account_id)
{
    if (!response_id || !*response_id || account_id <= 0 || pool_owner_get(p, response_id) == account_id)
        return;
    pool_owner_put(p, response_id, account_id);
    store_writer_put_owner(p->st, response_id, account_id);
}

void pool_on_owner(pool *p, pool_owner_fn fn, void *ud)
{
    p->on_owner = fn;
    p->on_owner_ud = ud;
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
