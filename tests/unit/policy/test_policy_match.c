/* test_policy_match.c: the sandbox's metered pattern functions
 * (policy_match.c) give the same results and the same errors as Lua 5.4's
 * own string.find/match/gmatch/gsub on a corpus of subjects, patterns and
 * arguments, and they stop at their step limit where Lua's would run on. */
#include "check.h"
#include "policy/policy_match.h"
#include <lauxlib.h>
#include <lualib.h>

/* Runs the differential script with `real` (Lua's string table) and `mine`
 * (a copy with the metered functions) as globals; returns its report. */
static const char *const compare_script =
    "local cases = {\n"
    "  {'hello world', 'o'}, {'hello world', 'o', 6}, {'hello world', 'l+'}, {'hello', 'l*'},\n"
    "  {'hello', 'x*'}, {'hello', '^h'}, {'hello', '^e'}, {'hello', 'o$'}, {'hello', 'l$'},\n"
    "  {'a$b', '$b'}, {'a$b', 'a$'}, {'hello world', '(o)(r)'}, {'hello', '()ll()'},\n"
    "  {'key = value', '(%w+)%s*=%s*(%w+)'}, {'THE (quick) fox', '%((%a+)%)'},\n"
    "  {'f(a(b)c)d', '%b()'}, {'f(a(b)c', '%b()'}, {'THE (quick) fox', '%f[%a]%a+'},\n"
    "  {'hello', '[aeiou]'}, {'hello', '[^aeiou]+'}, {'x]y', '[]]'}, {'x-y', '[a%-]'},\n"
    "  {'a-z', '[%a-]+'}, {'0x1F', '%x+', 3}, {'abc', '.-'}, {'abc', '.-c'}, {'abc', 'a?b?c?d?'},\n"
    "  {'aaa', 'a-b'}, {'abab', '(ab)%1'}, {'abcabc', '(a(b)c)%1'}, {'', ''}, {'', '.'},\n"
    "  {'abc', '', 10}, {'abc', '', 4}, {'abc', 'c', -1}, {'abc', 'a', -10}, {'abc', 'b', 0},\n"
    "  {'a.b', '.', 1, true}, {'a.b', '%.'}, {'a+b', '+', 1, true}, {'x%y', '%%'},\n"
    "  {'a\\0b', '\\0'}, {'a\\0b', '%z'}, {'a\\0b', '[\\0]'}, {'\\200\\201', '[\\128-\\255]+'},\n"
    "  {'  trim  ', '^%s*(.-)%s*$'}, {'CamelCaseWord', '%u%l+'}, {'1,22,333', '%d+'},\n"
    "  {'abc', '%'}, {'abc', '[a'}, {'abc', '(a'}, {'abc', 'a)'}, {'abc', '%1'}, {'abc', '(a)%2'},\n"
    "  {'abc', '%f'}, {'abc', '%fa'}, {'abc', '%b'}, {'abc', '%bx'}, {'abc', '[%'}, {'abc', '[]'},\n"
    "  {'abc', '[^]'}, {'abc', '(()'}, {'abc', '%g+'}, {'a\\tb\\nc', '%c'}, {'a,b;c', '%p'},\n"
    "  {'Hello', '%L+'}, {'Hello', '%U'}, {'x1y2', '%D+'}, {'a b', '%S+'}, {'a_b9', '%W'},\n"
    "  {'12ab', '%X+'}, {'aaa', 'a-$'}, {'[x]', '%[(.-)%]'}, {'xyz', 'y?z'}, {'xyz', 'q?z'},\n"
    "  {string.rep('(', 40) .. string.rep(')', 40), '%b()'},\n"
    "  {'abc', string.rep('(', 33) .. 'a' .. string.rep(')', 33)},\n"
    "  {'aaabaaa', 'b()a+%1'}, {'a1a', '()a%1'},\n" /* back-reference to a position capture */
    "}\n"
    "local function pack(ok, ...) return { ok = ok, n = select('#', ...), ... } end\n"
    "local function strip(msg) return (tostring(msg):gsub('^[^:]*:%d+: ', '')) end\n"
    "local function same(a, b)\n"
    "  if a.ok ~= b.ok then return false end\n"
    "  if not a.ok then return strip(a[1]) == strip(b[1]) end\n"
    "  if a.n ~= b.n then return false end\n"
    "  for i = 1, a.n do if a[i] ~= b[i] or math.type(a[i]) ~= math.type(b[i]) then return false end end\n"
    "  return true\n"
    "end\n"
    "local function show(r)\n"
    "  local t = {} for i = 1, r.n do t[#t + 1] = tostring(r[i]) end\n"
    "  return (r.ok and 'ok ' or 'error ') .. table.concat(t, ',')\n"
    "end\n"
    "local function gm(lib, s, p, init)\n"
    "  local out = {}\n"
    "  for a, b, c in lib.gmatch(s, p, init) do out[#out + 1] = tostring(a) .. '|' .. tostring(b) .. '|' .. tostring(c) end\n"
    "  return table.concat(out, ';')\n"
    "end\n"
    "local repls = { '<%0>', '%1%1', '%%', 'x', { hello = 'HI', o = 0, l = false },\n"
    "                function(a, b) if a == 'l' then return nil end return a .. (b or '') end, '%2', '%x', 7,\n"
    "                function() return {} end }\n"
    "local fails = {}\n"
    "local function check(what, a, b)\n"
    "  if not same(a, b) then fails[#fails + 1] = what .. ': lua ' .. show(a) .. ' / mine ' .. show(b) end\n"
    "end\n"
    "for i, c in ipairs(cases) do\n"
    "  local s, p, init, plain = c[1], c[2], c[3], c[4]\n"
    "  local tag = '#' .. i .. ' ' .. string.format('%q %q', s, p)\n"
    "  check(tag .. ' find', pack(pcall(real.find, s, p, init, plain)), pack(pcall(mine.find, s, p, init, plain)))\n"
    "  check(tag .. ' match', pack(pcall(real.match, s, p, init)), pack(pcall(mine.match, s, p, init)))\n"
    "  check(tag .. ' gmatch', pack(pcall(gm, real, s, p, init)), pack(pcall(gm, mine, s, p, init)))\n"
    "  for j, r in ipairs(repls) do\n"
    "    check(tag .. ' gsub ' .. j, pack(pcall(real.gsub, s, p, r)), pack(pcall(mine.gsub, s, p, r)))\n"
    "    check(tag .. ' gsub max ' .. j, pack(pcall(real.gsub, s, p, r, 1)), pack(pcall(mine.gsub, s, p, r, 1)))\n"
    "  end\n"
    "end\n"
    "return table.concat(fails, '\\n')\n";

