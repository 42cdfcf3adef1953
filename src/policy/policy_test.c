/* policy_test.c: `switchyard test [DIR] [--policies PDIR]`. Builds the engine
 * from PDIR (./policies if present, else the embedded copies), then runs every
 * file of DIR (default tests/policies) whose name ends in _spec.lua in a second
 * sandbox that holds the harness (lua/spec.lua), the fixtures
 * (lua/fixtures.lua), sy, and bridges classify/cooldown/guard/order/route that
 * go through the real C engine path, so a spec sees exactly what the gateway
 * would. A test that made the engine fall back to its C default fails.
 * Prints "ok - name" / "not ok - name: message" and "N passed, N failed". */
#include "policy/policy_test.h"
#include "policy/policy_sandbox.h"
#include <dirent.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SPEC_MEM_LIMIT ((size_t)64 << 20)
#define SPEC_INSTR_LIMIT 10000000L
#define SPEC_TIME_MS 10000 /* CPU time per spec case (the engine's own calls keep their 50 ms) */
#define SPEC_FILE_MAX (1L << 20)

/* ======================= spec tables -> C structs ======================= */

static int field(lua_State *L, int t, const char *k)
{
    lua_pushstring(L, k);
    return lua_rawget(L, t);
}

static double opt_num(lua_State *L, int t, const char *k, double def)
{
    int ty = field(L, t, k);
    if (ty != LUA_TNIL && ty != LUA_TNUMBER)
        luaL_error(L, "field '%s' must be a number, got %s", k, lua_typename(L, ty));
    double v = ty == LUA_TNUMBER ? lua_tonumber(L, -1) : def;
    lua_pop(L, 1);
    return v;
}

static lua_Integer opt_int(lua_State *L, int t, const char *k, lua_Integer def)
{
    int ty = field(L, t, k), isint = 1;
    lua_Integer v = ty == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : def;
    if ((ty != LUA_TNIL && ty != LUA_TNUMBER) || !isint)
        luaL_error(L, "field '%s' must be an integer", k);
    lua_pop(L, 1);
    return v;
}

static int opt_bool(lua_State *L, int t, const char *k)
{
    int ty = field(L, t, k);
    int v = ty == LUA_TBOOLEAN ? lua_toboolean(L, -1) : ty == LUA_TNUMBER ? lua_tonumber(L, -1) != 0 : 0;
    lua_pop(L, 1);
    return v;
}

/* The string stays alive: the table at t (an argument) still holds it. */
static const char *opt_str(lua_State *L, int t, const char *k, size_t *len)
{
    int ty = field(L, t, k);
    if (ty != LUA_TNIL && ty != LUA_TSTRING)
        luaL_error(L, "field '%s' must be a string, got %s", k, lua_typename(L, ty));
    const char *s = ty == LUA_TSTRING ? lua_tolstring(L, -1, len) : NULL;
    lua_pop(L, 1);
    return s;
}

static void candidate_read(lua_State *L, int t, policy_candidate *c)
{
    c->id = opt_int(L, t, "id", 0);
    c->name = opt_str(L, t, "name", NULL);
    c->kind = opt_str(L, t, "kind", NULL);
    c->sort = (int)opt_int(L, t, "sort", 0);
    c->updated_at = opt_int(L, t, "updated_at", 0);
    c->primary_used_pct = opt_num(L, t, "primary_used_pct", -1);
    c->secondary_used_pct = opt_num(L, t, "secondary_used_pct", -1);
    c->primary_reset_at = opt_num(L, t, "primary_reset_at", 0);
    c->secondary_reset_at = opt_num(L, t, "secondary_reset_at", 0);
    c->primary_window_s = opt_num(L, t, "primary_window_s", 0);
    c->secondary_window_s = opt_num(L, t, "secondary_window_s", 0);
    c->plan_type = opt_str(L, t, "plan_type", NULL);
    c->has_credits = (int)opt_int(L, t, "has_credits", -1);
    c->credits_unlimited = (int)opt_int(L, t, "credits_unlimited", -1);
    c->credits_balance = opt_num(L, t, "credits_balance", -1);
    c->success_rate = opt_num(L, t, "success_rate", 1);
    c->latency_ema_ms = opt_num(L, t, "latency_ema_ms", 0);
    c->health_age_s = opt_num(L, t, "health_age_s", 0);
    c->inflight = (int)opt_int(L, t, "inflight", 0);
    c->max_concurrency = (int)opt_int(L, t, "max_concurrency", 0);
    c->reserve = opt_bool(L, t, "reserve");
    c->weight = (int)opt_int(L, t, "weight", 1);
    c->current_weight = opt_num(L, t, "current_weight", 0);
    c->success_rate_60s = opt_num(L, t, "success_rate_60s", -1);
    c->latency_60s_ms = opt_num(L, t, "latency_60s_ms", -1);
    c->attempts_60s = (int)opt_int(L, t, "attempts_60s", 0);
    c->translated = opt_bool(L, t, "translated");
    c->unlisted = opt_bool(L, t, "unlisted");
}

