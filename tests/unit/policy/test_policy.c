/* test_policy.c: the policy engine. Hostile policies (runaway loops, loops
 * that pcall their way around the limit, memory bombs, sandbox escapes,
 * garbage results) fall back to the built-in default and leave the process
 * and the engine usable; broken files are refused by policy_new with the file
 * and line; the embedded copies load; the default numbers hold; and the C
 * defaults agree with the Lua policies on a broad sweep of inputs. */
#include "check.h"
#include "base/embedded.h"
#include "base/log.h"
#include "policy/policy.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const hooks[] = {"classify", "cooldown", "guard", "order", "breaker", "alert"};
#define NHOOKS ((int)(sizeof hooks / sizeof hooks[0]))
static char tdir[64];

/* ---------------------------------------------------------------- helpers */

static void file_write(const char *hook, const char *src)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s.lua", tdir, hook);
    FILE *f = fopen(path, "w");
    if (!f)
        abort();
    fputs(src, f);
    fclose(f);
}

/* A temp dir with the default policies, hook replaced by src (NULL: removed). */
static void dir_make(const char *hook, const char *src)
{
    snprintf(tdir, sizeof tdir, "/tmp/test_policy.XXXXXX");
    if (!mkdtemp(tdir))
        abort();
    for (int i = 0; i < NHOOKS; i++) {
        char name[64];
        snprintf(name, sizeof name, "policies/%s.lua", hooks[i]);
        const embedded_file *f = embedded_find(name);
        if (!f)
            abort();
        file_write(hooks[i], f->data);
    }
    if (hook && src)
        file_write(hook, src);
    if (hook && !src) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s.lua", tdir, hook);
        unlink(path);
    }
}

static void dir_remove(void)
{
    for (int i = 0; i < NHOOKS; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s.lua", tdir, hooks[i]);
        unlink(path);
    }
    rmdir(tdir);
}

static char load_err[1024];

static policy_engine *engine_with(const char *hook, const char *src)
{
    dir_make(hook, src);
    load_err[0] = '\0';
    policy_engine *pe = policy_new(tdir, load_err, sizeof load_err);
    dir_remove();
    return pe;
}

/* An event past its same-account retry (retries = 1), so a 5xx fails over. */
static policy_event event(int status)
{
    policy_event ev = {.status = status, .retry_after = -1, .account_kind = "api_key",
                       .endpoint = "/v1/responses", .retries = 1, .alternatives = 1};
    return ev;
}

static void classify_status(policy_engine *pe, int status, policy_verdict *v)
{
    policy_event ev = event(status);
    policy_classify(pe, &ev, v);
}

/* A classify policy that is well-behaved except on status 418. */
#define CLASSIFY_418(body) \
    "return function(ev)\n" \
    "  if ev.status == 418 then\n" body "\n  end\n" \
    "  return { action = 'failover', class = 'lua', cooldown = 7 }\n" \
    "end\n"

/* ------------------------------------------------- loading and the sources */

static void test_embedded_engine_loads_and_decides(void)
{
    char err[512];
    policy_engine *pe = policy_new(NULL, err, sizeof err);
    CHECK(pe != NULL);
    CHECK_EQ_STR(policy_source(pe), "embedded");
    policy_verdict v;
    classify_status(pe, 429, &v);
    CHECK_EQ_INT(v.failover, 1);
    CHECK_EQ_STR(v.cls, "rate_limit");
    CHECK(v.cooldown == -1);
    CHECK_EQ_INT(policy_fallbacks(pe), 0);
    CHECK_EQ_STR(policy_last_error(pe), "");
    policy_free(pe);
}

static void test_engine_loads_from_a_dir(void)
{
    policy_engine *pe = engine_with("classify", CLASSIFY_418("error('x')"));
    CHECK(pe != NULL);
    CHECK(strncmp(policy_source(pe), "/tmp/test_policy.", 17) == 0);
    policy_verdict v;
    classify_status(pe, 500, &v);
    CHECK_EQ_STR(v.cls, "lua");
    CHECK(v.cooldown == 7);
    policy_free(pe);
}

static void test_bare_function_and_table_forms_both_load(void)
{
    policy_engine *pe = engine_with("guard", "return function(c) return 'exclude' end\n");
    CHECK(pe != NULL);
    policy_candidate c = {.id = 1, .kind = "api_key", .primary_used_pct = -1, .secondary_used_pct = -1};
    CHECK_EQ_INT(policy_guard(pe, &c), GUARD_EXCLUDE);
    policy_free(pe);
    pe = engine_with("guard", "return { version = 1, guard = function(c) return 'reserve' end }\n");
    CHECK(pe != NULL);
    CHECK_EQ_INT(policy_guard(pe, &c), GUARD_RESERVE);
    policy_free(pe);
}

static void test_null_engine_uses_builtin_defaults(void)
{
    policy_verdict v;
    classify_status(NULL, 503, &v);
    CHECK_EQ_INT(v.failover, 1);
    CHECK_EQ_STR(v.cls, "server");
    CHECK(v.cooldown == 30);
    CHECK_EQ_INT(policy_fallbacks(NULL), 0);
}

/* The built-in classify (classify.lua's mirror) names a model the account
 * does not serve model_unsupported with no cooldown; a plain 404 is an
 * endpoint the upstream does not have (unknown_endpoint) and another 400 is
 * returned. */
static void test_builtin_classify_marks_an_unserved_model_without_cooldown(void)
{
    policy_verdict v;
    const char *said[][2] = {
        {"400", "The 'gpt-5.1-codex-max' model is not supported when using Codex with a ChatGPT account."},
        {"404", "The model `o9` does not exist or you do not have access to it."},
    };
    for (size_t i = 0; i < sizeof said / sizeof *said; i++) {
        policy_event ev = event(atoi(said[i][0]));
        ev.error_message = said[i][1];
        policy_classify(NULL, &ev, &v);
        CHECK_EQ_INT(v.failover, 1);
        CHECK_EQ_STR(v.cls, "model_unsupported");
        CHECK(v.cooldown == 0);
    }
    policy_event code = event(404);
    code.error_code = "model_not_found";
    policy_classify(NULL, &code, &v);
    CHECK_EQ_STR(v.cls, "model_unsupported");
    classify_status(NULL, 404, &v);
    CHECK_EQ_STR(v.cls, "unknown_endpoint");
    policy_event other = event(400);
    other.error_message = "Unsupported parameter: temperature";
    policy_classify(NULL, &other, &v);
    CHECK_EQ_INT(v.failover, 0);
}

/* ------------------------------------------------------ runaway policies */

static void test_infinite_loop_policy_falls_back_and_engine_survives(void)
{
    policy_engine *pe = engine_with("classify", CLASSIFY_418("    while true do end"));
    CHECK(pe != NULL);
    policy_verdict v;
    classify_status(pe, 418, &v);
    CHECK_EQ_INT(v.failover, 0); /* the C default: a 4xx request error is returned */
    CHECK_EQ_STR(v.cls, "request");
    CHECK_EQ_INT(policy_fallbacks(pe), 1);
    CHECK(strstr(policy_last_error(pe), "classify: timeout") != NULL);
    classify_status(pe, 500, &v); /* the next call runs Lua again, with a fresh budget */
    CHECK_EQ_STR(v.cls, "lua");
    CHECK_EQ_INT(policy_fallbacks(pe), 1);
    policy_free(pe);
}

static void test_pcall_cannot_swallow_the_instruction_limit(void)
{
    const char *bodies[] = {
        CLASSIFY_418("    while true do pcall(function() while true do end end) end"),
        CLASSIFY_418("    while true do xpcall(function() while true do end end, function() while true do end end) end"),
        CLASSIFY_418("    local ok = pcall(function() while true do end end)\n"
                     "    return { action = 'return', class = 'swallowed' }"),
        CLASSIFY_418("    for i = 1, math.huge do pcall(error, 'x') end"),
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        policy_engine *pe = engine_with("classify", bodies[i]);
        CHECK(pe != NULL);
        policy_verdict v;
        classify_status(pe, 418, &v);
        CHECK_EQ_STR(v.cls, "request");
        CHECK(strstr(policy_last_error(pe), "timeout") != NULL);
        classify_status(pe, 500, &v);
        CHECK_EQ_STR(v.cls, "lua");
        policy_free(pe);
    }
}

