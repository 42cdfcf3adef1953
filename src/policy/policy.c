/* policy.c: the policy engine (see policy.h). Loads the seven hook files into
 * one sandbox (policy_sandbox.c), self-checks them on fixtures, hands C
 * structs to the hooks as plain tables, reads the results back with strict
 * validation, and falls back to the built-in defaults below (the same rules,
 * in C) whenever a hook errors, times out, runs out of memory or returns
 * something malformed. Not thread-safe: one engine per event loop. */
#include "policy/policy.h"
#include "base/embedded.h"
#include "base/log.h"
#include "policy/policy_sandbox.h"
#include "base/sha256.h"
#include "base/sbuf.h"
#include <errno.h>
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define POLICY_MEM_LIMIT ((size_t)32 << 20)
#define POLICY_INSTR_LIMIT 1000000L
#define POLICY_TIME_MS 50 /* CPU time a hook call (or a file's load) may take */
#define POLICY_FILE_MAX ((long)1 << 20)
#define POLICY_BODY_MAX 16384
#define POLICY_COOLDOWN_MAX 2592000.0 /* 30 days */
#define POLICY_STEP_MAX 1000
#define POLICY_RETRY_AFTER_MAX 60.0

enum { HOOK_CLASSIFY, HOOK_COOLDOWN, HOOK_GUARD, HOOK_ORDER, HOOK_BREAKER, HOOK_PRICE, HOOK_BUDGET, HOOK_COUNT };
static const char *const hook_names[HOOK_COUNT] = {"classify", "cooldown", "guard", "order",
                                                   "breaker",  "price",    "budget"};
/* The file each hook lives in (prices.lua holds a table of data first). */
static const char *const hook_files[HOOK_COUNT] = {"classify", "cooldown", "guard", "order",
                                                   "breaker",  "prices",   "budget"};
static const char *const breaker_names[] = {"closed", "open", "half_open", NULL};
#define PRICE_MEMO 64
#define PRICE_MAX 1e6 /* USD per million tokens: anything above is a typo */

/* price() answers, kept per engine (so a reload forgets them). */
typedef struct price_memo {
    char model[128];
    int known;
    policy_price p;
} price_memo;
static char hook_keys[HOOK_COUNT]; /* registry keys (addresses) of the loaded hooks */

struct policy_engine {
    sandbox *sb;
    uint64_t generation;
    char source[1024];
    char files[HOOK_COUNT][1100]; /* where each hook was loaded from */
    int lines[HOOK_COUNT];        /* line the hook function starts on */
    char sha256[HOOK_COUNT][65];  /* of each hook file's text as loaded */
    uint64_t fallbacks;
    int may_resume;               /* classify resumes a cut text-only chat stream */
    uint64_t hook_fallbacks[HOOK_COUNT];
    char last_error[512];
    price_memo prices[PRICE_MEMO];
    size_t nprices, price_next;
    int order_bundled;            /* order.lua is the bundled text (from the binary or a copy of it) */
};

/* ======================= built-in defaults (C) ======================= */

static const char *const quota_texts[] = {
    "hit your usage limit", "usage_limit_reached", "quota exceeded", "insufficient_quota", NULL};
static const char *const deactivated_texts[] = {"account_deactivated", "deactivated", NULL};
static const char *const stream_rate_codes[] = {
    "rate_limit_exceeded", "rate_limit_error", "rate_limited", NULL};
static const char *const stream_server_codes[] = {
    "server_error", "internal_error", "internal_server_error", "overloaded", "overloaded_error",
    "server_is_overloaded", "service_unavailable", "api_error", NULL};
static const double cooldown_ladder[] = {45, 300, 1800, 7200};
#define LADDER_STEPS 4
#define LADDER_RESET_AFTER 1800.0

/* ASCII case-insensitive search of needle in s[0..n). */
static int text_has(const char *s, size_t n, const char *needle)
{
    size_t m = strlen(needle);
    if (!s || m > n)
        return 0;
    for (size_t i = 0; i + m <= n; i++)
        if (strncasecmp(s + i, needle, m) == 0)
            return 1;
    return 0;
}

static int str_has_any(const char *s, size_t n, const char *const *list)
{
    for (; *list; list++)
        if (text_has(s, n, *list))
            return 1;
    return 0;
}

static int event_mentions(const policy_event *ev, const char *const *list)
{
    size_t blen = ev->body_len < POLICY_BODY_MAX ? ev->body_len : POLICY_BODY_MAX;
    const char *f[] = {ev->error_message, ev->error_code, ev->error_type};
    if (ev->body && str_has_any(ev->body, blen, list))
        return 1;
    for (int i = 0; i < 3; i++)
        if (f[i] && str_has_any(f[i], strlen(f[i]), list))
            return 1;
    return 0;
}

static int code_is(const policy_event *ev, const char *const *list)
{
    for (; *list; list++)
        if ((ev->error_code && strcasecmp(ev->error_code, *list) == 0) ||
            (ev->error_type && strcasecmp(ev->error_type, *list) == 0))
            return 1;
    return 0;
}

static void verdict_act(policy_verdict *v, policy_action action, const char *cls, double cooldown, double after)
{
    v->action = action;
    v->failover = action == VERDICT_FAILOVER;
    v->drain_bucket = 0;
    snprintf(v->cls, sizeof v->cls, "%s", cls);
    v->cooldown = cooldown;
    v->after = after;
}

static void verdict_set(policy_verdict *v, int failover, const char *cls, double cooldown)
{
    verdict_act(v, failover ? VERDICT_FAILOVER : VERDICT_RETURN, cls, cooldown, 0);
}

static const char *const capacity_texts[] = {
    "overloaded", "at capacity", "capacity_exceeded", "server_is_overloaded", NULL};
static const char *const context_texts[] = {
    "context_length_exceeded", "maximum context length", "context window", NULL};

/* A short Retry-After worth waiting for on the same account (classify.lua's wait_out). */
static int classify_wait_out(const policy_event *ev)
{
    return ev->retry_after > 0 && ev->retry_after <= 5 && ev->alternatives == 0 && ev->retries < 2;
}

/* classify.lua's server_trouble. */
static void classify_server(const policy_event *ev, policy_verdict *out)
{
    if (ev->retry_after > 0) {
        if (classify_wait_out(ev))
            verdict_act(out, VERDICT_RETRY, "server", 0, ev->retry_after);
        else
            verdict_set(out, 1, "server", 30);
    } else if (ev->retries < 1) {
        verdict_act(out, VERDICT_RETRY, "server", 0, 0.12 + (0.9 - 0.12) * ev->random);
    } else {
        verdict_set(out, 1, "server", 30);
    }
}

