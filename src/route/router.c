/* router.c: candidate filtering and ordering (see router.h). */
#include "route/router.h"
#include "route/pool.h"
#include "policy/policy.h"
#include "store/store.h"
#include "route/affinity.h"
#include "route/account_limits.h"
#include "route/breaker.h"
#include "route/hold.h"
#include "base/sha256.h"
#include "upstream/model_list.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double router_rest_until(const pool_account *pa, double now)
{
    double b = breaker_open_until(pa);
    if (pa->st.cooldown_until > b)
        b = pa->st.cooldown_until;
    double w = account_limits_wait_s(pa, now); /* a local rate limit refills within the minute */
    return now + w > b ? now + w : b;
}

double router_family_until(const pool_account *pa, const route_ctx *ctx, double now)
{
    const account_family *f = ctx->is_get ? NULL : pool_family_cooling(pa, ctx->model, ctx->family, now);
    return f ? f->until : 0;
}

/* 1 (with why) when pa does not serve the request's model: not in the
 * operator's --models list, or refused by its upstream this run. What the
 * upstream's /models lists is a hint for the order only (an Azure
 * deployment, an alias, a relay serves names its list does not give). Not
 * a failure: nothing cools down. */
static int router_model_skip(const pool_account *pa, const route_ctx *ctx, char *why, size_t n)
{
    if (ctx->is_get || !ctx->model || !*ctx->model || pool_account_serves_request(pa, ctx->model))
        return 0;
    char to[MODEL_LIST_NAME_MAX + 1];
    if (model_list_has(pa->models_refused, ctx->model))
        snprintf(why, n, "model %.80s refused by its upstream (not served on this account)", ctx->model);
    else if (pool_account_model_for(pa, ctx->model, to, sizeof to))
        snprintf(why, n, "does not serve model %.80s (its --model-map sends %.80s, not in its --models list)",
                 ctx->model, to);
    else
        snprintf(why, n, "does not serve model %.80s (its --models list)", ctx->model);
    return 1;
}

/* router_available's checks; with slots 0 its concurrency limit is left out. */
static int router_check(const pool_account *pa, const route_ctx *ctx, double now, char *why, size_t n, int slots)
{
    if (!pa->a.enabled) {
        snprintf(why, n, "disabled");
        return 0;
    }
    if (pa->a.login_error) {
        snprintf(why, n, "needs_login: %s", pa->a.login_error);
        return 0;
    }
    if (pa->a.hold) { /* out until an operator acts: the reason says what to do */
        hold_reason(pa->a.hold, pa->a.name, why, n);
        return 0;
    }
    if (router_model_skip(pa, ctx, why, n))
        return 0;
    if (pa->st.cooldown_until > now) {
        snprintf(why, n, "cooling down for %.0fs after %s", pa->st.cooldown_until - now,
                 pa->st.last_error[0] ? pa->st.last_error : "an error");
        return 0;
    }
    const account_family *fam;
    if (!ctx->is_get && (fam = pool_family_cooling(pa, ctx->model, ctx->family, now)) != NULL) {
        snprintf(why, n, "limit family %s cooling down for %.0fs after a 429 for %.80s", fam->family,
                 fam->until - now, fam->model[0] ? fam->model : "one of its models");
        return 0;
    }
    if (!breaker_available(pa, now, why, n))
        return 0;
    if (slots && pa->a.max_concurrency > 0 && pa->inflight >= pa->a.max_concurrency) {
        snprintf(why, n, "at its concurrency limit (%d in flight)", pa->inflight);
        return 0;
    }
    if ((pa->a.max_rpm > 0 || pa->a.max_tpm > 0 || pa->a.budget_usd > 0) && !account_limits_ok(pa, now, why, n))
        return 0;
    return 1;
}

int router_available(const pool_account *pa, const route_ctx *ctx, double now, char *why, size_t n)
{
    return router_check(pa, ctx, now, why, n, 1);
}

int router_busy(const pool_account *pa, const route_ctx *ctx, double now)
{
    char why[ROUTER_WHY_MAX];
    return pa->a.max_concurrency > 0 && pa->inflight >= pa->a.max_concurrency &&
           router_check(pa, ctx, now, why, sizeof why, 0);
}

