/* redis_script.h: a Lua script run on Redis by its SHA1. Every module that
 * keeps one (concurrency slots, rate limits and budgets) used to keep its
 * own cache of SCRIPT LOAD answers; this is the one way now (issue 33).
 * The SHA1 is computed here from the text, as Redis does, so nothing waits
 * for SCRIPT LOAD's answer and no answer writes into its owner's memory:
 * the script is loaded at each connect (redis_script_load, its answer
 * ignored) and run with EVALSHA; a NOSCRIPT answer (a Redis restarted or
 * flushed under a live link) loads it again, and the caller may resend
 * that call with the text (EVAL), which caches it too. */
#ifndef SY_REDIS_SCRIPT_H
#define SY_REDIS_SCRIPT_H
#include "core/redis_link.h"
#include <hiredis/hiredis.h>

#define REDIS_SCRIPT_ARGS_MAX 16 /* keys and arguments of one call, together */

typedef struct redis_script {
    const char *text; /* static: the script's Lua */
    char sha[41];     /* its SHA1 in hex */
} redis_script;

/* s for text (a string that outlives s). */
void redis_script_init(redis_script *s, const char *text);
/* SCRIPT LOAD on l, the answer ignored (at each connect, and after NOSCRIPT). */
void redis_script_load(const redis_script *s, redis_link *l);
/* EVALSHA of s (EVAL with its text when as_text) with nkeys keys then
 * nargs arguments (at most REDIS_SCRIPT_ARGS_MAX together); fn as
 * redis_link_command: 0 sent (fn called once), -1 not (fn never called). */
int redis_script_eval(const redis_script *s, redis_link *l, int as_text, redis_reply_fn fn, void *ud, int nkeys,
                      const char *const *keys, int nargs, const char *const *args);
/* 1 when r is Redis's NOSCRIPT answer to an EVALSHA of s: s is loaded
 * again (the caller may resend its call as text); else 0. */
int redis_script_missing(const redis_script *s, redis_link *l, const redisReply *r);

#endif