/* Mirrors policies/classify.lua. */
static void classify_default(const policy_event *ev, policy_verdict *out)
{
    int s = ev->status;
    if (ev->after_output)
        verdict_set(out, 0, "interrupted", 0); /* classify.lua's RESUME_CHAT_STREAMS is off by default */
    else if (event_mentions(ev, quota_texts))
        verdict_set(out, 1, "quota", -1);
    else if (event_mentions(ev, deactivated_texts))
        verdict_set(out, 1, "deactivated", 20);
    else if (ev->timeout)
        verdict_set(out, 1, "timeout", 20);
    else if (ev->network_error)
        verdict_set(out, 1, "network", 20);
    else if (ev->not_answer)
        verdict_set(out, 1, "bad_answer", 30);
    else if (ev->in_stream && code_is(ev, stream_rate_codes))
        verdict_set(out, 1, "rate_limit", -1);
    else if (ev->in_stream && (code_is(ev, stream_server_codes) || event_mentions(ev, capacity_texts)))
        classify_server(ev, out);
    else if (ev->in_stream)
        verdict_set(out, 0, "stream", 0);
    else if (s == 0)
        verdict_set(out, 1, "network", 20);
    else if (s == 429 && classify_wait_out(ev))
        verdict_act(out, VERDICT_RETRY, "rate_limit", 0, ev->retry_after);
    else if (s == 429)
        verdict_set(out, 1, "rate_limit", -1);
    else if (s == 401 || s == 403)
        verdict_set(out, 1, "auth", 20);
    else if (s == 404)
        verdict_set(out, 1, "not_found", 20);
    else if (s == 408)
        verdict_set(out, 1, "timeout", 20);
    else if (s == 409)
        verdict_set(out, 1, "conflict", 20);
    else if (s >= 400 && s < 500 && ev->context_fallbacks > 0 && event_mentions(ev, context_texts))
        verdict_act(out, VERDICT_CONTEXT_FALLBACK, "context_length", 0, 0);
    else if (s >= 400 && s < 500)
        verdict_set(out, 0, "request", 0);
    else if (s >= 200 && s < 300)
        verdict_set(out, 0, "ok", 0);
    else
        classify_server(ev, out);
}

/* The latest reset time among the windows known to be spent (used >= 100 %)
 * that lies in the future; 0 when none. */
static double cooldown_window_reset(const policy_state *st, double now)
{
    double t = 0;
    if (st->primary_used_pct >= 100 && st->primary_reset_at > now)
        t = st->primary_reset_at;
    if (st->secondary_used_pct >= 100 && st->secondary_reset_at > now && st->secondary_reset_at > t)
        t = st->secondary_reset_at;
    return t;
}

/* Mirrors policies/cooldown.lua. */
static void cooldown_default(const policy_state *st, const char *cls, double now,
                             double *seconds, int *ladder_step)
{
    int step = st->ladder_step;
    double secs = 20;
    if (cls && (strcmp(cls, "rate_limit") == 0 || strcmp(cls, "quota") == 0)) {
        double back = st->last_429_at > st->cooldown_until ? st->last_429_at : st->cooldown_until;
        if (step <= 0 || (back > 0 && now - back > LADDER_RESET_AFTER))
            step = 1;
        else
            step = step + 1 < LADDER_STEPS ? step + 1 : LADDER_STEPS;
        double reset = cooldown_window_reset(st, now);
        secs = reset > 0 ? reset - now : cooldown_ladder[step - 1];
    } else if (cls && strcmp(cls, "server") == 0) {
        secs = 30;
    }
    if (st->retry_after > secs)
        secs = st->retry_after;
    if (!(secs <= POLICY_COOLDOWN_MAX))
        secs = POLICY_COOLDOWN_MAX;
    *seconds = secs;
    *ladder_step = step;
}

/* Mirrors policies/guard.lua. */
static int guard_default(const policy_candidate *c)
{
    if (c->primary_used_pct >= 95.0 || c->secondary_used_pct >= 90.0)
        return GUARD_RESERVE;
    return GUARD_NORMAL;
}

/* Mirrors policies/budget.lua. */
static int budget_default(const policy_budget *b) { return b->usd > 0 && b->spent >= b->usd; }

/* --- order (mirrors policies/order.lua) --- */

static int cand_before(const policy_candidate *a, const policy_candidate *b)
{
    if (a->sort != b->sort)
        return a->sort < b->sort;
    if (a->updated_at != b->updated_at)
        return a->updated_at > b->updated_at;
    return a->id < b->id;
}

/* The success rate recovered towards 1 with a 60 s half-life since it last changed. */
static double cand_recovered(const policy_candidate *c)
{
    if (c->success_rate >= 1 || c->health_age_s <= 0)
        return c->success_rate;
    return 1 - (1 - c->success_rate) * pow(0.5, c->health_age_s / 60.0);
}

/* P2C health comparison: is a clearly healthier than b? Ties and unknown
 * latency (0: no history) say no, so the head of the sort order keeps its turn. */
static int cand_healthier(const policy_candidate *a, const policy_candidate *b)
{
    double ra = cand_recovered(a), rb = cand_recovered(b);
    if (fabs(ra - rb) > 0.05)
        return ra > rb;
    if (a->inflight != b->inflight)
        return a->inflight < b->inflight;
    return a->latency_ema_ms > 0 && b->latency_ema_ms > 0 && a->latency_ema_ms * 2 <= b->latency_ema_ms &&
           b->latency_ema_ms - a->latency_ema_ms >= 250;
}

static uint32_t order_rand(uint32_t s) { return (uint32_t)(((uint64_t)s * 1103515245u + 12345u) & 0x7fffffff); }

/* Groups tried, in order: 0 = accounts (non-aggregate kinds), 1 = aggregates. */
static int order_groups(const char *rotation, int *g)
{
    if (rotation && strcmp(rotation, "account_rotation") == 0)
        return g[0] = 0, 1;
    if (rotation && strcmp(rotation, "aggregate_api_rotation") == 0)
        return g[0] = 1, 1;
    if (rotation && strcmp(rotation, "hybrid_aggregate_first_rotation") == 0)
        return g[0] = 1, g[1] = 0, 2;
    return g[0] = 0, g[1] = 1, 2; /* hybrid_rotation, and anything unknown */
}

/* Segment rank: normal segments of each group in order, then the reserves;
 * -1 when the rotation mode leaves the candidate's group out. */
static int order_rank(const policy_candidate *c, const int *g, int ng)
{
    int grp = c->kind && strcmp(c->kind, "aggregate") == 0;
    for (int i = 0; i < ng; i++)
        if (g[i] == grp)
            return (c->reserve ? ng : 0) + i;
    return -1;
}

/* Reverses a[lo..hi). */
static void order_reverse(size_t *a, size_t lo, size_t hi)
{
    while (hi > lo + 1) {
        size_t t = a[lo];
        a[lo++] = a[--hi];
        a[hi] = t;
    }
}

/* balanced: by id, starting at the first id after the cursor (wrapping). */
static void order_round_robin(const policy_candidate *c, size_t *seg, size_t len, int64_t cursor)
{
    for (size_t i = 1; i < len; i++)
        for (size_t j = i; j > 0 && c[seg[j]].id < c[seg[j - 1]].id; j--) {
            size_t t = seg[j];
            seg[j] = seg[j - 1];
            seg[j - 1] = t;
        }
    size_t start = 0;
    while (start < len && c[seg[start]].id <= cursor)
        start++;
    if (start == len || start == 0)
        return;
    order_reverse(seg, 0, start);
    order_reverse(seg, start, len);
    order_reverse(seg, 0, len);
}

