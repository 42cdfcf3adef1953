/* policy_defaults.c: the built-in defaults, the rules of the bundled
 * policies/<hook>.lua in C. They decide whenever there is no engine or a
 * hook errs, times out, runs out of memory or answers something malformed
 * (policy.c), so a broken policy never stops the gateway; they are also
 * what the bundled order.lua answers for one candidate (policy_order).
 * Each mirrors its Lua file, and unit.policy.test_policy holds the two to
 * the same answers on a sweep of inputs. */
#include "policy/policy_internal.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const quota_texts[] = {
    "hit your usage limit", "usage_limit_reached", "quota exceeded", "insufficient_quota", "credit balance is too low",
    NULL};
/* classify.lua's MODEL_TEXTS: the account does not serve the model. */
/* a 404 about something the request named, not the endpoint (classify.lua, NOT_ENDPOINT_TEXTS) */
static const char *const not_endpoint_texts[] = {"item with id", "previous response", "previous_response_not_found",
                                                 "response with id", NULL};
static const char *const model_texts[] = {"model_not_found", "not supported when using codex with a chatgpt account",
                                          "does not exist or you do not have access to it", NULL};
static const char *const deactivated_texts[] = {"account_deactivated", "deactivated", NULL};
/* Refusals waiting does not heal (classify.lua's HELD): the account leaves
 * the pool in that state until an operator acts. */
static const char *const held_deactivated[] = {
    "deactivated_workspace", "workspace is deactivated", "workspace has been deactivated", NULL};
static const char *const held_workspace[] = {"invalid_workspace_selected", "workspace_access_denied", NULL};
static const char *const held_region[] = {
    "unsupported_country_region_territory", "not authorized in this region", NULL};
static const char *const held_account[] = {
    "account_deactivated", "account associated with this api key has been deactivated", NULL};
/* classify.lua's KEY_REFUSED_TEXTS: an API key its upstream refuses as invalid. */
static const char *const key_refused_texts[] = {"invalid_api_key", "incorrect_api_key", "incorrect api key provided",
                                                "invalid_key", "invalid api key", "invalid x-api-key", NULL};
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

/* Also fills a verdict read from classify.lua (policy_hooks.c). */
void policy_verdict_act(policy_verdict *v, policy_action action, const char *cls, double cooldown, double after)
{
    v->action = action;
    v->failover = action == VERDICT_FAILOVER;
    v->drain_bucket = 0;
    v->scope_model = 0;
    v->state[0] = '\0';
    snprintf(v->cls, sizeof v->cls, "%s", cls);
    v->cooldown = cooldown;
    v->after = after;
}

static void verdict_set(policy_verdict *v, int failover, const char *cls, double cooldown)
{
    policy_verdict_act(v, failover ? VERDICT_FAILOVER : VERDICT_RETURN, cls, cooldown, 0);
}

static const char *const capacity_texts[] = {
    "overloaded", "at capacity", "capacity_exceeded", "server_is_overloaded", NULL};
static const char *const context_texts[] = {
    "context_length_exceeded", "maximum context length", "context window", "prompt is too long", NULL};
static const char *const encrypted_code[] = {"invalid_encrypted_content", NULL};
static const char *const encrypted_word[] = {"encrypted", NULL};
static const char *const encrypted_texts[] = {
    "could not be verified", "could not be decrypted", "did not match the target organization", NULL};

/* A short Retry-After worth waiting for on the same account (classify.lua's wait_out). */
static int classify_wait_out(const policy_event *ev)
{
    return ev->retry_after > 0 && ev->retry_after <= 5 && ev->alternatives == 0 && ev->retries < 2;
}

/* classify.lua's limit_scope: 1 when a rate limit is the model's (the
 * API's "Rate limit reached for MODEL in organization ..."). */
