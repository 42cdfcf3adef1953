/* shared_limits.c: rate-limit buckets and budget spend across the gateways
 * of one pool (see shared_limits.h; the request path's calls are
 * shared/shared.h's shared_*_bucket_*, shared_spend_tell).
 *
 * The local buckets and totals (pool.h: rpm, tpm, budget) stay the ones
 * the request path reads. Each answer of the pool sets them: a bucket to
 * the pool's level, a budget's spent to the pool's total when higher. So a
 * local "no" is the pool's too (the others only take more) and needs no
 * round trip, and when Redis is out of reach the local ones go on from the
 * pool's last word. Spend made while Redis is out of reach is kept per
 * budget and added at the reconnect, where every budget's total is read
 * back (the script also raises the pool's total to this instance's, so a
 * Redis restarted empty gets the spend back). */
#include "obs/metrics.h"
#include "shared/shared_limits.h"
#include "shared/shared_deadline.h"
#include "core/redis_script.h"
#include "shared/shared.h"
#include "shared/shared_redis.h"
#include "shared/shared_state.h"
#include "route/spend.h"
#include "route/ratelimit.h"
#include "core/redis_link.h"
#include "base/budget.h"
#include "base/log.h"
#include "base/sbuf.h"
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SL_TICK_MS 1000         /* budgets not read since the (re)connect are read this often */
#define SL_SPEND_AFTER_S 86400  /* a window's total outlives the window by a day */
#define SL_NEED 1.0             /* a request needs a whole request (rpm) and a positive token balance (tpm) */
#define SL_LEVEL_MAX 1e15       /* a level or total beyond this is not ours */

/* KEYS: 1 or 2 buckets; ARGV per bucket: the limit per minute, what it must
 * hold (0: nothing), what to take (negative: give back). Every bucket is
 * brought up to date on Redis's clock; all take, or none when one holds
 * less than its need. {1|0, level, level} (levels as text: Lua would
 * truncate a number answer to an integer). A bucket whose limit changed
 * starts full, as the local one does. */
#define SL_BUCKET_LUA                                                                                  \
    "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) " \
    "local lv, ok = {}, 1 "                                                                            \
    "for i = 1, #KEYS do "                                                                             \
    "  local pm, need = tonumber(ARGV[3 * i - 2]), tonumber(ARGV[3 * i - 1]) "                         \
    "  local b = redis.call('HMGET', KEYS[i], 'l', 't', 'pm') "                                        \
    "  local l, ts = tonumber(b[1]), tonumber(b[2]) "                                                  \
    "  if not l or not ts or tonumber(b[3]) ~= pm then l = pm ts = now end "                           \
    "  if now > ts then l = math.min(pm, l + (now - ts) * pm / 60000) end "                            \
    "  lv[i] = l "                                                                                     \
    "  if need > 0 and l < need then ok = 0 end "                                                      \
    "end "                                                                                             \
    "for i = 1, #KEYS do "                                                                             \
    "  local pm = tonumber(ARGV[3 * i - 2]) "                                                          \
    "  if ok == 1 then lv[i] = math.min(pm, lv[i] - tonumber(ARGV[3 * i])) end "                       \
    "  redis.call('HSET', KEYS[i], 'l', string.format('%.17g', lv[i]), 't', now, 'pm', pm) "          \
    "  redis.call('PEXPIRE', KEYS[i], math.ceil((pm - lv[i]) * 60000 / pm) + 1000) "                   \
    "end "                                                                                             \
    "return {ok, string.format('%.17g', lv[1]), string.format('%.17g', lv[2] or 0)}"
/* KEYS: a budget window's total; ARGV: what to add, this instance's total
 * (the pool's is raised to it: never below what one instance knows), the
 * expiry (unix s), the channel, the message up to the total and after it
 * ("" none). Publishes when the total moved. The total as text. */
