/* policy_sandbox.c: the sandboxed Lua state under the policy engine and the
 * spec runner (see policy_sandbox.h): capped allocator, instruction budget,
 * allow-listed _ENV, text-only loading, protected runs with a traceback. */
#include "policy/policy_sandbox.h"
#include "base/embedded.h"
#include "base/log.h"
#include "policy/policy_match.h"
#include <errno.h>
#include <lauxlib.h>
#include <lua-cjson.h>
#include <lualib.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SB_HOOK_STEP 1000     /* instructions between two budget checks */
#define SB_MOVE_MAX 1000000   /* table.move: elements per call */
#define SB_MATCH_STEPS 20000000L /* pattern-matching steps per run (policy_match.c) */
#define SB_ENCODE_MAX 100000L /* cjson.encode: values visited per call (a webhook body is 16 KiB at most) */
#define SB_ENCODE_BYTES ((size_t)1 << 20) /* cjson.encode: string bytes per call (escaping may grow them 6x) */
#define SB_DATE_FORMAT_MAX 256 /* os.date: format bytes (each conversion is a strftime call) */

enum { TRIP_NONE, TRIP_INSTR, TRIP_TIME };

struct sandbox {
    lua_State *L;
    size_t used, limit;       /* bytes */
    long instr_used, instr_limit;
    long time_ms;             /* CPU time per run; 0: unbounded */
    int tripped;              /* TRIP_*: a budget ran out in this run */
    int oom;                  /* an allocation was refused in this run */
    int print_stdout;
    char trip_where[160];     /* "file:line:" where the budget ran out */
    char trace[2048];
    match_meter meter;        /* pattern steps; meter.expired is the run's deadline flag */
    volatile sig_atomic_t running; /* inside sandbox_run: the timer's ticks count */
    volatile sig_atomic_t ticks;   /* ticks of the timer since the run started */
    timer_t timer;            /* ticks every SB_TICK_MS of the creating thread's CPU time */
    int has_timer;
};

/* Registry keys (their addresses): allow-listed globals, library tables,
 * exported values. */
static char key_base, key_libs, key_exports;

static const char *const base_allowed[] = {
    "assert", "error", "getmetatable", "ipairs", "next", "pairs", "pcall", "rawequal",
    "rawget", "rawlen", "rawset", "select", "tonumber", "tostring", "type", "_VERSION", NULL};
static const char *const libs_copied[] = {"string", "table", "math", "utf8", "os", "cjson", NULL};
static const char *const os_allowed[] = {"time", "clock", "date", NULL};
static const char *const cjson_allowed[] = {"encode", "decode", "null", NULL};

static sandbox *sandbox_of(lua_State *L)
{
    void *ud;
    lua_getallocf(L, &ud);
    return ud;
}

/* Counts every byte; growth past the cap is refused, shrinking never fails. */
static void *sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    sandbox *sb = ud;
    size_t old = ptr ? osize : 0;
    if (nsize == 0) {
        free(ptr);
        sb->used -= old;
        return NULL;
    }
    if (nsize > old && sb->used + (nsize - old) > sb->limit) {
        sb->oom = 1;
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (!p) {
        if (nsize <= old)
            return ptr;
        sb->oom = 1;
        return NULL;
    }
    sb->used = sb->used - old + nsize;
    return p;
}

/* Charges SB_HOOK_STEP instructions per call against the shared budget; once
 * over, re-arms itself for every instruction so a pcall in the script only
 * catches the error until its next instruction. */
