/* policy_match.h: Lua's pattern functions (string.find, match, gmatch,
 * gsub) for the policy sandbox, with the same patterns and results as Lua
 * 5.4's but metered. Lua's own matcher is a C function that backtracks
 * without ever returning to the VM: string.find(string.rep('a', 1e5), '.-b')
 * runs for about a minute and no instruction count or hook can stop it.
 * These versions count every matching step (and every position a plain
 * find tries) against a meter the sandbox resets for each run: past its step
 * limit, or once the sandbox's timer has marked the run as over time, the
 * call raises a Lua error instead of going on. */
#ifndef SY_POLICY_MATCH_H
#define SY_POLICY_MATCH_H
#include <lua.h>
#include <signal.h>

typedef struct match_meter {
    volatile sig_atomic_t expired; /* set by the sandbox (its timer's signal handler) */
    long steps, limit;             /* steps taken in this run, and the most allowed */
    int exhausted;                 /* this run hit the limit or the deadline in a pattern function */
} match_meter;

/* Replaces find, match, gmatch and gsub in the table on top of the stack
 * (the string library) with metered versions using m, which must outlive
 * the Lua state. */
void match_install(lua_State *L, match_meter *m);

#endif
