/* policy.c: the policy engine (see policy.h), its life: loads the
 * hook files into one sandbox (policy_sandbox.c), self-checks them on
 * fixtures, calls them under the sandbox's limits (the argument tables and
 * the strict reading of results are policy_hooks.c) and falls back to the
 * built-in defaults (policy_defaults.c: the same rules, in C) whenever a
 * hook errors, times out, runs out of memory or returns something
 * malformed, counting and logging each fallback. Not thread-safe: one
 * engine per event loop. */
#include "policy/policy_internal.h"
#include "base/embedded.h"
#include "base/log.h"
#include "base/sha256.h"
#include "base/sbuf.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const policy_hook_names[HOOK_COUNT] = {"classify", "cooldown", "guard", "order",
                                                   "breaker",  "price",    "budget", "strip", "exhausted",
                                                   "first_token", "alert", "dialect"};
/* The file each hook lives in (prices.lua holds a table of data first). */
static const char *const hook_files[HOOK_COUNT] = {"classify", "cooldown", "guard", "order",
                                                   "breaker",  "prices",   "budget", "strip", "exhausted",
                                                   "first_token", "alert", "dialect"};

/* ======================= calling the hooks ======================= */

/* Runs one hook; 0 on success, else -1 with why = "<result>: <message>". */
static int hook_run(policy_engine *pe, lua_CFunction fn, hook_call *h, char *why, size_t n)
{
    char msg[400];
    sandbox_result r = sandbox_run(pe->sb, fn, h, msg, sizeof msg);
    if (r == SANDBOX_OK)
        return 0;
    snprintf(why, n, "%s: %s", sandbox_result_name(r), msg);
    return -1;
}

static void engine_fallback(policy_engine *pe, int hook, const char *why)
{
    char red[400];
    log_redact(red, sizeof red, why);
    pe->fallbacks++;
    uint64_t n = ++pe->hook_fallbacks[hook];
    snprintf(pe->last_error, sizeof pe->last_error, "%s: %s", policy_hook_names[hook], red);
    if (n <= 10 || n % 1000 == 0) {
        log_warn("policy: %s hook (%s) failed, built-in default used (%llu times): %s",
                 policy_hook_names[hook], pe->files[hook], (unsigned long long)n, red);
        char trace[1024];
        log_redact(trace, sizeof trace, sandbox_traceback(pe->sb));
        log_debug("policy: %s", trace);
    }
}

/* ======================= public hook calls ======================= */

const char *policy_action_name(policy_action a)
{
    static const char *const names[] = {"return", "failover", "retry", "context_fallback", "resume", "strip_retry",
                                        "retry_turn"};
    return (size_t)a < sizeof names / sizeof *names ? names[a] : "?";
}

void policy_classify(policy_engine *pe, const policy_event *ev, policy_verdict *out)
{
    static const policy_event none = {.network_error = 1, .retry_after = -1};
    char why[512];
    hook_call h = {.pe = pe, .ev = ev ? ev : &none, .verdict = out};
    if (pe && hook_run(pe, policy_classify_run, &h, why, sizeof why) == 0)
        return;
    if (pe)
        engine_fallback(pe, HOOK_CLASSIFY, why);
    policy_classify_default(h.ev, out);
}

void policy_cooldown(policy_engine *pe, const policy_state *st, const char *cls, double now,
                     double *seconds, int *ladder_step)
{
    static const policy_state none = {.retry_after = -1};
    char why[512];
    hook_call h = {.pe = pe, .st = st ? st : &none, .cls = cls, .now = now};
    if (pe && hook_run(pe, policy_cooldown_run, &h, why, sizeof why) == 0) {
        *seconds = h.seconds;
        *ladder_step = h.step;
        return;
    }
    if (pe)
        engine_fallback(pe, HOOK_COOLDOWN, why);
    policy_cooldown_default(h.st, cls, now, seconds, ladder_step);
}

int policy_guard(policy_engine *pe, const policy_candidate *c)
{
    char why[512];
    hook_call h = {.pe = pe, .c = c};
    if (!c)
        return GUARD_NORMAL;
    if (pe && hook_run(pe, policy_guard_run, &h, why, sizeof why) == 0)
        return h.guard;
    if (pe)
        engine_fallback(pe, HOOK_GUARD, why);
    return policy_guard_default(c);
}