static int classify_scope_model(const policy_event *ev)
{
    const char *m = ev->error_message, *model = ev->model;
    if (!m || !model || !*model || (ev->account_kind && strcmp(ev->account_kind, "chatgpt") == 0))
        return 0;
    char needle[160];
    if ((size_t)snprintf(needle, sizeof needle, "rate limit reached for %s", model) >= sizeof needle)
        return 0;
    return strcasestr(m, needle) != NULL;
}

static void classify_rate_limited(const policy_event *ev, policy_verdict *out)
{
    verdict_set(out, 1, "rate_limit", -1);
    out->scope_model = classify_scope_model(ev);
}

/* classify.lua's server_trouble. */
static void classify_server(const policy_event *ev, policy_verdict *out)
{
    if (ev->retry_after > 0) {
        if (classify_wait_out(ev))
            policy_verdict_act(out, VERDICT_RETRY, "server", 0, ev->retry_after);
        else
            verdict_set(out, 1, "server", 30);
    } else if (ev->retries < 1) {
        policy_verdict_act(out, VERDICT_RETRY, "server", 0, 0.12 + (0.9 - 0.12) * ev->random);
    } else {
        verdict_set(out, 1, "server", 30);
    }
}

/* classify.lua's held_state: the state an account is held in for this
 * refusal (401, 402 or 403 naming it), or NULL. */
static const char *classify_held(const policy_event *ev)
{
    if (ev->status != 401 && ev->status != 402 && ev->status != 403)
        return NULL;
    if (event_mentions(ev, held_deactivated))
        return "deactivated_workspace";
    if (event_mentions(ev, held_workspace))
        return "workspace_denied";
    if (event_mentions(ev, held_region))
        return "region_unsupported";
    if (event_mentions(ev, held_account))
        return "account_deactivated";
    if (ev->status != 402 && !(ev->account_kind && strcmp(ev->account_kind, "chatgpt") == 0) &&
        event_mentions(ev, key_refused_texts))
        return "key_refused";
    return NULL;
}

/* classify.lua's after_output. */
static void classify_after_output(const policy_event *ev, policy_verdict *out)
{
    const char *cls;
    double cooldown;
    if (ev->network_error || ev->timeout)
        cls = "interrupted", cooldown = 20;
    else if (event_mentions(ev, quota_texts))
        cls = "quota", cooldown = -1;
    else if (code_is(ev, stream_rate_codes))
        cls = "rate_limit", cooldown = -1;
    else if (code_is(ev, stream_server_codes) || event_mentions(ev, capacity_texts))
        cls = "server", cooldown = 30;
    else {
        verdict_set(out, 0, "stream", 0);
        return;
    }
    int chat = ev->endpoint && strcmp(ev->endpoint, "/v1/chat/completions") == 0;
    int responses = ev->endpoint && strcmp(ev->endpoint, "/v1/responses") == 0;
    if ((chat || responses) && ev->continuable && !ev->tool_call && ev->delivered_chars > 0)
        policy_verdict_act(out, VERDICT_RESUME, cls, cooldown, 0);
    else if (strcmp(cls, "interrupted") != 0 && responses && ev->alternatives > 0)
        policy_verdict_act(out, VERDICT_RETRY_TURN, cls, cooldown, 0);
    else
        policy_verdict_act(out, VERDICT_RETURN, cls, strcmp(cls, "interrupted") == 0 ? 0 : cooldown, 0);
}