static void sandbox_hook(lua_State *L, lua_Debug *ar)
{
    sandbox *sb = sandbox_of(L);
    if (!sb->tripped) {
        if (sb->meter.expired) {
            sb->tripped = TRIP_TIME;
        } else {
            sb->instr_used += SB_HOOK_STEP;
            if (sb->instr_used < sb->instr_limit)
                return;
            sb->tripped = TRIP_INSTR;
        }
        luaL_where(L, 0);
        snprintf(sb->trip_where, sizeof sb->trip_where, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
    }
    lua_sethook(L, sandbox_hook, LUA_MASKCOUNT, 1);
    if (sb->tripped == TRIP_TIME)
        lua_pushfstring(L, "%spolicy exceeded its time limit (%d ms)", sb->trip_where, (int)sb->time_ms);
    else
        lua_pushfstring(L, "%spolicy exceeded the instruction limit (%d instructions)", sb->trip_where,
                        (int)sb->instr_limit);
    lua_error(L);
}

/* ---------- the time limit ----------
 * C functions never return to the VM while they work, so no count hook
 * can stop one: a timer on the thread's CPU clock does. It ticks every
 * SB_TICK_MS of the thread's CPU time (so only while the thread works: an
 * idle loop gets no signals), and a run counts the ticks since it started
 * (no system call per run; arming a timer per call cost 1.5 us). At the
 * tick numbered time_ms / SB_TICK_MS (between time_ms - SB_TICK_MS and
 * time_ms of CPU into the run), the handler sets meter.expired (the pattern functions
 * and the other metered C functions look at it as they go) and arms the
 * count hook for the very next instruction (lua_sethook is safe in a signal
 * handler; that is what Lua documents it for). The thread's CPU time, not
 * wall time, so a loaded machine that deschedules the loop cannot make a
 * healthy policy time out. */

#define SB_SIGNAL (SIGRTMIN + 4)
#define SB_TICK_MS 5

static void sandbox_on_timer(int sig, siginfo_t *si, void *uc)
{
    sandbox *sb = si->si_value.sival_ptr;
    if (!sb || !sb->running || sb->meter.expired)
        return;
    if (++sb->ticks < sb->time_ms / SB_TICK_MS)
        return;
    sb->meter.expired = 1;
    lua_sethook(sb->L, sandbox_hook, LUA_MASKCOUNT, 1);
}

static pthread_once_t sandbox_signal_once = PTHREAD_ONCE_INIT;

static void sandbox_signal_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = sandbox_on_timer;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SB_SIGNAL, &sa, NULL);
}

/* A timer ticking on the calling thread's CPU clock, signalling this thread. */
static void sandbox_timer_create(sandbox *sb)
{
    if (sb->time_ms <= 0)
        return;
    pthread_once(&sandbox_signal_once, sandbox_signal_install);
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SB_SIGNAL;
    ev.sigev_value.sival_ptr = sb;
    ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    sb->has_timer = timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &sb->timer) == 0;
    if (sb->has_timer) {
        struct itimerspec its;
        memset(&its, 0, sizeof its);
        its.it_value.tv_nsec = its.it_interval.tv_nsec = SB_TICK_MS * 1000000L;
        timer_settime(sb->timer, 0, &its, NULL);
    } else {
        log_warn("policy: no CPU-time timer (%s); only the instruction and step limits bound a policy call",
                 strerror(errno));
    }
}

static void sandbox_begin(sandbox *sb)
{
    sb->running = 0;
    sb->instr_used = 0;
    sb->tripped = TRIP_NONE;
    sb->oom = 0;
    sb->trip_where[0] = '\0';
    sb->meter.expired = 0;
    sb->meter.steps = 0;
    sb->meter.exhausted = 0;
    lua_sethook(sb->L, sandbox_hook, LUA_MASKCOUNT, SB_HOOK_STEP);
}

/* Starts the run's clock (after sandbox_begin). */
static void sandbox_clock_start(sandbox *sb)
{
    sb->ticks = 0; /* running is 0 here: no tick can interleave */
    sb->running = sb->time_ms > 0;
}

static void sandbox_clock_stop(sandbox *sb)
{
    sb->running = 0; /* a tick from here on changes nothing */
}

/* Message handler: never runs Lua code (no __tostring), adds a traceback. */
static int sandbox_msgh(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (!msg)
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    luaL_traceback(L, L, msg, 1);
    return 1;
}