int policy_strip(policy_engine *pe, const policy_blob *b)
{
    char why[512];
    hook_call h = {.pe = pe, .blob = b};
    if (pe && hook_run(pe, policy_strip_run, &h, why, sizeof why) == 0)
        return h.strip;
    if (pe)
        engine_fallback(pe, HOOK_STRIP, why);
    return policy_strip_default(b);
}

/* The memo key of a first_token request: 0 when it does not fit, or a
 * field holds the separator (two requests must never share a key): asked
 * every time then. The stream flags, then the fields joined by \x1f;
 * copied by hand (snprintf cost 1 600 instructions per stream). */
long policy_prompt_kib(size_t n)
{
    long kib = 1;
    while ((size_t)kib * 1024 < n && kib < (1L << 30))
        kib <<= 1;
    return kib;
}

static int first_token_key(const policy_first_token *ft, char *key, size_t n)
{
    const char *f[] = {ft->endpoint, ft->model, ft->reasoning, ft->account_kind};
    size_t len = 0;
    key[len++] = (char)('0' + (ft->stream ? 1 : 0) + (ft->reasoning ? 2 : 0));
    int log2 = 0; /* prompt_kib is a power of two: its exponent, one byte */
    while (log2 < 62 && (1L << log2) < ft->prompt_kib)
        log2++;
    key[len++] = (char)('A' + log2);
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        const char *s = f[i] ? f[i] : "";
        size_t k = strlen(s);
        if (memchr(s, '\x1f', k) || len + (i > 0) + k >= n)
            return 0;
        if (i > 0)
            key[len++] = '\x1f';
        memcpy(key + len, s, k);
        len += k;
    }
    key[len] = '\0';
    return 1;
}

policy_silence policy_silence_limits(policy_engine *pe, const policy_first_token *ft)
{
    char why[512], key[sizeof pe->first_tokens[0].key];
    int memo = pe && first_token_key(ft, key, sizeof key);
    for (size_t i = 0; memo && i < pe->nfirst_tokens; i++)
        if (strcmp(pe->first_tokens[i].key, key) == 0)
            return pe->first_tokens[i].limits;
    hook_call h = {.pe = pe, .ft = ft};
    if (pe && hook_run(pe, policy_first_token_run, &h, why, sizeof why) == 0) {
        if (memo) {
            first_token_memo *m = pe->nfirst_tokens < FIRST_TOKEN_MEMO
                                      ? &pe->first_tokens[pe->nfirst_tokens++]
                                      : &pe->first_tokens[pe->first_token_next++ % FIRST_TOKEN_MEMO];
            memcpy(m->key, key, sizeof key);
            m->limits = h.silence;
        }
        return h.silence;
    }
    if (pe)
        engine_fallback(pe, HOOK_FIRST_TOKEN, why);
    return policy_first_token_default(ft);
}

double policy_first_token_limit(policy_engine *pe, const policy_first_token *ft)
{
    return policy_silence_limits(pe, ft).first_token;
}

int policy_exhausted_answer(policy_engine *pe, const policy_exhausted *ex, double *resets_at, char *plan_type,
                            size_t plan_n)
{
    char why[512];
    hook_call h = {.pe = pe, .ex = ex};
    if (pe && hook_run(pe, policy_exhausted_run, &h, why, sizeof why) == 0) {
        *resets_at = h.resets_at;
        snprintf(plan_type, plan_n, "%s", h.plan_type);
        return h.usage_limit;
    }
    if (pe)
        engine_fallback(pe, HOOK_EXHAUSTED, why);
    return policy_exhausted_default(ex, resets_at, plan_type, plan_n);
}

/* A pool past POLICY_ORDER_WINDOW candidates: the built-in order picks the
 * first POLICY_ORDER_WINDOW and the hook orders those. Building 20 000
 * argument tables per request took longer than a hook may run (and the
 * request makes max_attempts attempts at most anyway). */
#define POLICY_ORDER_WINDOW 256

static size_t policy_order_window(policy_engine *pe, const policy_candidate *c, size_t n,
                                  const policy_order_ctx *ctx, size_t *perm)
{
    size_t k = policy_order_default(c, n, ctx, perm);
    if (k > POLICY_ORDER_WINDOW)
        k = POLICY_ORDER_WINDOW;
    policy_candidate *w = malloc(k * sizeof *w);
    size_t *sub = malloc(k * sizeof *sub), *wperm = malloc(k * sizeof *wperm);
    if (!w || !sub || !wperm) {
        free(w), free(sub), free(wperm);
        return k; /* the built-in order's first k */
    }
    for (size_t i = 0; i < k; i++) {
        sub[i] = perm[i];
        w[i] = c[perm[i]];
    }
    size_t m = policy_order(pe, w, k, ctx, wperm);
    for (size_t i = 0; i < m; i++)
        perm[i] = sub[wperm[i]];
    free(w), free(sub), free(wperm);
    return m;
}