/* weighted: does a go before b? Healthy (recovered success rate >= 0.5)
 * before failing, then the larger current_weight + weight (smooth weighted
 * round-robin); ties keep the base order (the sort is stable). */
static int cand_heavier(const policy_candidate *a, const policy_candidate *b)
{
    int da = cand_recovered(a) < 0.5, db = cand_recovered(b) < 0.5;
    if (da != db)
        return db;
    return a->current_weight + a->weight > b->current_weight + b->weight;
}

static void order_weighted(const policy_candidate *c, size_t *seg, size_t len)
{
    for (size_t i = 1; i < len; i++)
        for (size_t j = i; j > 0 && cand_heavier(&c[seg[j]], &c[seg[j - 1]]); j--) {
            size_t t = seg[j];
            seg[j] = seg[j - 1];
            seg[j - 1] = t;
        }
}

/* ordered: power of two choices among the first three. Returns the new seed. */
static uint32_t order_p2c(const policy_candidate *c, size_t *seg, size_t len, uint32_t seed)
{
    size_t k = len < 3 ? len : 3;
    if (k < 2)
        return seed;
    uint32_t r1 = order_rand(seed), r2 = order_rand(r1);
    size_t i = r1 % k, j = r2 % (k - 1);
    if (j >= i)
        j++;
    size_t lo = i < j ? i : j, hi = i < j ? j : i;
    size_t win = cand_healthier(&c[seg[hi]], &c[seg[lo]]) ? hi : lo;
    if (win == 0 || !cand_healthier(&c[seg[win]], &c[seg[0]]))
        return r2; /* the head keeps its turn unless the winner is clearly healthier */
    size_t v = seg[win];
    memmove(seg + 1, seg, win * sizeof *seg);
    seg[0] = v;
    return r2;
}

static size_t order_default(const policy_candidate *c, size_t n, const policy_order_ctx *ctx, size_t *perm)
{
    int g[2], ng = order_groups(ctx->rotation, g);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (order_rank(&c[i], g, ng) >= 0)
            perm[m++] = i;
    for (size_t i = 1; i < m; i++)
        for (size_t j = i; j > 0; j--) {
            const policy_candidate *a = &c[perm[j]], *b = &c[perm[j - 1]];
            int ra = order_rank(a, g, ng), rb = order_rank(b, g, ng);
            if (ra > rb || (ra == rb && !cand_before(a, b)))
                break;
            size_t t = perm[j];
            perm[j] = perm[j - 1];
            perm[j - 1] = t;
        }
    int balanced = ctx->strategy && strcmp(ctx->strategy, "balanced") == 0;
    int weighted = ctx->strategy && strcmp(ctx->strategy, "weighted") == 0;
    uint32_t seed = ctx->seed;
    for (size_t a = 0; a < m;) {
        int r = order_rank(&c[perm[a]], g, ng);
        size_t b = a;
        while (b < m && order_rank(&c[perm[b]], g, ng) == r)
            b++;
        if (r < ng && balanced)
            order_round_robin(c, perm + a, b - a, ctx->cursor);
        else if (r < ng && weighted)
            order_weighted(c, perm + a, b - a);
        else if (r < ng)
            seed = order_p2c(c, perm + a, b - a, seed);
        a = b;
    }
    for (size_t i = 0; ctx->preferred && i < m; i++)
        if (c[perm[i]].id == ctx->preferred) {
            size_t v = perm[i];
            memmove(perm + 1, perm, i * sizeof *perm);
            perm[0] = v;
            break;
        }
    return m;
}

/* Mirrors policies/breaker.lua. */
static void breaker_default(const policy_breaker_state *st, int success, int *state, double *open_seconds)
{
    *open_seconds = 0;
    if (st->state == BREAKER_CLOSED) {
        int open = !success && (st->consecutive_failures >= 4 ||
                                (st->window_requests >= 10 && st->window_failures >= 0.6 * st->window_requests));
        *state = open ? BREAKER_OPEN : BREAKER_CLOSED;
    } else if (!success) {
        *state = BREAKER_OPEN;
    } else {
        *state = st->consecutive_successes >= 2 ? BREAKER_CLOSED : BREAKER_HALF_OPEN;
    }
    if (*state == BREAKER_OPEN)
        *open_seconds = 60;
}

/* ======================= C structs -> Lua tables ======================= */

static void set_str(lua_State *L, const char *k, const char *v)
{
    if (!v)
        return;
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
}