static int sandbox_panic(lua_State *L)
{
    log_error("policy: unprotected Lua error: %s", lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?");
    abort();
}

static void sandbox_copy_error(sandbox *sb, lua_State *L, char *err, size_t errlen)
{
    const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "(no message)";
    snprintf(sb->trace, sizeof sb->trace, "%s", msg);
    size_t n = strcspn(msg, "\n");
    if (err && errlen)
        snprintf(err, errlen, "%.*s", (int)n, msg);
}

sandbox_result sandbox_run(sandbox *sb, lua_CFunction fn, void *ud, char *err, size_t errlen)
{
    lua_State *L = sb->L;
    int top = lua_gettop(L);
    if (err && errlen)
        err[0] = '\0';
    if (!lua_checkstack(L, 3)) {
        if (err && errlen)
            snprintf(err, errlen, "Lua stack exhausted");
        return SANDBOX_NOMEM;
    }
    sandbox_begin(sb);
    lua_pushcfunction(L, sandbox_msgh);
    lua_pushcfunction(L, fn);
    lua_pushlightuserdata(L, ud);
    sandbox_clock_start(sb);
    int st = lua_pcall(L, 1, 0, top + 1);
    sandbox_clock_stop(sb);
    sandbox_result r = SANDBOX_OK;
    if (st != LUA_OK) {
        r = sb->tripped || sb->meter.exhausted || sb->meter.expired ? SANDBOX_TIMEOUT
            : (st == LUA_ERRMEM || sb->oom) ? SANDBOX_NOMEM : SANDBOX_ERRMSG;
        sandbox_copy_error(sb, L, err, errlen);
    }
    lua_settop(L, top);
    if (r == SANDBOX_NOMEM)
        lua_gc(L, LUA_GCCOLLECT);
    return r;
}

const char *sandbox_result_name(sandbox_result r)
{
    static const char *const names[] = {"ok", "timeout", "nomem", "error"};
    return (unsigned)r < 4 ? names[r] : "?";
}

const char *sandbox_traceback(const sandbox *sb) { return sb->trace; }
size_t sandbox_memory(const sandbox *sb) { return sb->used; }
void sandbox_set_print(sandbox *sb, int to_stdout) { sb->print_stdout = to_stdout; }
void *sandbox_ud(lua_State *L) { return lua_touserdata(L, 1); }

/* --- the replacements the allow-list hands out --- */

/* setmetatable without __gc: a finalizer would run outside any budget. */
static int sandbox_setmetatable(lua_State *L)
{
    int t = lua_type(L, 2);
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
    if (t == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "setmetatable: __gc metamethods are not allowed in policies");
        lua_pop(L, 1);
    }
    if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL)
        return luaL_error(L, "cannot change a protected metatable");
    lua_settop(L, 2);
    lua_setmetatable(L, 1);
    return 1;
}

/* xpcall whose handler runs after unwinding, under the budget. Lua calls a
 * message handler from inside the erroring hook, where hooks are off: a
 * looping handler would then never be stopped. */
static int sandbox_xpcall(lua_State *L)
{
    int n = lua_gettop(L);
    luaL_checkany(L, 2);
    lua_pushvalue(L, 1);
    for (int i = 3; i <= n; i++)
        lua_pushvalue(L, i);
    if (lua_pcall(L, n - 2, LUA_MULTRET, 0) == LUA_OK) {
        lua_pushboolean(L, 1);
        lua_insert(L, n + 1);
        return lua_gettop(L) - n;
    }
    lua_pushvalue(L, 2);
    lua_insert(L, n + 1);
    lua_pcall(L, 1, 1, 0);
    lua_pushboolean(L, 0);
    lua_insert(L, n + 1);
    return 2;
}

/* collectgarbage("count") only. */
static int sandbox_collectgarbage(lua_State *L)
{
    const char *opt = luaL_optstring(L, 1, "collect");
    if (strcmp(opt, "count") != 0)
        return luaL_error(L, "collectgarbage: only \"count\" is allowed in policies");
    lua_pushnumber(L, lua_gc(L, LUA_GCCOUNT, 0) + lua_gc(L, LUA_GCCOUNTB, 0) / 1024.0);
    return 1;
}