void policy_alert_post_free(policy_alert_post *p)
{
    free(p->url);
    free(p->body);
    free(p->headers);
    memset(p, 0, sizeof *p);
}

size_t policy_alert(policy_engine *pe, const policy_alert_event *ev, policy_alert_post out[POLICY_ALERT_POSTS])
{
    char why[512];
    memset(out, 0, POLICY_ALERT_POSTS * sizeof *out);
    hook_call h = {.pe = pe, .alert = ev, .posts = out, .scratch = SBUF_INIT};
    int rc = pe ? hook_run(pe, policy_alert_run, &h, why, sizeof why) : -1;
    sbuf_free(&h.scratch);
    if (rc == 0)
        return h.nposts;
    for (size_t i = 0; i < POLICY_ALERT_POSTS; i++) /* what a failed run read before it failed */
        policy_alert_post_free(&out[i]);
    if (pe)
        engine_fallback(pe, HOOK_ALERT, why);
    return policy_alert_default(ev, out);
}

size_t policy_order(policy_engine *pe, const policy_candidate *c, size_t n,
                    const policy_order_ctx *ctx, size_t *perm)
{
    static const policy_order_ctx none = {0};
    char why[512];
    hook_call h = {.pe = pe, .c = c, .n = n, .perm = perm, .ctx = ctx ? ctx : &none};
    if (n == 0)
        return 0;
    /* The bundled order.lua: its C mirror answers the same (the unit test
     * test_c_defaults_match_lua_guard_and_order compares them on thousands
     * of random pools) for a fraction of the cost of building the argument
     * tables and entering Lua (a quarter of the gateway's own instructions
     * per request with one account, more with every candidate). Any other
     * order.lua is always called. */
    if (pe && pe->order_bundled)
        return policy_order_default(c, n, h.ctx, perm);
    if (pe && n > POLICY_ORDER_WINDOW)
        return policy_order_window(pe, c, n, h.ctx, perm);
    if (pe && hook_run(pe, policy_order_run, &h, why, sizeof why) == 0)
        return h.count;
    if (pe)
        engine_fallback(pe, HOOK_ORDER, why);
    return policy_order_default(c, n, h.ctx, perm);
}

void policy_request_bounds(const policy_engine *pe, int *max_attempts, double *max_seconds)
{
    *max_attempts = pe ? pe->max_attempts : POLICY_MAX_ATTEMPTS_DEFAULT;
    *max_seconds = pe ? pe->max_seconds : POLICY_MAX_SECONDS_DEFAULT;
}

void policy_breaker(policy_engine *pe, const policy_breaker_state *st, int success, double now,
                    int *state, double *open_seconds)
{
    char why[512];
    hook_call h = {.pe = pe, .bst = st, .success = success, .now = now};
    if (pe && hook_run(pe, policy_breaker_run, &h, why, sizeof why) == 0) {
        *state = h.bstate;
        *open_seconds = h.open_seconds;
        return;
    }
    if (pe)
        engine_fallback(pe, HOOK_BREAKER, why);
    policy_breaker_default(st, success, state, open_seconds);
}

int policy_budget_over(policy_engine *pe, const policy_budget *b)
{
    char why[512];
    hook_call h = {.pe = pe, .budget = b};
    if (pe && hook_run(pe, policy_budget_run, &h, why, sizeof why) == 0)
        return h.over;
    if (pe)
        engine_fallback(pe, HOOK_BUDGET, why);
    return policy_budget_default(b);
}

int policy_price_get(policy_engine *pe, const char *model, policy_price *out)
{
    char why[512];
    if (!model)
        model = "";
    memset(out, 0, sizeof *out);
    if (!pe || strlen(model) >= sizeof pe->prices[0].model)
        return 0;
    for (size_t i = 0; i < pe->nprices; i++)
        if (strcmp(pe->prices[i].model, model) == 0) {
            *out = pe->prices[i].p;
            return pe->prices[i].known;
        }
    hook_call h = {.pe = pe, .model = model};
    if (hook_run(pe, policy_price_run, &h, why, sizeof why) != 0) {
        engine_fallback(pe, HOOK_PRICE, why); /* no built-in price list: unknown, and not remembered */
        return 0;
    }
    price_memo *m = pe->nprices < PRICE_MEMO ? &pe->prices[pe->nprices++] : &pe->prices[pe->price_next++ % PRICE_MEMO];
    sbuf_copy_cstr(m->model, sizeof m->model, model);
    m->known = h.price_known;
    m->p = h.price;
    *out = h.price;
    return h.price_known;
}

