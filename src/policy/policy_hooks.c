/* policy_hooks.c: the policy engine's code that runs inside the sandbox
 * (policy_sandbox.c, under its instruction, time and memory limits, so an
 * error or out-of-memory anywhere here is caught there): each hook's
 * argument table built from the C structs, its result read back with
 * strict validation (anything malformed is a Lua error, and policy.c falls
 * back to the built-in default), and, at load, each hook function taken
 * out of its file's return value and kept in the registry. policy.c hands
 * the policy_<hook>_run functions to sandbox_run. */
#include "policy/policy_internal.h"
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const breaker_names[] = {"closed", "open", "half_open", NULL};

#define PRICE_MAX 1e6 /* USD per million tokens: anything above is a typo */

static char hook_keys[HOOK_COUNT]; /* registry keys (addresses) of the loaded hooks */

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
    set_str(L, "model", ev->model);
    set_str(L, "endpoint", ev->endpoint);
    set_str(L, "not_answer", ev->not_answer);
    set_int(L, "retries", ev->retries);
    set_int(L, "alternatives", ev->alternatives);
    set_num(L, "random", ev->random);
    set_int(L, "context_fallbacks", ev->context_fallbacks);
    set_bool(L, "after_output", ev->after_output);
    set_int(L, "delivered_chars", ev->delivered_chars);
    set_bool(L, "tool_call", ev->tool_call);
    set_bool(L, "continuable", ev->continuable);
}

static void state_push(lua_State *L, const policy_state *st)
{
    lua_createtable(L, 0, 10);
    set_int(L, "account_id", st->account_id);
    set_str(L, "family", st->family ? st->family : "");
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
    /* present only when true: the usual candidate keeps its 16-slot table */
    if (c->translated)
        set_bool(L, "translated", 1);
    if (c->unlisted)
        set_bool(L, "unlisted", 1);
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

/* A hold's state name (policy.h): it is stored with the account, shown by
 * the CLI and the dashboard and written into log lines, so it is kept a
 * plain word. */
static int state_valid(const char *s, size_t n)
{
    if (n == 0 || n >= sizeof(((policy_verdict *)0)->state))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return 0;
    return 1;
}

static void verdict_parse(lua_State *L, int t, policy_verdict *out)
{
    if (lua_type(L, t) != LUA_TTABLE)
        luaL_error(L, "classify returned %s, expected a table {action=, class=, cooldown=}", luaL_typename(L, t));
    static const char *const actions[] = {"return", "failover", "retry", "context_fallback", "resume", "strip_retry",
                                          "retry_turn", NULL};
    int act = name_index(raw_field(L, t, "action") == LUA_TSTRING ? lua_tostring(L, -1) : NULL, actions);
    if (act < 0)
        luaL_error(L, "classify: action must be \"failover\", \"return\", \"retry\", \"context_fallback\", "
                      "\"resume\", \"strip_retry\" or \"retry_turn\"");
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
    policy_verdict_act(out, (policy_action)act, cls, cd, after);
    int dt = raw_field(L, t, "drain_bucket");
    if (dt != LUA_TNIL && dt != LUA_TBOOLEAN)
        luaL_error(L, "classify: drain_bucket must be a boolean or nil");
    out->drain_bucket = lua_toboolean(L, -1);
    static const char *const scopes[] = {"account", "model", NULL};
    int sct = raw_field(L, t, "scope");
    int scope = sct == LUA_TNIL ? 0 : name_index(sct == LUA_TSTRING ? lua_tostring(L, -1) : NULL, scopes);
    if (scope < 0)
        luaL_error(L, "classify: scope must be \"account\", \"model\" or nil");
    out->scope_model = scope == 1;
    int stt = raw_field(L, t, "state");
    if (stt == LUA_TNIL)
        return;
    const char *state = stt == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
    if (!state || !state_valid(state, n))
        luaL_error(L, "classify: state must be a string of 1..31 characters a-z, 0-9 and _");
    if (!failover)
        luaL_error(L, "classify: state goes with action \"failover\" only");
    memcpy(out->state, state, n + 1);
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

static void hook_push(lua_State *L, int hook)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &hook_keys[hook]) == LUA_TNIL)
        luaL_error(L, "hook %s is not loaded", policy_hook_names[hook]);
}