static void test_memory_bomb_falls_back_with_nomem(void)
{
    const char *bodies[] = {
        CLASSIFY_418("    local t = {}\n    for i = 1, 1e9 do t[i] = string.rep('x', 4096) .. i end"),
        CLASSIFY_418("    local s = string.rep('x', 1 << 30)"),
        CLASSIFY_418("    local s = 'x'\n    while true do s = s .. s end"),
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        policy_engine *pe = engine_with("classify", bodies[i]);
        CHECK(pe != NULL);
        policy_verdict v;
        classify_status(pe, 418, &v);
        CHECK_EQ_STR(v.cls, "request");
        CHECK_EQ_INT(policy_fallbacks(pe), 1);
        /* filling 32 MiB takes tens of ms of page faults and copies: the
         * time limit (50 ms) may stop it before the memory cap does */
        CHECK(strstr(policy_last_error(pe), "classify: nomem") != NULL ||
              strstr(policy_last_error(pe), "classify: timeout") != NULL);
        classify_status(pe, 500, &v); /* the memory came back */
        CHECK_EQ_STR(v.cls, "lua");
        CHECK_EQ_INT(policy_fallbacks(pe), 1);
        policy_free(pe);
    }
}

static void test_c_side_loops_are_bounded(void)
{
    /* string.rep of an empty string and table.move of nils spin in C, where no
     * instruction is counted: both are capped by the sandbox. */
    policy_engine *pe = engine_with("classify", CLASSIFY_418(
        "    local s = string.rep('', 1e15) .. ('' ):rep(1e15, '')\n"
        "    if s ~= '' then error('rep') end\n"
        "    table.move({}, 1, 1e12, 2)"));
    CHECK(pe != NULL);
    policy_verdict v;
    classify_status(pe, 418, &v);
    CHECK(strstr(policy_last_error(pe), "table.move") != NULL);
    policy_free(pe);
}

/* A classify hook running body on status 418: the default decides, the
 * fallback is counted with a reason holding want, and the next call is the
 * policy's own again. */
static void check_418_falls_back(const char *body, const char *want)
{
    char src[1024];
    snprintf(src, sizeof src, CLASSIFY_418("%s"), body);
    policy_engine *pe = engine_with("classify", src);
    CHECK(pe != NULL);
    if (!pe)
        return;
    policy_verdict v;
    classify_status(pe, 418, &v);
    CHECK_EQ_STR(v.cls, "request"); /* the built-in default */
    CHECK_EQ_INT(policy_fallbacks(pe), 1);
    if (!strstr(policy_last_error(pe), want)) {
        fprintf(stderr, "  %s\n  gave: %s\n", body, policy_last_error(pe));
        CHECK(0);
    }
    classify_status(pe, 500, &v);
    CHECK_EQ_STR(v.cls, "lua");
    CHECK_EQ_INT(policy_fallbacks(pe), 1);
    policy_free(pe);
}

/* A hook stuck in one long C call (Lua's own string.find backtracking on
 * '.-b' ran ~50 s) or in many costly instructions is stopped by the time
 * limit (50 ms of CPU) or the pattern step limit: the default decides, the
 * fallback is counted, and the engine answers normally afterwards. Without
 * the bound each of these runs for minutes (ctest's 60 s timeout). */
static void test_long_c_calls_are_stopped_by_the_time_limit(void)
{
    const char *bodies[] = {
        "    string.find(string.rep('a', 100000), '.-b')",
        "    string.match(string.rep('a', 5000), '(.-)(.-)(.-)b')",
        "    string.gsub(string.rep('a', 100000), '.-.-b', '')",
        "    for w in string.gmatch(string.rep('a', 100000), 'a-b') do end",
        "    ('x'):rep(100000):find('.-.-y')",
        "    string.find(string.rep('a', 1000000), string.rep('a', 500000) .. 'b', 1, true)",
        "    for i = 1, 1e9 do pcall(string.find, string.rep('a', 100000), '.-b') end",
        "    local s = string.rep('a', 1000000)\n"
        "    local t = {}\n    for i = 1, 20000 do t[i] = s end\n    table.sort(t)",
        "    local a, b = string.rep('a', 8000000), string.rep('a', 7999999) .. 'a'\n"
        "    for i = 1, 1e9 do local x = a == b end",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++)
        check_418_falls_back(bodies[i], "classify: timeout");
}

/* Library calls whose work one call could make unbounded are refused up
 * front: cjson.encode of a value referencing one table over and over
 * (2^40 values, built with malloc outside the memory cap), and os.date with
 * a format of 400 000 conversions (70 ms inside one call). */
static void test_c_calls_with_unbounded_work_are_refused(void)
{
    const char *bodies[] = {
        "    local t = {}\n    for i = 1, 40 do t = { t, t } end\n    cjson.encode(t)",
        "    cjson.encode({ string.rep('\\0', 1100000) })",
        "    os.date(string.rep('%c', 400000))",
    };
    const char *want[] = {"cjson.encode: more than", "cjson.encode: more than", "os.date: format longer"};
    for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++)
        check_418_falls_back(bodies[i], want[i]);
}

static void refused(const char *hook, const char *src, const char *want1, const char *want2);

/* Top-level code of a file is bounded the same way: the file is refused. */
static void test_slow_top_level_code_is_refused(void)
{
    refused("guard", "string.find(string.rep('a', 100000), '.-b')\n", "/guard.lua:1:", "limit");
}

/* ---------------------------------------------------------------- sandbox */

static void test_sandbox_hides_io_os_require_load_debug(void)
{
    policy_engine *pe = engine_with("classify", CLASSIFY_418(
        "    local leaks = {}\n"
        "    local function leak(name, cond) if cond then leaks[#leaks + 1] = name end end\n"
        "    leak('io', io ~= nil)\n"
        "    leak('os', os.execute ~= nil or os.exit ~= nil or os.getenv ~= nil or os.remove ~= nil)\n"
        "    leak('require', require ~= nil or package ~= nil)\n"
        "    leak('load', load ~= nil or loadfile ~= nil or dofile ~= nil or loadstring ~= nil)\n"
        "    leak('debug', debug ~= nil)\n"
        "    leak('dump', string.dump ~= nil or ('').dump ~= nil)\n"
        "    leak('coroutine', coroutine ~= nil)\n"
        "    leak('strmeta', getmetatable('') ~= false)\n"
        "    leak('gc', (pcall(collectgarbage, 'collect')))\n"
        "    leak('gccount', type(collectgarbage('count')) ~= 'number')\n"
        "    leak('ostime', type(os.time()) ~= 'number' or type(os.clock()) ~= 'number' or type(os.date('!%Y')) ~= 'string')\n"
        "    leak('cjson', cjson.decode(cjson.encode({ a = 1 })).a ~= 1 or cjson.new ~= nil)\n"
        "    leak('__gc', (pcall(setmetatable, {}, { __gc = function() end })))\n"
        "    leak('sy', sy == nil or sy.contains_any('Hello', { 'ELL' }) ~= 'ELL')\n"
        "    leak('_G', _G.io ~= nil or _G ~= _ENV)\n"
        "    sy.lower = nil; string.lower = nil\n"
        "    return { action = 'return', class = #leaks == 0 and 'sandboxed' or table.concat(leaks, ',') }"));
    CHECK(pe != NULL);
    policy_verdict v;
    classify_status(pe, 418, &v);
    CHECK_EQ_STR(v.cls, "sandboxed");
    CHECK_EQ_INT(policy_fallbacks(pe), 0);
    policy_free(pe);
}

static void test_calling_io_os_execute_require_or_load_falls_back(void)
{
    const char *calls[] = {
        CLASSIFY_418("    os.execute('touch /tmp/test_policy_pwned')"),
        CLASSIFY_418("    io.open('/etc/passwd')"),
        CLASSIFY_418("    require('os')"),
        CLASSIFY_418("    load('return 1')()"),
        CLASSIFY_418("    collectgarbage('stop')"),
    };
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        policy_engine *pe = engine_with("classify", calls[i]);
        CHECK(pe != NULL);
        policy_verdict v;
        classify_status(pe, 418, &v);
        CHECK_EQ_STR(v.cls, "request");
        CHECK_EQ_INT(policy_fallbacks(pe), 1);
        CHECK(strstr(policy_last_error(pe), "classify: error") != NULL);
        policy_free(pe);
    }
    CHECK(access("/tmp/test_policy_pwned", F_OK) != 0);
}