/* The memo slot of an ask: kind (3) x client (2) x upstream (2), or -1 for
 * a name outside those (not asked by the gateway; a test may). */
static int dialect_slot(const policy_dialect_ask *ask)
{
    static const char *const kinds[] = {"api_key", "chatgpt", "aggregate"};
    int k = -1, c = -1, u = -1;
    for (int i = 0; i < 3 && ask->kind; i++)
        if (strcmp(ask->kind, kinds[i]) == 0)
            k = i;
    if (ask->client)
        c = strcmp(ask->client, "responses") == 0 ? 0 : strcmp(ask->client, "chat") == 0 ? 1 : -1;
    if (ask->upstream)
        u = strcmp(ask->upstream, "responses") == 0 ? 0 : strcmp(ask->upstream, "chat") == 0 ? 1 : -1;
    return k < 0 || c < 0 || u < 0 ? -1 : (k * 2 + c) * 2 + u;
}

const policy_dialect *policy_dialect_rules(policy_engine *pe, const policy_dialect_ask *ask)
{
    static policy_dialect none; /* an ask outside the known names, or out of memory: the defaults, made each time */
    char why[512];
    int slot = dialect_slot(ask);
    if (slot >= 0 && pe && pe->dialects[slot])
        return pe->dialects[slot];
    policy_dialect *r = slot >= 0 ? calloc(1, sizeof *r) : NULL;
    if (!r) {
        memset(&none, 0, sizeof none);
        policy_dialect_default(ask, &none);
        return &none;
    }
    hook_call h = {.pe = pe, .dask = ask, .dialect = r};
    if (!pe || hook_run(pe, policy_dialect_run, &h, why, sizeof why) != 0) {
        if (pe)
            engine_fallback(pe, HOOK_DIALECT, why);
        memset(r, 0, sizeof *r);
        policy_dialect_default(ask, r); /* remembered: the rules of one load stay one set */
    }
    if (!pe) { /* tests without an engine: one set of defaults per slot for the process */
        static policy_dialect *builtin[DIALECT_MEMO];
        if (builtin[slot])
            free(r);
        else
            builtin[slot] = r;
        return builtin[slot];
    }
    pe->dialects[slot] = r;
    return r;
}

/* ======================= loading and self-check ======================= */

static char *file_slurp(const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc((size_t)POLICY_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, (size_t)POLICY_FILE_MAX + 1, f) : 0;
    int bad = !buf || ferror(f) || n > (size_t)POLICY_FILE_MAX;
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "%s: %s", path, buf ? "unreadable or larger than 1 MiB" : "out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static int engine_load_hook(policy_engine *pe, const char *dir, int hook, char *err, size_t errlen)
{
    char *path = pe->files[hook], *buf = NULL, chunk[1104], msg[512];
    const char *src;
    size_t len, dl = dir ? strlen(dir) : 0;
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    if (dir) {
        snprintf(path, sizeof pe->files[hook], "%.*s/%s.lua", (int)dl, dir, hook_files[hook]);
        if (hook >= HOOK_BREAKER && access(path, F_OK) != 0)
            dir = NULL; /* a policy dir from before breaker / prices / budget / strip / exhausted / first_token / alert
                        * existed: the bundled file */
        else if (!(src = buf = file_slurp(path, &len, err, errlen)))
            return -1;
    }
    if (!dir) {
        snprintf(path, sizeof pe->files[hook], "policies/%s.lua", hook_files[hook]);
        const embedded_file *f = embedded_find(path);
        if (!f) {
            snprintf(err, errlen, "%s: not embedded in this binary", path);
            return -1;
        }
        src = f->data;
        len = f->len;
    }
    sha256_hex(src, len, pe->sha256[hook]);
    if (hook == HOOK_ORDER) {
        const embedded_file *b = embedded_find("policies/order.lua");
        pe->order_bundled = b && b->len == len && memcmp(b->data, src, len) == 0;
    }
    snprintf(chunk, sizeof chunk, "@%s", path);
    load_call c = {pe, hook, src, chunk, len};
    sandbox_result r = sandbox_run(pe->sb, policy_load_run, &c, msg, sizeof msg);
    free(buf);
    if (r == SANDBOX_OK)
        return 0;
    char base[32];
    snprintf(base, sizeof base, "%s.lua", hook_files[hook]);
    if (strstr(msg, base))
        snprintf(err, errlen, "%s", msg);
    else
        snprintf(err, errlen, "%s: %s: %s", path, sandbox_result_name(r), msg);
    return -1;
}

static int check_fail(policy_engine *pe, int hook, const char *why, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s:%d: self-check of %s failed: %s", pe->files[hook], pe->lines[hook],
             policy_hook_names[hook], why);
    return -1;
}