double router_soonest_return(gateway *gw, const route_ctx *ctx, int64_t pinned, double now, char *name, size_t n)
{
    double soonest = 0;
    for (size_t i = 0; i < pool_count(gw->pool); i++) {
        const pool_account *pa = pool_at(gw->pool, i);
        /* needs_login, a hold and an exhausted budget: not back by themselves within a wait */
        if ((pinned && pa->a.id != pinned) || !pa->a.enabled || pa->a.login_error || pa->a.hold ||
            account_limits_over_budget(pa, now))
            continue;
        if (!ctx->is_get && !pool_account_serves_request(pa, ctx->model))
            continue;
        double back = router_rest_until(pa, now), fam = router_family_until(pa, ctx, now);
        if (fam > back)
            back = fam;
        if (back > now && (!soonest || back < soonest)) {
            soonest = back;
            sbuf_copy_cstr(name, n, pa->a.name);
        }
    }
    return soonest;
}

void router_skip_add(route_plan *plan, const pool_account *pa, const char *reason)
{
    if (plan->nskips >= ROUTER_SKIPS_MAX) {
        plan->skips_more++;
        return;
    }
    if (plan->nskips == plan->cap_skips) {
        plan->cap_skips = plan->cap_skips ? plan->cap_skips * 2 : 8;
        plan->skips = realloc(plan->skips, plan->cap_skips * sizeof *plan->skips);
    }
    route_skip *s = &plan->skips[plan->nskips++];
    s->account_id = pa->a.id;
    sbuf_copy_cstr(s->name, sizeof s->name, pa->a.name);
    sbuf_copy_cstr(s->reason, sizeof s->reason, reason);
}

static void router_candidate_fill(policy_candidate *c, const pool_account *pa, const route_ctx *ctx, double now)
{
    health_figures h;
    health_window_read(&pa->health, now, &h);
    memset(c, 0, sizeof *c);
    c->id = pa->a.id;
    c->name = pa->a.name;
    c->kind = account_kind_name(pa->a.kind);
    c->sort = pa->a.sort;
    c->updated_at = pa->a.updated_at;
    c->primary_used_pct = pa->st.primary_used_pct;
    c->secondary_used_pct = pa->st.secondary_used_pct;
    c->primary_reset_at = pa->st.primary_reset_at;
    c->secondary_reset_at = pa->st.secondary_reset_at;
    c->primary_window_s = pa->st.primary_window_s;
    c->secondary_window_s = pa->st.secondary_window_s;
    c->plan_type = pa->st.plan_type;
    c->has_credits = pa->st.has_credits;
    c->credits_unlimited = pa->st.credits_unlimited;
    c->credits_balance = pa->st.credits_balance;
    c->success_rate = pa->st.success_ema;
    c->latency_ema_ms = pa->st.latency_ema_ms;
    /* health recovers from the last failure (the last state change when the
     * gateway has seen none since it started) */
    double since = pa->breaker.last_failure_at > 0 ? pa->breaker.last_failure_at : pa->st.updated_at;
    c->health_age_s = since > 0 && now > since ? now - since : 0;
    c->inflight = pa->inflight;
    c->max_concurrency = pa->a.max_concurrency;
    c->weight = pa->a.weight;
    c->success_rate_60s = h.success_rate;
    c->latency_60s_ms = h.latency_ms;
    c->attempts_60s = h.attempts;
    /* hints for the order (docs/clients.md): a translation to reach it, and
     * an upstream /models list that does not name the model */
    c->translated = !ctx->is_get && !(account_dialects(&pa->a, &pa->st) & (1u << (unsigned)ctx->api));
    c->unlisted = !ctx->is_get && !pool_account_lists(pa, ctx->model);
}

/* The guard's verdict on pa. Guard sees identity and usage only, so a
 * verdict the policy gave is kept until the usage figures or the policy
 * change (pool_refresh rebuilds the account, and the memo, on any config
 * change): guard runs when an account's quota moves, not per request. */
/* 1 if the usage figures guard saw for the memo are still c's. */
static int router_usage_same(const pool_guard_memo *m, const policy_candidate *c)
{
    return m->primary_used_pct == c->primary_used_pct && m->secondary_used_pct == c->secondary_used_pct &&
           m->primary_reset_at == c->primary_reset_at && m->secondary_reset_at == c->secondary_reset_at &&
           m->primary_window_s == c->primary_window_s && m->secondary_window_s == c->secondary_window_s &&
           m->has_credits == c->has_credits && m->credits_unlimited == c->credits_unlimited &&
           m->credits_balance == c->credits_balance && strcmp(m->plan_type, c->plan_type) == 0;
}