int policy_classify_run(lua_State *L)
{
    hook_call *h = sandbox_ud(L);
    hook_push(L, HOOK_CLASSIFY);
    event_push(L, h->ev);
    lua_call(L, 1, 1);
    verdict_parse(L, lua_gettop(L), h->verdict);
    return 0;
}

int policy_cooldown_run(lua_State *L)
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

int policy_guard_run(lua_State *L)
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

int policy_order_run(lua_State *L)
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

int policy_breaker_run(lua_State *L)
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

int policy_budget_run(lua_State *L)
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

int policy_price_run(lua_State *L)
{
    hook_call *h = sandbox_ud(L);
    hook_push(L, HOOK_PRICE);
    lua_pushstring(L, h->model);
    lua_call(L, 1, 1);
    h->price_known = price_parse(L, lua_gettop(L), &h->price);
    return 0;
}

int policy_strip_run(lua_State *L)
{
    hook_call *h = sandbox_ud(L);
    const policy_blob *b = h->blob;
    hook_push(L, HOOK_STRIP);
    lua_createtable(L, 0, 7);
    set_str(L, "item_type", b->item_type ? b->item_type : "");
    set_bool(L, "in_part", b->in_part);
    set_str(L, "origin", b->origin ? b->origin : "");
    set_str(L, "origin_kind", b->origin_kind ? b->origin_kind : "");
    set_str(L, "target", b->target ? b->target : "");
    set_str(L, "target_kind", b->target_kind ? b->target_kind : "");
    set_bool(L, "strip_retry", b->strip_retry);
    lua_call(L, 1, 1);
    static const char *const names[] = {"keep", "drop", "text", NULL};
    int s = name_index(lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL, names);
    if (s < 0)
        luaL_error(L, "strip must return \"keep\", \"drop\" or \"text\"");
    h->strip = s;
    return 0;
}

int policy_exhausted_run(lua_State *L)
{
    hook_call *h = sandbox_ud(L);
    const policy_exhausted *ex = h->ex;
    hook_push(L, HOOK_EXHAUSTED);
    lua_createtable(L, 0, 3);
    set_str(L, "endpoint", ex->endpoint ? ex->endpoint : "");
    set_num(L, "now", ex->now);
    lua_createtable(L, (int)ex->n, 0);
    for (size_t i = 0; i < ex->n; i++) {
        const policy_out_account *a = &ex->accounts[i];
        lua_createtable(L, 0, 10);
        set_str(L, "name", a->name ? a->name : "");
        set_str(L, "kind", a->kind ? a->kind : "");
        set_str(L, "why", a->why ? a->why : "");
        set_str(L, "last_class", a->last_class ? a->last_class : "");
        set_num(L, "back_at", a->until);
        set_num(L, "primary_used_pct", a->primary_used_pct);
        set_num(L, "secondary_used_pct", a->secondary_used_pct);
        set_num(L, "primary_reset_at", a->primary_reset_at);
        set_num(L, "secondary_reset_at", a->secondary_reset_at);
        set_str(L, "plan_type", a->plan_type ? a->plan_type : "");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "accounts");
    lua_call(L, 1, 1);
    int t = lua_gettop(L);
    if (lua_type(L, t) != LUA_TTABLE)
        luaL_error(L, "exhausted returned %s, expected a table {shape=...}", luaL_typename(L, t));
    static const char *const shapes[] = {"unavailable", "usage_limit", NULL};
    int shape = name_index(raw_field(L, t, "shape") == LUA_TSTRING ? lua_tostring(L, -1) : NULL, shapes);
    if (shape < 0)
        luaL_error(L, "exhausted: shape must be \"unavailable\" or \"usage_limit\"");
    h->usage_limit = shape == 1;
    double at = 0;
    int ty = raw_field(L, t, "resets_at");
    if (ty == LUA_TNUMBER)
        at = lua_tonumber(L, -1);
    else if (ty != LUA_TNIL)
        luaL_error(L, "exhausted: resets_at must be a number or nil");
    if (!(at >= 0 && at <= 4102444800.0)) /* 2100-01-01 */
        luaL_error(L, "exhausted: resets_at must be unix seconds, 0..4102444800");
    h->resets_at = at;
    size_t pn = 0;
    ty = raw_field(L, t, "plan_type");
    const char *plan = ty == LUA_TSTRING ? lua_tolstring(L, -1, &pn) : "";
    if (ty != LUA_TSTRING && ty != LUA_TNIL)
        luaL_error(L, "exhausted: plan_type must be a string or nil");
    if (pn && !class_valid(plan, pn))
        luaL_error(L, "exhausted: plan_type must be 0..31 printable characters");
    memcpy(h->plan_type, plan, pn);
    h->plan_type[pn] = '\0';
    return 0;
}

