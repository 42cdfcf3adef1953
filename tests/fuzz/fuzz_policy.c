/* fuzz_policy.c: policy result conversion. Hooks that answer with whatever
 * Lua value the input decodes to (JSON through cjson: tables, strings,
 * numbers up to inf, cjson.null), for each of the five hooks: the engine
 * must never crash, and what it hands back is always in range (a valid
 * class and cooldown, a ladder step 0..1000, a permutation of candidates, a
 * breaker state with its open seconds). */
#include "fuzz_common.h"
#include "policy/policy.h"
#include <string.h>
#include <unistd.h>

static policy_engine *pe;

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    FUZZ_CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char dir[] = "/tmp/sy_fuzz_policy_XXXXXX";
    FUZZ_CHECK(mkdtemp(dir) != NULL);
    /* ordinary answers for the self-check; the fuzzed value behind a marker */
    write_file(dir, "classify.lua",
               "return function(ev)\n"
               "  if ev.status == 599 then return cjson.decode(ev.body) end\n"
               "  return { action = 'failover', class = 'server', cooldown = 30 }\n"
               "end\n");
    write_file(dir, "cooldown.lua",
               "return function(state, class, now)\n"
               "  if class:sub(1, 5) == 'fuzz:' then\n"
               "    local v = cjson.decode(class:sub(6))\n"
               "    if type(v) == 'table' then return v[1], v[2] end\n"
               "    return v\n"
               "  end\n"
               "  return 20, state.ladder_step\n"
               "end\n");
    write_file(dir, "guard.lua",
               "return function(account)\n"
               "  if account.name:sub(1, 5) == 'fuzz:' then return cjson.decode(account.name:sub(6)) end\n"
               "  return 'normal'\n"
               "end\n");
    write_file(dir, "order.lua",
               "return function(candidates, ctx)\n"
               "  if ctx.model and ctx.model:sub(1, 5) == 'fuzz:' then return cjson.decode(ctx.model:sub(6)) end\n"
               "  local ids = {}\n"
               "  for i, c in ipairs(candidates) do ids[i] = c.id end\n"
               "  return ids\n"
               "end\n");
    write_file(dir, "breaker.lua",
               "return function(st, outcome, now)\n"
               "  if st.kind:sub(1, 5) == 'fuzz:' then\n"
               "    local v = cjson.decode(st.kind:sub(6))\n"
               "    if type(v) == 'table' then return v[1], v[2] end\n"
               "    return v\n"
               "  end\n"
               "  return 'closed'\n"
               "end\n");
    char err[512];
    pe = policy_new(dir, err, sizeof err);
    static const char *const files[] = {"classify.lua", "cooldown.lua", "guard.lua", "order.lua", "breaker.lua"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) { /* loaded: the directory is no longer needed */
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    if (!pe) {
        fprintf(stderr, "fuzz_policy: %s\n", err);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    if (n < 1 || n > 4096)
        return 0;
    char text[4200];
    snprintf(text, sizeof text, "fuzz:%.*s", (int)(n - 1), (const char *)data + 1);
    size_t len = strlen(text);
    switch (data[0] % 5) {
    case 0: {
        policy_event ev = {.status = 599, .body = text + 5, .body_len = len - 5, .retry_after = -1};
        policy_verdict v;
        policy_classify(pe, &ev, &v);
        size_t cl = strlen(v.cls);
        FUZZ_CHECK(cl >= 1 && cl < sizeof v.cls);
        FUZZ_CHECK(v.cooldown == -1 || (v.cooldown >= 0 && v.cooldown <= 2592000));
        FUZZ_CHECK(v.failover == 0 || v.failover == 1);
        break;
    }
    case 1: {
        policy_state st = {.account_id = 1, .ladder_step = 2, .retry_after = -1};
        double secs = -5;
        int step = -5;
        policy_cooldown(pe, &st, text, 1.7e9, &secs, &step);
        FUZZ_CHECK(secs >= 0 && secs <= 2592000);
        FUZZ_CHECK(step >= 0 && step <= 1000);
        break;
    }
    case 2: {
        policy_candidate c = {.id = 5, .name = text, .kind = "api_key", .success_rate = 1,
                              .primary_used_pct = -1, .secondary_used_pct = -1};
        int g = policy_guard(pe, &c);
        FUZZ_CHECK(g == GUARD_NORMAL || g == GUARD_RESERVE || g == GUARD_EXCLUDE);
        break;
    }
    case 3: {
        policy_breaker_state st = {.account_id = 1, .kind = text, .state = BREAKER_HALF_OPEN,
                                   .consecutive_failures = 1, .window_requests = 1, .window_failures = 1};
        int state = -1;
        double secs = -1;
        policy_breaker(pe, &st, 0, 1.7e9, &state, &secs);
        FUZZ_CHECK(state == BREAKER_CLOSED || state == BREAKER_OPEN || state == BREAKER_HALF_OPEN);
        FUZZ_CHECK(secs >= 0 && secs <= 2592000);
        FUZZ_CHECK(state == BREAKER_OPEN || secs == 0);
        break;
    }
    default: {
        policy_candidate c[3] = {
            {.id = 1, .name = "a", .kind = "api_key", .success_rate = 1, .primary_used_pct = -1},
            {.id = 2, .name = "b", .kind = "chatgpt", .success_rate = 1, .primary_used_pct = -1},
            {.id = 3, .name = "c", .kind = "aggregate", .success_rate = 1, .primary_used_pct = -1},
        };
        policy_order_ctx ctx = {.strategy = "ordered", .rotation = "account_rotation", .model = text};
        size_t perm[3] = {9, 9, 9};
        size_t m = policy_order(pe, c, 3, &ctx, perm);
        FUZZ_CHECK(m <= 3);
        int seen[3] = {0, 0, 0};
        for (size_t i = 0; i < m; i++) {
            FUZZ_CHECK(perm[i] < 3 && !seen[perm[i]]);
            seen[perm[i]] = 1;
        }
    }
    }
    return 0;
}