/* Reads the candidate list at arg 1 into GC-owned memory; returns the count. */
static size_t candidates_read(lua_State *L, policy_candidate **out)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    size_t n = lua_rawlen(L, 1);
    policy_candidate *c = lua_newuserdatauv(L, (n ? n : 1) * sizeof *c, 0);
    memset(c, 0, (n ? n : 1) * sizeof *c);
    for (size_t i = 0; i < n; i++) {
        if (lua_rawgeti(L, 1, (lua_Integer)i + 1) != LUA_TTABLE)
            luaL_error(L, "candidate %d is not a table", (int)i + 1);
        candidate_read(L, lua_gettop(L), &c[i]);
        lua_pop(L, 1);
    }
    *out = c;
    return n;
}

static void ctx_read(lua_State *L, int t, policy_order_ctx *ctx)
{
    luaL_checktype(L, t, LUA_TTABLE);
    ctx->strategy = opt_str(L, t, "strategy", NULL);
    ctx->rotation = opt_str(L, t, "rotation", NULL);
    ctx->model = opt_str(L, t, "model", NULL);
    ctx->platform_key_id = opt_int(L, t, "platform_key_id", 0);
    ctx->cursor = opt_int(L, t, "cursor", 0);
    ctx->preferred = opt_int(L, t, "preferred", 0);
    ctx->seed = (uint32_t)opt_int(L, t, "seed", 0);
}

/* Integral doubles come back as integers: nicer in messages (45, not 45.0). */
static void push_num(lua_State *L, double v)
{
    if (v > -1e15 && v < 1e15 && v == (double)(lua_Integer)v)
        lua_pushinteger(L, (lua_Integer)v);
    else
        lua_pushnumber(L, v);
}

/* ======================= bridges into the engine ======================= */

static policy_engine *bridge_engine(lua_State *L) { return lua_touserdata(L, lua_upvalueindex(1)); }