int policy_first_token_run(lua_State *L)
{
    hook_call *h = sandbox_ud(L);
    const policy_first_token *ft = h->ft;
    hook_push(L, HOOK_FIRST_TOKEN);
    lua_createtable(L, 0, 6);
    set_str(L, "endpoint", ft->endpoint ? ft->endpoint : "");
    set_int(L, "prompt_kib", ft->prompt_kib > 0 ? ft->prompt_kib : 1);
    set_str(L, "model", ft->model ? ft->model : "");
    set_str(L, "reasoning", ft->reasoning); /* nil: the request says nothing of reasoning */
    set_bool(L, "stream", ft->stream);
    set_str(L, "account_kind", ft->account_kind ? ft->account_kind : "");
    lua_call(L, 1, 1);
    double secs = -1, after = 0;
    if (lua_type(L, -1) == LUA_TNUMBER)
        secs = lua_tonumber(L, -1);
    else if (lua_type(L, -1) == LUA_TTABLE) {
        int t = lua_gettop(L);
        secs = raw_field(L, t, "seconds") == LUA_TNUMBER ? lua_tonumber(L, -1) : -1;
        lua_pop(L, 1);
        int ty = raw_field(L, t, "after_output");
        after = ty == LUA_TNUMBER ? lua_tonumber(L, -1) : ty == LUA_TNIL ? 0 : -1;
        lua_pop(L, 1);
        if (!(after == 0 || (after >= 1 && after <= POLICY_FIRST_TOKEN_MAX)) || (ty == LUA_TNUMBER && after == 0))
            luaL_error(L, "first_token: after_output must be seconds, 1..%d, or nil", (int)POLICY_FIRST_TOKEN_MAX);
    }
    if (!(secs >= 1 && secs <= POLICY_FIRST_TOKEN_MAX))
        luaL_error(L, "first_token must return seconds, 1..%d, or {seconds = ..., after_output = ...}",
                   (int)POLICY_FIRST_TOKEN_MAX);
    h->silence.first_token = secs;
    h->silence.after_output = after;
    return 0;
}

/* --- alert: the posts an event asks for --- */

#define ALERT_JSON_DEPTH 16

/* Appends the Lua value at idx as JSON: a table with the keys 1..n only
 * is an array, one with string keys only an object (an empty one: {});
 * cjson.null is null. Bounded by POLICY_ALERT_BODY_MAX bytes of output
 * and ALERT_JSON_DEPTH levels; anything else is an error. */