static int check_classify(policy_engine *pe, char *err, size_t errlen)
{
    static const char quota_body[] =
        "{\"type\":\"error\",\"error\":{\"type\":\"usage_limit_reached\","
        "\"message\":\"You've hit your usage limit.\"}}";
    const policy_event evs[] = {
        {.status = 429, .retry_after = 12, .account_kind = "api_key", .endpoint = "/v1/responses"},
        {.status = 500, .retry_after = -1, .account_kind = "chatgpt", .endpoint = "/v1/responses"},
        {.status = 400, .error_type = "invalid_request_error", .error_code = "context_length_exceeded",
         .error_message = "too long", .retry_after = -1, .account_kind = "api_key",
         .endpoint = "/v1/chat/completions"},
        {.network_error = 1, .retry_after = -1, .account_kind = "aggregate", .endpoint = "/v1/responses"},
        {.timeout = 1, .retry_after = -1},
        {.status = 200, .in_stream = 1, .body = quota_body, .body_len = sizeof quota_body - 1,
         .error_type = "usage_limit_reached", .retry_after = -1, .account_kind = "chatgpt"},
    };
    char why[512];
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++) {
        policy_verdict v;
        hook_call h = {.pe = pe, .ev = &evs[i], .verdict = &v};
        if (hook_run(pe, policy_classify_run, &h, why, sizeof why) != 0)
            return check_fail(pe, HOOK_CLASSIFY, why, err, errlen);
    }
    return 0;
}

static int check_cooldown(policy_engine *pe, char *err, size_t errlen)
{
    const policy_state sts[] = {
        {.account_id = 1, .retry_after = -1},
        {.account_id = 2, .ladder_step = 2, .last_429_at = 1700000000 - 60, .retry_after = 400},
        {.account_id = 3, .ladder_step = 4, .last_429_at = 1700000000 - 7200, .retry_after = -1},
        {.account_id = 4, .retry_after = -1, .primary_used_pct = 100, .primary_reset_at = 1700000000 + 600,
         .secondary_used_pct = -1},
        {.account_id = 5, .ladder_step = 1, .last_429_at = 1700000000 - 60, .retry_after = -1,
         .primary_used_pct = 100, .primary_reset_at = 1700000000 + 900, .secondary_used_pct = -1,
         .family = "codex_bengalfox"},
    };
    const char *classes[] = {"rate_limit", "quota", "server", "network"};
    char why[512];
    for (size_t i = 0; i < sizeof sts / sizeof sts[0]; i++)
        for (size_t k = 0; k < 4; k++) {
            hook_call h = {.pe = pe, .st = &sts[i], .cls = classes[k], .now = 1700000000};
            if (hook_run(pe, policy_cooldown_run, &h, why, sizeof why) != 0)
                return check_fail(pe, HOOK_COOLDOWN, why, err, errlen);
        }
    return 0;
}

static const policy_candidate check_cands[] = {
    {.id = 11, .name = "a", .kind = "chatgpt", .sort = 0, .updated_at = 100, .primary_used_pct = 10,
     .secondary_used_pct = 20, .success_rate = 1, .latency_ema_ms = 300, .max_concurrency = 1,
     .weight = 3, .current_weight = -1},
    {.id = 12, .name = "b", .kind = "api_key", .sort = 0, .updated_at = 200, .primary_used_pct = -1,
     .secondary_used_pct = -1, .success_rate = 0.5, .latency_ema_ms = 900, .inflight = 1,
     .weight = 1, .current_weight = 1},
    {.id = 13, .name = "c", .kind = "aggregate", .sort = 1, .updated_at = 50, .primary_used_pct = 99,
     .secondary_used_pct = 95, .success_rate = 0.9, .latency_ema_ms = 100, .reserve = 1,
     .weight = 1},
};