static void set_int(lua_State *L, const char *k, lua_Integer v)
{
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

static void set_num(lua_State *L, const char *k, double v)
{
    lua_pushnumber(L, v);
    lua_setfield(L, -2, k);
}

static void set_bool(lua_State *L, const char *k, int v)
{
    lua_pushboolean(L, v);
    lua_setfield(L, -2, k);
}

static void event_push(lua_State *L, const policy_event *ev)
{
    lua_createtable(L, 0, 20);
    set_int(L, "status", ev->status);
    if (ev->body) {
        lua_pushlstring(L, ev->body, ev->body_len < POLICY_BODY_MAX ? ev->body_len : POLICY_BODY_MAX);
        lua_setfield(L, -2, "body");
    }
    set_str(L, "error_type", ev->error_type);
    set_str(L, "error_code", ev->error_code);
    set_str(L, "error_message", ev->error_message);
    set_bool(L, "network_error", ev->network_error);
    set_bool(L, "timeout", ev->timeout);
    set_bool(L, "in_stream", ev->in_stream);
    set_num(L, "retry_after", ev->retry_after);
    set_str(L, "account_kind", ev->account_kind);
    set_str(L, "endpoint", ev->endpoint);
    set_str(L, "not_answer", ev->not_answer);
    set_int(L, "retries", ev->retries);
    set_int(L, "alternatives", ev->alternatives);
    set_num(L, "random", ev->random);
    set_int(L, "context_fallbacks", ev->context_fallbacks);
    set_bool(L, "after_output", ev->after_output);
    set_int(L, "delivered_chars", ev->delivered_chars);
    set_bool(L, "tool_call", ev->tool_call);
}

static void state_push(lua_State *L, const policy_state *st)
{
    lua_createtable(L, 0, 9);
    set_int(L, "account_id", st->account_id);
    set_int(L, "ladder_step", st->ladder_step);
    set_num(L, "last_429_at", st->last_429_at);
    set_num(L, "cooldown_until", st->cooldown_until);
    set_num(L, "retry_after", st->retry_after);
    set_num(L, "primary_used_pct", st->primary_used_pct);
    set_num(L, "primary_reset_at", st->primary_reset_at);
    set_num(L, "secondary_used_pct", st->secondary_used_pct);
    set_num(L, "secondary_reset_at", st->secondary_reset_at);
}

/* A table of nrec slots holding the account's identity and usage. That is
 * all guard sees (not health), so a verdict holds until the usage changes
 * (see router_guard); order's candidates add health and the reserve mark. */
static void account_push(lua_State *L, const policy_candidate *c, int nrec)
{
    lua_createtable(L, 0, nrec);
    set_int(L, "id", c->id);
    set_str(L, "name", c->name);
    set_str(L, "kind", c->kind);
    set_int(L, "sort", c->sort);
    set_int(L, "updated_at", c->updated_at);
    set_num(L, "primary_used_pct", c->primary_used_pct);
    set_num(L, "secondary_used_pct", c->secondary_used_pct);
    set_int(L, "max_concurrency", c->max_concurrency);
}

/* current_weight only goes in for the weighted strategy: without it a
 * candidate has 16 fields, which fit the 16-slot table (17 would take 32,
 * and a bigger table per candidate per request costs allocation and GC). */
static void candidate_push(lua_State *L, const policy_candidate *c, int weighted)
{
    account_push(L, c, weighted ? 18 : 17);
    set_num(L, "success_rate", c->success_rate);
    set_num(L, "health_age_s", c->health_age_s);
    set_num(L, "latency_ema_ms", c->latency_ema_ms);
    set_int(L, "inflight", c->inflight);
    set_bool(L, "reserve", c->reserve);
    set_int(L, "weight", c->weight);
    if (weighted)
        set_num(L, "current_weight", c->current_weight);
    set_num(L, "success_rate_60s", c->success_rate_60s);
    set_num(L, "latency_60s_ms", c->latency_60s_ms);
    set_int(L, "attempts_60s", c->attempts_60s);
}

static void budget_push(lua_State *L, const policy_budget *b)
{
    lua_createtable(L, 0, 8);
    set_str(L, "kind", b->kind);
    set_str(L, "name", b->name);
    set_str(L, "period", b->period);
    set_num(L, "usd", b->usd);
    set_num(L, "spent", b->spent);
    set_num(L, "start", b->start);
    set_num(L, "resets_at", b->resets_at);
    set_num(L, "now", b->now);
}

static void breaker_state_push(lua_State *L, const policy_breaker_state *st)
{
    lua_createtable(L, 0, 7);
    set_int(L, "account_id", st->account_id);
    set_str(L, "kind", st->kind);
    set_str(L, "state", breaker_names[st->state >= 0 && st->state <= 2 ? st->state : 0]);
    set_int(L, "consecutive_failures", st->consecutive_failures);
    set_int(L, "consecutive_successes", st->consecutive_successes);
    set_int(L, "window_requests", st->window_requests);
    set_int(L, "window_failures", st->window_failures);
}

static void ctx_push(lua_State *L, const policy_order_ctx *ctx)
{
    lua_createtable(L, 0, 7);
    set_str(L, "strategy", ctx->strategy);
    set_str(L, "rotation", ctx->rotation);
    set_str(L, "model", ctx->model);
    set_int(L, "platform_key_id", ctx->platform_key_id);
    set_int(L, "cursor", ctx->cursor);
    set_int(L, "preferred", ctx->preferred);
    set_int(L, "seed", (lua_Integer)ctx->seed);
}

/* ======================= Lua results -> C (strict) ======================= */

/* Pushes t[k] without metamethods; returns its type. */
static int raw_field(lua_State *L, int t, const char *k)
{
    lua_pushstring(L, k);
    return lua_rawget(L, t);
}

/* The index of s in the NULL-terminated names, or -1 (also for s NULL). */
static int name_index(const char *s, const char *const *names)
{
    for (int i = 0; s && names[i]; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

static int class_valid(const char *s, size_t n)
{
    if (n == 0 || n >= sizeof(((policy_verdict *)0)->cls))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] <= ' ' || s[i] > '~')
            return 0;
    return 1;
}

static void verdict_parse(lua_State *L, int t, policy_verdict *out)
{
    if (lua_type(L, t) != LUA_TTABLE)
        luaL_error(L, "classify returned %s, expected a table {action=, class=, cooldown=}", luaL_typename(L, t));
    static const char *const actions[] = {"return", "failover", "retry", "context_fallback", "resume", NULL};
    int act = name_index(raw_field(L, t, "action") == LUA_TSTRING ? lua_tostring(L, -1) : NULL, actions);
    if (act < 0)
        luaL_error(L, "classify: action must be \"failover\", \"return\", \"retry\", \"context_fallback\" or \"resume\"");
    int failover = act == VERDICT_FAILOVER;
    size_t n = 0;
    const char *cls = raw_field(L, t, "class") == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
    if (!cls || !class_valid(cls, n))
        luaL_error(L, "classify: class must be a string of 1..31 printable characters");
    double cd = failover ? -1 : 0;
    int ct = raw_field(L, t, "cooldown");
    if (ct == LUA_TNUMBER)
        cd = lua_tonumber(L, -1);
    else if (ct != LUA_TNIL)
        luaL_error(L, "classify: cooldown must be a number or nil");
    if (!(cd == -1 || (cd >= 0 && cd <= POLICY_COOLDOWN_MAX)))
        luaL_error(L, "classify: cooldown must be -1 or 0..%d seconds", (int)POLICY_COOLDOWN_MAX);
    double after = 0;
    if (act == VERDICT_RETRY) {
        int at = raw_field(L, t, "after");
        after = at == LUA_TNUMBER ? lua_tonumber(L, -1) : -1;
        if (!(after >= 0 && after <= POLICY_RETRY_AFTER_MAX))
            luaL_error(L, "classify: retry needs after = 0..%d seconds", (int)POLICY_RETRY_AFTER_MAX);
        if (cd < 0)
            cd = 0;
    }
    verdict_act(out, (policy_action)act, cls, cd, after);
    int dt = raw_field(L, t, "drain_bucket");
    if (dt != LUA_TNIL && dt != LUA_TBOOLEAN)
        luaL_error(L, "classify: drain_bucket must be a boolean or nil");
    out->drain_bucket = lua_toboolean(L, -1);
}

static void cooldown_parse(lua_State *L, int first, int old_step, double *seconds, int *step)
{
    if (lua_type(L, first) != LUA_TNUMBER)
        luaL_error(L, "cooldown returned %s, expected seconds (and the ladder step)", luaL_typename(L, first));
    double s = lua_tonumber(L, first);
    if (!(s >= 0 && s <= POLICY_COOLDOWN_MAX))
        luaL_error(L, "cooldown: seconds must be 0..%d", (int)POLICY_COOLDOWN_MAX);
    int isint = 0;
    lua_Integer st = old_step;
    if (lua_type(L, first + 1) == LUA_TNUMBER)
        st = lua_tointegerx(L, first + 1, &isint);
    else if (lua_type(L, first + 1) == LUA_TNIL)
        isint = 1;
    if (!isint || st < 0 || st > POLICY_STEP_MAX)
        luaL_error(L, "cooldown: ladder step must be an integer 0..%d or nil", POLICY_STEP_MAX);
    *seconds = s;
    *step = (int)st;
}

static void breaker_parse(lua_State *L, int first, int *state, double *open_seconds)
{
    int st = name_index(lua_type(L, first) == LUA_TSTRING ? lua_tostring(L, first) : NULL, breaker_names);
    if (st < 0)
        luaL_error(L, "breaker must return \"closed\", \"open\" or \"half_open\" (and seconds when open)");
    double secs = 0;
    if (st == BREAKER_OPEN) {
        secs = lua_type(L, first + 1) == LUA_TNUMBER ? lua_tonumber(L, first + 1) : -1;
        if (!(secs >= 0 && secs <= POLICY_COOLDOWN_MAX))
            luaL_error(L, "breaker: \"open\" needs its seconds, 0..%d", (int)POLICY_COOLDOWN_MAX);
    }
    *state = st;
    *open_seconds = secs;
}

static int guard_parse(lua_State *L, int t)
{
    static const char *const names[] = {"normal", "reserve", "exclude", NULL};
    int g = name_index(lua_type(L, t) == LUA_TSTRING ? lua_tostring(L, t) : NULL, names);
    return g >= 0 ? g : luaL_error(L, "guard must return \"normal\", \"reserve\" or \"exclude\"");
}

static double price_field(lua_State *L, int t, const char *k, double dflt)
{
    int ty = raw_field(L, t, k);
    double v = ty == LUA_TNUMBER ? lua_tonumber(L, -1) : dflt;
    lua_pop(L, 1);
    if (ty != LUA_TNUMBER && (ty != LUA_TNIL || dflt < 0))
        luaL_error(L, "price: '%s' must be a number (USD per million tokens)", k);
    if (!(v >= 0 && v <= PRICE_MAX))
        luaL_error(L, "price: '%s' must be 0..%d", k, (int)PRICE_MAX);
    return v;
}

/* nil -> unknown (0); a table {input, cached_input?, output} -> 1. */
static int price_parse(lua_State *L, int t, policy_price *out)
{
    if (lua_type(L, t) == LUA_TNIL)
        return 0;
    if (lua_type(L, t) != LUA_TTABLE)
        luaL_error(L, "price returned %s, expected nil or {input=, cached_input=, output=}", luaL_typename(L, t));
    out->input = price_field(L, t, "input", -1);
    out->output = price_field(L, t, "output", -1);
    out->cached_input = price_field(L, t, "cached_input", out->input);
    return 1;
}

/* Maps each returned id (or candidate table) to an unused index into c. */
static size_t order_parse(lua_State *L, int t, const policy_candidate *c, size_t n, size_t *perm)
{
    if (lua_type(L, t) != LUA_TTABLE)
        luaL_error(L, "order returned %s, expected a list of candidate ids", luaL_typename(L, t));
    size_t len = lua_rawlen(L, t);
    if (len > n)
        luaL_error(L, "order returned %d ids for %d candidates", (int)len, (int)n);
    unsigned char *used = lua_newuserdatauv(L, n ? n : 1, 0);
    memset(used, 0, n);
    for (size_t i = 0; i < len; i++) {
        int ty = lua_rawgeti(L, t, (lua_Integer)i + 1), isint = 0;
        if (ty == LUA_TTABLE) {
            lua_pushliteral(L, "id");
            ty = lua_rawget(L, -2);
            lua_remove(L, -2);
        }
        lua_Integer id = ty == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
        if (!isint)
            luaL_error(L, "order: entry %d is %s, expected a candidate id", (int)i + 1, luaL_typename(L, -1));
        lua_pop(L, 1);
        size_t k = 0, seen = 0;
        for (; k < n; k++)
            if (c[k].id == id && !(seen = used[k]))
                break;
        if (k == n)
            luaL_error(L, "order: %s candidate id %I", seen ? "duplicate" : "unknown", id);
        used[k] = 1;
        perm[i] = k;
    }
    return len;
}

/* ======================= calling the hooks ======================= */

typedef struct hook_call {
    policy_engine *pe;
    const policy_event *ev;
    policy_verdict *verdict;
    const policy_state *st;
    const char *cls;
    double now, seconds;
    int step, guard;
    const policy_candidate *c;
    size_t n, count, *perm;
    const policy_order_ctx *ctx;
    const policy_breaker_state *bst;
    int success, bstate;
    double open_seconds;
    const char *model;
    policy_price price;
    int price_known;
    const policy_budget *budget;
    int over;
} hook_call;

static void hook_push(lua_State *L, int hook)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &hook_keys[hook]) == LUA_TNIL)
        luaL_error(L, "hook %s is not loaded", hook_names[hook]);
}