static void alert_json(lua_State *L, int idx, sbuf *out, int depth)
{
    if (out->len > POLICY_ALERT_BODY_MAX)
        luaL_error(L, "alert: body larger than %d bytes", POLICY_ALERT_BODY_MAX);
    idx = lua_absindex(L, idx);
    switch (lua_type(L, idx)) {
    case LUA_TBOOLEAN:
        sbuf_puts(out, lua_toboolean(L, idx) ? "true" : "false");
        return;
    case LUA_TLIGHTUSERDATA:
        if (lua_touserdata(L, idx) == NULL) { /* cjson.null */
            sbuf_puts(out, "null");
            return;
        }
        break;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            sbuf_put_int(out, (long long)lua_tointeger(L, idx));
        } else {
            double d = lua_tonumber(L, idx);
            if (d != d || d > 1e300 || d < -1e300)
                luaL_error(L, "alert: body holds a number JSON cannot carry");
            sbuf_printf(out, "%.17g", d);
        }
        return;
    case LUA_TSTRING: {
        size_t n;
        const char *str = lua_tolstring(L, idx, &n);
        if (n > POLICY_ALERT_BODY_MAX)
            luaL_error(L, "alert: body larger than %d bytes", POLICY_ALERT_BODY_MAX);
        sbuf_json_str(out, str, n);
        return;
    }
    case LUA_TTABLE: {
        if (depth >= ALERT_JSON_DEPTH)
            luaL_error(L, "alert: body nested deeper than %d", ALERT_JSON_DEPTH);
        luaL_checkstack(L, 4, "alert: body");
        lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
        int array = n > 0;
        lua_pushnil(L);
        while (lua_next(L, idx)) { /* every key an integer 1..n (an array) or a string (an object) */
            int ty = lua_type(L, -2);
            int isint = 0;
            lua_Integer k = ty == LUA_TNUMBER ? lua_tointegerx(L, -2, &isint) : 0;
            if (array ? !(isint && k >= 1 && k <= n) : ty != LUA_TSTRING)
                luaL_error(L, "alert: a body table is an array (keys 1..n) or an object (string keys)");
            lua_pop(L, 1);
        }
        sbuf_puts(out, array ? "[" : "{");
        if (array) {
            for (lua_Integer i = 1; i <= n; i++) {
                if (i > 1)
                    sbuf_puts(out, ",");
                lua_rawgeti(L, idx, i);
                alert_json(L, -1, out, depth + 1);
                lua_pop(L, 1);
            }
        } else {
            int first = 1;
            lua_pushnil(L);
            while (lua_next(L, idx)) {
                size_t kn;
                const char *k = lua_tolstring(L, -2, &kn); /* a string key: no conversion in place */
                if (!first)
                    sbuf_puts(out, ",");
                first = 0;
                sbuf_json_str(out, k, kn);
                sbuf_puts(out, ":");
                alert_json(L, -1, out, depth + 1);
                lua_pop(L, 1);
                if (out->len > POLICY_ALERT_BODY_MAX)
                    luaL_error(L, "alert: body larger than %d bytes", POLICY_ALERT_BODY_MAX);
            }
        }
        sbuf_puts(out, array ? "]" : "}");
        return;
    }
    default:
        break;
    }
    luaL_error(L, "alert: body holds a %s", luaL_typename(L, idx));
}

/* A webhook URL: http:// or https://, a host, no spaces or control bytes. */
static int alert_url_valid(const char *u, size_t n)
{
    size_t skip = strncmp(u, "https://", 8) == 0 ? 8 : strncmp(u, "http://", 7) == 0 ? 7 : 0;
    if (!skip || n <= skip || n > POLICY_ALERT_URL_MAX || u[skip] == '/' || u[skip] == '?' || u[skip] == '#')
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)u[i] <= ' ' || u[i] == 0x7f)
            return 0;
    return 1;
}

/* A header the gateway leaves to curl: the framing and the host. */
static int alert_header_reserved(const char *k)
{
    static const char *const reserved[] = {"content-length", "transfer-encoding", "host", "connection", NULL};
    for (int i = 0; reserved[i]; i++)
        if (strcasecmp(k, reserved[i]) == 0)
            return 1;
    return 0;
}