static int router_guard(gateway *gw, pool_account *pa, const policy_candidate *c)
{
    pool_guard_memo *m = &pa->guard;
    uint64_t gen = policy_generation(gw->policy);
    if (gen && m->policy_gen == gen && router_usage_same(m, c))
        return m->verdict;
    uint64_t fallbacks = policy_fallbacks(gw->policy);
    int g = policy_guard(gw->policy, c);
    /* a failed hook is not remembered: it is retried (and reported) next time */
    m->policy_gen = policy_fallbacks(gw->policy) == fallbacks ? gen : 0;
    m->primary_used_pct = c->primary_used_pct;
    m->secondary_used_pct = c->secondary_used_pct;
    m->primary_reset_at = c->primary_reset_at;
    m->secondary_reset_at = c->secondary_reset_at;
    m->primary_window_s = c->primary_window_s;
    m->secondary_window_s = c->secondary_window_s;
    sbuf_copy_cstr(m->plan_type, sizeof m->plan_type, c->plan_type);
    m->has_credits = c->has_credits;
    m->credits_unlimited = c->credits_unlimited;
    m->credits_balance = c->credits_balance;
    m->verdict = g;
    return g;
}

/* Turn states are opaque and may be long: they are kept in the response
 * owner map under a fixed-size key of their own. */
void router_turn_state_key(const char *turn_state, char key[72])
{
    memcpy(key, "ts:", 3);
    sha256_hex(turn_state, strlen(turn_state), key + 3);
}

void router_turn_state_owner_set(gateway *gw, const char *turn_state, int64_t account_id)
{
    char key[72];
    router_turn_state_key(turn_state, key);
    pool_owner_set(gw->pool, key, account_id);
}

/* The account a continuation must reach: the owner of previous_response_id.
 * Else the account that issued the turn state, which is a sticky-routing
 * hint, not a contract: it goes first while it can serve (router_turn_first)
 * and the turn moves on without the header when it cannot. */
static void router_pin(gateway *gw, const route_ctx *ctx, route_plan *plan)
{
    int64_t owner = pool_owner_get(gw->pool, ctx->previous_response_id);
    if (owner && pool_find(gw->pool, owner)) {
        plan->pinned_owner = owner;
        plan->pinned_by = "previous_response_id";
        return;
    }
    if (ctx->turn_state && *ctx->turn_state) {
        char key[72];
        router_turn_state_key(ctx->turn_state, key);
        owner = pool_owner_get(gw->pool, key);
        plan->turn_owner = owner; /* even when removed since: nobody else gets its turn state */
        if (owner && pool_find(gw->pool, owner))
            plan->pinned_by = "x-codex-turn-state";
    }
}

/* Moves the plan's i-th account to the front, the others keeping their order. */
static void router_put_first(route_plan *plan, size_t i)
{
    int64_t id = plan->ids[i];
    memmove(&plan->ids[1], &plan->ids[0], i * sizeof *plan->ids);
    plan->ids[0] = id;
}

/* Session affinity: the account that served the session's last turn goes
 * first whatever the strategy, as long as order kept it and it is not in
 * reserve while normal accounts remain (prompt caches are per account, but
 * a nearly spent account is not worth them). */
static void router_affinity(gateway *gw, const route_ctx *ctx, route_plan *plan, const policy_candidate *cands,
                            pool_account **pas, const size_t *perm, size_t k, double now)
{
    if (!gw->affinity || !ctx->session_id || !*ctx->session_id || plan->pinned_owner)
        return;
    plan->affinity_prev = affinity_get(gw->affinity, ctx->session_id, now);
    if (!plan->affinity_prev || !k || plan->ids[0] == plan->affinity_prev)
        return;
    for (size_t i = 1; i < k; i++) {
        if (pas[perm[i]]->a.id != plan->affinity_prev)
            continue;
        if (cands[perm[i]].reserve && !cands[perm[0]].reserve)
            return;
        router_put_first(plan, i);
        plan->affinity_first = 1;
        return;
    }
}

/* The account that issued the request's turn state goes first when order
 * kept it, unless it is in reserve while normal accounts remain (the rule
 * affinity follows); before session affinity, which it overrides. */
static void router_turn_first(route_plan *plan, const policy_candidate *cands, pool_account **pas,
                              const size_t *perm, size_t k)
{
    if (!plan->turn_owner || !plan->n || plan->ids[0] == plan->turn_owner)
        return;
    int first_reserve = 0, owner_reserve = -1;
    for (size_t i = 0; i < k; i++) {
        if (pas[perm[i]]->a.id == plan->ids[0])
            first_reserve = cands[perm[i]].reserve;
        if (pas[perm[i]]->a.id == plan->turn_owner)
            owner_reserve = cands[perm[i]].reserve;
    }
    if (owner_reserve < 0 || (owner_reserve && !first_reserve))
        return;
    for (size_t i = 1; i < plan->n; i++)
        if (plan->ids[i] == plan->turn_owner) {
            router_put_first(plan, i);
            return;
        }
}