static int classify_run(lua_State *L)
{
    hook_call *h = sandbox_ud(L);
    hook_push(L, HOOK_CLASSIFY);
    event_push(L, h->ev);
    lua_call(L, 1, 1);
    verdict_parse(L, lua_gettop(L), h->verdict);
    return 0;
}

static int cooldown_run(lua_State *L)
{
    hook_call *h = sandbox_ud(L);
    hook_push(L, HOOK_COOLDOWN);
    state_push(L, h->st);
    lua_pushstring(L, h->cls ? h->cls : "");
    lua_pushnumber(L, h->now);
    lua_call(L, 3, 2);
    cooldown_parse(L, lua_gettop(L) - 1, h->st->ladder_step, &h->seconds, &h->step);
    return 0;
}

static int guard_run(lua_State *L)
{
    hook_call *h = sandbox_ud(L);
    hook_push(L, HOOK_GUARD);
    account_push(L, h->c, 16);
    /* the rest of what the usage endpoint says; order does not need it */
    set_num(L, "primary_reset_at", h->c->primary_reset_at);
    set_num(L, "secondary_reset_at", h->c->secondary_reset_at);
    set_num(L, "primary_window_s", h->c->primary_window_s);
    set_num(L, "secondary_window_s", h->c->secondary_window_s);
    lua_pushstring(L, h->c->plan_type ? h->c->plan_type : "");
    lua_setfield(L, -2, "plan_type");
    set_int(L, "has_credits", h->c->has_credits);
    set_int(L, "credits_unlimited", h->c->credits_unlimited);
    set_num(L, "credits_balance", h->c->credits_balance);
    lua_call(L, 1, 1);
    h->guard = guard_parse(L, lua_gettop(L));
    return 0;
}