static char *alert_dup(lua_State *L, const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (!d)
        luaL_error(L, "alert: out of memory");
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* Reads the post at t into h->posts[h->nposts]. Each string is stored in
 * the post as soon as it is made, so an error halfway leaks nothing. */
static void alert_post_parse(lua_State *L, int t, hook_call *h)
{
    if (lua_type(L, t) != LUA_TTABLE)
        luaL_error(L, "alert: a post must be a table {url=..., body=..., headers=...}");
    if (h->nposts >= POLICY_ALERT_POSTS)
        luaL_error(L, "alert: at most %d posts per event", POLICY_ALERT_POSTS);
    policy_alert_post *p = &h->posts[h->nposts++];
    size_t n = 0;
    const char *u = raw_field(L, t, "url") == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
    if (!u || !alert_url_valid(u, n))
        luaL_error(L, "alert: url must be an http:// or https:// URL of at most %d bytes", POLICY_ALERT_URL_MAX);
    p->url = alert_dup(L, u, n);
    lua_pop(L, 1);
    sbuf_reset(&h->scratch);
    int ty = raw_field(L, t, "body");
    if (ty == LUA_TSTRING) {
        const char *b = lua_tolstring(L, -1, &n);
        if (n > POLICY_ALERT_BODY_MAX)
            luaL_error(L, "alert: body larger than %d bytes", POLICY_ALERT_BODY_MAX);
        sbuf_append(&h->scratch, b, n);
    } else if (ty == LUA_TTABLE) {
        alert_json(L, -1, &h->scratch, 0);
        if (h->scratch.len > POLICY_ALERT_BODY_MAX)
            luaL_error(L, "alert: body larger than %d bytes", POLICY_ALERT_BODY_MAX);
    } else if (ty != LUA_TNIL) {
        luaL_error(L, "alert: body must be a table, a string or nil");
    }
    lua_pop(L, 1);
    p->body = alert_dup(L, h->scratch.len ? h->scratch.p : "", h->scratch.len);
    p->body_len = h->scratch.len;
    sbuf_reset(&h->scratch);
    ty = raw_field(L, t, "headers");
    if (ty == LUA_TTABLE) {
        int ht = lua_gettop(L), count = 0;
        lua_pushnil(L);
        while (lua_next(L, ht)) {
            size_t kn = 0, vn = 0;
            if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
                luaL_error(L, "alert: headers must map names to strings");
            const char *k = lua_tolstring(L, -2, &kn), *v = lua_tolstring(L, -1, &vn);
            if (++count > POLICY_ALERT_HEADERS)
                luaL_error(L, "alert: at most %d headers", POLICY_ALERT_HEADERS);
            int ok = kn >= 1 && kn <= 64 && vn <= 1024 && !alert_header_reserved(k);
            for (size_t i = 0; ok && i < kn; i++)
                ok = (k[i] >= 'a' && k[i] <= 'z') || (k[i] >= 'A' && k[i] <= 'Z') || (k[i] >= '0' && k[i] <= '9') ||
                     k[i] == '-' || k[i] == '_';
            for (size_t i = 0; ok && i < vn; i++)
                ok = (unsigned char)v[i] >= ' ' && v[i] != 0x7f;
            if (!ok)
                luaL_error(L, "alert: header '%s' is not a plain name (not Host, Content-Length, Transfer-Encoding or "
                              "Connection) with a one-line value of at most 1024 bytes", k);
            sbuf_append(&h->scratch, k, kn);
            sbuf_puts(&h->scratch, ": ");
            sbuf_append(&h->scratch, v, vn);
            sbuf_puts(&h->scratch, "\n");
            lua_pop(L, 1);
        }
    } else if (ty != LUA_TNIL) {
        luaL_error(L, "alert: headers must be a table or nil");
    }
    lua_pop(L, 1);
    p->headers = alert_dup(L, h->scratch.len ? h->scratch.p : "", h->scratch.len);
    sbuf_reset(&h->scratch);
}

int policy_alert_run(lua_State *L)
{
    hook_call *h = sandbox_ud(L);
    const policy_alert_event *ev = h->alert;
    hook_push(L, HOOK_ALERT);
    lua_createtable(L, 0, 6);
    set_str(L, "kind", ev->kind ? ev->kind : "");
    set_str(L, "subject", ev->subject ? ev->subject : "");
    set_str(L, "state", ev->state ? ev->state : "");
    set_str(L, "text", ev->text ? ev->text : "");
    set_str(L, "webhook_url", ev->webhook_url ? ev->webhook_url : "");
    set_num(L, "now", ev->now);
    lua_call(L, 1, 1);
    int t = lua_gettop(L);
    h->nposts = 0;
    if (lua_type(L, t) == LUA_TNIL)
        return 0;
    if (lua_type(L, t) != LUA_TTABLE)
        luaL_error(L, "alert returned %s, expected nil, a post {url=...} or a list of posts", luaL_typename(L, t));
    if (raw_field(L, t, "url") != LUA_TNIL) { /* one post */
        lua_pop(L, 1);
        alert_post_parse(L, t, h);
        return 0;
    }
    lua_pop(L, 1);
    lua_Integer n = (lua_Integer)lua_rawlen(L, t);
    if (n > POLICY_ALERT_POSTS)
        luaL_error(L, "alert: at most %d posts per event", POLICY_ALERT_POSTS);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, t, i);
        alert_post_parse(L, lua_gettop(L), h);
        lua_pop(L, 1);
    }
    return 0;
}