#define ROUTER_STACK 16 /* pools up to this size plan without the heap */

/* Weighted strategy: hands order the smooth weighted round-robin state of
 * this key + model (before), and steps it for the pick order made (after):
 * over the normal candidates of the chosen account's group, so a group
 * that was not reached does not pile up weight. */
static void router_swrr_load(gateway *gw, const route_ctx *ctx, policy_candidate *cands, size_t n)
{
    int64_t ids_s[ROUTER_STACK], *ids = n > ROUTER_STACK ? calloc(n, sizeof *ids) : ids_s;
    double cur_s[ROUTER_STACK], *cur = n > ROUTER_STACK ? calloc(n, sizeof *cur) : cur_s;
    for (size_t i = 0; i < n; i++)
        ids[i] = cands[i].id;
    pool_swrr_get(gw->pool, ctx->key_id, ctx->model, ids, cur, n);
    for (size_t i = 0; i < n; i++)
        cands[i].current_weight = cur[i];
    if (ids != ids_s)
        free(ids), free(cur);
}

static void router_swrr_step(gateway *gw, const route_ctx *ctx, const policy_candidate *cands, size_t n,
                             size_t chosen)
{
    if (cands[chosen].reserve)
        return;
    int agg = strcmp(cands[chosen].kind, "aggregate") == 0;
    int64_t ids_s[ROUTER_STACK], *ids = n > ROUTER_STACK ? calloc(n, sizeof *ids) : ids_s;
    int w_s[ROUTER_STACK], *w = n > ROUTER_STACK ? calloc(n, sizeof *w) : w_s;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!cands[i].reserve && (strcmp(cands[i].kind, "aggregate") == 0) == agg) {
            ids[m] = cands[i].id;
            w[m++] = cands[i].weight;
        }
    pool_swrr_advance(gw->pool, ctx->key_id, ctx->model, ids, w, m, cands[chosen].id);
    if (ids != ids_s)
        free(ids), free(w);
}

int router_kept(gateway *gw, const route_ctx *ctx)
{
    int64_t owner = pool_owner_get(gw->pool, ctx->previous_response_id);
    if (owner && pool_find(gw->pool, owner))
        return 1; /* pinned: it never rotates */
    double now = gateway_now();
    char why[ROUTER_WHY_MAX];
    const pool_account *pa = NULL;
    if (ctx->turn_state && *ctx->turn_state) {
        char key[72];
        router_turn_state_key(ctx->turn_state, key);
        pa = pool_find(gw->pool, pool_owner_get(gw->pool, key));
        if (pa && router_available(pa, ctx, now, why, sizeof why))
            return 1;
    }
    if (gw->affinity && ctx->session_id && *ctx->session_id) {
        pa = pool_find(gw->pool, affinity_get(gw->affinity, ctx->session_id, now));
        if (pa && router_available(pa, ctx, now, why, sizeof why))
            return 1;
    }
    return 0;
}

static int router_name_cmp(const void *a, const void *b)
{
    const pool_account *x = *(pool_account *const *)a, *y = *(pool_account *const *)b;
    return strcmp(x->a.name ? x->a.name : "", y->a.name ? y->a.name : "");
}

/* Balanced, with the pool's position pos: the cursor that makes the order
 * policy ("the first id after the cursor") start at the account of that
 * position among the normal candidates of the rotation's first group (by
 * name, the same on every gateway). */
static int64_t router_shared_cursor(gateway *gw, const policy_candidate *cands, pool_account **pas, size_t n,
                                    int64_t pos, int64_t cursor)
{
    const char *rot = gw->cfg.rotation;
    int agg_first = strcmp(rot, "aggregate_api_rotation") == 0 || strcmp(rot, "hybrid_aggregate_first_rotation") == 0;
    pool_account *sel_s[ROUTER_STACK], **sel = n > ROUTER_STACK ? calloc(n, sizeof *sel) : sel_s;
    if (!sel)
        return cursor;
    size_t m = 0;
    for (int pass = 0; pass < 3 && !m; pass++) /* the first group's normal ones, else any normal one, else any */
        for (size_t i = 0; i < n; i++)
            if (pass == 2 || (!cands[i].reserve && (pass == 1 || (strcmp(cands[i].kind, "aggregate") == 0) == agg_first)))
                sel[m++] = pas[i];
    if (m) {
        qsort(sel, m, sizeof *sel, router_name_cmp);
        cursor = sel[(size_t)((pos - 1) % (int64_t)m)]->a.id - 1;
    }
    if (sel != sel_s)
        free(sel);
    return cursor;
}