/* classify(ev) -> {action=, class=, cooldown=} */
static int bridge_classify(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    policy_event ev = {0};
    ev.status = (int)opt_int(L, 1, "status", 0);
    ev.body = opt_str(L, 1, "body", &ev.body_len);
    ev.error_type = opt_str(L, 1, "error_type", NULL);
    ev.error_code = opt_str(L, 1, "error_code", NULL);
    ev.error_message = opt_str(L, 1, "error_message", NULL);
    ev.network_error = opt_bool(L, 1, "network_error");
    ev.timeout = opt_bool(L, 1, "timeout");
    ev.in_stream = opt_bool(L, 1, "in_stream");
    ev.retry_after = opt_num(L, 1, "retry_after", -1);
    ev.account_kind = opt_str(L, 1, "account_kind", NULL);
    ev.model = opt_str(L, 1, "model", NULL);
    ev.endpoint = opt_str(L, 1, "endpoint", NULL);
    ev.not_answer = opt_str(L, 1, "not_answer", NULL);
    ev.retries = (int)opt_int(L, 1, "retries", 0);
    ev.alternatives = (int)opt_int(L, 1, "alternatives", 0);
    ev.random = opt_num(L, 1, "random", 0);
    ev.context_fallbacks = (int)opt_int(L, 1, "context_fallbacks", 0);
    ev.after_output = opt_bool(L, 1, "after_output");
    ev.delivered_chars = (long)opt_int(L, 1, "delivered_chars", 0);
    ev.tool_call = opt_bool(L, 1, "tool_call");
    ev.continuable = opt_bool(L, 1, "continuable");
    policy_verdict v;
    policy_classify(bridge_engine(L), &ev, &v);
    lua_createtable(L, 0, 4);
    lua_pushstring(L, policy_action_name(v.action));
    lua_setfield(L, -2, "action");
    if (v.action == VERDICT_RETRY) {
        push_num(L, v.after);
        lua_setfield(L, -2, "after");
    }
    lua_pushstring(L, v.cls);
    lua_setfield(L, -2, "class");
    push_num(L, v.cooldown);
    lua_setfield(L, -2, "cooldown");
    if (v.drain_bucket) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "drain_bucket");
    }
    if (v.state[0]) {
        lua_pushstring(L, v.state);
        lua_setfield(L, -2, "state");
    }
    if (v.scope_model) {
        lua_pushstring(L, "model");
        lua_setfield(L, -2, "scope");
    }
    return 1;
}

/* cooldown(state, class, now) -> seconds, ladder_step */
static int bridge_cooldown(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    policy_state st = {0};
    st.account_id = opt_int(L, 1, "account_id", 1);
    st.ladder_step = (int)opt_int(L, 1, "ladder_step", 0);
    st.last_429_at = opt_num(L, 1, "last_429_at", 0);
    st.cooldown_until = opt_num(L, 1, "cooldown_until", 0);
    st.retry_after = opt_num(L, 1, "retry_after", -1);
    st.primary_used_pct = opt_num(L, 1, "primary_used_pct", -1);
    st.primary_reset_at = opt_num(L, 1, "primary_reset_at", 0);
    st.secondary_used_pct = opt_num(L, 1, "secondary_used_pct", -1);
    st.secondary_reset_at = opt_num(L, 1, "secondary_reset_at", 0);
    st.family = opt_str(L, 1, "family", NULL);
    const char *cls = luaL_checkstring(L, 2);
    double now = luaL_checknumber(L, 3), secs;
    int step;
    policy_cooldown(bridge_engine(L), &st, cls, now, &secs, &step);
    push_num(L, secs);
    lua_pushinteger(L, step);
    return 2;
}

/* strip(blob) -> "keep" | "drop" | "text" */
static int bridge_strip(lua_State *L)
{
    static const char *const names[] = {"keep", "drop", "text"};
    luaL_checktype(L, 1, LUA_TTABLE);
    policy_blob b = {0};
    b.item_type = opt_str(L, 1, "item_type", NULL);
    b.in_part = opt_bool(L, 1, "in_part");
    b.origin = opt_str(L, 1, "origin", NULL);
    b.origin_kind = opt_str(L, 1, "origin_kind", NULL);
    b.target = opt_str(L, 1, "target", NULL);
    b.target_kind = opt_str(L, 1, "target_kind", NULL);
    b.strip_retry = opt_bool(L, 1, "strip_retry");
    int s = policy_strip(bridge_engine(L), &b);
    lua_pushstring(L, s >= 0 && s <= 2 ? names[s] : "?");
    return 1;
}

/* first_token({endpoint, model, reasoning, stream, account_kind, prompt_kib}) -> seconds, after_output (0: none) */
static int bridge_first_token(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    policy_first_token ft = {0};
    ft.endpoint = opt_str(L, 1, "endpoint", NULL);
    ft.model = opt_str(L, 1, "model", NULL);
    ft.reasoning = opt_str(L, 1, "reasoning", NULL);
    ft.stream = opt_bool(L, 1, "stream");
    ft.account_kind = opt_str(L, 1, "account_kind", NULL);
    ft.prompt_kib = (long)opt_int(L, 1, "prompt_kib", 1);
    policy_silence s = policy_silence_limits(bridge_engine(L), &ft);
    push_num(L, s.first_token);
    push_num(L, s.after_output);
    return 2;
}