#define SL_SPEND_LUA                                                                                   \
    "local v = tonumber(redis.call('INCRBYFLOAT', KEYS[1], ARGV[1])) "                                 \
    "local moved = tonumber(ARGV[1]) > 0 "                                                             \
    "if v < tonumber(ARGV[2]) then v = tonumber(ARGV[2]) moved = true "                                \
    "  redis.call('SET', KEYS[1], string.format('%.17g', v)) end "                                     \
    "redis.call('EXPIREAT', KEYS[1], ARGV[3]) "                                                        \
    "local s = string.format('%.17g', v) "                                                             \
    "if moved and ARGV[5] ~= '' then redis.call('PUBLISH', ARGV[4], ARGV[5] .. s .. ARGV[6]) end "     \
    "return s"

enum { SL_SCRIPT_BUCKET, SL_SCRIPT_SPEND, SL_SCRIPTS };
static const char *const sl_script_text[SL_SCRIPTS] = {SL_BUCKET_LUA, SL_SPEND_LUA};

/* What a command awaiting its answer is. */
enum { SL_KEY_TAKE, SL_ACCOUNT_TAKE, SL_ACCOUNT_GIVE, SL_TOKENS, SL_SPEND };
enum { SL_RPM, SL_TPM };

/* A command awaiting its answer; for a take, also the caller's handle. */
struct shared_limits_call {
    shared_limits_call *prev, *next; /* in sl->calls */
    shared_limits *sl;               /* NULL: the module is gone (the answer only frees it) */
    int what, script;
    int64_t id;                      /* the key's or the account's (this instance's ids) */
    int nb, which[2], pm[2];         /* the buckets sent: SL_RPM/SL_TPM and their limits */
    shared_bucket_fn fn;             /* a take's caller, NULL none (a give, tokens, a spend) */
    void *ud;
    shared_deadline dl;              /* a take with a caller: open while it waits */
    int cancelled;
    int is_key;                      /* a spend: of a key's budget (else an account's) */
    char period[16];                 /* a spend's window */
    double start;
};

/* A budget as this instance tells it. */
typedef struct sl_budget {
    char *name;       /* "key:HASH" or "account:NAME" */
    char period[16];
    double start;     /* the window pending and synced are for */
    double pending;   /* spent here while Redis was out of reach: added at the reconnect */
    int synced;       /* the pool's total was read (or told) since the link came up */
    int seen;
} sl_budget;

struct shared_limits {
    gateway *gw;
    shared *sh;
    struct event *tick;
    redis_script scripts[SL_SCRIPTS]; /* by their SHA1 (core/redis_script.h) */
    shared_limits_call *calls;
    sl_budget *b;
    size_t nb, capb;
};

/* ---------- pure ---------- */

int shared_limits_number(const char *s, size_t n, double *out)
{
    char buf[64];
    if (!s || !n || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end = NULL;
    double v = strtod(buf, &end);
    if (end != buf + n || !isfinite(v) || v > SL_LEVEL_MAX || v < -SL_LEVEL_MAX)
        return -1;
    *out = v;
    return 0;
}

int shared_bucket_answer_read(const redisReply *r, shared_bucket_answer *out)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 3 || r->element[0]->type != REDIS_REPLY_INTEGER ||
        (r->element[0]->integer != 0 && r->element[0]->integer != 1))
        return -1;
    for (int i = 0; i < 2; i++) {
        const redisReply *e = r->element[i + 1];
        if (e->type != REDIS_REPLY_STRING || shared_limits_number(e->str, e->len, &out->level[i]) != 0)
            return -1;
    }
    out->ok = (int)r->element[0]->integer;
    return 0;
}

int shared_spend_read(const json_value *body, shared_spend_total *out)
{
    const char *period = json_get_str(body, "p");
    const json_value *w = json_get(body, "w"), *usd = json_get(body, "usd");
    int64_t start;
    if (!period || strlen(period) >= sizeof out->period || budget_period_valid(period) != 0 || !w ||
        w->type != JSON_NUMBER || json_num_to_int64(w->num, 0, 100000000000LL, &start) != 0 ||
        (double)start != w->num || !usd ||
        usd->type != JSON_NUMBER || !isfinite(usd->num) || usd->num < 0 || usd->num > 1e12)
        return -1;
    memcpy(out->period, period, strlen(period) + 1);
    out->start = (double)start;
    out->usd = usd->num;
    return 0;
}