static void test_policies_do_not_share_helpers(void)
{
    /* classify clobbers its own sy and string tables; order still has them. */
    policy_engine *pe = engine_with("classify",
        "sy.copy = nil; sy.map = nil; table.sort = nil; math.min = nil\n"
        "return function(ev) return { action = 'return', class = 'x' } end\n");
    CHECK(pe != NULL);
    policy_candidate c[2] = {{.id = 1, .kind = "api_key", .success_rate = 1},
                             {.id = 2, .kind = "api_key", .success_rate = 1}};
    policy_order_ctx ctx = {.strategy = "balanced", .rotation = "account_rotation"};
    size_t perm[2];
    CHECK_EQ_INT(policy_order(pe, c, 2, &ctx, perm), 2);
    CHECK_EQ_INT(policy_fallbacks(pe), 0);
    policy_free(pe);
}

/* ---------------------------------------------------------- bad results */

static void test_garbage_classify_results_fall_back(void)
{
    policy_engine *pe = engine_with("classify",
        "return function(ev)\n"
        "  local s = ev.status\n"
        "  if s == 418 then return 42 end\n"
        "  if s == 419 then return { action = 'explode', class = 'x' } end\n"
        "  if s == 420 then return { action = 'failover', class = string.rep('a', 40) } end\n"
        "  if s == 421 then return { action = 'failover', class = 'x', cooldown = -5 } end\n"
        "  if s == 422 then return { action = 'failover', class = 'x', cooldown = 0/0 } end\n"
        "  if s == 423 then return { action = 'failover', class = 'two words' } end\n"
        "  if s == 424 then return setmetatable({}, { __index = function() return 'failover' end }) end\n"
        "  if s == 425 then return { action = 'failover', class = 'x', cooldown = '5' } end\n"
        "  if s == 426 then return { action = 'return', class = 'x', state = 'held_for_good' } end\n"
        "  if s == 427 then return { action = 'failover', class = 'x', state = 'Two Words' } end\n"
        "  if s == 428 then return { action = 'failover', class = 'x', state = string.rep('s', 32) } end\n"
        "  if s == 432 then return { action = 'failover', class = 'x', state = 7 } end\n"
        "  if s == 433 then return { action = 'failover', class = 'x', state = '' } end\n"
        "  if s == 434 then return { action = 'failover', class = 'x', cooldown = 0, state = 'my_own_1' } end\n"
        "  return { action = 'failover', class = 'lua' }\n"
        "end\n");
    CHECK(pe != NULL);
    const int garbage[] = {418, 419, 420, 421, 422, 423, 424, 425, 426, 427, 428, 432, 433};
    for (size_t i = 0; i < sizeof garbage / sizeof *garbage; i++) {
        int s = garbage[i];
        policy_verdict v, d;
        classify_status(pe, s, &v);
        classify_status(NULL, s, &d);
        CHECK_EQ_STR(v.cls, d.cls);
        CHECK_EQ_INT(v.failover, d.failover);
    }
    CHECK_EQ_INT(policy_fallbacks(pe), 13);
    policy_verdict v;
    classify_status(pe, 500, &v);
    CHECK_EQ_STR(v.cls, "lua");
    CHECK(v.cooldown == -1); /* failover without a cooldown asks the cooldown hook */
    CHECK_EQ_STR(v.state, "");
    classify_status(pe, 434, &v); /* a policy's own state is taken as it is */
    CHECK_EQ_INT(v.action, VERDICT_FAILOVER);
    CHECK_EQ_STR(v.state, "my_own_1");
    CHECK_EQ_INT(policy_fallbacks(pe), 13);
    policy_free(pe);
}

static void test_garbage_cooldown_results_fall_back(void)
{
    policy_engine *pe = engine_with("cooldown",
        "return function(st, class, now)\n"
        "  local id = st.account_id\n"
        "  if id == 901 then return 'soon' end\n"
        "  if id == 902 then return -1 end\n"
        "  if id == 903 then return 10, 1.5 end\n"
        "  if id == 904 then return 1/0 end\n"
        "  if id == 905 then return 10, -2 end\n"
        "  return 11, 3\n"
        "end\n");
    CHECK(pe != NULL);
    for (int id = 901; id <= 905; id++) {
        policy_state st = {.account_id = id, .retry_after = -1};
        double s, ds;
        int step, dstep;
        policy_cooldown(pe, &st, "rate_limit", 1700000000, &s, &step);
        policy_cooldown(NULL, &st, "rate_limit", 1700000000, &ds, &dstep);
        CHECK(s == ds && s == 45);
        CHECK_EQ_INT(step, dstep);
    }
    CHECK_EQ_INT(policy_fallbacks(pe), 5);
    policy_state st = {.account_id = 1, .ladder_step = 2, .retry_after = -1};
    double s;
    int step;
    policy_cooldown(pe, &st, "server", 1700000000, &s, &step);
    CHECK(s == 11);
    CHECK_EQ_INT(step, 3);
    policy_free(pe);
}

static void test_garbage_guard_results_fall_back(void)
{
    policy_engine *pe = engine_with("guard",
        "return function(c)\n"
        "  if c.name == 'maybe' then return 'maybe' end\n"
        "  if c.name == 'table' then return {} end\n"
        "  if c.name == 'nothing' then return end\n"
        "  return 'exclude'\n"
        "end\n");
    CHECK(pe != NULL);
    const char *names[] = {"maybe", "table", "nothing"};
    for (int i = 0; i < 3; i++) {
        policy_candidate c = {.id = 1, .name = names[i], .kind = "chatgpt", .primary_used_pct = 99,
                              .secondary_used_pct = -1};
        CHECK_EQ_INT(policy_guard(pe, &c), GUARD_RESERVE);
    }
    CHECK_EQ_INT(policy_fallbacks(pe), 3);
    policy_candidate ok = {.id = 1, .name = "fine", .kind = "chatgpt", .primary_used_pct = -1,
                           .secondary_used_pct = -1};
    CHECK_EQ_INT(policy_guard(pe, &ok), GUARD_EXCLUDE);
    policy_free(pe);
}

static void test_order_rejects_unknown_duplicate_and_malformed_ids(void)
{
    policy_engine *pe = engine_with("order",
        "return function(cands, ctx)\n"
        "  local m = ctx.model\n"
        "  if m == 'unknown' then return { 999 } end\n"
        "  if m == 'dup' then return { cands[1].id, cands[1].id } end\n"
        "  if m == 'string' then return { tostring(cands[1].id) } end\n"
        "  if m == 'nil' then return nil end\n"
        "  if m == 'too_many' then return { 1, 2, 3, 1 } end\n"
        "  if m == 'float' then return { 1.5 } end\n"
        "  if m == 'tables' then return { cands[3], cands[1] } end\n"
        "  return { cands[#cands].id }\n"
        "end\n");
    CHECK(pe != NULL);
    policy_candidate c[3] = {
        {.id = 1, .kind = "api_key", .sort = 0, .success_rate = 1, .primary_used_pct = -1},
        {.id = 2, .kind = "api_key", .sort = 1, .success_rate = 1, .primary_used_pct = -1},
        {.id = 3, .kind = "api_key", .sort = 2, .success_rate = 1, .primary_used_pct = -1},
    };
    const char *bad[] = {"unknown", "dup", "string", "nil", "too_many", "float"};
    for (int i = 0; i < 6; i++) {
        policy_order_ctx ctx = {.strategy = "balanced", .rotation = "account_rotation", .model = bad[i]};
        size_t perm[3] = {9, 9, 9};
        CHECK_EQ_INT(policy_order(pe, c, 3, &ctx, perm), 3);
        CHECK(perm[0] == 0 && perm[1] == 1 && perm[2] == 2);
    }
    CHECK_EQ_INT(policy_fallbacks(pe), 6);
    CHECK(strstr(policy_last_error(pe), "order: error") != NULL);
    policy_order_ctx ctx = {.strategy = "ordered", .model = "tables"};
    size_t perm[3];
    CHECK_EQ_INT(policy_order(pe, c, 3, &ctx, perm), 2); /* dropping candidates is allowed */
    CHECK(perm[0] == 2 && perm[1] == 0);
    ctx.model = "x";
    CHECK_EQ_INT(policy_order(pe, c, 3, &ctx, perm), 1);
    CHECK_EQ_INT(perm[0], 2);
    CHECK_EQ_INT(policy_fallbacks(pe), 6);
    policy_free(pe);
}

/* ------------------------------------------------- refused at policy_new */

static void refused(const char *hook, const char *src, const char *want1, const char *want2)
{
    policy_engine *pe = engine_with(hook, src);
    CHECK(pe == NULL);
    if (!strstr(load_err, want1) || (want2 && !strstr(load_err, want2))) {
        fprintf(stderr, "  error was: %s\n  wanted: %s / %s\n", load_err, want1, want2 ? want2 : "");
        CHECK(0);
    }
    policy_free(pe);
}