/* print(): to stdout in the spec runner, else a redacted log line. */
static int sandbox_print(lua_State *L)
{
    int n = lua_gettop(L);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 1; i <= n; i++) {
        if (i > 1)
            luaL_addchar(&b, '\t');
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    const char *s = lua_tostring(L, -1);
    if (sandbox_of(L)->print_stdout) {
        printf("%s\n", s);
    } else {
        char red[1024];
        log_redact(red, sizeof red, s);
        log_info("policy print: %s", red);
    }
    return 0;
}

/* string.rep refusing the empty-result loop the original spins through
 * without executing a single Lua instruction. */
static int sandbox_str_rep(lua_State *L)
{
    size_t l, lsep;
    luaL_checklstring(L, 1, &l);
    lua_Integer n = luaL_checkinteger(L, 2);
    luaL_optlstring(L, 3, "", &lsep);
    if (n <= 0 || l + lsep == 0) {
        lua_pushliteral(L, "");
        return 1;
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

/* table.move capped: moving nils is a C loop the budget cannot see. */
static int sandbox_tab_move(lua_State *L)
{
    lua_Integer f = luaL_checkinteger(L, 2), e = luaL_checkinteger(L, 3);
    if (e >= f && (lua_Unsigned)e - (lua_Unsigned)f >= SB_MOVE_MAX)
        return luaL_error(L, "table.move: more than %d elements", SB_MOVE_MAX);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

/* Raises the time-limit error inside a metered C function once the run's
 * time is up (the count hook would only see it after the function). */
static void sandbox_check_time(lua_State *L)
{
    sandbox *sb = sandbox_of(L);
    if (sb->meter.expired)
        luaL_error(L, "policy exceeded its time limit (%d ms)", (int)sb->time_ms);
}

/* table.sort's default order, as a C comparator that looks at the clock:
 * without one, sort compares in C from start to end (long strings make each
 * comparison costly) and nothing could stop it. */
static int sandbox_sort_lt(lua_State *L)
{
    sandbox_check_time(L);
    lua_pushboolean(L, lua_compare(L, 1, 2, LUA_OPLT));
    return 1;
}

static int sandbox_tab_sort(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    if (lua_isnoneornil(L, 2)) {
        lua_settop(L, 1);
        lua_pushcfunction(L, sandbox_sort_lt);
    }
    lua_settop(L, 2);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, 2, 0);
    return 0;
}

typedef struct encode_walk {
    long values;
    size_t bytes;
} encode_walk;

/* Counts what encoding the value at idx would visit, following every
 * reference (a table referenced twice is encoded twice): a small table of
 * tables of itself, {t, t} forty levels deep, is 2^40 values of output that
 * lua-cjson would build with plain malloc, outside the memory cap. */
static void sandbox_encode_walk(lua_State *L, int idx, int depth, encode_walk *w)
{
    if (++w->values > SB_ENCODE_MAX)
        luaL_error(L, "cjson.encode: more than %d values", (int)SB_ENCODE_MAX);
    if ((w->values & 1023) == 0)
        sandbox_check_time(L);
    int t = lua_type(L, idx);
    if (t == LUA_TSTRING) {
        size_t n;
        lua_tolstring(L, idx, &n);
        w->bytes += n;
        if (w->bytes > SB_ENCODE_BYTES)
            luaL_error(L, "cjson.encode: more than %d bytes of strings", (int)SB_ENCODE_BYTES);
        return;
    }
    if (t != LUA_TTABLE || depth > 1000) /* deeper: lua-cjson refuses it itself */
        return;
    idx = lua_absindex(L, idx);
    luaL_checkstack(L, 3, "cjson.encode: nesting");
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        sandbox_encode_walk(L, -2, depth + 1, w);
        sandbox_encode_walk(L, -1, depth + 1, w);
        lua_pop(L, 1);
    }
}

static int sandbox_cjson_encode(lua_State *L)
{
    encode_walk w = {0, 0};
    luaL_checkany(L, 1);
    lua_settop(L, 1);
    sandbox_encode_walk(L, 1, 0, &w);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, 1, 1);
    return 1;
}