static int order_run(lua_State *L)
{
    hook_call *h = sandbox_ud(L);
    hook_push(L, HOOK_ORDER);
    int weighted = h->ctx->strategy && strcmp(h->ctx->strategy, "weighted") == 0;
    lua_createtable(L, (int)h->n, 0);
    for (size_t i = 0; i < h->n; i++) {
        candidate_push(L, &h->c[i], weighted);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    ctx_push(L, h->ctx);
    lua_call(L, 2, 1);
    h->count = order_parse(L, lua_gettop(L), h->c, h->n, h->perm);
    return 0;
}

static int breaker_run(lua_State *L)
{
    hook_call *h = sandbox_ud(L);
    hook_push(L, HOOK_BREAKER);
    breaker_state_push(L, h->bst);
    lua_pushstring(L, h->success ? "success" : "failure");
    lua_pushnumber(L, h->now);
    lua_call(L, 3, 2);
    breaker_parse(L, lua_gettop(L) - 1, &h->bstate, &h->open_seconds);
    return 0;
}

static int budget_run(lua_State *L)
{
    hook_call *h = sandbox_ud(L);
    const policy_budget *b = h->budget;
    hook_push(L, HOOK_BUDGET);
    budget_push(L, b);
    lua_call(L, 1, 1);
    const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    if (!v || (strcmp(v, "ok") != 0 && strcmp(v, "over") != 0))
        luaL_error(L, "budget must return \"ok\" or \"over\"");
    h->over = strcmp(v, "over") == 0;
    return 0;
}

static int price_run(lua_State *L)
{
    hook_call *h = sandbox_ud(L);
    hook_push(L, HOOK_PRICE);
    lua_pushstring(L, h->model);
    lua_call(L, 1, 1);
    h->price_known = price_parse(L, lua_gettop(L), &h->price);
    return 0;
}

/* Runs one hook; 0 on success, else -1 with why = "<result>: <message>". */
static int hook_run(policy_engine *pe, lua_CFunction fn, hook_call *h, char *why, size_t n)
{
    char msg[400];
    sandbox_result r = sandbox_run(pe->sb, fn, h, msg, sizeof msg);
    if (r == SANDBOX_OK)
        return 0;
    snprintf(why, n, "%s: %s", sandbox_result_name(r), msg);
    return -1;
}

static void engine_fallback(policy_engine *pe, int hook, const char *why)
{
    char red[400];
    log_redact(red, sizeof red, why);
    pe->fallbacks++;
    uint64_t n = ++pe->hook_fallbacks[hook];
    snprintf(pe->last_error, sizeof pe->last_error, "%s: %s", hook_names[hook], red);
    if (n <= 10 || n % 1000 == 0) {
        log_warn("policy: %s hook (%s) failed, built-in default used (%llu times): %s",
                 hook_names[hook], pe->files[hook], (unsigned long long)n, red);
        char trace[1024];
        log_redact(trace, sizeof trace, sandbox_traceback(pe->sb));
        log_debug("policy: %s", trace);
    }
}

/* ======================= public hook calls ======================= */

void policy_classify(policy_engine *pe, const policy_event *ev, policy_verdict *out)
{
    static const policy_event none = {.network_error = 1, .retry_after = -1};
    char why[512];
    hook_call h = {.pe = pe, .ev = ev ? ev : &none, .verdict = out};
    if (pe && hook_run(pe, classify_run, &h, why, sizeof why) == 0)
        return;
    if (pe)
        engine_fallback(pe, HOOK_CLASSIFY, why);
    classify_default(h.ev, out);
}

void policy_cooldown(policy_engine *pe, const policy_state *st, const char *cls, double now,
                     double *seconds, int *ladder_step)
{
    static const policy_state none = {.retry_after = -1};
    char why[512];
    hook_call h = {.pe = pe, .st = st ? st : &none, .cls = cls, .now = now};
    if (pe && hook_run(pe, cooldown_run, &h, why, sizeof why) == 0) {
        *seconds = h.seconds;
        *ladder_step = h.step;
        return;
    }
    if (pe)
        engine_fallback(pe, HOOK_COOLDOWN, why);
    cooldown_default(h.st, cls, now, seconds, ladder_step);
}

int policy_guard(policy_engine *pe, const policy_candidate *c)
{
    char why[512];
    hook_call h = {.pe = pe, .c = c};
    if (!c)
        return GUARD_NORMAL;
    if (pe && hook_run(pe, guard_run, &h, why, sizeof why) == 0)
        return h.guard;
    if (pe)
        engine_fallback(pe, HOOK_GUARD, why);
    return guard_default(c);
}

size_t policy_order(policy_engine *pe, const policy_candidate *c, size_t n,
                    const policy_order_ctx *ctx, size_t *perm)
{
    static const policy_order_ctx none = {0};
    char why[512];
    hook_call h = {.pe = pe, .c = c, .n = n, .perm = perm, .ctx = ctx ? ctx : &none};
    if (n == 0)
        return 0;
    /* One candidate under the bundled order.lua: the plan cannot change (no
     * choice to make; only the rotation may leave it out), and the C mirror
     * of that file answers the same for a fraction of the cost of building
     * the argument tables and entering Lua (a quarter of the gateway's own
     * instructions per request with one account). Any other order.lua is
     * always called. */
    if (n == 1 && pe && pe->order_bundled)
        return order_default(c, n, h.ctx, perm);
    if (pe && hook_run(pe, order_run, &h, why, sizeof why) == 0)
        return h.count;
    if (pe)
        engine_fallback(pe, HOOK_ORDER, why);
    return order_default(c, n, h.ctx, perm);
}

void policy_breaker(policy_engine *pe, const policy_breaker_state *st, int success, double now,
                    int *state, double *open_seconds)
{
    char why[512];
    hook_call h = {.pe = pe, .bst = st, .success = success, .now = now};
    if (pe && hook_run(pe, breaker_run, &h, why, sizeof why) == 0) {
        *state = h.bstate;
        *open_seconds = h.open_seconds;
        return;
    }
    if (pe)
        engine_fallback(pe, HOOK_BREAKER, why);
    breaker_default(st, success, state, open_seconds);
}

int policy_budget_over(policy_engine *pe, const policy_budget *b)
{
    char why[512];
    hook_call h = {.pe = pe, .budget = b};
    if (pe && hook_run(pe, budget_run, &h, why, sizeof why) == 0)
        return h.over;
    if (pe)
        engine_fallback(pe, HOOK_BUDGET, why);
    return budget_default(b);
}

int policy_price_get(policy_engine *pe, const char *model, policy_price *out)
{
    char why[512];
    if (!model)
        model = "";
    memset(out, 0, sizeof *out);
    if (!pe || strlen(model) >= sizeof pe->prices[0].model)
        return 0;
    for (size_t i = 0; i < pe->nprices; i++)
        if (strcmp(pe->prices[i].model, model) == 0) {
            *out = pe->prices[i].p;
            return pe->prices[i].known;
        }
    hook_call h = {.pe = pe, .model = model};
    if (hook_run(pe, price_run, &h, why, sizeof why) != 0) {
        engine_fallback(pe, HOOK_PRICE, why); /* no built-in price list: unknown, and not remembered */
        return 0;
    }
    price_memo *m = pe->nprices < PRICE_MEMO ? &pe->prices[pe->nprices++] : &pe->prices[pe->price_next++ % PRICE_MEMO];
    sbuf_copy_cstr(m->model, sizeof m->model, model);
    m->known = h.price_known;
    m->p = h.price;
    *out = h.price;
    return h.price_known;
}

/* ======================= loading and self-check ======================= */

typedef struct load_call {
    policy_engine *pe;
    int hook;
    const char *src, *chunk;
    size_t len;
} load_call;

/* Leaves the hook function of the chunk's return value on top. */
static void hook_extract(lua_State *L, load_call *c)
{
    const char *name = hook_names[c->hook], *file = c->pe->files[c->hook];
    if (lua_type(L, -1) == LUA_TFUNCTION)
        return;
    if (lua_type(L, -1) != LUA_TTABLE)
        luaL_error(L, "%s: must return a function or a table {version = 1, %s = function ... end}, got %s",
                   file, name, luaL_typename(L, -1));
    int t = lua_gettop(L), isint = 0;
    int vt = raw_field(L, t, "version");
    lua_Integer v = vt == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
    if (vt != LUA_TNIL && (!isint || v != 1))
        luaL_error(L, "%s: unsupported policy version (this gateway speaks version 1)", file);
    if (raw_field(L, t, name) != LUA_TFUNCTION)
        luaL_error(L, "%s: returned table has no function '%s'", file, name);
}

static int load_run(lua_State *L)
{
    load_call *c = sandbox_ud(L);
    sandbox_push_env(L);
    sandbox_load(L, c->chunk, c->src, c->len);
    lua_call(L, 0, 1);
    hook_extract(L, c);
    lua_Debug ar;
    lua_pushvalue(L, -1);
    lua_getinfo(L, ">S", &ar);
    c->pe->lines[c->hook] = ar.linedefined > 0 ? ar.linedefined : 1;
    lua_rawsetp(L, LUA_REGISTRYINDEX, &hook_keys[c->hook]);
    return 0;
}

static char *file_slurp(const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc((size_t)POLICY_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, (size_t)POLICY_FILE_MAX + 1, f) : 0;
    int bad = !buf || ferror(f) || n > (size_t)POLICY_FILE_MAX;
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "%s: %s", path, buf ? "unreadable or larger than 1 MiB" : "out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static int engine_load_hook(policy_engine *pe, const char *dir, int hook, char *err, size_t errlen)
{
    char *path = pe->files[hook], *buf = NULL, chunk[1104], msg[512];
    const char *src;
    size_t len, dl = dir ? strlen(dir) : 0;
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    if (dir) {
        snprintf(path, sizeof pe->files[hook], "%.*s/%s.lua", (int)dl, dir, hook_files[hook]);
        if (hook >= HOOK_BREAKER && access(path, F_OK) != 0)
            dir = NULL; /* a policy dir from before breaker / prices / budget existed: the bundled file */
        else if (!(src = buf = file_slurp(path, &len, err, errlen)))
            return -1;
    }
    if (!dir) {
        snprintf(path, sizeof pe->files[hook], "policies/%s.lua", hook_files[hook]);
        const embedded_file *f = embedded_find(path);
        if (!f) {
            snprintf(err, errlen, "%s: not embedded in this binary", path);
            return -1;
        }
        src = f->data;
        len = f->len;
    }
    sha256_hex(src, len, pe->sha256[hook]);
    if (hook == HOOK_ORDER) {
        const embedded_file *b = embedded_find("policies/order.lua");
        pe->order_bundled = b && b->len == len && memcmp(b->data, src, len) == 0;
    }
    snprintf(chunk, sizeof chunk, "@%s", path);
    load_call c = {pe, hook, src, chunk, len};
    sandbox_result r = sandbox_run(pe->sb, load_run, &c, msg, sizeof msg);
    free(buf);
    if (r == SANDBOX_OK)
        return 0;
    char base[32];
    snprintf(base, sizeof base, "%s.lua", hook_files[hook]);
    if (strstr(msg, base))
        snprintf(err, errlen, "%s", msg);
    else
        snprintf(err, errlen, "%s: %s: %s", path, sandbox_result_name(r), msg);
    return -1;
}

static int check_fail(policy_engine *pe, int hook, const char *why, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s:%d: self-check of %s failed: %s", pe->files[hook], pe->lines[hook],
             hook_names[hook], why);
    return -1;
}

static int check_classify(policy_engine *pe, char *err, size_t errlen)
{
    static const char quota_body[] =
        "{\"type\":\"error\",\"error\":{\"type\":\"usage_limit_reached\","
        "\"message\":\"You've hit your usage limit.\"}}";
    const policy_event evs[] = {
        {.status = 429, .retry_after = 12, .account_kind = "api_key", .endpoint = "/v1/responses"},
        {.status = 500, .retry_after = -1, .account_kind = "chatgpt", .endpoint = "/v1/responses"},
        {.status = 400, .error_type = "invalid_request_error", .error_code = "context_length_exceeded",
         .error_message = "too long", .retry_after = -1, .account_kind = "api_key",
         .endpoint = "/v1/chat/completions"},
        {.network_error = 1, .retry_after = -1, .account_kind = "aggregate", .endpoint = "/v1/responses"},
        {.timeout = 1, .retry_after = -1},
        {.status = 200, .in_stream = 1, .body = quota_body, .body_len = sizeof quota_body - 1,
         .error_type = "usage_limit_reached", .retry_after = -1, .account_kind = "chatgpt"},
    };
    char why[512];
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++) {
        policy_verdict v;
        hook_call h = {.pe = pe, .ev = &evs[i], .verdict = &v};
        if (hook_run(pe, classify_run, &h, why, sizeof why) != 0)
            return check_fail(pe, HOOK_CLASSIFY, why, err, errlen);
    }
    return 0;
}