/* A field name a dialect rule lists: a JSON member name (or "tools.<type>",
 * "reasoning.summary"): printable, no quote or backslash, short. */
static void dialect_name_copy(lua_State *L, const char *what, int idx, char out[POLICY_DIALECT_NAME_MAX])
{
    size_t n = 0;
    const char *s = lua_type(L, idx) == LUA_TSTRING ? lua_tolstring(L, idx, &n) : NULL;
    if (!s || n == 0 || n >= POLICY_DIALECT_NAME_MAX)
        luaL_error(L, "dialect: %s: each name must be a string of 1..%d bytes", what, POLICY_DIALECT_NAME_MAX - 1);
    for (size_t i = 0; i < n; i++)
        if (s[i] <= ' ' || s[i] > '~' || s[i] == '"' || s[i] == '\\')
            luaL_error(L, "dialect: %s: '%s' is not a field name", what, s);
    memcpy(out, s, n + 1);
}

/* A list of names (drop, ignore) into names[], *n of them. */
static void dialect_list(lua_State *L, int t, const char *k, char (*names)[POLICY_DIALECT_NAME_MAX], size_t *n)
{
    int ty = raw_field(L, t, k);
    if (ty == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    if (ty != LUA_TTABLE)
        luaL_error(L, "dialect: '%s' must be a list of field names", k);
    lua_Integer len = (lua_Integer)lua_rawlen(L, -1);
    if (len > POLICY_DIALECT_NAMES)
        luaL_error(L, "dialect: '%s' lists more than %d names", k, POLICY_DIALECT_NAMES);
    for (lua_Integer i = 1; i <= len; i++) {
        lua_rawgeti(L, -1, i);
        dialect_name_copy(L, k, -1, names[*n]);
        (*n)++;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

/* The dialect hook's answer (policies/dialect.lua): every member checked,
 * an unknown one refused (a misspelt rule must not pass unnoticed). */
static void dialect_parse(lua_State *L, int t, policy_dialect *r)
{
    static const char *const known[] = {"stream", "store", "instructions", "input_list", "system_role",
                                        "strip_item_ids", "drop", "rename", "ignore", NULL};
    memset(r, 0, sizeof *r);
    if (lua_type(L, t) == LUA_TNIL)
        return;
    if (lua_type(L, t) != LUA_TTABLE)
        luaL_error(L, "dialect returned %s, expected a table of rules (or nil: none)", luaL_typename(L, t));
    lua_pushnil(L);
    while (lua_next(L, t)) {
        if (lua_type(L, -2) != LUA_TSTRING || name_index(lua_tostring(L, -2), known) < 0)
            luaL_error(L, "dialect: unknown rule '%s'", lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?");
        lua_pop(L, 1);
    }
    int ty = raw_field(L, t, "stream");
    if (ty == LUA_TSTRING && strcmp(lua_tostring(L, -1), "always") == 0)
        r->stream = 1;
    else if (ty != LUA_TNIL && !(ty == LUA_TSTRING && strcmp(lua_tostring(L, -1), "as_asked") == 0))
        luaL_error(L, "dialect: 'stream' must be \"always\" or \"as_asked\"");
    lua_pop(L, 1);
    ty = raw_field(L, t, "store");
    if (ty == LUA_TBOOLEAN && !lua_toboolean(L, -1))
        r->store_off = 1;
    else if (ty != LUA_TNIL)
        luaL_error(L, "dialect: 'store' may only be false (the upstream keeps nothing)");
    lua_pop(L, 1);
    static const char *const flags[] = {"input_list", "strip_item_ids"};
    int *const dst[] = {&r->input_list, &r->strip_item_ids};
    for (size_t i = 0; i < 2; i++) {
        ty = raw_field(L, t, flags[i]);
        if (ty != LUA_TNIL && ty != LUA_TBOOLEAN)
            luaL_error(L, "dialect: '%s' must be true or false", flags[i]);
        *dst[i] = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    ty = raw_field(L, t, "system_role");
    if (ty != LUA_TNIL) {
        const char *s = ty == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        if (!s || (strcmp(s, "developer") != 0 && strcmp(s, "user") != 0 && strcmp(s, "system") != 0))
            luaL_error(L, "dialect: 'system_role' must be \"developer\", \"user\" or \"system\"");
        sbuf_copy_cstr(r->system_role, sizeof r->system_role, strcmp(s, "system") == 0 ? "" : s);
    }
    lua_pop(L, 1);
    ty = raw_field(L, t, "instructions");
    if (ty != LUA_TNIL) {
        size_t n = 0;
        const char *s = ty == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
        if (!s || n == 0 || n >= sizeof r->instructions || memchr(s, '\0', n))
            luaL_error(L, "dialect: 'instructions' must be a text of 1..%d bytes", (int)sizeof r->instructions - 1);
        memcpy(r->instructions, s, n + 1);
        r->has_instructions = 1;
    }
    lua_pop(L, 1);
    dialect_list(L, t, "drop", r->drop, &r->n_drop);
    dialect_list(L, t, "ignore", r->ignore, &r->n_ignore);
    ty = raw_field(L, t, "rename");
    if (ty == LUA_TTABLE) {
        int m = lua_gettop(L);
        lua_pushnil(L);
        while (lua_next(L, m)) {
            if (r->n_rename >= POLICY_DIALECT_NAMES)
                luaL_error(L, "dialect: 'rename' holds more than %d fields", POLICY_DIALECT_NAMES);
            dialect_name_copy(L, "rename", -2, r->rename_from[r->n_rename]);
            dialect_name_copy(L, "rename", -1, r->rename_to[r->n_rename]);
            r->n_rename++;
            lua_pop(L, 1);
        }
    } else if (ty != LUA_TNIL) {
        luaL_error(L, "dialect: 'rename' must be a table {from = to}");
    }
    lua_pop(L, 1);
}

int policy_dialect_run(lua_State *L)
{
    hook_call *h = sandbox_ud(L);
    hook_push(L, HOOK_DIALECT);
    lua_createtable(L, 0, 3);
    set_str(L, "kind", h->dask->kind ? h->dask->kind : "");
    set_str(L, "client", h->dask->client ? h->dask->client : "");
    set_str(L, "upstream", h->dask->upstream ? h->dask->upstream : "");
    lua_call(L, 1, 1);
    dialect_parse(L, lua_gettop(L), h->dialect);
    return 0;
}

/* ======================= taking the hooks out of their files ======================= */

/* order.lua's optional max_attempts (an integer, 1..1000) and max_seconds
 * (1..3600): how far one request may go (policy_request_bounds). Absent:
 * the built-in defaults; anything else fails the load, so a typo is never
 * a silent default. */
static void hook_request_bounds(lua_State *L, int t, policy_engine *pe, const char *file)
{
    int isint = 0;
    int ty = raw_field(L, t, "max_attempts");
    lua_Integer a = ty == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
    if (ty != LUA_TNIL && (!isint || a < 1 || a > POLICY_ATTEMPTS_MAX))
        luaL_error(L, "%s: max_attempts must be an integer 1..%d", file, POLICY_ATTEMPTS_MAX);
    lua_pop(L, 1);
    ty = raw_field(L, t, "max_seconds");
    double secs = ty == LUA_TNUMBER ? lua_tonumber(L, -1) : 0;
    if (ty != LUA_TNIL && !(secs >= 1 && secs <= POLICY_SECONDS_MAX))
        luaL_error(L, "%s: max_seconds must be a number of seconds 1..%d", file, (int)POLICY_SECONDS_MAX);
    lua_pop(L, 1);
    pe->max_attempts = a ? (int)a : POLICY_MAX_ATTEMPTS_DEFAULT;
    pe->max_seconds = secs > 0 ? secs : POLICY_MAX_SECONDS_DEFAULT;
}

/* Leaves the hook function of the chunk's return value on top. */
static void hook_extract(lua_State *L, load_call *c)
{
    const char *name = policy_hook_names[c->hook], *file = c->pe->files[c->hook];
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
    if (c->hook == HOOK_ORDER)
        hook_request_bounds(L, t, c->pe, file);
}

int policy_load_run(lua_State *L)
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