/* os.date with a bounded format: one call runs a strftime per conversion,
 * and a format of 400 000 "%c" took 70 ms inside that one call. */
static int sandbox_os_date(lua_State *L)
{
    size_t n = 0;
    if (lua_type(L, 1) == LUA_TSTRING)
        lua_tolstring(L, 1, &n);
    if (n > SB_DATE_FORMAT_MAX)
        return luaL_error(L, "os.date: format longer than %d bytes", SB_DATE_FORMAT_MAX);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

/* --- building the state --- */

/* Replaces t[name] (t on top) by fn with the original as upvalue. */
static void sandbox_wrap(lua_State *L, const char *name, lua_CFunction fn)
{
    lua_getfield(L, -1, name);
    lua_pushcclosure(L, fn, 1);
    lua_setfield(L, -2, name);
}

/* Pushes a new table holding t[names...] for the table t at idx. */
static void sandbox_subset(lua_State *L, int idx, const char *const *names)
{
    idx = lua_absindex(L, idx);
    lua_newtable(L);
    for (; *names; names++) {
        lua_getfield(L, idx, *names);
        lua_setfield(L, -2, *names);
    }
}

static void sandbox_open_libs(lua_State *L)
{
    luaL_requiref(L, "_G", luaopen_base, 1);
    sandbox_subset(L, -1, base_allowed);
    lua_pushcfunction(L, sandbox_setmetatable);
    lua_setfield(L, -2, "setmetatable");
    lua_pushcfunction(L, sandbox_xpcall);
    lua_setfield(L, -2, "xpcall");
    lua_pushcfunction(L, sandbox_collectgarbage);
    lua_setfield(L, -2, "collectgarbage");
    lua_pushcfunction(L, sandbox_print);
    lua_setfield(L, -2, "print");
    lua_rawsetp(L, LUA_REGISTRYINDEX, &key_base);
    lua_pop(L, 1);

    lua_newtable(L); /* libs */
    luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 0);
    lua_pushnil(L);
    lua_setfield(L, -2, "dump");
    sandbox_wrap(L, "rep", sandbox_str_rep);
    match_install(L, &sandbox_of(L)->meter);
    lua_setfield(L, -2, "string");
    luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 0);
    sandbox_wrap(L, "move", sandbox_tab_move);
    sandbox_wrap(L, "sort", sandbox_tab_sort);
    lua_setfield(L, -2, "table");
    luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 0);
    lua_setfield(L, -2, "math");
    luaL_requiref(L, LUA_UTF8LIBNAME, luaopen_utf8, 0);
    lua_setfield(L, -2, "utf8");
    luaL_requiref(L, LUA_OSLIBNAME, luaopen_os, 0);
    sandbox_subset(L, -1, os_allowed);
    sandbox_wrap(L, "date", sandbox_os_date);
    lua_setfield(L, -3, "os");
    lua_pop(L, 1);
    luaL_requiref(L, "cjson", luaopen_cjson, 0);
    sandbox_subset(L, -1, cjson_allowed);
    sandbox_wrap(L, "encode", sandbox_cjson_encode);
    lua_setfield(L, -3, "cjson");
    lua_pop(L, 1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &key_libs);

    /* ("").__index is the real string table: hide the metatable itself. */
    lua_pushliteral(L, "");
    lua_getmetatable(L, -1);
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 2);

    lua_newtable(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &key_exports);
}

static int sandbox_setup(lua_State *L)
{
    sandbox_open_libs(L);
    return 0;
}

