/* fuzz_match.c: the sandbox's metered pattern functions on any pattern and
 * subject: errors are Lua errors (never a crash), every call ends within
 * its step budget. */
#include "fuzz_common.h"
#include "policy/policy_match.h"
#include <lauxlib.h>
#include <lualib.h>
#include <string.h>

static lua_State *L;
static match_meter meter;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    L = luaL_newstate();
    luaL_openlibs(L);
    meter.limit = 200000;
    lua_newtable(L);
    match_install(L, &meter);
    lua_setglobal(L, "m");
    int rc = luaL_dostring(L,
        "function run(op, s, p, r)\n"
        "  if op == 0 then return m.find(s, p) end\n"
        "  if op == 1 then return m.find(s, p, -3, true) end\n"
        "  if op == 2 then return m.match(s, p, 2) end\n"
        "  if op == 3 then local n = 0 for a in m.gmatch(s, p) do n = n + 1 end return n end\n"
        "  if op == 4 then return m.gsub(s, p, r) end\n"
        "  if op == 5 then return m.gsub(s, p, { a = 'b' }, 3) end\n"
        "  return m.gsub(s, p, function(...) return select('#', ...) .. '' end)\n"
        "end\n");
    FUZZ_CHECK(rc == LUA_OK);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    if (n < 2 || n > 2048)
        return 0;
    const char *rest = (const char *)data + 1;
    size_t left = n - 1;
    const char *nul = memchr(rest, '\0', left < 64 ? left : 64);
    size_t lp = nul ? (size_t)(nul - rest) : (left < 16 ? left : 16);
    const char *subject = rest + lp + (nul ? 1 : 0);
    size_t ls = left - lp - (nul ? 1 : 0);
    meter.steps = 0;
    meter.exhausted = 0;
    lua_settop(L, 0);
    lua_getglobal(L, "run");
    lua_pushinteger(L, data[0] % 7);
    lua_pushlstring(L, subject, ls);
    lua_pushlstring(L, rest, lp);
    lua_pushlstring(L, rest, lp); /* the pattern text doubles as a replacement string */
    lua_pcall(L, 4, LUA_MULTRET, 0);
    FUZZ_CHECK(meter.steps <= meter.limit + 2048);
    lua_settop(L, 0);
    return 0;
}