static void test_broken_files_are_refused_naming_file_and_line(void)
{
    /* syntax error: file and line */
    refused("guard", "return function(c)\n  if c.id then\n    return 'normal'\nend\n", "/guard.lua:5:", NULL);
    /* missing hook */
    refused("guard", "return { version = 1, gaurd = function() return 'normal' end }\n",
            "/guard.lua", "no function 'guard'");
    /* wrong return type of the chunk */
    refused("order", "return 42\n", "/order.lua", "must return a function");
    /* wrong result type, found by the self-check: names where the hook starts */
    refused("classify", "\nreturn function(ev)\n  return 'failover'\nend\n", "/classify.lua:2: self-check of classify",
            "expected a table");
    /* runtime error in the self-check: file and line of the error */
    refused("order", "return function(c, ctx)\n  return ctx.nope.x\nend\n", "/order.lua:2:", "nope");
    /* unsupported version */
    refused("cooldown", "return { version = 2, cooldown = function() return 1 end }\n", "/cooldown.lua",
            "version");
    /* runaway and bloated top-level code */
    refused("cooldown", "while true do end\n", "/cooldown.lua:1:", "instruction limit");
    refused("cooldown", "local t = {}\nfor i = 1, 1e9 do t[i] = ('x'):rep(1 << 30) .. i end\n", "/cooldown.lua",
            "memory");
    /* binary chunks */
    refused("guard", "\x1bLua\x54\x00garbage", "/guard.lua", "binary");
    /* missing file */
    refused("order", NULL, "/order.lua", "No such file");
}

static void test_failed_reload_keeps_the_old_engine(void)
{
    policy_engine *old = engine_with(NULL, NULL);
    CHECK(old != NULL);
    policy_engine *fresh = engine_with("classify", "return function(ev) syntax error here end\n");
    CHECK(fresh == NULL);
    policy_verdict v;
    classify_status(old, 401, &v);
    CHECK_EQ_STR(v.cls, "auth");
    CHECK_EQ_INT(policy_fallbacks(old), 0);
    policy_free(old);
}

/* ----------------------------------------------------- default numbers */