static void test_metered_patterns_match_lua_results_and_errors(void)
{
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    static match_meter m;
    m.limit = 1L << 40;
    lua_getglobal(L, "string");
    lua_setglobal(L, "real");
    lua_newtable(L);
    match_install(L, &m);
    lua_setglobal(L, "mine");
    if (luaL_dostring(L, compare_script) != LUA_OK) {
        fprintf(stderr, "  script error: %s\n", lua_tostring(L, -1));
        CHECK(0);
    } else {
        const char *report = lua_tostring(L, -1);
        if (report && *report) {
            fprintf(stderr, "  differences:\n%s\n", report);
            CHECK(0);
        }
    }
    CHECK(m.steps > 0);
    CHECK(!m.exhausted);
    lua_close(L);
}

/* The pathological find of the hostile pass stops at the step limit with
 * an error, and marks the meter so the sandbox reports a timeout. */
static void test_backtracking_stops_at_the_step_limit(void)
{
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    static match_meter m;
    m.limit = 2000000;
    lua_newtable(L);
    match_install(L, &m);
    lua_setglobal(L, "mine");
    const char *cases[] = {
        "return mine.find(string.rep('a', 100000), '.-b')",
        "return mine.gsub(string.rep('a', 100000), '.-.-b', '')",
        "for w in mine.gmatch(string.rep('a', 100000), 'a-b') do end",
        "return mine.find(string.rep('a', 1000000), string.rep('a', 500000) .. 'b', 1, true)",
        "return mine.match(string.rep('(', 100000), '%b()')",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        m.steps = 0;
        m.exhausted = 0;
        CHECK(luaL_dostring(L, cases[i]) != LUA_OK);
        CHECK(strstr(lua_tostring(L, -1), "step limit") != NULL);
        CHECK(m.exhausted);
        lua_settop(L, 0);
    }
    /* an expired run stops at the next check, whatever is left of the steps */
    m.steps = 0;
    m.exhausted = 0;
    m.expired = 1;
    CHECK(luaL_dostring(L, "return mine.find(string.rep('a', 100000), '.-b')") != LUA_OK);
    CHECK(strstr(lua_tostring(L, -1), "time limit") != NULL);
    CHECK(m.steps < 5000);
    lua_close(L);
}

int main(void)
{
    RUN(test_metered_patterns_match_lua_results_and_errors);
    RUN(test_backtracking_stops_at_the_step_limit);
    return check_summary();
}