void router_plan(gateway *gw, const route_ctx *ctx, route_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    sbuf_copy_cstr(plan->strategy, sizeof plan->strategy, gw->cfg.route_strategy);
    size_t total = pool_count(gw->pool);
    plan->ids = calloc(total ? total : 1, sizeof *plan->ids);
    policy_candidate cands_s[ROUTER_STACK];
    pool_account *pas_s[ROUTER_STACK];
    size_t perm_s[ROUTER_STACK];
    char used_s[ROUTER_STACK];
    int heap = total > ROUTER_STACK;
    policy_candidate *cands = heap ? calloc(total, sizeof *cands) : cands_s;
    pool_account **pas = heap ? calloc(total, sizeof *pas) : pas_s;
    size_t *perm = heap ? calloc(total, sizeof *perm) : perm_s;
    char *used = heap ? calloc(total, 1) : used_s;
    double now = gateway_now();
    char why[ROUTER_WHY_MAX];

    router_pin(gw, ctx, plan);

    size_t n = 0;
    for (size_t i = 0; i < total; i++) {
        pool_account *pa = pool_at(gw->pool, i);
        if (plan->pinned_owner && pa->a.id != plan->pinned_owner)
            continue; /* the stored response lives on one account only */
        if (!router_available(pa, ctx, now, why, sizeof why)) {
            router_skip_add(plan, pa, why);
            continue;
        }
        router_candidate_fill(&cands[n], pa, ctx, now);
        int g = router_guard(gw, pa, &cands[n]);
        if (g == GUARD_EXCLUDE) {
            router_skip_add(plan, pa, "excluded by the quota guard");
            continue;
        }
        cands[n].reserve = g == GUARD_RESERVE;
        pas[n++] = pa;
    }

    int weighted = strcmp(gw->cfg.route_strategy, "weighted") == 0;
    if (weighted && n)
        router_swrr_load(gw, ctx, cands, n);
    int64_t cursor = pool_cursor_get(gw->pool, ctx->key_id, ctx->model);
    if (ctx->cursor_pos > 0 && n && strcmp(gw->cfg.route_strategy, "balanced") == 0)
        cursor = router_shared_cursor(gw, cands, pas, n, ctx->cursor_pos, cursor);
    policy_order_ctx octx = {
        .strategy = gw->cfg.route_strategy,
        .rotation = gw->cfg.rotation,
        .model = ctx->model ? ctx->model : "",
        .platform_key_id = ctx->key_id,
        .cursor = cursor,
        .preferred = ctx->preferred,
        .seed = (uint32_t)random(),
    };
    size_t k = n ? policy_order(gw->policy, cands, n, &octx, perm) : 0;
    if (weighted && k)
        router_swrr_step(gw, ctx, cands, n, perm[0]);
    memset(used, 0, n);
    for (size_t i = 0; i < k; i++) {
        plan->ids[plan->n++] = pas[perm[i]]->a.id;
        used[perm[i]] = 1;
    }
    router_affinity(gw, ctx, plan, cands, pas, perm, k, now);
    router_turn_first(plan, cands, pas, perm, k);
    plan->affinity_first = plan->n && plan->affinity_prev && plan->ids[0] == plan->affinity_prev;
    plan->kept_first = plan->n && (plan->pinned_owner || (plan->turn_owner && plan->ids[0] == plan->turn_owner) ||
                                   plan->affinity_first);
    /* a request makes max_attempts attempts at most: the plan need not hold more accounts */
    int max_attempts;
    double max_seconds;
    policy_request_bounds(gw->policy, &max_attempts, &max_seconds);
    if (plan->n > (size_t)max_attempts) {
        plan->beyond = plan->n - (size_t)max_attempts;
        plan->n = (size_t)max_attempts;
    }
    for (size_t i = 0; i < n; i++)
        if (!used[i])
            router_skip_add(plan, pas[i], "left out by the order policy (rotation mode)");
    if (heap) {
        free(used);
        free(perm);
        free(pas);
        free(cands);
    }
}

void router_plan_free(route_plan *plan)
{
    free(plan->ids);
    free(plan->skips);
    memset(plan, 0, sizeof *plan);
}