static void test_classify_default_numbers(void)
{
    policy_engine *pe = policy_new(NULL, load_err, sizeof load_err);
    CHECK(pe != NULL);
    struct { int status; int failover; const char *cls; double cd; } cases[] = {
        {401, 1, "auth", 20}, {403, 1, "auth", 20}, {404, 1, "unknown_endpoint", 20}, {405, 1, "unknown_endpoint", 20},
        {408, 1, "timeout", 20},
        {409, 1, "conflict", 20}, {429, 1, "rate_limit", -1}, {500, 1, "server", 30},
        {502, 1, "server", 30}, {503, 1, "server", 30}, {400, 0, "request", 0}, {422, 0, "request", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        policy_verdict v;
        classify_status(pe, cases[i].status, &v);
        CHECK_EQ_INT(v.failover, cases[i].failover);
        CHECK_EQ_STR(v.cls, cases[i].cls);
        CHECK(v.cooldown == cases[i].cd);
    }
    const char *quota[] = {"You've hit your usage limit", "usage_limit_reached", "Quota exceeded",
                           "INSUFFICIENT_QUOTA"};
    for (int i = 0; i < 4; i++) {
        policy_event ev = event(400);
        ev.body = quota[i];
        ev.body_len = strlen(quota[i]);
        policy_verdict v;
        policy_classify(pe, &ev, &v);
        CHECK_EQ_INT(v.failover, 1);
        CHECK_EQ_STR(v.cls, "quota");
        CHECK(v.cooldown == -1);
    }
    policy_event ev = event(400);
    ev.error_code = "account_deactivated";
    policy_verdict v;
    policy_classify(pe, &ev, &v);
    CHECK_EQ_INT(v.failover, 1);
    CHECK_EQ_STR(v.cls, "deactivated");
    CHECK_EQ_STR(v.state, ""); /* on a 400: a cooldown, not a hold */
    ev = event(401);
    ev.error_code = "account_deactivated";
    policy_classify(pe, &ev, &v);
    CHECK_EQ_STR(v.state, "account_deactivated"); /* the account refused for good: held */
    /* refusals waiting does not heal hold the account, in the shapes the upstreams send */
    struct { int status; const char *body, *code, *message, *state; } held[] = {
        {402, "{\"detail\":{\"code\":\"deactivated_workspace\"}}", "deactivated_workspace", NULL,
         "deactivated_workspace"},
        {403, "This workspace has been deactivated and can no longer be used.", NULL, NULL, "deactivated_workspace"},
        {403, "{\"detail\":{\"code\":\"invalid_workspace_selected\"}}", "invalid_workspace_selected", NULL,
         "workspace_denied"},
        {403, "{\"error\":{\"code\":\"unsupported_country_region_territory\",\"message\":\"Country, region, or "
              "territory not supported\",\"param\":null,\"type\":\"request_forbidden\"}}",
         "unsupported_country_region_territory", "Country, region, or territory not supported", "region_unsupported"},
        {401, NULL, NULL, "Workspace is not authorized in this region.", "region_unsupported"},
    };
    for (size_t i = 0; i < sizeof held / sizeof *held; i++) {
        ev = event(held[i].status);
        ev.body = held[i].body;
        ev.body_len = held[i].body ? strlen(held[i].body) : 0;
        ev.error_code = held[i].code;
        ev.error_message = held[i].message;
        policy_classify(pe, &ev, &v);
        CHECK_EQ_INT(v.action, VERDICT_FAILOVER);
        CHECK_EQ_STR(v.cls, held[i].state);
        CHECK_EQ_STR(v.state, held[i].state);
        CHECK(v.cooldown == 0);
        ev.status = 400; /* only an account-level status (401, 402, 403) holds */
        policy_classify(pe, &ev, &v);
        CHECK_EQ_STR(v.state, "");
    }
    ev = event(400);
    ev.error_code = "context_length_exceeded";
    policy_classify(pe, &ev, &v);
    CHECK_EQ_INT(v.failover, 0);
    ev = event(0);
    ev.network_error = 1;
    policy_classify(pe, &ev, &v);
    CHECK_EQ_STR(v.cls, "network");
    CHECK(v.cooldown == 20);
    ev = event(0);
    ev.timeout = 1;
    policy_classify(pe, &ev, &v);
    CHECK_EQ_STR(v.cls, "timeout");
    CHECK(v.cooldown == 20);
    ev = event(200);
    ev.in_stream = 1;
    ev.error_type = "usage_limit_reached";
    policy_classify(pe, &ev, &v);
    CHECK_EQ_INT(v.failover, 1);
    CHECK_EQ_STR(v.cls, "quota");
    ev.error_type = "invalid_request_error";
    ev.error_code = "content_policy_violation";
    policy_classify(pe, &ev, &v);
    CHECK_EQ_INT(v.failover, 0);
    /* the same-account retries */
    ev = event(502);
    ev.retries = 0;
    ev.random = 0.5;
    policy_classify(pe, &ev, &v);
    CHECK_EQ_INT(v.action, VERDICT_RETRY);
    CHECK(fabs(v.after - 0.51) < 1e-9);
    ev = event(429);
    ev.retries = 0;
    ev.retry_after = 3;
    ev.alternatives = 0;
    policy_classify(pe, &ev, &v);
    CHECK_EQ_INT(v.action, VERDICT_RETRY);
    CHECK(v.after == 3);
    ev.alternatives = 1;
    policy_classify(pe, &ev, &v);
    CHECK_EQ_INT(v.action, VERDICT_FAILOVER);
    ev = event(200);
    ev.not_answer = "content_type";
    policy_classify(pe, &ev, &v);
    CHECK_EQ_STR(v.cls, "bad_answer");
    CHECK_EQ_INT(v.failover, 1);
    ev = event(400);
    ev.error_code = "context_length_exceeded";
    ev.context_fallbacks = 1;
    policy_classify(pe, &ev, &v);
    CHECK_EQ_INT(v.action, VERDICT_CONTEXT_FALLBACK);
    CHECK_EQ_INT(policy_fallbacks(pe), 0);
    policy_free(pe);
}

static void test_cooldown_ladder_numbers(void)
{
    policy_engine *pe = policy_new(NULL, load_err, sizeof load_err);
    CHECK(pe != NULL);
    const double want[] = {45, 300, 1800, 7200, 7200};
    policy_state st = {.account_id = 1, .retry_after = -1};
    double now = 1700000000;
    for (int i = 0; i < 5; i++) {
        double s;
        int step;
        policy_cooldown(pe, &st, "rate_limit", now, &s, &step);
        CHECK(s == want[i]);
        CHECK_EQ_INT(step, i < 4 ? i + 1 : 4);
        st.ladder_step = step;
        st.last_429_at = now;
        now += 60;
    }
    double s;
    int step;
    st.last_429_at = now - 1801; /* over 30 min since the last 429: back to step 1 */
    policy_cooldown(pe, &st, "quota", now, &s, &step);
    CHECK(s == 45);
    CHECK_EQ_INT(step, 1);
    policy_state hint = {.account_id = 1, .retry_after = 600};
    policy_cooldown(pe, &hint, "rate_limit", now, &s, &step);
    CHECK(s == 600);
    policy_state fixed = {.account_id = 1, .ladder_step = 3, .last_429_at = now, .retry_after = -1};
    policy_cooldown(pe, &fixed, "server", now, &s, &step);
    CHECK(s == 30);
    CHECK_EQ_INT(step, 3);
    policy_cooldown(pe, &fixed, "network", now, &s, &step);
    CHECK(s == 20);
    CHECK_EQ_INT(policy_fallbacks(pe), 0);
    policy_free(pe);
}

static void test_guard_and_order_default_rules(void)
{
    policy_engine *pe = policy_new(NULL, load_err, sizeof load_err);
    CHECK(pe != NULL);
    policy_candidate g = {.id = 1, .kind = "chatgpt", .primary_used_pct = 95, .secondary_used_pct = -1};
    CHECK_EQ_INT(policy_guard(pe, &g), GUARD_RESERVE);
    g.primary_used_pct = 94.9;
    CHECK_EQ_INT(policy_guard(pe, &g), GUARD_NORMAL);
    g.secondary_used_pct = 90;
    CHECK_EQ_INT(policy_guard(pe, &g), GUARD_RESERVE);
    g.primary_used_pct = g.secondary_used_pct = -1;
    CHECK_EQ_INT(policy_guard(pe, &g), GUARD_NORMAL);

    policy_candidate c[4] = {
        {.id = 30, .kind = "chatgpt", .sort = 0, .success_rate = 1},
        {.id = 10, .kind = "api_key", .sort = 1, .success_rate = 1},
        {.id = 20, .kind = "aggregate", .sort = 2, .success_rate = 1},
        {.id = 40, .kind = "api_key", .sort = 3, .success_rate = 1, .reserve = 1},
    };
    size_t perm[4];
    policy_order_ctx ctx = {.strategy = "balanced", .rotation = "hybrid_rotation", .cursor = 10};
    CHECK_EQ_INT(policy_order(pe, c, 4, &ctx, perm), 4);
    CHECK(c[perm[0]].id == 30 && c[perm[1]].id == 10 && c[perm[2]].id == 20 && c[perm[3]].id == 40);
    ctx.rotation = "aggregate_api_rotation";
    CHECK_EQ_INT(policy_order(pe, c, 4, &ctx, perm), 1);
    CHECK(c[perm[0]].id == 20);
    ctx.rotation = "account_rotation";
    ctx.preferred = 40;
    CHECK_EQ_INT(policy_order(pe, c, 4, &ctx, perm), 3);
    CHECK(c[perm[0]].id == 40 && c[perm[1]].id == 30 && c[perm[2]].id == 10);
    CHECK_EQ_INT(policy_fallbacks(pe), 0);
    policy_free(pe);
}

/* ------------------------------------------- C defaults == Lua policies */

static uint32_t rnd_state = 12345;
static uint32_t rnd(uint32_t n)
{
    rnd_state = rnd_state * 1664525u + 1013904223u;
    return (rnd_state >> 8) % n;
}

static void test_c_defaults_match_lua_classify_and_cooldown(void)
{
    policy_engine *pe = policy_new(NULL, load_err, sizeof load_err);
    CHECK(pe != NULL);
    const int statuses[] = {0, 200, 201, 301, 400, 401, 402, 403, 404, 408, 409, 413, 422, 429, 499, 500, 503, 599, 600};
    const char *texts[] = {NULL, "You've hit your usage limit", "account_deactivated", "context_length_exceeded",
                           "rate_limit_exceeded", "server_error", "Quota Exceeded", "Overloaded", "fine", "the model is at capacity", "maximum context length",
                           "deactivated_workspace", "INVALID_WORKSPACE_SELECTED", "unsupported_country_region_territory",
                           "Workspace is not authorized in this region.", "workspace_access_denied",
                           "invalid_api_key", "Incorrect API key provided: sk-a***", "invalid x-api-key", "invalid_key"};
    int mismatches = 0;
    for (size_t s = 0; s < sizeof statuses / sizeof statuses[0]; s++)
        for (int flags = 0; flags < 8; flags++)
            for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++)
                for (int where = 0; where < 4; where++) {
                    policy_event ev = event(statuses[s]);
                    int extra = (int)rnd(72);
                    ev.retries = extra % 3;
                    ev.alternatives = (extra / 3) % 2;
                    ev.retry_after = (const double[]){-1, 0, 2, 5, 6, 3600}[(extra / 6) % 6];
                    ev.context_fallbacks = (extra / 36) % 2;
                    ev.not_answer = rnd(10) == 0 ? "empty_body" : NULL;
                    ev.random = rnd(1000) / 1000.0;
                    ev.after_output = rnd(4) == 0;
                    ev.delivered_chars = ev.after_output ? (long)rnd(3) * 20 : 0;
                    ev.tool_call = rnd(2);
                    ev.continuable = ev.after_output && rnd(2);
                    ev.endpoint = (const char *const[]){"/v1/chat/completions", "/v1/responses", NULL}[rnd(3)];
                    ev.account_kind = (const char *const[]){"api_key", "chatgpt", "aggregate", NULL}[rnd(4)];
                    ev.network_error = flags & 1;
                    ev.timeout = (flags >> 1) & 1;
                    ev.in_stream = (flags >> 2) & 1;
                    const char *x = texts[t];
                    if (where == 0 && x) {
                        ev.body = x;
                        ev.body_len = strlen(x);
                    }
                    if (where == 1)
                        ev.error_code = x;
                    if (where == 2)
                        ev.error_type = x;
                    if (where == 3)
                        ev.error_message = x;
                    policy_verdict a, b;
                    policy_classify(pe, &ev, &a);
                    policy_classify(NULL, &ev, &b);
                    if (a.action != b.action || a.failover != b.failover || strcmp(a.cls, b.cls) != 0 ||
                        a.cooldown != b.cooldown || fabs(a.after - b.after) > 1e-9 || strcmp(a.state, b.state) != 0) {
                        if (mismatches++ < 5)
                            fprintf(stderr, "  classify status=%d flags=%d text=%s where=%d: lua %s/%d c %s/%d\n",
                                    statuses[s], flags, x ? x : "-", where, a.cls, a.failover, b.cls, b.failover);
                    }
                }
    const char *classes[] = {"rate_limit", "quota", "server", "network", "timeout", "auth", "weird", ""};
    const double lasts[] = {0, -10, -1800, -1801, -100000};
    const double retries[] = {-1, 10, 100, 5000, 1e9};
    double now = 1700000000;
    /* windows: unknown, spent with a future reset, spent with a past reset, not spent */
    const double used[] = {-1, 100, 100, 80};
    const double resets[] = {0, 3000, -5, 7000};
    for (int step = 0; step <= 5; step++)
        for (int l = 0; l < 5; l++)
            for (int r = 0; r < 5; r++)
                for (int kw = 0; kw < 8 * 16; kw++) {
                    int k = kw % 8, wp = (kw / 8) % 4, ws = kw / 32;
                    policy_state st = {.account_id = 1, .ladder_step = step,
                                       .last_429_at = lasts[l] ? now + lasts[l] : 0, .retry_after = retries[r],
                                       .primary_used_pct = used[wp], .primary_reset_at = resets[wp] ? now + resets[wp] : 0,
                                       .secondary_used_pct = used[ws],
                                       .secondary_reset_at = resets[ws] ? now + 2 * resets[ws] : 0};
                    double sa, sb;
                    int pa, pb;
                    policy_cooldown(pe, &st, classes[k], now, &sa, &pa);
                    policy_cooldown(NULL, &st, classes[k], now, &sb, &pb);
                    if (sa != sb || pa != pb) {
                        if (mismatches++ < 10)
                            fprintf(stderr, "  cooldown step=%d last=%g retry=%g class=%s: lua %g/%d c %g/%d\n",
                                    step, lasts[l], retries[r], classes[k], sa, pa, sb, pb);
                    }
                }
    CHECK_EQ_INT(mismatches, 0);
    CHECK_EQ_INT(policy_fallbacks(pe), 0);
    policy_free(pe);
}

