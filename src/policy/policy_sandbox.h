/* policy_sandbox.h: one sandboxed Lua 5.4 state, shared by the policy engine
 * (policy.c) and the spec runner (policy_test.c). It owns the memory cap (a
 * custom allocator), the per-run instruction budget (a count hook that, once
 * tripped, fires on every instruction so a script's own pcall cannot swallow
 * it), the per-run time limit (a CPU-time timer whose signal arms that hook,
 * plus metered versions of the C functions that could otherwise run long:
 * the pattern functions, table.sort, cjson.encode), the allow-listed _ENV each chunk gets, text-only loading, and protected
 * runs that report OK / TIMEOUT / NOMEM / ERRMSG. It knows nothing of hooks.
 *
 * All Lua work happens inside sandbox_run(): C hands in a lua_CFunction and a
 * pointer; the function finds the pointer with sandbox_ud() and does its
 * pushing, calling and reading there, so a memory error anywhere is caught. */
#ifndef SY_POLICY_SANDBOX_H
#define SY_POLICY_SANDBOX_H
#include <lua.h>
#include <stddef.h>

typedef enum {
    SANDBOX_OK = 0,
    SANDBOX_TIMEOUT, /* instruction budget, time limit or pattern step budget exhausted */
    SANDBOX_NOMEM,   /* memory cap reached */
    SANDBOX_ERRMSG   /* any other error; the message says what */
} sandbox_result;

typedef struct sandbox sandbox;

/* Creates the state: base allow-list, string/table/math/utf8, os.time/clock/date
 * and cjson.encode/decode/null. NULL (and err filled) on failure. */
/* time_ms bounds each run in CPU time of the thread that created the
 * sandbox (0: no time bound); a sandbox is used by that thread only. */
sandbox *sandbox_new(size_t mem_limit, long instr_limit, long time_ms, char *err, size_t errlen);
void sandbox_free(sandbox *sb); /* full GC, then lua_close */

/* Runs fn(L) with ud as its only argument under a fresh instruction budget.
 * On failure err gets the first line of the error (the traceback is kept for
 * sandbox_traceback). The Lua stack is restored either way. */
sandbox_result sandbox_run(sandbox *sb, lua_CFunction fn, void *ud, char *err, size_t errlen);
const char *sandbox_result_name(sandbox_result r); /* "ok" "timeout" "nomem" "error" */
const char *sandbox_traceback(const sandbox *sb);  /* of the last failed run */
size_t sandbox_memory(const sandbox *sb);          /* bytes held by the state */
void sandbox_set_print(sandbox *sb, int to_stdout); /* print(): log (0) or stdout (1) */

/* Loads embedded file (e.g. "lua/sy.lua") in a fresh env, runs it and exports
 * its return value under name, so every later env sees it. 0 or -1 + err. */
int sandbox_export_embedded(sandbox *sb, const char *file, const char *name, char *err, size_t errlen);

/* --- only inside a sandbox_run function --- */
void *sandbox_ud(lua_State *L);
/* Pushes a fresh env: the allow-list, copies of the libraries and of every
 * exported table, _G pointing at itself. */
void sandbox_push_env(lua_State *L);
/* Replaces the env on top of the stack with chunk src compiled as text with
 * that env as its _ENV; raises the syntax error ("name:line: msg") on failure. */
void sandbox_load(lua_State *L, const char *chunkname, const char *src, size_t len);
/* Pops the value on top and exports it as global name of every later env. */
void sandbox_export(lua_State *L, const char *name);
/* Pushes the exported value called name (nil if none), not a copy. */
void sandbox_push_export(lua_State *L, const char *name);

#endif