double shared_bucket_wait_s(double level, int per_minute, double need)
{
    if (per_minute <= 0 || level >= need)
        return 0;
    return (need - level) * 60.0 / per_minute;
}

/* ---------- commands ---------- */

static int sl_up(const shared_limits *sl) { return redis_link_is_up(shared_redis_link(sl->sh)); }

static pool_key *sl_key_by_id(shared_limits *sl, int64_t id)
{
    pool *p = sl->gw->pool;
    for (size_t i = 0; i < pool_key_count(p); i++)
        if (pool_key_entry(p, i)->k.id == id)
            return pool_key_entry(p, i);
    return NULL;
}

static void sl_call_unlink(shared_limits_call *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else if (c->sl)
        c->sl->calls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

static void sl_on_answer(void *ud, redisReply *r);

/* The script (EVALSHA) with keys and args; c (calloc'ed) is answered by
 * sl_on_answer. -1 (c freed): not sent. */
static int sl_eval(shared_limits *sl, shared_limits_call *c, int script, int nkeys, const char **keys, int nargs,
                   const char **args)
{
    c->sl = sl;
    c->script = script;
    if (redis_script_eval(&sl->scripts[script], shared_redis_link(sl->sh), 0, sl_on_answer, c, nkeys, keys, nargs,
                          args) != 0) {
        free(c);
        return -1;
    }
    c->next = sl->calls;
    if (sl->calls)
        sl->calls->prev = c;
    sl->calls = c;
    return 0;
}

/* "sy:{POOL}:bucket:key:HASH:rpm" and the like into out; -1 when too long. */
static int sl_name(const shared_limits *sl, char *out, size_t n, const char *what, const char *kind, const char *id,
                   const char *tail)
{
    int w = snprintf(out, n, "%s%s:%s:%s:%s", shared_redis_prefix(sl->sh), what, kind, id, tail);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

/* ---------- buckets ---------- */

/* The take's caller goes on (once): at the answer, unless the deadline
 * or a cancel came first. */
static void sl_take_finish(shared_limits_call *c, shared_bucket_verdict v, double wait_s)
{
    if (shared_deadline_answer(&c->dl) && c->fn)
        c->fn(c->ud, v, wait_s);
}

static void sl_on_deadline(void *arg)
{
    shared_limits_call *c = arg;
    log_debug("redis: no answer to a rate-limit take in time: the local bucket decides");
    c->fn(c->ud, SHARED_BUCKET_LOCAL, 0);
}

/* Sends the bucket script for c's buckets (c->nb, which, pm set): keys of
 * kind/id; take[i] what each takes, need[i] what each must hold. */
static shared_limits_call *sl_bucket_send(shared_limits *sl, shared_limits_call *c, const char *kind, const char *id,
                                          const double *need, const double *take)
{
    char keys[2][400], args[6][40];
    const char *kp[2], *ap[6];
    for (int i = 0; i < c->nb; i++) {
        if (sl_name(sl, keys[i], sizeof keys[i], "bucket", kind, id, c->which[i] == SL_RPM ? "rpm" : "tpm") != 0) {
            free(c);
            return NULL;
        }
        kp[i] = keys[i];
        snprintf(args[3 * i], sizeof args[0], "%d", c->pm[i]);
        snprintf(args[3 * i + 1], sizeof args[0], "%.17g", need[i]);
        snprintf(args[3 * i + 2], sizeof args[0], "%.17g", take[i]);
        for (int j = 0; j < 3; j++)
            ap[3 * i + j] = args[3 * i + j];
    }
    if (sl_eval(sl, c, SL_SCRIPT_BUCKET, c->nb, kp, 3 * c->nb, ap) != 0)
        return NULL;
    if (c->fn) {
        struct timeval tv = shared_wait(sl->gw->shared);
        shared_deadline_arm(&c->dl, sl->gw->base, tv.tv_sec * 1000L + tv.tv_usec / 1000, METRICS_REDIS_WAIT_LIMITS,
                            sl_on_deadline, c);
    }
    return c;
}

static shared_limits_call *sl_key_take(void *impl, int64_t key_id, shared_bucket_fn fn, void *ud)
{
    shared_limits *sl = impl;
    if (!sl_up(sl))
        return NULL; /* the local bucket decided */
    pool_key *pk = sl_key_by_id(sl, key_id);
    if (!pk || pk->k.max_rpm <= 0)
        return NULL;
    shared_limits_call *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->what = SL_KEY_TAKE;
    c->id = key_id;
    c->nb = 1;
    c->which[0] = SL_RPM;
    c->pm[0] = pk->k.max_rpm;
    c->fn = fn;
    c->ud = ud;
    const double need[] = {SL_NEED}, take[] = {1};
    return sl_bucket_send(sl, c, "key", pk->k.hash, need, take);
}

/* An account's buckets into c; what each takes with take_rpm / take_tpm. */
static shared_limits_call *sl_account_send(shared_limits *sl, const pool_account *pa, int what, shared_bucket_fn fn,
                                           void *ud, int rpm, int tpm, double need, double take_rpm, double take_tpm)
{
    if (!sl_up(sl) || !pa->a.name)
        return NULL;
    shared_limits_call *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->what = what;
    c->id = pa->a.id;
    c->fn = fn;
    c->ud = ud;
    double needs[2], takes[2];
    if (rpm) {
        c->which[c->nb] = SL_RPM;
        c->pm[c->nb] = pa->a.max_rpm;
        needs[c->nb] = need;
        takes[c->nb++] = take_rpm;
    }
    if (tpm) {
        c->which[c->nb] = SL_TPM;
        c->pm[c->nb] = pa->a.max_tpm;
        needs[c->nb] = need;
        takes[c->nb++] = take_tpm;
    }
    return sl_bucket_send(sl, c, "account", pa->a.name, needs, takes);
}

static shared_limits_call *sl_account_take(void *impl, const pool_account *pa, shared_bucket_fn fn, void *ud)
{
    return sl_account_send(impl, pa, SL_ACCOUNT_TAKE, fn, ud, pa->a.max_rpm > 0, pa->a.max_tpm > 0, SL_NEED, 1, 0);
}

static void sl_account_give(void *impl, const pool_account *pa)
{
    sl_account_send(impl, pa, SL_ACCOUNT_GIVE, NULL, NULL, 1, 0, 0, -1, 0);
}

static void sl_account_tokens(void *impl, const pool_account *pa, long tokens)
{
    sl_account_send(impl, pa, SL_TOKENS, NULL, NULL, 0, 1, 0, 0, (double)tokens);
}

static void sl_cancel(void *impl, shared_limits_call *c)
{
    c->fn = NULL;
    c->cancelled = 1;
    shared_deadline_cancel(&c->dl);
}

/* The pool's levels into the local buckets (when the limits are still the
 * ones sent), then the caller's verdict. */
static void sl_bucket_answer(shared_limits *sl, shared_limits_call *c, const redisReply *r)
{
    shared_bucket_answer a;
    if (shared_bucket_answer_read(r, &a) != 0) {
        if (r && r->type == REDIS_REPLY_ERROR)
            log_debug("redis: a rate-limit take failed (%.*s): the local bucket decides", (int)r->len, r->str);
        sl_take_finish(c, SHARED_BUCKET_FAILED, 0);
        return;
    }
    double mono = ratelimit_now(), wait = 0;
    pool_key *pk = c->what == SL_KEY_TAKE ? sl_key_by_id(sl, c->id) : NULL;
    pool_account *pa = c->what != SL_KEY_TAKE ? pool_find(sl->gw->pool, c->id) : NULL;
    for (int i = 0; i < c->nb; i++) {
        double level = a.level[i];
        if (!a.ok)
            wait = fmax(wait, shared_bucket_wait_s(level, c->pm[i], SL_NEED));
        if (pk && pk->k.max_rpm == c->pm[i]) {
            ratelimit_set(&pk->rpm, c->pm[i], level, mono); /* its request took from it already (key_rules_check) */
        } else if (pa && c->which[i] == SL_RPM && pa->a.max_rpm == c->pm[i]) {
            /* a grant in time: the attempt takes its request from the local bucket as it starts */
            if (a.ok && c->what == SL_ACCOUNT_TAKE && c->fn)
                level += 1;
            ratelimit_set(&pa->rpm, c->pm[i], level, mono);
        } else if (pa && c->which[i] == SL_TPM && pa->a.max_tpm == c->pm[i]) {
            ratelimit_set(&pa->tpm, c->pm[i], level, mono);
        }
    }
    if (c->what == SL_ACCOUNT_TAKE && c->cancelled && a.ok && pa) /* nobody will use it */
        sl_account_give(sl, pa);
    sl_take_finish(c, a.ok ? SHARED_BUCKET_TAKEN : SHARED_BUCKET_EMPTY, wait);
}

/* ---------- budgets ---------- */

static sl_budget *sl_budget_get(shared_limits *sl, const char *name)
{
    for (size_t i = 0; i < sl->nb; i++)
        if (strcmp(sl->b[i].name, name) == 0)
            return &sl->b[i];
    if (sl->nb == sl->capb) {
        size_t cap = sl->capb ? 2 * sl->capb : 16;
        sl_budget *nb = realloc(sl->b, cap * sizeof *nb);
        if (!nb)
            return NULL;
        sl->b = nb;
        sl->capb = cap;
    }
    sl_budget *e = &sl->b[sl->nb];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    if (!e->name)
        return NULL;
    sl->nb++;
    return e;
}

/* Adds delta to the pool's total of budget e's window (raised to floor,
 * this instance's total) and publishes it; the answer is the pool's total. */
static void sl_spend_send(shared_limits *sl, sl_budget *e, int is_key, int64_t id, const char *kind, const char *who,
                          double end, double delta, double floor)
{
    char key[400], window[48];
    snprintf(window, sizeof window, "%s:%.0f", e->period, e->start);
    if (sl_name(sl, key, sizeof key, "spend", kind, who, window) != 0)
        return;
    shared_limits_call *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->what = SL_SPEND;
    c->id = id;
    c->is_key = is_key;
    memcpy(c->period, e->period, sizeof c->period);
    c->start = e->start;
    char add[40], fl[40], exp[32], body[96];
    snprintf(add, sizeof add, "%.17g", delta);
    snprintf(fl, sizeof fl, "%.17g", floor);
    snprintf(exp, sizeof exp, "%.0f", end + SL_SPEND_AFTER_S);
    snprintf(body, sizeof body, "{\"p\":\"%s\",\"w\":%.0f,\"usd\":", e->period, e->start);
    sbuf msg = SBUF_INIT;
    shared_message_write(&msg, "spend", shared_redis_id(sl->sh), e->name, body);
    if (msg.len)
        msg.p[--msg.len] = '\0'; /* the message's own closing brace: the script puts the total before it */
    const char *keys[] = {key};
    const char *args[] = {add, fl, exp, shared_redis_channel(sl->sh), msg.p ? msg.p : "", "}}"};
    if (sl_eval(sl, c, SL_SCRIPT_SPEND, 1, keys, 6, args) == 0)
        e->synced = 1;
    sbuf_free(&msg);
}

/* A budget (of a key: hash, or of an account: name) charged usd here now,
 * or only looked at (usd 0): told when the link is up, kept for the
 * reconnect when not. */
static void sl_budget_tell(shared_limits *sl, int is_key, int64_t id, const char *who, const char *period,
                           const budget_state *b, double usd, double now)
{
    char name[320];
    int w = snprintf(name, sizeof name, "%s:%s", is_key ? "key" : "account", who);
    if (w < 0 || (size_t)w >= sizeof name)
        return;
    sl_budget *e = sl_budget_get(sl, name);
    if (!e)
        return;
    e->seen = 1;
    double start, end;
    budget_window(period, now, &start, &end);
    if (strcmp(e->period, period) != 0 || e->start != start) { /* a new window, or another period */
        snprintf(e->period, sizeof e->period, "%s", period);
        e->start = start;
        e->pending = 0;
        e->synced = 0;
    }
    if (!sl_up(sl)) {
        e->pending += usd;
        return;
    }
    if (usd > 0 || e->pending > 0 || !e->synced) {
        double delta = e->pending + usd;
        e->pending = 0;
        sl_spend_send(sl, e, is_key, id, is_key ? "key" : "account", who, end, delta,
                      b->start == start ? b->spent : 0);
    }
}

static void sl_spend(void *impl, int64_t key_id, int64_t account_id, double usd)
{
    shared_limits *sl = impl;
    double now = gateway_now();
    pool_key *pk = key_id ? sl_key_by_id(sl, key_id) : NULL;
    if (pk && pk->k.budget_usd > 0)
        sl_budget_tell(sl, 1, pk->k.id, pk->k.hash, pk->k.budget_period, &pk->budget, usd, now);
    pool_account *pa = account_id ? pool_find(sl->gw->pool, account_id) : NULL;
    if (pa && pa->a.budget_usd > 0 && pa->a.name)
        sl_budget_tell(sl, 0, pa->a.id, pa->a.name, pa->a.budget_period, &pa->budget, usd, now);
}

/* The pool's total of a window (an answer, or another instance's message). */
static void sl_spend_learn(shared_limits *sl, pool_key *pk, pool_account *pa, const char *period, double start,
                           double total)
{
    double now = gateway_now();
    int rose = pk ? spend_key_learn(sl->gw->policy, pk, period, start, total, now)
                  : pa ? spend_account_learn(sl->gw->policy, pa, period, start, total, now) : 0;
    if (rose)
        log_debug("redis: %s %s has spent $%.4f of its budget across the gateways", pk ? "key" : "account",
                  pk ? pk->k.name : pa->a.name, total);
}

static void sl_spend_answer(shared_limits *sl, shared_limits_call *c, const redisReply *r)
{
    double total;
    if (!r || r->type != REDIS_REPLY_STRING || shared_limits_number(r->str, r->len, &total) != 0 || total < 0) {
        if (r && r->type == REDIS_REPLY_ERROR)
            log_debug("redis: a budget's spend was refused (%.*s)", (int)r->len, r->str);
        return; /* the local total goes on; the next spend or reconnect raises the pool's to it */
    }
    pool_key *pk = c->is_key ? sl_key_by_id(sl, c->id) : NULL;
    pool_account *pa = c->is_key ? NULL : pool_find(sl->gw->pool, c->id);
    sl_spend_learn(sl, pk, pa, c->period, c->start, total);
}

/* Every budget: read (and told) once per connect and per window; the
 * table keeps only budgets that still exist. */
static void sl_budgets_sweep(shared_limits *sl)
{
    pool *p = sl->gw->pool;
    double now = gateway_now();
    for (size_t i = 0; i < sl->nb; i++)
        sl->b[i].seen = 0;
    for (size_t i = 0; i < pool_key_count(p); i++) {
        pool_key *pk = pool_key_entry(p, i);
        if (pk->k.budget_usd > 0)
            sl_budget_tell(sl, 1, pk->k.id, pk->k.hash, pk->k.budget_period, &pk->budget, 0, now);
    }
    for (size_t i = 0; i < pool_count(p); i++) {
        pool_account *pa = pool_at(p, i);
        if (pa->a.budget_usd > 0 && pa->a.name)
            sl_budget_tell(sl, 0, pa->a.id, pa->a.name, pa->a.budget_period, &pa->budget, 0, now);
    }
    for (size_t i = 0; i < sl->nb;) {
        if (sl->b[i].seen) {
            i++;
            continue;
        }
        free(sl->b[i].name);
        sl->b[i] = sl->b[--sl->nb];
    }
}

/* ---------- the link's turns ---------- */

static void sl_on_answer(void *ud, redisReply *r)
{
    shared_limits_call *c = ud;
    shared_limits *sl = c->sl;
    if (!sl) { /* the module is gone */
        free(c);
        return;
    }
    sl_call_unlink(c);
    redis_script_missing(&sl->scripts[c->script], shared_redis_link(sl->sh), r); /* flushed: loaded again */
    switch (c->what) {
    case SL_SPEND:
        sl_spend_answer(sl, c, r);
        break;
    default:
        sl_bucket_answer(sl, c, r);
        break;
    }
    shared_deadline_cancel(&c->dl);
    free(c);
}

static void sl_on_up(void *ud)
{
    shared_limits *sl = ud;
    for (int i = 0; i < SL_SCRIPTS; i++)
        redis_script_load(&sl->scripts[i], shared_redis_link(sl->sh));
    for (size_t i = 0; i < sl->nb; i++)
        sl->b[i].synced = 0;
    sl_budgets_sweep(sl); /* the pool's totals in, this instance's pending spend out */
}

static void sl_on_message(void *ud, const char *name, const json_value *body)
{
    shared_limits *sl = ud;
    shared_spend_total t;
    if (shared_spend_read(body, &t) != 0) {
        log_debug("redis: a spend message for %s that does not read: ignored", name);
        return;
    }
    pool *p = sl->gw->pool;
    if (strncmp(name, "key:", 4) == 0) {
        for (size_t i = 0; i < pool_key_count(p); i++)
            if (strcmp(pool_key_entry(p, i)->k.hash, name + 4) == 0)
                sl_spend_learn(sl, pool_key_entry(p, i), NULL, t.period, t.start, t.usd);
    } else if (strncmp(name, "account:", 8) == 0) {
        for (size_t i = 0; i < pool_count(p); i++)
            if (pool_at(p, i)->a.name && strcmp(pool_at(p, i)->a.name, name + 8) == 0)
                sl_spend_learn(sl, NULL, pool_at(p, i), t.period, t.start, t.usd);
    }
}

static void sl_on_tick(evutil_socket_t fd, short what, void *arg)
{
    shared_limits *sl = arg;
    if (sl_up(sl))
        sl_budgets_sweep(sl);
}

static int sl_reachable(void *impl) { return sl_up(impl); }

static const shared_limits_ops sl_ops = {
    sl_key_take, sl_account_take, sl_account_give, sl_account_tokens, sl_spend, sl_cancel, sl_reachable,
};

shared_limits *shared_limits_new(gateway *gw)
{
    if (!gw->shared)
        return NULL;
    shared_limits *sl = calloc(1, sizeof *sl);
    if (!sl)
        return NULL;
    sl->gw = gw;
    for (int i = 0; i < SL_SCRIPTS; i++)
        redis_script_init(&sl->scripts[i], sl_script_text[i]);
    sl->sh = gw->shared;
    shared_redis_ext x = {"spend", sl_on_up, sl_on_message, sl};
    if (shared_redis_extend(gw->shared, &x) != 0) { /* not the Redis implementation */
        free(sl);
        return NULL;
    }
    sl->tick = event_new(gw->base, -1, EV_PERSIST, sl_on_tick, sl);
    if (!sl->tick) {
        shared_limits_free(sl);
        return NULL;
    }
    struct timeval tv = {0, SL_TICK_MS * 1000};
    event_add(sl->tick, &tv);
    shared_limits_install(gw->shared, &sl_ops, sl);
    if (sl_up(sl)) /* the link came up before this module joined it */
        sl_on_up(sl);
    return sl;
}

void shared_limits_free(shared_limits *sl)
{
    if (!sl)
        return;
    shared_limits_install(sl->sh, NULL, NULL);
    shared_redis_unextend(sl->sh, sl);
    for (shared_limits_call *c = sl->calls; c; c = c->next) { /* their answers (NULL, as the link closes) free them */
        c->sl = NULL;
        c->fn = NULL;
        shared_deadline_cancel(&c->dl);
    }
    if (sl->tick)
        event_free(sl->tick);
    for (size_t i = 0; i < sl->nb; i++)
        free(sl->b[i].name);
    free(sl->b);
    free(sl);
}