static void test_c_default_matches_lua_budget(void)
{
    policy_engine *pe = policy_new(NULL, load_err, sizeof load_err);
    CHECK(pe != NULL);
    const double usds[] = {0, 0.5, 5, 50};
    const double spents[] = {0, 0.49, 0.5, 4.99, 5, 5.01, 50, 1e6};
    int mismatches = 0;
    for (int u = 0; u < 4; u++)
        for (int sp = 0; sp < 8; sp++) {
            policy_budget b = {"key", "k", "month", usds[u], spents[sp], 0, 1, 0};
            mismatches += policy_budget_over(pe, &b) != policy_budget_over(NULL, &b);
        }
    CHECK_EQ_INT(mismatches, 0);
    CHECK_EQ_INT(policy_fallbacks(pe), 0);
    policy_free(pe);
}

static void test_c_default_matches_lua_first_token(void)
{
    policy_engine *pe = policy_new(NULL, load_err, sizeof load_err);
    CHECK(pe != NULL);
    const char *const endpoints[] = {"/v1/chat/completions", "/v1/responses", NULL};
    const char *const models[] = {"gpt-4o", "gpt-5", "GPT-5.1-Codex", "gpt-5-chat-latest", "o3-mini", "openai/o4",
                                  "o1/", "", "codex", "gpt-test", NULL};
    const char *const efforts[] = {NULL, "", "none", "minimal", "high", "None"};
    const char *const kinds[] = {"api_key", "chatgpt", NULL};
    int mismatches = 0, calls = 0;
    for (int e = 0; e < 3; e++)
        for (int m = 0; m < 11; m++)
            for (int r = 0; r < 6; r++)
                for (int k = 0; k < 3; k++) {
                    long kib = 1L << (calls % 13); /* 1 KiB .. 4 MiB */
                    policy_first_token ft = {endpoints[e], models[m], efforts[r], k & 1, kinds[k], kib};
                    policy_silence a = policy_silence_limits(pe, &ft), b = policy_silence_limits(NULL, &ft);
                    mismatches += a.first_token != b.first_token || a.after_output != b.after_output;
                    calls++;
                }
    CHECK(calls > 500);
    CHECK_EQ_INT(mismatches, 0);
    CHECK_EQ_INT(policy_fallbacks(pe), 0);
    policy_free(pe);
}

/* first_token may answer a number (no after-output limit: the idle limit
 * alone) or {seconds, after_output}; an after_output out of range fails the load. */
static void test_first_token_answers_a_number_or_a_table_with_after_output(void)
{
    policy_first_token ft = {"/v1/chat/completions", "gpt-4o", NULL, 1, "api_key", 1};
    policy_engine *pe = engine_with("first_token", "return { version = 1, first_token = function(r) return 9 end }");
    CHECK(pe != NULL);
    policy_silence s = policy_silence_limits(pe, &ft);
    CHECK(s.first_token == 9 && s.after_output == 0);
    policy_free(pe);
    pe = engine_with("first_token",
                     "return { version = 1, first_token = function(r) return { seconds = 9, after_output = 4 } end }");
    CHECK(pe != NULL);
    s = policy_silence_limits(pe, &ft);
    CHECK(s.first_token == 9 && s.after_output == 4);
    CHECK(policy_first_token_limit(pe, &ft) == 9);
    policy_free(pe);
    const char *bad[] = {"{ seconds = 9, after_output = 0 }", "{ seconds = 9, after_output = 4000 }",
                         "{ seconds = 9, after_output = 'x' }", "{ after_output = 4 }"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char src[256];
        snprintf(src, sizeof src, "return { version = 1, first_token = function(r) return %s end }", bad[i]);
        pe = engine_with("first_token", src);
        CHECK(pe == NULL);
        CHECK(strstr(load_err, "first_token") != NULL);
        policy_free(pe);
    }
}

/* The bundled order.lua, as a file of its own (not byte-identical to the
 * bundled one, so the engine always calls it: see policy_order). */
static policy_engine *engine_with_order_copy(void)
{
    const embedded_file *f = embedded_find("policies/order.lua");
    CHECK(f != NULL);
    char *src = malloc(f->len + 32);
    memcpy(src, f->data, f->len);
    strcpy(src + f->len, "\n-- a copy\n");
    policy_engine *pe = engine_with("order", src);
    free(src);
    return pe;
}

static void test_c_defaults_match_lua_guard_and_order(void)
{
    policy_engine *pe = engine_with_order_copy();
    CHECK(pe != NULL);
    const double pcts[] = {-1, 0, 50, 89.9, 90, 94.9, 95, 100};
    int mismatches = 0;
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 8; b++) {
            policy_candidate c = {.id = 1, .kind = "chatgpt", .primary_used_pct = pcts[a],
                                  .secondary_used_pct = pcts[b]};
            mismatches += policy_guard(pe, &c) != policy_guard(NULL, &c);
        }
    const char *kinds[] = {"api_key", "chatgpt", "aggregate", NULL};
    const char *strategies[] = {"ordered", "balanced", "weighted", NULL};
    const char *rotations[] = {"account_rotation", "aggregate_api_rotation", "hybrid_rotation",
                               "hybrid_aggregate_first_rotation", NULL, "bogus"};
    const double rates[] = {0.3, 0.5, 0.9, 0.93, 0.96, 1};
    for (int iter = 0; iter < 3000; iter++) {
        policy_candidate c[8];
        size_t n = rnd(9);
        int used[24] = {0};
        for (size_t i = 0; i < n; i++) {
            int id;
            do
                id = 1 + (int)rnd(22);
            while (used[id]);
            used[id] = 1;
            c[i] = (policy_candidate){.id = id, .name = "x", .kind = kinds[rnd(4)], .sort = (int)rnd(3),
                                      .updated_at = rnd(3), .primary_used_pct = -1, .secondary_used_pct = -1,
                                      .success_rate = rates[rnd(6)], .latency_ema_ms = 200.0 * rnd(4),
                                      .health_age_s = 30.0 * rnd(4),
                                      .inflight = (int)rnd(3), .reserve = rnd(4) == 0,
                                      .weight = (int)rnd(4), .current_weight = (double)rnd(7) - 3,
                                      .translated = rnd(3) == 0, .unlisted = rnd(4) == 0};
        }
        policy_order_ctx ctx = {.strategy = strategies[rnd(4)], .rotation = rotations[rnd(6)],
                                .cursor = rnd(24), .preferred = rnd(3) ? 0 : rnd(24),
                                .seed = rnd(1u << 30) * 4 + rnd(4)};
        size_t pa[8], pb[8];
        size_t na = policy_order(pe, c, n, &ctx, pa), nb = policy_order(NULL, c, n, &ctx, pb);
        int same = na == nb;
        for (size_t i = 0; same && i < na; i++)
            same = c[pa[i]].id == c[pb[i]].id;
        if (!same && mismatches++ < 5) {
            fprintf(stderr, "  order iter %d (%s/%s cursor %lld pref %lld seed %u):", iter,
                    ctx.strategy ? ctx.strategy : "-", ctx.rotation ? ctx.rotation : "-",
                    (long long)ctx.cursor, (long long)ctx.preferred, ctx.seed);
            for (size_t i = 0; i < na; i++)
                fprintf(stderr, " %lld", (long long)c[pa[i]].id);
            fprintf(stderr, " | c:");
            for (size_t i = 0; i < nb; i++)
                fprintf(stderr, " %lld", (long long)c[pb[i]].id);
            fprintf(stderr, "\n");
        }
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK_EQ_INT(policy_fallbacks(pe), 0);
    policy_free(pe);
}