/* Mirrors policies/classify.lua. */
void policy_classify_default(const policy_event *ev, policy_verdict *out)
{
    int s = ev->status;
    const char *held = ev->after_output ? NULL : classify_held(ev);
    if (ev->after_output)
        classify_after_output(ev, out);
    else if ((s == 400 || ev->in_stream) &&
             (event_mentions(ev, encrypted_code) ||
              (event_mentions(ev, encrypted_word) && event_mentions(ev, encrypted_texts))))
        policy_verdict_act(out, VERDICT_STRIP_RETRY, "invalid_encrypted_content", 0, 0);
    else if ((s == 400 || s == 404 || ev->in_stream) && event_mentions(ev, model_texts))
        verdict_set(out, 1, "model_unsupported", 0);
    else if (held) {
        verdict_set(out, 1, held, 0);
        snprintf(out->state, sizeof out->state, "%s", held);
    } else if (event_mentions(ev, quota_texts))
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
        classify_rate_limited(ev, out);
    else if (ev->in_stream && (code_is(ev, stream_server_codes) || event_mentions(ev, capacity_texts)))
        classify_server(ev, out);
    else if (ev->in_stream)
        verdict_set(out, 0, "stream", 0);
    else if (s == 0)
        verdict_set(out, 1, "network", 20);
    else if (s == 429 && classify_wait_out(ev))
        policy_verdict_act(out, VERDICT_RETRY, "rate_limit", 0, ev->retry_after);
    else if (s == 429)
        classify_rate_limited(ev, out);
    else if (s == 404 && ev->endpoint && strcmp(ev->endpoint, "/v1/responses/{id}") == 0)
        verdict_set(out, 0, "not_found", 0);
    else if ((s == 405 || s == 501) && ev->endpoint && strcmp(ev->endpoint, "/v1/responses/{id}") == 0)
        verdict_set(out, 0, "unsupported_call", 0);
    else if ((s == 404 || s == 405) && !(ev->endpoint && strcmp(ev->endpoint, "/v1/responses/{id}") == 0) &&
             !event_mentions(ev, not_endpoint_texts))
        verdict_set(out, 1, "unknown_endpoint", 20);
    else if (s == 401 || s == 403)
        verdict_set(out, 1, "auth", 20);
    else if (s == 404)
        verdict_set(out, 1, "not_found", 20);
    else if (s == 408)
        verdict_set(out, 1, "timeout", 20);
    else if (s == 409)
        verdict_set(out, 1, "conflict", 20);
    else if (s >= 400 && s < 500 && ev->context_fallbacks > 0 && event_mentions(ev, context_texts))
        policy_verdict_act(out, VERDICT_CONTEXT_FALLBACK, "context_length", 0, 0);
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
void policy_cooldown_default(const policy_state *st, const char *cls, double now,
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
int policy_guard_default(const policy_candidate *c)
{
    if (c->primary_used_pct >= 95.0 || c->secondary_used_pct >= 90.0)
        return GUARD_RESERVE;
    return GUARD_NORMAL;
}

/* Mirrors policies/budget.lua. */
int policy_budget_default(const policy_budget *b) { return b->usd > 0 && b->spent >= b->usd; }

/* --- exhausted (mirrors policies/exhausted.lua) --- */

/* The time an account out for its plan's usage is back: its rest, or the
 * reset of a window it has spent, whichever is later; -1 when it is out
 * for another reason (policies/exhausted.lua's out_for_usage). */
static double exhausted_back(const policy_out_account *a, double now)
{
    const char *c = a->last_class ? a->last_class : "";
    int resting = a->until > now && (strcmp(c, "quota") == 0 || strcmp(c, "rate_limit") == 0);
    int p = a->primary_used_pct >= 100, s = a->secondary_used_pct >= 100;
    if (!resting && !p && !s)
        return -1;
    double t = a->until > now ? a->until : 0;
    if (p && a->primary_reset_at > t)
        t = a->primary_reset_at;
    if (s && a->secondary_reset_at > t)
        t = a->secondary_reset_at;
    return t;
}

int policy_exhausted_default(const policy_exhausted *ex, double *resets_at, char *plan_type, size_t plan_n)
{
    *resets_at = 0;
    snprintf(plan_type, plan_n, "%s", "");
    if (!ex->endpoint || strcmp(ex->endpoint, "/v1/responses") != 0 || ex->n == 0)
        return 0;
    double soonest = 0;
    const char *plan = "";
    for (size_t i = 0; i < ex->n; i++) {
        double t = exhausted_back(&ex->accounts[i], ex->now);
        if (t < 0)
            return 0; /* one is out for something else: not a usage limit */
        if (t > 0 && (soonest == 0 || t < soonest)) {
            soonest = t;
            plan = ex->accounts[i].plan_type ? ex->accounts[i].plan_type : "";
        }
    }
    *resets_at = soonest;
    snprintf(plan_type, plan_n, "%s", plan);
    return 1;
}

/* --- strip (mirrors policies/strip.lua) --- */

int policy_strip_default(const policy_blob *b)
{
    const char *origin = b->origin ? b->origin : "", *target = b->target ? b->target : "";
    const char *type = b->item_type ? b->item_type : "";
    if (*origin && strcmp(origin, target) == 0)
        return STRIP_KEEP;
    if (!*origin && !b->strip_retry)
        return STRIP_KEEP;
    if (b->in_part || strcmp(type, "compaction") == 0 || strcmp(type, "compaction_summary") == 0)
        return STRIP_TEXT;
    return STRIP_DROP;
}

/* --- first_token (mirrors policies/first_token.lua) --- */

#define FIRST_TOKEN_CHAT 10.0       /* a stream with nothing to think about, on a prompt up to 32 KiB */
#define FIRST_TOKEN_CHAT_MAX 60.0   /* ... + 5 s per doubling of the prompt above, up to this */
#define FIRST_TOKEN_REASONING 180.0 /* a reasoning model may think for minutes before its first event */
#define AFTER_OUTPUT_CHAT 30.0      /* silent this long after output: stuck (twice the first token's) */

/* A model that reasons by default: the o-series, gpt-5 (not its -chat
 * variants) and the codex models; a provider prefix ("openai/") is skipped. */
static int first_token_reasoning_model(const char *model)
{
    const char *m = model ? model : "", *slash = strrchr(m, '/');
    char low[128];
    size_t n = 0;
    for (m = slash ? slash + 1 : m; *m && n + 1 < sizeof low; m++)
        low[n++] = (char)(*m >= 'A' && *m <= 'Z' ? *m + 32 : *m);
    low[n] = '\0';
    if (strstr(low, "chat"))
        return 0;
    return strncmp(low, "o1", 2) == 0 || strncmp(low, "o3", 2) == 0 || strncmp(low, "o4", 2) == 0 ||
           strncmp(low, "gpt-5", 5) == 0 || strstr(low, "codex") != NULL;
}

policy_silence policy_first_token_default(const policy_first_token *ft)
{
    const char *effort = ft->reasoning;
    double secs = FIRST_TOKEN_CHAT; /* a longer prompt takes longer to read before the first token */
    for (long kib = 32; kib < ft->prompt_kib && secs < FIRST_TOKEN_CHAT_MAX; kib <<= 1)
        secs += 5;
    policy_silence chat = {secs < FIRST_TOKEN_CHAT_MAX ? secs : FIRST_TOKEN_CHAT_MAX, AFTER_OUTPUT_CHAT};
    if (effort && strcmp(effort, "none") == 0)
        return chat;
    if (effort || first_token_reasoning_model(ft->model)) /* it may think between its summary and its answer */
        return (policy_silence){FIRST_TOKEN_REASONING, FIRST_TOKEN_REASONING};
    return chat;
}

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

/* 0: native and listed; 1 translated; 2 its upstream's list lacks the
 * model (more likely refused than a translation is to fail); 3 both. */
static int order_penalty(const policy_candidate *c) { return (c->unlisted ? 2 : 0) + (c->translated ? 1 : 0); }

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

size_t policy_order_default(const policy_candidate *c, size_t n, const policy_order_ctx *ctx, size_t *perm)
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
    /* within each group, an account reached by translation, or whose
     * upstream does not list the model, after the others (stable); hints
     * only, so "ordered" keeps the operator's sort: among equal sorts */
    int by_sort = !balanced && !weighted;
    for (size_t a = 0; a < m;) {
        int r = order_rank(&c[perm[a]], g, ng);
        size_t b = a;
        while (b < m && order_rank(&c[perm[b]], g, ng) == r)
            b++;
        for (size_t i = a + 1; r < ng && i < b; i++) /* reserves keep their order, as order.lua's */
            for (size_t j = i; j > a && order_penalty(&c[perm[j]]) < order_penalty(&c[perm[j - 1]]) &&
                               (!by_sort || c[perm[j]].sort == c[perm[j - 1]].sort);
                 j--) {
                size_t t = perm[j];
                perm[j] = perm[j - 1];
                perm[j - 1] = t;
            }
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
void policy_breaker_default(const policy_breaker_state *st, int success, int *state, double *open_seconds)
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

/* --- alert (mirrors policies/alert.lua) --- */

size_t policy_alert_default(const policy_alert_event *ev, policy_alert_post *out)
{
    const char *url = ev->webhook_url ? ev->webhook_url : "";
    if (!*url)
        return 0;
    sbuf b = SBUF_INIT, text = SBUF_INIT;
    sbuf_puts(&text, "switchyard: ");
    sbuf_puts(&text, ev->text ? ev->text : "");
    sbuf_puts(&b, "{\"text\":");
    sbuf_json_str(&b, text.p, text.len);
    sbuf_puts(&b, "}");
    sbuf_free(&text);
    out[0].url = strdup(url);
    out[0].body = strdup(b.p);
    out[0].body_len = b.len;
    out[0].headers = strdup("");
    sbuf_free(&b);
    if (!out[0].url || !out[0].body || !out[0].headers) {
        policy_alert_post_free(&out[0]);
        return 0;
    }
    return 1;
}

/* ---------- dialect (policies/dialect.lua) ---------- */

static void dialect_names(char (*dst)[POLICY_DIALECT_NAME_MAX], size_t *n, const char *const *names)
{
    for (*n = 0; names[*n] && *n < POLICY_DIALECT_NAMES; (*n)++)
        sbuf_copy_cstr(dst[*n], POLICY_DIALECT_NAME_MAX, names[*n]);
}

void policy_dialect_default(const policy_dialect_ask *ask, policy_dialect *out)
{
    static const char *const chatgpt_drop[] = {"max_output_tokens", "temperature", "top_p", "frequency_penalty",
                                               "presence_penalty", NULL};
    static const char *const chatgpt_ignore[] = {"frequency_penalty", "presence_penalty", "seed", "logit_bias", NULL};
    static const char *const to_chat_ignore[] = {"include", "reasoning.summary", "truncation", "metadata",
                                                 "prompt_cache_key", "service_tier", "safety_identifier",
                                                 "tools.web_search", "tools.web_search_preview",
                                                 "tools.namespace", NULL};
    static const char *const to_messages_ignore[] = {"tools.web_search", "tools.web_search_preview", "tools.namespace",
                                                     "text.verbosity", "verbosity", "frequency_penalty",
                                                     "presence_penalty", "seed", "logit_bias", NULL};
    memset(out, 0, sizeof *out);
    const char *kind = ask->kind ? ask->kind : "", *client = ask->client ? ask->client : "";
    const char *upstream = ask->upstream ? ask->upstream : "";
    if (strcmp(kind, "chatgpt") == 0 && strcmp(upstream, "responses") == 0) {
        out->stream = 1;
        out->store_off = 1;
        out->has_instructions = 1;
        sbuf_copy_cstr(out->instructions, sizeof out->instructions, "You are a helpful assistant.");
        out->input_list = 1;
        out->strip_item_ids = 1;
        sbuf_copy_cstr(out->system_role, sizeof out->system_role, "developer");
        dialect_names(out->drop, &out->n_drop, chatgpt_drop);
        dialect_names(out->ignore, &out->n_ignore, chatgpt_ignore);
    } else if (strcmp(upstream, "chat") == 0 && strcmp(client, "responses") == 0) {
        dialect_names(out->ignore, &out->n_ignore, to_chat_ignore);
    } else if (strcmp(upstream, "messages") == 0 && strcmp(client, "messages") != 0) {
        dialect_names(out->ignore, &out->n_ignore, to_messages_ignore);
    }
}