/* alert({kind, subject, state, text, webhook_url, now}) -> a list of
 * posts {url, body (the text sent), headers = {name = value}}, {} none */
static int bridge_alert(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    policy_alert_event ev = {opt_str(L, 1, "kind", NULL),  opt_str(L, 1, "subject", NULL),
                             opt_str(L, 1, "state", NULL), opt_str(L, 1, "text", NULL),
                             opt_str(L, 1, "webhook_url", NULL), opt_num(L, 1, "now", 0)};
    policy_alert_post posts[POLICY_ALERT_POSTS];
    size_t n = policy_alert(bridge_engine(L), &ev, posts);
    /* copied into Lua memory first, so a Lua error below leaks nothing */
    lua_createtable(L, (int)n, 0);
    int list = lua_gettop(L);
    for (size_t i = 0; i < n; i++) {
        lua_createtable(L, 0, 3);
        lua_pushstring(L, posts[i].url);
        lua_setfield(L, -2, "url");
        lua_pushlstring(L, posts[i].body, posts[i].body_len);
        lua_setfield(L, -2, "body");
        lua_pushstring(L, posts[i].headers);
        lua_setfield(L, -2, "header_lines");
        lua_rawseti(L, list, (lua_Integer)i + 1);
    }
    for (size_t i = 0; i < n; i++)
        policy_alert_post_free(&posts[i]);
    for (size_t i = 0; i < n; i++) { /* "Name: value\n" lines -> {Name = value} */
        lua_rawgeti(L, list, (lua_Integer)i + 1);
        lua_getfield(L, -1, "header_lines");
        const char *h = lua_tostring(L, -1);
        lua_newtable(L);
        while (h && *h) {
            const char *colon = strstr(h, ": "), *nl = strchr(h, '\n');
            if (!colon || !nl || colon > nl)
                break;
            lua_pushlstring(L, h, (size_t)(colon - h));
            lua_pushlstring(L, colon + 2, (size_t)(nl - colon - 2));
            lua_settable(L, -3);
            h = nl + 1;
        }
        lua_setfield(L, -3, "headers");
        lua_pop(L, 2);
    }
    return 1;
}

/* exhausted({endpoint, now, accounts}) -> {shape, resets_at, plan_type} */
static int bridge_exhausted(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    policy_exhausted ex = {0};
    ex.endpoint = opt_str(L, 1, "endpoint", NULL);
    ex.now = opt_num(L, 1, "now", 0);
    if (field(L, 1, "accounts") != LUA_TTABLE)
        return luaL_error(L, "exhausted: accounts must be a table");
    int at = lua_gettop(L);
    size_t n = (size_t)luaL_len(L, at);
    policy_out_account *v = lua_newuserdatauv(L, (n ? n : 1) * sizeof *v, 0);
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, at, (lua_Integer)i + 1);
        int t = lua_gettop(L);
        luaL_checktype(L, t, LUA_TTABLE);
        v[i] = (policy_out_account){opt_str(L, t, "name", NULL), opt_str(L, t, "kind", NULL), opt_str(L, t, "why", NULL),
                                    opt_str(L, t, "last_class", NULL), opt_num(L, t, "back_at", 0),
                                    opt_num(L, t, "primary_used_pct", -1), opt_num(L, t, "secondary_used_pct", -1),
                                    opt_num(L, t, "primary_reset_at", 0), opt_num(L, t, "secondary_reset_at", 0),
                                    opt_str(L, t, "plan_type", NULL)};
        lua_pop(L, 1); /* the strings stay alive in the argument table */
    }
    ex.accounts = v;
    ex.n = n;
    double resets = 0;
    char plan[32];
    int limit = policy_exhausted_answer(bridge_engine(L), &ex, &resets, plan, sizeof plan);
    lua_createtable(L, 0, 3);
    lua_pushstring(L, limit ? "usage_limit" : "unavailable");
    lua_setfield(L, -2, "shape");
    push_num(L, resets);
    lua_setfield(L, -2, "resets_at");
    lua_pushstring(L, plan);
    lua_setfield(L, -2, "plan_type");
    return 1;
}