static void test_bundled_order_runs_as_its_c_mirror_and_a_policy_of_its_own_is_always_asked(void)
{
    policy_engine *bundled = policy_new(NULL, load_err, sizeof load_err);
    policy_engine *copy = engine_with_order_copy();
    policy_engine *drops = engine_with("order", "return function(c, ctx) return {} end\n");
    CHECK(bundled != NULL && copy != NULL && drops != NULL);
    const char *kinds[] = {"api_key", "chatgpt", "aggregate"};
    const char *strategies[] = {"ordered", "balanced", "weighted", NULL};
    const char *rotations[] = {"account_rotation", "aggregate_api_rotation", "hybrid_rotation",
                               "hybrid_aggregate_first_rotation", NULL, "bogus"};
    int mismatches = 0, kept = 0, left_out = 0;
    for (int k = 0; k < 3; k++)
        for (int s = 0; s < 4; s++)
            for (int r = 0; r < 6; r++)
                for (int pref = 0; pref < 2; pref++) {
                    policy_candidate c = {.id = 5, .name = "x", .kind = kinds[k], .primary_used_pct = -1,
                                          .secondary_used_pct = -1, .success_rate = 0.4, .reserve = pref,
                                          .weight = 1};
                    policy_order_ctx ctx = {.strategy = strategies[s], .rotation = rotations[r],
                                            .cursor = 5, .preferred = pref ? 5 : 0, .seed = 11};
                    size_t pa[1] = {9}, pb[1] = {9}, pc[1];
                    size_t na = policy_order(bundled, &c, 1, &ctx, pa);
                    size_t nb = policy_order(copy, &c, 1, &ctx, pb);
                    mismatches += na != nb || (na == 1 && pa[0] != pb[0]);
                    kept += na == 1;
                    left_out += na == 0;
                    /* a policy of its own is asked even about one candidate */
                    CHECK_EQ_INT(policy_order(drops, &c, 1, &ctx, pc), 0);
                }
    CHECK_EQ_INT(mismatches, 0);
    CHECK(kept > 0 && left_out > 0); /* the rotation leaves some kinds out */
    CHECK_EQ_INT(policy_fallbacks(bundled) + policy_fallbacks(copy) + policy_fallbacks(drops), 0);
    policy_free(bundled);
    policy_free(copy);
    policy_free(drops);
}

/* order.lua's max_attempts / max_seconds bound one request; absent: the
 * built-in numbers; out of range or of the wrong type: the file is refused
 * (a typo must not silently become the default). */
static void test_request_bounds_come_from_order_lua_and_bad_ones_are_refused(void)
{
    int a = 0;
    double secs = 0;
    policy_request_bounds(NULL, &a, &secs);
    CHECK_EQ_INT(a, POLICY_MAX_ATTEMPTS_DEFAULT);
    CHECK(secs == POLICY_MAX_SECONDS_DEFAULT);
    policy_engine *pe = policy_new(NULL, load_err, sizeof load_err);
    CHECK(pe != NULL);
    policy_request_bounds(pe, &a, &secs);
    CHECK_EQ_INT(a, 16); /* the bundled order.lua's numbers */
    CHECK(secs == 120);
    policy_free(pe);
    pe = engine_with("order", "return {version = 1, order = function(c, ctx) return {} end,"
                              " max_attempts = 3, max_seconds = 2.5}\n");
    CHECK(pe != NULL);
    policy_request_bounds(pe, &a, &secs);
    CHECK_EQ_INT(a, 3);
    CHECK(secs == 2.5);
    policy_free(pe);
    pe = engine_with("order", "return function(c, ctx) return {} end\n");
    CHECK(pe != NULL);
    policy_request_bounds(pe, &a, &secs);
    CHECK_EQ_INT(a, POLICY_MAX_ATTEMPTS_DEFAULT);
    CHECK(secs == POLICY_MAX_SECONDS_DEFAULT);
    policy_free(pe);
    refused("order", "return {order = function() return {} end, max_attempts = 0}\n", "/order.lua", "max_attempts");
    refused("order", "return {order = function() return {} end, max_attempts = 1.5}\n", "/order.lua", "max_attempts");
    refused("order", "return {order = function() return {} end, max_attempts = '8'}\n", "/order.lua", "max_attempts");
    refused("order", "return {order = function() return {} end, max_seconds = 0}\n", "/order.lua", "max_seconds");
    refused("order", "return {order = function() return {} end, max_seconds = 1e9}\n", "/order.lua", "max_seconds");
    refused("order", "return {order = function() return {} end, max_seconds = 0/0}\n", "/order.lua", "max_seconds");
}

/* A policy order of its own over 5 000 candidates is asked about the
 * first 256 of the built-in order (a hook over every one would pass its
 * time limit on every request and fall back anyway). */
static void test_a_policy_order_over_a_huge_pool_sees_a_window_and_never_falls_back(void)
{
    policy_engine *pe = engine_with("order",
        "return function(c, ctx)\n"
        "  if #c > 256 then error('saw ' .. #c) end\n"
        "  local ids = {}\n"
        "  for i = #c, 1, -1 do ids[#ids + 1] = c[i].id end\n"
        "  return ids\n"
        "end\n");
    CHECK(pe != NULL);
    enum { N = 5000 };
    policy_candidate *c = calloc(N, sizeof *c);
    size_t *perm = calloc(N, sizeof *perm), *def = calloc(N, sizeof *def);
    for (int i = 0; i < N; i++)
        c[i] = (policy_candidate){.id = i + 1, .name = "x", .kind = "api_key", .sort = i % 7, .updated_at = 1,
                                  .primary_used_pct = -1, .secondary_used_pct = -1, .success_rate = 1, .weight = 1};
    policy_order_ctx ctx = {.strategy = "ordered", .rotation = "account_rotation", .seed = 7};
    size_t k = policy_order(pe, c, N, &ctx, perm);
    size_t kd = policy_order(NULL, c, N, &ctx, def);
    CHECK_EQ_INT((int)k, 256);
    CHECK_EQ_INT((int)kd, N);
    int same = 1;
    for (size_t i = 0; i < k; i++) /* the hook reversed the built-in order's first 256 */
        same &= perm[i] == def[255 - i];
    CHECK(same);
    CHECK_EQ_INT((int)policy_fallbacks(pe), 0);
    free(c);
    free(perm);
    free(def);
    policy_free(pe);
}

static void test_c_default_matches_lua_breaker(void)
{
    policy_engine *pe = policy_new(NULL, load_err, sizeof load_err);
    CHECK(pe != NULL);
    const char *kinds[] = {"api_key", "chatgpt", "aggregate"};
    int mismatches = 0;
    for (int state = 0; state < 3; state++)
        for (int cf = 0; cf < 7; cf++)
            for (int cs = 0; cs < 4; cs++)
                for (int wr = 0; wr <= 20; wr++)
                    for (int wf = 0; wf <= wr; wf += 1 + wr / 8)
                        for (int ok = 0; ok < 2; ok++) {
                            policy_breaker_state st = {.account_id = 1, .kind = kinds[wr % 3], .state = state,
                                                       .consecutive_failures = cf, .consecutive_successes = cs,
                                                       .window_requests = wr, .window_failures = wf};
                            int a, b;
                            double sa, sb;
                            policy_breaker(pe, &st, ok, 1700000000, &a, &sa);
                            policy_breaker(NULL, &st, ok, 1700000000, &b, &sb);
                            if ((a != b || sa != sb) && mismatches++ < 5)
                                fprintf(stderr, "  breaker state=%d cf=%d cs=%d wr=%d wf=%d ok=%d: lua %d/%g c %d/%g\n",
                                        state, cf, cs, wr, wf, ok, a, sa, b, sb);
                        }
    CHECK_EQ_INT(mismatches, 0);
    /* the default numbers */
    policy_breaker_state st = {.state = BREAKER_CLOSED, .consecutive_failures = 4, .window_requests = 4,
                               .window_failures = 4};
    int s;
    double secs;
    policy_breaker(pe, &st, 0, 0, &s, &secs);
    CHECK_EQ_INT(s, BREAKER_OPEN);
    CHECK(secs == 60);
    st.consecutive_failures = 3;
    policy_breaker(pe, &st, 0, 0, &s, &secs);
    CHECK_EQ_INT(s, BREAKER_CLOSED);
    CHECK_EQ_INT(policy_fallbacks(pe), 0);
    policy_free(pe);
}

static void test_many_calls_do_not_grow_or_fail(void)
{
    policy_engine *pe = policy_new(NULL, load_err, sizeof load_err);
    CHECK(pe != NULL);
    char body[16384];
    memset(body, 'a', sizeof body);
    for (int i = 0; i < 3000; i++) {
        policy_event ev = event(400 + i % 200);
        ev.body = body;
        ev.body_len = sizeof body;
        policy_verdict v;
        policy_classify(pe, &ev, &v);
    }
    CHECK_EQ_INT(policy_fallbacks(pe), 0);
    policy_free(pe);
}

/* ------------------------------------------------------------------ alert */

static policy_alert_event alert_event(const char *kind, const char *url)
{
    policy_alert_event ev = {kind, "k1", "key_refused", "account k1 is held: \"quoted\" – é", url, 1700000000};
    return ev;
}

static void alert_free_all(policy_alert_post *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        policy_alert_post_free(&p[i]);
}