static int check_guard_order(policy_engine *pe, char *err, size_t errlen)
{
    const policy_order_ctx ctxs[] = {
        {.strategy = "ordered", .rotation = "account_rotation", .model = "gpt-5", .platform_key_id = 1, .seed = 7},
        {.strategy = "balanced", .rotation = "hybrid_rotation", .model = "gpt-5", .platform_key_id = 1,
         .cursor = 12, .preferred = 13, .seed = 3},
        {.strategy = "ordered", .rotation = "hybrid_aggregate_first_rotation", .seed = 0},
        {.strategy = "weighted", .rotation = "hybrid_rotation", .model = "gpt-5", .platform_key_id = 2, .seed = 1},
    };
    char why[512];
    size_t perm[3];
    for (size_t i = 0; i < 3; i++) {
        hook_call h = {.pe = pe, .c = &check_cands[i]};
        if (hook_run(pe, policy_guard_run, &h, why, sizeof why) != 0)
            return check_fail(pe, HOOK_GUARD, why, err, errlen);
    }
    for (size_t i = 0; i < sizeof ctxs / sizeof ctxs[0]; i++) {
        hook_call h = {.pe = pe, .c = check_cands, .n = 3, .perm = perm, .ctx = &ctxs[i]};
        if (hook_run(pe, policy_order_run, &h, why, sizeof why) != 0)
            return check_fail(pe, HOOK_ORDER, why, err, errlen);
    }
    return 0;
}

static int check_breaker(policy_engine *pe, char *err, size_t errlen)
{
    const policy_breaker_state sts[] = {
        {.account_id = 1, .kind = "api_key", .state = BREAKER_CLOSED, .consecutive_failures = 4,
         .window_requests = 4, .window_failures = 4},
        {.account_id = 2, .kind = "aggregate", .state = BREAKER_HALF_OPEN, .consecutive_successes = 2,
         .window_requests = 12, .window_failures = 8},
        {.account_id = 3, .kind = "chatgpt", .state = BREAKER_OPEN, .consecutive_failures = 1,
         .window_requests = 20, .window_failures = 1},
    };
    char why[512];
    for (size_t i = 0; i < sizeof sts / sizeof sts[0]; i++)
        for (int ok = 0; ok < 2; ok++) {
            hook_call h = {.pe = pe, .bst = &sts[i], .success = ok, .now = 1700000000};
            if (hook_run(pe, policy_breaker_run, &h, why, sizeof why) != 0)
                return check_fail(pe, HOOK_BREAKER, why, err, errlen);
        }
    return 0;
}

static int check_budget(policy_engine *pe, char *err, size_t errlen)
{
    const policy_budget bs[] = {
        {.kind = "key", .name = "k", .period = "month", .usd = 50, .spent = 12.5, .start = 1700000000,
         .resets_at = 1702592000, .now = 1700100000},
        {.kind = "account", .name = "a", .period = "7d", .usd = 5, .spent = 5.01, .start = 1700000000,
         .resets_at = 1700604800, .now = 1700100000},
    };
    char why[512];
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) {
        hook_call h = {.pe = pe, .budget = &bs[i]};
        if (hook_run(pe, policy_budget_run, &h, why, sizeof why) != 0)
            return check_fail(pe, HOOK_BUDGET, why, err, errlen);
    }
    return 0;
}

static int check_strip(policy_engine *pe, char *err, size_t errlen)
{
    const policy_blob bs[] = {
        {.item_type = "reasoning", .origin = "a", .origin_kind = "chatgpt", .target = "b", .target_kind = "chatgpt"},
        {.item_type = "compaction", .origin = "a", .origin_kind = "chatgpt", .target = "b", .target_kind = "api_key"},
        {.item_type = "function_call_output", .in_part = 1, .origin = "", .origin_kind = "", .target = "b",
         .target_kind = "chatgpt", .strip_retry = 1},
        {.item_type = "", .origin = "", .origin_kind = "", .target = "c", .target_kind = "aggregate"},
    };
    char why[512];
    for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) {
        hook_call h = {.pe = pe, .blob = &bs[i]};
        if (hook_run(pe, policy_strip_run, &h, why, sizeof why) != 0)
            return check_fail(pe, HOOK_STRIP, why, err, errlen);
    }
    return 0;
}