sandbox *sandbox_new(size_t mem_limit, long instr_limit, long time_ms, char *err, size_t errlen)
{
    sandbox *sb = calloc(1, sizeof *sb);
    if (!sb) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    sb->limit = mem_limit;
    sb->instr_limit = instr_limit;
    sb->time_ms = time_ms;
    sb->meter.limit = SB_MATCH_STEPS;
    sb->L = lua_newstate(sandbox_alloc, sb);
    if (!sb->L) {
        snprintf(err, errlen, "cannot create a Lua state");
        free(sb);
        return NULL;
    }
    lua_atpanic(sb->L, sandbox_panic);
    /* hooks make short-lived tables on every request and keep nothing:
     * the generational collector's young collections suit that best */
    lua_gc(sb->L, LUA_GCGEN, 0, 0);
    sandbox_timer_create(sb);
    char msg[256];
    if (sandbox_run(sb, sandbox_setup, sb, msg, sizeof msg) != SANDBOX_OK) {
        snprintf(err, errlen, "Lua sandbox set-up failed: %s", msg);
        sandbox_free(sb);
        return NULL;
    }
    return sb;
}

void sandbox_free(sandbox *sb)
{
    if (!sb)
        return;
    sandbox_begin(sb);
    lua_gc(sb->L, LUA_GCCOLLECT);
    lua_close(sb->L);
    if (sb->has_timer)
        timer_delete(sb->timer);
    free(sb);
}

/* Pushes a shallow copy of the table at idx. */
static void sandbox_copy_table(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    lua_newtable(L);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -4);
    }
}

/* env[k] = copy-or-value for every k, v of the table at idx. */
static void sandbox_fill(lua_State *L, int env, int idx)
{
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -1) == LUA_TTABLE) {
            sandbox_copy_table(L, -1);
            lua_replace(L, -2);
        }
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, env);
    }
}

void sandbox_push_env(lua_State *L)
{
    lua_createtable(L, 0, 32);
    int env = lua_gettop(L);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &key_base);
    sandbox_fill(L, env, -1);
    lua_pop(L, 1);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &key_libs);
    for (const char *const *n = libs_copied; *n; n++) {
        lua_getfield(L, -1, *n);
        sandbox_copy_table(L, -1);
        lua_setfield(L, env, *n);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &key_exports);
    sandbox_fill(L, env, -1);
    lua_pop(L, 1);
    lua_pushvalue(L, env);
    lua_setfield(L, env, "_G");
}

void sandbox_load(lua_State *L, const char *chunkname, const char *src, size_t len)
{
    int env = lua_gettop(L);
    if (luaL_loadbufferx(L, src, len, chunkname, "t") != LUA_OK)
        lua_error(L);
    lua_pushvalue(L, env);
    if (!lua_setupvalue(L, -2, 1))
        lua_pop(L, 1);
    lua_replace(L, env);
}

void sandbox_export(lua_State *L, const char *name)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &key_exports);
    lua_insert(L, -2);
    lua_setfield(L, -2, name);
    lua_pop(L, 1);
}

void sandbox_push_export(lua_State *L, const char *name)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &key_exports);
    lua_getfield(L, -1, name);
    lua_remove(L, -2);
}

typedef struct export_call {
    const char *file, *name;
} export_call;

static int sandbox_export_run(lua_State *L)
{
    export_call *c = sandbox_ud(L);
    const embedded_file *f = embedded_find(c->file);
    if (!f)
        return luaL_error(L, "%s: not embedded in this binary", c->file);
    char chunk[256];
    snprintf(chunk, sizeof chunk, "@%s", c->file);
    sandbox_push_env(L);
    sandbox_load(L, chunk, f->data, f->len);
    lua_call(L, 0, 1);
    if (!lua_istable(L, -1))
        return luaL_error(L, "%s: must return a table, got %s", c->file, luaL_typename(L, -1));
    sandbox_export(L, c->name);
    return 0;
}

int sandbox_export_embedded(sandbox *sb, const char *file, const char *name, char *err, size_t errlen)
{
    export_call c = {file, name};
    return sandbox_run(sb, sandbox_export_run, &c, err, errlen) == SANDBOX_OK ? 0 : -1;
}