static int check_cooldown(policy_engine *pe, char *err, size_t errlen)
{
    const policy_state sts[] = {
        {.account_id = 1, .retry_after = -1},
        {.account_id = 2, .ladder_step = 2, .last_429_at = 1700000000 - 60, .retry_after = 400},
        {.account_id = 3, .ladder_step = 4, .last_429_at = 1700000000 - 7200, .retry_after = -1},
        {.account_id = 4, .retry_after = -1, .primary_used_pct = 100, .primary_reset_at = 1700000000 + 600,
         .secondary_used_pct = -1},
    };
    const char *classes[] = {"rate_limit", "quota", "server", "network"};
    char why[512];
    for (size_t i = 0; i < sizeof sts / sizeof sts[0]; i++)
        for (size_t k = 0; k < 4; k++) {
            hook_call h = {.pe = pe, .st = &sts[i], .cls = classes[k], .now = 1700000000};
            if (hook_run(pe, cooldown_run, &h, why, sizeof why) != 0)
                return check_fail(pe, HOOK_COOLDOWN, why, err, errlen);
        }
    return 0;
}

static const policy_candidate check_cands[] = {
    {.id = 11, .name = "a", .kind = "chatgpt", .sort = 0, .updated_at = 100, .primary_used_pct = 10,
     .secondary_used_pct = 20, .success_rate = 1, .latency_ema_ms = 300, .max_concurrency = 1,
     .weight = 3, .current_weight = -1},
    {.id = 12, .name = "b", .kind = "api_key", .sort = 0, .updated_at = 200, .primary_used_pct = -1,
     .secondary_used_pct = -1, .success_rate = 0.5, .latency_ema_ms = 900, .inflight = 1,
     .weight = 1, .current_weight = 1},
    {.id = 13, .name = "c", .kind = "aggregate", .sort = 1, .updated_at = 50, .primary_used_pct = 99,
     .secondary_used_pct = 95, .success_rate = 0.9, .latency_ema_ms = 100, .reserve = 1,
     .weight = 1},
};