static int check_exhausted(policy_engine *pe, char *err, size_t errlen)
{
    const policy_out_account accts[] = {
        {.name = "a", .kind = "chatgpt", .why = "cooling down for 280s after quota", .last_class = "quota",
         .until = 1700000280, .primary_used_pct = 100, .secondary_used_pct = 40, .primary_reset_at = 1700003600,
         .plan_type = "plus"},
        {.name = "b", .kind = "api_key", .why = "cooling down for 20s after network", .last_class = "network",
         .until = 1700000020, .primary_used_pct = -1, .secondary_used_pct = -1, .plan_type = ""},
    };
    const policy_exhausted exs[] = {
        {.endpoint = "/v1/responses", .now = 1700000000, .accounts = accts, .n = 1},
        {.endpoint = "/v1/responses", .now = 1700000000, .accounts = accts, .n = 2},
        {.endpoint = "/v1/chat/completions", .now = 1700000000, .accounts = accts, .n = 1},
        {.endpoint = "/v1/responses", .now = 1700000000, .accounts = accts, .n = 0},
    };
    char why[512];
    for (size_t i = 0; i < sizeof exs / sizeof exs[0]; i++) {
        hook_call h = {.pe = pe, .ex = &exs[i]};
        if (hook_run(pe, policy_exhausted_run, &h, why, sizeof why) != 0)
            return check_fail(pe, HOOK_EXHAUSTED, why, err, errlen);
    }
    return 0;
}

static int check_first_token(policy_engine *pe, char *err, size_t errlen)
{
    const policy_first_token fts[] = {
        {.endpoint = "/v1/chat/completions", .model = "gpt-4o", .stream = 1, .account_kind = "api_key", .prompt_kib = 1},
        {.endpoint = "/v1/responses", .model = "gpt-5", .reasoning = "high", .stream = 1, .account_kind = "chatgpt",
         .prompt_kib = 256},
        {.endpoint = "/v1/responses", .model = "", .reasoning = "", .stream = 0, .account_kind = "aggregate",
         .prompt_kib = 4096},
    };
    char why[512];
    for (size_t i = 0; i < sizeof fts / sizeof fts[0]; i++) {
        hook_call h = {.pe = pe, .ft = &fts[i]};
        if (hook_run(pe, policy_first_token_run, &h, why, sizeof why) != 0)
            return check_fail(pe, HOOK_FIRST_TOKEN, why, err, errlen);
    }
    return 0;
}

static int check_alert(policy_engine *pe, char *err, size_t errlen)
{
    const policy_alert_event evs[] = {
        {"account_held", "a", "key_refused", "account a is held: the upstream refuses this key as invalid", "", 1700000000},
        {"pool_exhausted", "pool", "usage_limit", "no account can serve /v1/responses", "https://hooks.example/x",
         1700000000},
        {"db_degraded", "database", "writer_failing", "the database writer is failing", "http://127.0.0.1:9/a", 0},
    };
    char why[512];
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++) {
        policy_alert_post posts[POLICY_ALERT_POSTS] = {{0}};
        hook_call h = {.pe = pe, .alert = &evs[i], .posts = posts, .scratch = SBUF_INIT};
        int rc = hook_run(pe, policy_alert_run, &h, why, sizeof why);
        sbuf_free(&h.scratch);
        for (size_t j = 0; j < POLICY_ALERT_POSTS; j++)
            policy_alert_post_free(&posts[j]);
        if (rc != 0)
            return check_fail(pe, HOOK_ALERT, why, err, errlen);
    }
    return 0;
}

static int check_dialect(policy_engine *pe, char *err, size_t errlen)
{
    static const char *const kinds[] = {"api_key", "chatgpt", "aggregate"}, *const apis[] = {"responses", "chat"};
    char why[512];
    for (size_t k = 0; k < 3; k++)
        for (size_t c = 0; c < 2; c++)
            for (size_t u = 0; u < 2; u++) {
                policy_dialect *r = calloc(1, sizeof *r);
                policy_dialect_ask ask = {kinds[k], apis[c], apis[u]};
                hook_call h = {.pe = pe, .dask = &ask, .dialect = r};
                int rc = r ? hook_run(pe, policy_dialect_run, &h, why, sizeof why) : -1;
                free(r);
                if (rc != 0)
                    return check_fail(pe, HOOK_DIALECT, r ? why : "out of memory", err, errlen);
            }
    return 0;
}