/* guard(candidate) -> "normal" | "reserve" | "exclude" */
static int bridge_guard(lua_State *L)
{
    static const char *const names[] = {"normal", "reserve", "exclude"};
    luaL_checktype(L, 1, LUA_TTABLE);
    policy_candidate c;
    candidate_read(L, 1, &c);
    int g = policy_guard(bridge_engine(L), &c);
    lua_pushstring(L, g >= 0 && g <= 2 ? names[g] : "?");
    return 1;
}

static void ids_push(lua_State *L, const policy_candidate *c, const size_t *perm, size_t m)
{
    lua_createtable(L, (int)m, 0);
    for (size_t i = 0; i < m; i++) {
        lua_pushinteger(L, c[perm[i]].id);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

/* order(candidates, ctx) -> ids in try order */
static int bridge_order(lua_State *L)
{
    policy_candidate *c;
    policy_order_ctx ctx;
    ctx_read(L, 2, &ctx);
    size_t n = candidates_read(L, &c);
    size_t *perm = lua_newuserdatauv(L, (n ? n : 1) * sizeof *perm, 0);
    size_t m = policy_order(bridge_engine(L), c, n, &ctx, perm);
    ids_push(L, c, perm, m);
    return 1;
}

/* route(candidates, ctx): what the router does: guard each (dropping
 * "exclude", marking "reserve"), then order -> ids */
static int bridge_route(lua_State *L)
{
    policy_engine *pe = bridge_engine(L);
    policy_candidate *c;
    policy_order_ctx ctx;
    ctx_read(L, 2, &ctx);
    size_t n = candidates_read(L, &c), kept = 0;
    for (size_t i = 0; i < n; i++) {
        int g = policy_guard(pe, &c[i]);
        if (g == GUARD_EXCLUDE)
            continue;
        c[kept] = c[i];
        c[kept++].reserve = g == GUARD_RESERVE;
    }
    size_t *perm = lua_newuserdatauv(L, (kept ? kept : 1) * sizeof *perm, 0);
    size_t m = policy_order(pe, c, kept, &ctx, perm);
    ids_push(L, c, perm, m);
    return 1;
}

/* breaker(state, outcome, now) -> state, seconds */
static int bridge_breaker(lua_State *L)
{
    static const char *const names[] = {"closed", "open", "half_open"};
    luaL_checktype(L, 1, LUA_TTABLE);
    policy_breaker_state st = {0};
    st.account_id = opt_int(L, 1, "account_id", 1);
    st.kind = opt_str(L, 1, "kind", NULL);
    const char *state = opt_str(L, 1, "state", NULL);
    for (int i = 0; state && i < 3; i++)
        if (strcmp(state, names[i]) == 0)
            st.state = i;
    st.consecutive_failures = (int)opt_int(L, 1, "consecutive_failures", 0);
    st.consecutive_successes = (int)opt_int(L, 1, "consecutive_successes", 0);
    st.window_requests = (int)opt_int(L, 1, "window_requests", 0);
    st.window_failures = (int)opt_int(L, 1, "window_failures", 0);
    const char *outcome = luaL_checkstring(L, 2);
    double now = luaL_optnumber(L, 3, 0), secs;
    int out;
    policy_breaker(bridge_engine(L), &st, strcmp(outcome, "success") == 0, now, &out, &secs);
    lua_pushstring(L, names[out]);
    if (out == BREAKER_OPEN)
        push_num(L, secs);
    else
        lua_pushnil(L);
    return 2;
}

/* price(model) -> {input, cached_input, output} or nil */
static int bridge_price(lua_State *L)
{
    policy_price p;
    if (!policy_price_get(bridge_engine(L), luaL_checkstring(L, 1), &p)) {
        lua_pushnil(L);
        return 1;
    }
    lua_createtable(L, 0, 3);
    push_num(L, p.input);
    lua_setfield(L, -2, "input");
    push_num(L, p.cached_input);
    lua_setfield(L, -2, "cached_input");
    push_num(L, p.output);
    lua_setfield(L, -2, "output");
    return 1;
}

/* budget(b) -> "ok" | "over" */
static int bridge_budget(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    policy_budget b = {
        .kind = opt_str(L, 1, "kind", NULL), .name = opt_str(L, 1, "name", NULL),
        .period = opt_str(L, 1, "period", NULL), .usd = opt_num(L, 1, "usd", 0), .spent = opt_num(L, 1, "spent", 0),
        .start = opt_num(L, 1, "start", 0), .resets_at = opt_num(L, 1, "resets_at", 0), .now = opt_num(L, 1, "now", 0),
    };
    lua_pushstring(L, policy_budget_over(bridge_engine(L), &b) ? "over" : "ok");
    return 1;
}

static void push_names(lua_State *L, const char (*names)[POLICY_DIALECT_NAME_MAX], size_t n)
{
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushstring(L, names[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

/* dialect({kind, client, upstream}) -> the rules as the engine keeps them
 * (after the strict reading): {stream = "always"|"as_asked", store = false|nil,
 * instructions, input_list, system_role, strip_item_ids, drop, rename, ignore} */
static int bridge_dialect(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    policy_dialect_ask ask = {opt_str(L, 1, "kind", NULL), opt_str(L, 1, "client", NULL),
                              opt_str(L, 1, "upstream", NULL)};
    const policy_dialect *r = policy_dialect_rules(bridge_engine(L), &ask);
    lua_createtable(L, 0, 9);
    lua_pushstring(L, r->stream ? "always" : "as_asked");
    lua_setfield(L, -2, "stream");
    if (r->store_off) {
        lua_pushboolean(L, 0);
        lua_setfield(L, -2, "store");
    }
    if (r->has_instructions) {
        lua_pushstring(L, r->instructions);
        lua_setfield(L, -2, "instructions");
    }
    lua_pushboolean(L, r->input_list);
    lua_setfield(L, -2, "input_list");
    lua_pushboolean(L, r->strip_item_ids);
    lua_setfield(L, -2, "strip_item_ids");
    lua_pushstring(L, r->system_role[0] ? r->system_role : "system");
    lua_setfield(L, -2, "system_role");
    push_names(L, r->drop, r->n_drop);
    lua_setfield(L, -2, "drop");
    push_names(L, r->ignore, r->n_ignore);
    lua_setfield(L, -2, "ignore");
    lua_createtable(L, 0, (int)r->n_rename);
    for (size_t i = 0; i < r->n_rename; i++) {
        lua_pushstring(L, r->rename_to[i]);
        lua_setfield(L, -2, r->rename_from[i]);
    }
    lua_setfield(L, -2, "rename");
    return 1;
}

static int bridge_fallbacks(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)policy_fallbacks(bridge_engine(L)));
    return 1;
}

static int bridge_last_error(lua_State *L)
{
    lua_pushstring(L, policy_last_error(bridge_engine(L)));
    return 1;
}

static int spec_install_run(lua_State *L)
{
    static const luaL_Reg bridges[] = {
        {"classify", bridge_classify}, {"cooldown", bridge_cooldown}, {"guard", bridge_guard},
        {"order", bridge_order}, {"route", bridge_route}, {"breaker", bridge_breaker},
        {"price", bridge_price}, {"budget", bridge_budget}, {"strip", bridge_strip},
        {"exhausted", bridge_exhausted}, {"first_token", bridge_first_token}, {"alert", bridge_alert},
        {"dialect", bridge_dialect}, {"fallbacks", bridge_fallbacks},
        {"last_error", bridge_last_error}, {NULL, NULL}};
    for (const luaL_Reg *r = bridges; r->name; r++) {
        lua_pushlightuserdata(L, sandbox_ud(L));
        lua_pushcclosure(L, r->func, 1);
        sandbox_export(L, r->name);
    }
    sandbox_push_export(L, "spec");
    lua_getfield(L, -1, "api");
    luaL_checktype(L, -1, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        if (lua_type(L, -2) == LUA_TSTRING)
            sandbox_export(L, lua_tostring(L, -2));
        else
            lua_pop(L, 1);
    }
    return 0;
}

/* ======================= running spec files ======================= */

typedef struct spec_job {
    const char *chunk, *src;
    size_t len;
    int index, count, passed;
    char name[1200];
    char msg[1024];
} spec_job;

/* Pushes spec[fn] (the harness module's function called fn). */
static void spec_push_fn(lua_State *L, const char *fn)
{
    sandbox_push_export(L, "spec");
    lua_getfield(L, -1, fn);
    lua_remove(L, -2);
}

static int spec_load_run(lua_State *L)
{
    spec_job *j = sandbox_ud(L);
    spec_push_fn(L, "reset");
    lua_call(L, 0, 0);
    sandbox_push_env(L);
    sandbox_load(L, j->chunk, j->src, j->len);
    lua_call(L, 0, 0);
    spec_push_fn(L, "count");
    lua_call(L, 0, 1);
    j->count = (int)lua_tointeger(L, -1);
    return 0;
}

static int spec_case_run(lua_State *L)
{
    spec_job *j = sandbox_ud(L);
    spec_push_fn(L, "name");
    lua_pushinteger(L, j->index);
    lua_call(L, 1, 1);
    snprintf(j->name, sizeof j->name, "%s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
    spec_push_fn(L, "run");
    lua_pushinteger(L, j->index);
    lua_call(L, 1, 2);
    j->passed = lua_toboolean(L, -2);
    snprintf(j->msg, sizeof j->msg, "%s", lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "");
    return 0;
}

static void one_line(char *s)
{
    for (; *s; s++)
        if (*s == '\n' || *s == '\t' || *s == '\r')
            *s = ' ';
}

static void report(int ok, const char *name, const char *msg, int *passed, int *failed)
{
    if (ok) {
        printf("ok - %s\n", name);
        (*passed)++;
    } else {
        char m[1100];
        snprintf(m, sizeof m, "%s", msg);
        one_line(m);
        printf("not ok - %s: %s\n", name, m);
        (*failed)++;
    }
    fflush(stdout);
}

static char *spec_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc((size_t)SPEC_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, (size_t)SPEC_FILE_MAX, f) : 0;
    fclose(f);
    if (buf)
        buf[n] = '\0';
    *len = n;
    return buf;
}

static void spec_file(sandbox *sb, policy_engine *pe, const char *path, int *passed, int *failed)
{
    char chunk[1200], err[1024];
    spec_job j = {.chunk = chunk};
    char *src = spec_slurp(path, &j.len);
    if (!src) {
        report(0, path, "cannot read", passed, failed);
        return;
    }
    j.src = src;
    snprintf(chunk, sizeof chunk, "@%s", path);
    sandbox_result r = sandbox_run(sb, spec_load_run, &j, err, sizeof err);
    free(src);
    if (r != SANDBOX_OK) {
        report(0, path, err, passed, failed);
        return;
    }
    if (j.count == 0)
        report(0, path, "no tests in this file", passed, failed);
    for (j.index = 1; j.index <= j.count; j.index++) {
        uint64_t before = policy_fallbacks(pe);
        snprintf(j.name, sizeof j.name, "%s #%d", path, j.index);
        r = sandbox_run(sb, spec_case_run, &j, err, sizeof err);
        if (r != SANDBOX_OK) {
            char m[1100];
            snprintf(m, sizeof m, "%s: %s", sandbox_result_name(r), err);
            report(0, j.name, m, passed, failed);
        } else if (j.passed && policy_fallbacks(pe) != before) {
            snprintf(err, sizeof err, "the policy failed and the built-in default answered (%s)",
                     policy_last_error(pe));
            report(0, j.name, err, passed, failed);
        } else {
            report(j.passed, j.name, j.msg, passed, failed);
        }
    }
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The names in dir that end in _spec.lua, sorted; NULL-terminated. */
static char **spec_list(const char *dir, size_t *count)
{
    DIR *d = opendir(dir);
    char **v = NULL;
    size_t n = 0;
    if (!d)
        return NULL;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 9 || strcmp(e->d_name + l - 9, "_spec.lua") != 0)
            continue;
        char **nv = realloc(v, (n + 2) * sizeof *v);
        if (!nv)
            break;
        v = nv;
        v[n++] = strdup(e->d_name);
        v[n] = NULL;
    }
    closedir(d);
    if (v)
        qsort(v, n, sizeof *v, name_cmp);
    *count = n;
    return v;
}

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static sandbox *spec_sandbox(policy_engine *pe, char *err, size_t errlen)
{
    sandbox *sb = sandbox_new(SPEC_MEM_LIMIT, SPEC_INSTR_LIMIT, SPEC_TIME_MS, err, errlen);
    if (!sb)
        return NULL;
    sandbox_set_print(sb, 1);
    if (sandbox_export_embedded(sb, "lua/sy.lua", "sy", err, errlen) ||
        sandbox_export_embedded(sb, "lua/fixtures.lua", "fixtures", err, errlen) ||
        sandbox_export_embedded(sb, "lua/spec.lua", "spec", err, errlen) ||
        sandbox_run(sb, spec_install_run, pe, err, errlen) != SANDBOX_OK) {
        sandbox_free(sb);
        return NULL;
    }
    return sb;
}

static int test_usage(FILE *f, int rc)
{
    fprintf(f, "usage: switchyard test [DIR] [--policies PDIR]\n"
                    "  DIR   specs (*_spec.lua), default tests/policies\n"
                    "  PDIR  policies under test, default ./policies, else the embedded copies\n");
    return rc;
}

int policy_test_main(int argc, char **argv)
{
    const char *dir = NULL, *pdir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--policies") == 0 && i + 1 < argc)
            pdir = argv[++i];
        else if (strncmp(argv[i], "--policies=", 11) == 0)
            pdir = argv[i] + 11;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return test_usage(stdout, 0);
        else if (!strcmp(argv[i], "--db") || !strncmp(argv[i], "--db=", 5)) {
            /* refused rather than ignored: the specs run the policies alone */
            fprintf(stderr, "switchyard test: --db does not apply: the policy tests read no database "
                            "(they run the policies against their specs; --policies PDIR picks the policies)\n");
            return test_usage(stderr, 2);
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "switchyard test: unknown option '%s'\n", argv[i]);
            return test_usage(stderr, 2);
        } else if (dir) {
            fprintf(stderr, "switchyard test: one spec directory only, got '%s' and '%s'\n", dir, argv[i]);
            return test_usage(stderr, 2);
        }
        else
            dir = argv[i];
    }
    if (!dir)
        dir = "tests/policies";
    if (!pdir && is_dir("policies"))
        pdir = "policies";
    char err[1024];
    int passed = 0, failed = 0;
    policy_engine *pe = policy_new(pdir, err, sizeof err);
    if (!pe) {
        report(0, "load policies", err, &passed, &failed);
        printf("%d passed, %d failed\n", passed, failed);
        return 1;
    }
    sandbox *sb = spec_sandbox(pe, err, sizeof err);
    size_t n = 0;
    char **names = sb ? spec_list(dir, &n) : NULL;
    if (!sb)
        report(0, "spec harness", err, &passed, &failed);
    else if (n == 0)
        fprintf(stderr, "switchyard test: no *_spec.lua in %s\n", dir);
    for (size_t i = 0; i < n; i++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        spec_file(sb, pe, path, &passed, &failed);
        free(names[i]);
    }
    free(names);
    printf("%d passed, %d failed\n", passed, failed);
    sandbox_free(sb);
    policy_free(pe);
    return failed || n == 0 ? 1 : 0;
}