static int check_guard_order(policy_engine *pe, char *err, size_t errlen)
{
    const policy_order_ctx ctxs[] = {
        {.strategy = "ordered", .rotation = "account_rotation", .model = "gpt-5", .platform_key_id = 1, .seed = 7},
        {.strategy = "balanced", .rotation = "hybrid_rotation", .model = "gpt-5", .platform_key_id = 1,
         .cursor = 12, .preferred = 13, .seed = 3},
        {.strategy = "ordered", .rotation = "hybrid_aggregate_first_rotation", .seed = 0},
        {.strategy = "weighted", .rotation = "hybrid_rotation", .model = "gpt-5", .platform_key_id = 2, .seed = 1},
    };
    char why[512];
    size_t perm[3];
    for (size_t i = 0; i < 3; i++) {
        hook_call h = {.pe = pe, .c = &check_cands[i]};
        if (hook_run(pe, guard_run, &h, why, sizeof why) != 0)
            return check_fail(pe, HOOK_GUARD, why, err, errlen);
    }
    for (size_t i = 0; i < sizeof ctxs / sizeof ctxs[0]; i++) {
        hook_call h = {.pe = pe, .c = check_cands, .n = 3, .perm = perm, .ctx = &ctxs[i]};
        if (hook_run(pe, order_run, &h, why, sizeof why) != 0)
            return check_fail(pe, HOOK_ORDER, why, err, errlen);
    }
    return 0;
}

static int check_breaker(policy_engine *pe, char *err, size_t errlen)
{
    const policy_breaker_state sts[] = {
        {.account_id = 1, .kind = "api_key", .state = BREAKER_CLOSED, .consecutive_failures = 4,
         .window_requests = 4, .window_failures = 4},
        {.account_id = 2, .kind = "aggregate", .state = BREAKER_HALF_OPEN, .consecutive_successes = 2,
         .window_requests = 12, .window_failures = 8},
        {.account_id = 3, .kind = "chatgpt", .state = BREAKER_OPEN, .consecutive_failures = 1,
         .window_requests = 20, .window_failures = 1},
    };
    char why[512];
    for (size_t i = 0; i < sizeof sts / sizeof sts[0]; i++)
        for (int ok = 0; ok < 2; ok++) {
            hook_call h = {.pe = pe, .bst = &sts[i], .success = ok, .now = 1700000000};
            if (hook_run(pe, breaker_run, &h, why, sizeof why) != 0)
                return check_fail(pe, HOOK_BREAKER, why, err, errlen);
        }
    return 0;
}

static int check_budget(policy_engine *pe, char *err, size_t errlen)
{
    const policy_budget bs[] = {
        {.kind = "key", .name = "k", .period = "month", .usd = 50, .spent = 12.5, .start = 1700000000,
         .resets_at = 1702592000, .now = 1700100000},
        {.kind = "account", .name = "a", .period = "7d", .usd = 5, .spent = 5.01, .start = 1700000000,
         .resets_at = 1700604800, .now = 1700100000},
    };
    char why[512];
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) {
        hook_call h = {.pe = pe, .budget = &bs[i]};
        if (hook_run(pe, budget_run, &h, why, sizeof why) != 0)
            return check_fail(pe, HOOK_BUDGET, why, err, errlen);
    }
    return 0;
}

static int check_price(policy_engine *pe, char *err, size_t errlen)
{
    const char *models[] = {"gpt-5", "gpt-4o-2024-08-06", "no-such-model", ""};
    char why[512];
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        hook_call h = {.pe = pe, .model = models[i]};
        if (hook_run(pe, price_run, &h, why, sizeof why) != 0)
            return check_fail(pe, HOOK_PRICE, why, err, errlen);
    }
    return 0;
}

policy_engine *policy_new(const char *dir, char *err, size_t errlen)
{
    policy_engine *pe = calloc(1, sizeof *pe);
    if (!pe) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    static uint64_t generations;
    pe->generation = ++generations; /* engines are made on the loop thread (start-up, SIGHUP) */
    snprintf(pe->source, sizeof pe->source, "%s", dir ? dir : "embedded");
    pe->sb = sandbox_new(POLICY_MEM_LIMIT, POLICY_INSTR_LIMIT, POLICY_TIME_MS, err, errlen);
    if (!pe->sb)
        goto fail;
    if (sandbox_export_embedded(pe->sb, "lua/sy.lua", "sy", err, errlen) != 0)
        goto fail;
    for (int i = 0; i < HOOK_COUNT; i++)
        if (engine_load_hook(pe, dir, i, err, errlen) != 0)
            goto fail;
    if (check_classify(pe, err, errlen) || check_cooldown(pe, err, errlen) ||
        check_guard_order(pe, err, errlen) || check_breaker(pe, err, errlen) || check_price(pe, err, errlen) ||
        check_budget(pe, err, errlen))
        goto fail;
    /* would this classify resume a cut text-only chat stream? */
    policy_event cut = {.status = 200, .in_stream = 1, .network_error = 1, .retry_after = -1,
                        .account_kind = "api_key", .endpoint = "/v1/chat/completions", .after_output = 1,
                        .delivered_chars = 100, .alternatives = 1};
    policy_verdict v;
    hook_call h = {.pe = pe, .ev = &cut, .verdict = &v};
    char why[512];
    pe->may_resume = hook_run(pe, classify_run, &h, why, sizeof why) == 0 && v.action == VERDICT_RESUME;
    log_debug("policy: hooks loaded from %s (%zu KiB of Lua memory)", pe->source,
              sandbox_memory(pe->sb) / 1024);
    return pe;
fail:
    policy_free(pe);
    return NULL;
}

void policy_free(policy_engine *pe)
{
    if (!pe)
        return;
    sandbox_free(pe->sb);
    free(pe);
}

const char *policy_source(const policy_engine *pe) { return pe ? pe->source : "none"; }
uint64_t policy_generation(const policy_engine *pe) { return pe ? pe->generation : 0; }
uint64_t policy_fallbacks(const policy_engine *pe) { return pe ? pe->fallbacks : 0; }
int policy_may_resume(const policy_engine *pe) { return pe ? pe->may_resume : 0; }
const char *policy_last_error(const policy_engine *pe) { return pe ? pe->last_error : ""; }

int policy_file_info(const policy_engine *pe, size_t i, policy_file *out)
{
    if (!pe || i >= HOOK_COUNT)
        return -1;
    out->hook = hook_names[i];
    out->path = pe->files[i];
    out->sha256 = pe->sha256[i];
    out->fallbacks = pe->hook_fallbacks[i];
    return 0;
}