static int check_price(policy_engine *pe, char *err, size_t errlen)
{
    const char *models[] = {"gpt-5", "gpt-4o-2024-08-06", "no-such-model", ""};
    char why[512];
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        hook_call h = {.pe = pe, .model = models[i]};
        if (hook_run(pe, policy_price_run, &h, why, sizeof why) != 0)
            return check_fail(pe, HOOK_PRICE, why, err, errlen);
    }
    return 0;
}

policy_engine *policy_new(const char *dir, char *err, size_t errlen)
{
    policy_engine *pe = calloc(1, sizeof *pe);
    if (!pe) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    static uint64_t generations;
    pe->generation = ++generations; /* engines are made on the loop thread (start-up, SIGHUP) */
    snprintf(pe->source, sizeof pe->source, "%s", dir ? dir : "embedded");
    pe->max_attempts = POLICY_MAX_ATTEMPTS_DEFAULT;
    pe->max_seconds = POLICY_MAX_SECONDS_DEFAULT;
    pe->sb = sandbox_new(POLICY_MEM_LIMIT, POLICY_INSTR_LIMIT, POLICY_TIME_MS, err, errlen);
    if (!pe->sb)
        goto fail;
    if (sandbox_export_embedded(pe->sb, "lua/sy.lua", "sy", err, errlen) != 0)
        goto fail;
    for (int i = 0; i < HOOK_COUNT; i++)
        if (engine_load_hook(pe, dir, i, err, errlen) != 0)
            goto fail;
    if (check_classify(pe, err, errlen) || check_cooldown(pe, err, errlen) ||
        check_guard_order(pe, err, errlen) || check_breaker(pe, err, errlen) || check_price(pe, err, errlen) ||
        check_budget(pe, err, errlen) || check_strip(pe, err, errlen) || check_exhausted(pe, err, errlen) ||
        check_first_token(pe, err, errlen) || check_alert(pe, err, errlen) || check_dialect(pe, err, errlen))
        goto fail;
    /* would this classify resume a cut text-only chat stream? a Responses one? */
    const char *const endpoints[] = {"/v1/chat/completions", "/v1/responses"};
    pe->may_resume = 0;
    for (int i = 0; i < 2; i++) {
        policy_event cut = {.status = 200, .in_stream = 1, .network_error = 1, .retry_after = -1,
                            .account_kind = "api_key", .endpoint = endpoints[i], .after_output = 1,
                            .delivered_chars = 100, .alternatives = 1, .continuable = 1};
        policy_verdict v;
        hook_call h = {.pe = pe, .ev = &cut, .verdict = &v};
        char why[512];
        if (hook_run(pe, policy_classify_run, &h, why, sizeof why) == 0 && v.action == VERDICT_RESUME)
            pe->may_resume |= 1 << i;
    }
    log_debug("policy: hooks loaded from %s (%zu KiB of Lua memory)", pe->source,
              sandbox_memory(pe->sb) / 1024);
    return pe;
fail:
    policy_free(pe);
    return NULL;
}

void policy_free(policy_engine *pe)
{
    if (!pe)
        return;
    sandbox_free(pe->sb);
    for (size_t i = 0; i < DIALECT_MEMO; i++)
        free(pe->dialects[i]);
    free(pe);
}

const char *policy_source(const policy_engine *pe) { return pe ? pe->source : "none"; }
uint64_t policy_generation(const policy_engine *pe) { return pe ? pe->generation : 0; }
uint64_t policy_fallbacks(const policy_engine *pe) { return pe ? pe->fallbacks : 0; }
int policy_may_resume(const policy_engine *pe, const char *endpoint)
{
    if (!pe || !endpoint)
        return 0;
    int bit = strcmp(endpoint, "/v1/chat/completions") == 0 ? 1 : strcmp(endpoint, "/v1/responses") == 0 ? 2 : 0;
    return (pe->may_resume & bit) != 0;
}
const char *policy_last_error(const policy_engine *pe) { return pe ? pe->last_error : ""; }

int policy_file_info(const policy_engine *pe, size_t i, policy_file *out)
{
    if (!pe || i >= HOOK_COUNT)
        return -1;
    out->hook = policy_hook_names[i];
    out->path = pe->files[i];
    out->sha256 = pe->sha256[i];
    out->fallbacks = pe->hook_fallbacks[i];
    return 0;
}
