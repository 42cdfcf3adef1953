/* policy_internal.h: what the policy engine's three files share; no other
 * module includes it. policy.c is the engine's life (load, self-check, the
 * public hook calls under the sandbox's limits, the fallback bookkeeping,
 * free); policy_hooks.c is the code that runs inside the sandbox (each
 * hook's argument table and the strict reading of its result, and taking
 * the hooks out of their files); policy_defaults.c is the built-in defaults
 * (the bundled policies' rules in C). */
#ifndef SY_POLICY_INTERNAL_H
#define SY_POLICY_INTERNAL_H
#include "policy/policy.h"
#include "policy/policy_sandbox.h"
#include "base/sbuf.h"
#include <stddef.h>
#include <stdint.h>

/* the engine's limits, and the bounds a hook's answer must keep */
#define POLICY_MEM_LIMIT ((size_t)32 << 20)
#define POLICY_INSTR_LIMIT 1000000L
#define POLICY_TIME_MS 50 /* CPU time a hook call (or a file's load) may take */
#define POLICY_FILE_MAX ((long)1 << 20)
#define POLICY_BODY_MAX 16384
#define POLICY_COOLDOWN_MAX 2592000.0 /* 30 days */
#define POLICY_STEP_MAX 1000
#define POLICY_RETRY_AFTER_MAX 60.0
#define POLICY_ATTEMPTS_MAX 1000
#define POLICY_SECONDS_MAX 3600.0

enum { HOOK_CLASSIFY, HOOK_COOLDOWN, HOOK_GUARD, HOOK_ORDER, HOOK_BREAKER, HOOK_PRICE, HOOK_BUDGET, HOOK_STRIP,
       HOOK_EXHAUSTED, HOOK_FIRST_TOKEN, HOOK_ALERT, HOOK_DIALECT, HOOK_COUNT };
/* "classify", ...: by HOOK_* (policy.c) */
extern const char *const policy_hook_names[HOOK_COUNT];
#define PRICE_MEMO 64

/* price() answers, kept per engine (so a reload forgets them). */
typedef struct price_memo {
    char model[128];
    int known;
    policy_price p;
} price_memo;

#define FIRST_TOKEN_MEMO 32
/* first_token() answers, kept per engine like prices (the hook is pure: the
 * same request shape gets the same answer until a reload). The key is the
 * request's fields joined, "\x1f"-separated, with a flags byte. */
typedef struct first_token_memo {
    char key[200];
    policy_silence limits;
} first_token_memo;

#define DIALECT_MEMO 12 /* dialect() answers, kept per engine: 3 kinds x client x upstream */

struct policy_engine {
    sandbox *sb;
    uint64_t generation;
    char source[1024];
    char files[HOOK_COUNT][1100]; /* where each hook was loaded from */
    int lines[HOOK_COUNT];        /* line the hook function starts on */
    char sha256[HOOK_COUNT][65];  /* of each hook file's text as loaded */
    uint64_t fallbacks;
    int may_resume;               /* classify resumes a cut text-only chat stream (bit 0), Responses stream (bit 1) */
    uint64_t hook_fallbacks[HOOK_COUNT];
    char last_error[512];
    price_memo prices[PRICE_MEMO];
    size_t nprices, price_next;
    int max_attempts;             /* order.lua's request bounds (policy_request_bounds) */
    double max_seconds;
    int order_bundled;            /* order.lua is the bundled text (from the binary or a copy of it) */
    first_token_memo first_tokens[FIRST_TOKEN_MEMO];
    size_t nfirst_tokens, first_token_next;
    policy_dialect *dialects[DIALECT_MEMO]; /* by dialect_slot (policy.c); NULL: not asked yet */
};

/* One hook call: its arguments in, its result out. policy.c fills one and
 * hands it with the hook's policy_<hook>_run to sandbox_run, which finds it
 * again with sandbox_ud (the fields a hook does not use stay 0). */
typedef struct hook_call {
    policy_engine *pe;
    const policy_event *ev;
    policy_verdict *verdict;
    const policy_state *st;
    const char *cls;
    double now, seconds;
    policy_silence silence; /* first_token */
    int step, guard;
    const policy_candidate *c;
    size_t n, count, *perm;
    const policy_order_ctx *ctx;
    const policy_breaker_state *bst;
    int success, bstate;
    double open_seconds;
    const char *model;
    policy_price price;
    int price_known;
    const policy_budget *budget;
    int over;
    const policy_blob *blob;
    int strip;
    const policy_exhausted *ex;
    int usage_limit;
    double resets_at;
    char plan_type[32];
    const policy_first_token *ft;
    const policy_alert_event *alert;
    policy_alert_post *posts; /* POLICY_ALERT_POSTS of them, filled as read (the caller frees them either way) */
    size_t nposts;
    sbuf scratch;             /* a post's body as it is encoded (the caller frees it either way) */
    const policy_dialect_ask *dask;
    policy_dialect *dialect;  /* filled as read (zeroed first) */
} hook_call;

/* Loading one hook file (policy.c, engine_load_hook -> policy_load_run). */
typedef struct load_call {
    policy_engine *pe;
    int hook;
    const char *src, *chunk;
    size_t len;
} load_call;

/* ---- policy_hooks.c: run inside sandbox_run, with a hook_call as its ud ---- */
int policy_classify_run(lua_State *L);
int policy_cooldown_run(lua_State *L);
int policy_guard_run(lua_State *L);
int policy_order_run(lua_State *L);
int policy_breaker_run(lua_State *L);
int policy_budget_run(lua_State *L);
int policy_price_run(lua_State *L);
int policy_strip_run(lua_State *L);
int policy_exhausted_run(lua_State *L);
int policy_first_token_run(lua_State *L);
int policy_alert_run(lua_State *L);
int policy_dialect_run(lua_State *L);
/* ... and with a load_call: runs the chunk, keeps its hook function in the
 * registry (where policy_<hook>_run finds it) and notes its line. */
int policy_load_run(lua_State *L);

/* ---- policy_defaults.c: the built-in defaults (see policy.h) ---- */
void policy_verdict_act(policy_verdict *v, policy_action action, const char *cls, double cooldown, double after);
void policy_classify_default(const policy_event *ev, policy_verdict *out);
void policy_cooldown_default(const policy_state *st, const char *cls, double now, double *seconds,
                             int *ladder_step);
int policy_guard_default(const policy_candidate *c);
int policy_budget_default(const policy_budget *b);
int policy_strip_default(const policy_blob *b);
int policy_exhausted_default(const policy_exhausted *ex, double *resets_at, char *plan_type, size_t plan_n);
policy_silence policy_first_token_default(const policy_first_token *ft);
size_t policy_alert_default(const policy_alert_event *ev, policy_alert_post *out);
void policy_dialect_default(const policy_dialect_ask *ask, policy_dialect *out);
size_t policy_order_default(const policy_candidate *c, size_t n, const policy_order_ctx *ctx, size_t *perm);
void policy_breaker_default(const policy_breaker_state *st, int success, int *state, double *open_seconds);

#endif