static void test_c_default_matches_lua_alert(void)
{
    policy_engine *pe = policy_new(NULL, load_err, sizeof load_err);
    CHECK(pe != NULL);
    const char *urls[] = {"", "https://hooks.example/T/B/x", "http://127.0.0.1:9/a?b=c"};
    const char *kinds[] = {"account_held", "pool_exhausted", "db_degraded", ""};
    for (size_t u = 0; u < 3; u++)
        for (size_t k = 0; k < 4; k++) {
            policy_alert_event ev = alert_event(kinds[k], urls[u]);
            policy_alert_post a[POLICY_ALERT_POSTS], b[POLICY_ALERT_POSTS];
            size_t na = policy_alert(pe, &ev, a), nb = policy_alert(NULL, &ev, b);
            CHECK_EQ_INT(na, u == 0 ? 0 : 1);
            CHECK_EQ_INT(na, nb);
            for (size_t i = 0; i < na && i < nb; i++) {
                CHECK_EQ_STR(a[i].url, b[i].url);
                CHECK_EQ_STR(a[i].body, b[i].body);
                CHECK_EQ_STR(a[i].headers, b[i].headers);
                CHECK_EQ_INT(a[i].body_len, strlen(a[i].body));
            }
            if (na)
                CHECK_EQ_STR(a[0].body, "{\"text\":\"switchyard: account k1 is held: \\\"quoted\\\" – é\"}");
            alert_free_all(a, na);
            alert_free_all(b, nb);
        }
    CHECK_EQ_INT(policy_fallbacks(pe), 0);
    policy_free(pe);
}

static void test_an_alert_policy_of_its_own_posts_lists_strings_and_headers(void)
{
    policy_engine *pe = engine_with("alert",
        "return function(ev)\n"
        "  if ev.kind == 'two' then return {\n"
        "    { url = 'https://a.example/x', body = 'plain text', headers = { ['X-Token-Name'] = 'ops' } },\n"
        "    { url = 'http://b.example/y', body = { list = { 1, 2.5, true, cjson.null }, nested = { a = {} } } } }\n"
        "  end\n"
        "  if ev.kind == 'none' then return nil end\n"
        "  return { url = 'https://c.example/z' }\n"
        "end\n");
    CHECK(pe != NULL);
    policy_alert_post p[POLICY_ALERT_POSTS];
    policy_alert_event ev = alert_event("two", "");
    size_t n = policy_alert(pe, &ev, p);
    CHECK_EQ_INT(n, 2);
    if (n == 2) {
        CHECK_EQ_STR(p[0].url, "https://a.example/x");
        CHECK_EQ_STR(p[0].body, "plain text");
        CHECK_EQ_STR(p[0].headers, "X-Token-Name: ops\n");
        CHECK_EQ_STR(p[1].url, "http://b.example/y");
        /* key order is Lua's: either is JSON of the same object */
        CHECK(strcmp(p[1].body, "{\"list\":[1,2.5,true,null],\"nested\":{\"a\":{}}}") == 0 ||
              strcmp(p[1].body, "{\"nested\":{\"a\":{}},\"list\":[1,2.5,true,null]}") == 0);
        CHECK_EQ_STR(p[1].headers, "");
    }
    alert_free_all(p, n);
    ev = alert_event("none", "https://hooks.example/x");
    CHECK_EQ_INT(policy_alert(pe, &ev, p), 0);
    ev = alert_event("one", "");
    n = policy_alert(pe, &ev, p);
    CHECK_EQ_INT(n, 1);
    if (n == 1)
        CHECK(p[0].body_len == 0 && strcmp(p[0].body, "") == 0);
    alert_free_all(p, n);
    CHECK_EQ_INT(policy_fallbacks(pe), 0);
    policy_free(pe);
}

static void test_garbage_alert_results_fall_back_to_the_default(void)
{
    /* each answers the self-check's events with nil, and garbage for kind "x" */
    const char *bad[] = {
        "42",
        "{ url = 'ftp://a.example/' }",
        "{ url = 'https://' }",
        "{ url = 'https://a.example/ x' }",
        "{ url = 'https://a.example/', body = 12 }",
        "{ url = 'https://a.example/', body = { [1] = 'a', b = 'c' } }",
        "{ url = 'https://a.example/', body = { [2] = 'a' } }",
        "{ url = 'https://a.example/', body = { f = print } }",
        "{ url = 'https://a.example/', body = { n = 0/0 } }",
        "{ url = 'https://a.example/', body = string.rep('x', 20000) }",
        "{ url = 'https://a.example/', body = { string.rep('x', 9000), string.rep('y', 9000) } }",
        "(function() local t = {} local c = t for i = 1, 40 do c.a = {} c = c.a end "
        "return { url = 'https://a.example/', body = t } end)()",
        "{ url = 'https://a.example/', headers = { Host = 'evil' } }",
        "{ url = 'https://a.example/', headers = { ['X-A'] = 'a\\r\\nX-B: b' } }",
        "{ url = 'https://a.example/', headers = { ['X A'] = 'b' } }",
        "{ url = 'https://a.example/', headers = 'X-A: b' }",
        "{ {url = 'https://a.example/'}, {url = 'https://a.example/'}, {url = 'https://a.example/'}, "
        "{url = 'https://a.example/'}, {url = 'https://a.example/'} }",
        "{ {url = 'https://a.example/'}, 7 }",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char src[1024];
        snprintf(src, sizeof src, "return function(ev)\n  if ev.kind ~= 'x' then return nil end\n  return %s\nend\n",
                 bad[i]);
        policy_engine *pe = engine_with("alert", src);
        CHECK(pe != NULL);
        if (!pe) {
            fprintf(stderr, "  refused: %s\n", load_err);
            continue;
        }
        policy_alert_post p[POLICY_ALERT_POSTS];
        policy_alert_event ev = alert_event("x", "https://hooks.example/d");
        size_t n = policy_alert(pe, &ev, p);
        if (policy_fallbacks(pe) != 1 || n != 1 || strcmp(p[0].url, "https://hooks.example/d") != 0) {
            fprintf(stderr, "  not refused: %s\n", bad[i]);
            CHECK(0);
        }
        alert_free_all(p, n);
        policy_free(pe);
    }
}

int main(void)
{
    log_set_level(LOG_ERROR);
    RUN(test_embedded_engine_loads_and_decides);
    RUN(test_engine_loads_from_a_dir);
    RUN(test_bare_function_and_table_forms_both_load);
    RUN(test_null_engine_uses_builtin_defaults);
    RUN(test_builtin_classify_marks_an_unserved_model_without_cooldown);
    RUN(test_infinite_loop_policy_falls_back_and_engine_survives);
    RUN(test_pcall_cannot_swallow_the_instruction_limit);
    RUN(test_memory_bomb_falls_back_with_nomem);
    RUN(test_long_c_calls_are_stopped_by_the_time_limit);
    RUN(test_c_calls_with_unbounded_work_are_refused);
    RUN(test_slow_top_level_code_is_refused);
    RUN(test_c_side_loops_are_bounded);
    RUN(test_sandbox_hides_io_os_require_load_debug);
    RUN(test_calling_io_os_execute_require_or_load_falls_back);
    RUN(test_policies_do_not_share_helpers);
    RUN(test_garbage_classify_results_fall_back);
    RUN(test_garbage_cooldown_results_fall_back);
    RUN(test_garbage_guard_results_fall_back);
    RUN(test_order_rejects_unknown_duplicate_and_malformed_ids);
    RUN(test_broken_files_are_refused_naming_file_and_line);
    RUN(test_failed_reload_keeps_the_old_engine);
    RUN(test_classify_default_numbers);
    RUN(test_cooldown_ladder_numbers);
    RUN(test_guard_and_order_default_rules);
    RUN(test_c_defaults_match_lua_classify_and_cooldown);
    RUN(test_c_defaults_match_lua_guard_and_order);
    RUN(test_bundled_order_runs_as_its_c_mirror_and_a_policy_of_its_own_is_always_asked);
    RUN(test_request_bounds_come_from_order_lua_and_bad_ones_are_refused);
    RUN(test_a_policy_order_over_a_huge_pool_sees_a_window_and_never_falls_back);
    RUN(test_c_default_matches_lua_breaker);
    RUN(test_c_default_matches_lua_budget);
    RUN(test_c_default_matches_lua_first_token);
    RUN(test_c_default_matches_lua_alert);
    RUN(test_an_alert_policy_of_its_own_posts_lists_strings_and_headers);
    RUN(test_garbage_alert_results_fall_back_to_the_default);
    RUN(test_first_token_answers_a_number_or_a_table_with_after_output);
    RUN(test_many_calls_do_not_grow_or_fail);
    return check_summary();
}
