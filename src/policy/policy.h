/* policy.h: the Lua 5.4 policy engine. The C core keeps all state and calls
 * its hooks with plain-table snapshots: classify, cooldown, guard, order,
 * breaker, budget, strip, exhausted, first_token, alert (policies/<hook>.lua, each
 * returning its function) and price (policies/prices.lua). Every call runs in a
 * sandbox under an instruction-count hook and a memory cap; on any error,
 * timeout, out-of-memory or malformed result the built-in safe default (the
 * same rules in C) decides and a warning is logged. The engine never fails
 * its caller. */
#ifndef SY_POLICY_H
#define SY_POLICY_H
#include <stddef.h>
#include <stdint.h>

typedef struct policy_engine policy_engine;

/* Loads the hooks from dir (NULL: the copies embedded in the binary), runs
 * the self-check (each hook called on fixtures and its result validated).
 * Returns NULL and fills err on any failure. */
policy_engine *policy_new(const char *dir, char *err, size_t errlen);
void policy_free(policy_engine *pe);
const char *policy_source(const policy_engine *pe); /* dir or "embedded" */
/* A number no other engine of this process had (never 0 for an engine,
 * 0 for NULL): what a verdict kept across requests was computed by. */
uint64_t policy_generation(const policy_engine *pe);

/* Counters of hook failures that fell back to the built-in default. */
uint64_t policy_fallbacks(const policy_engine *pe);
/* The last fallback's reason, e.g. "classify: timeout: ...", "" if none
 * (redacted; safe to log or show). The hook calls below also accept
 * pe == NULL: the built-in default decides. */
const char *policy_last_error(const policy_engine *pe);

/* The i-th hook's file as loaded (for the admin API); -1 past the last. */
typedef struct policy_file {
    const char *hook;       /* "classify", ... */
    const char *path;       /* file path, or "policies/<hook>.lua" for the embedded copy */
    const char *sha256;     /* hex digest of the text loaded */
    uint64_t fallbacks;     /* calls of this hook decided by the built-in default */
} policy_file;
int policy_file_info(const policy_engine *pe, size_t i, policy_file *out);

/* --- classify: what to do with an upstream failure --- */
typedef struct policy_event {
    int status;                /* HTTP status; 0 for network errors/timeouts */
    const char *body;          /* error body or in-stream error event data (may be NULL) */
    size_t body_len;           /* capped by the caller at 16 KiB */
    const char *error_type;    /* from the JSON error object, or NULL */
    const char *error_code;
    const char *error_message;
    int network_error;         /* connect/reset/DNS failure */
    int timeout;               /* connect/first-byte/idle timeout */
    int in_stream;             /* error arrived inside a 200 SSE stream, before output */
    double retry_after;        /* seconds from Retry-After / resets_in_seconds, -1 none */
    const char *account_kind;  /* "api_key" | "chatgpt" | "aggregate" */
    const char *model;         /* the model sent to the account (after its model map); NULL unknown */
    const char *endpoint;      /* "/v1/responses", ... */
    const char *not_answer;    /* a 2xx that is no answer: "content_type" | "empty_body" | "no_output"; NULL */
    int retries;               /* same-account retries already made for this request on this account */
    int alternatives;          /* remaining candidates that would send the same model */
    double random;             /* 0 <= random < 1, chosen by C (jitter) */
    int context_fallbacks;     /* remaining candidates declared as larger-context fallbacks */
    int after_output;          /* a stream cut after output reached the client (resume or not) */
    long delivered_chars;      /* after_output: bytes of text the client got */
    int tool_call;             /* after_output: the delivered output held a tool call */
    int continuable;           /* after_output: the gateway can continue the answer on another account
                                * (text only, whole events, a candidate that takes it): "resume" works */
} policy_event;

typedef enum {
    VERDICT_RETURN = 0,        /* hand the error to the client unchanged */
    VERDICT_FAILOVER,          /* cool this account down, try the next candidate */
    VERDICT_RETRY,             /* the same account again after `after` seconds */
    VERDICT_CONTEXT_FALLBACK,  /* the next larger-context fallback candidate, once */
    VERDICT_RESUME,            /* after_output only: finish the stream on the next candidate */
    VERDICT_STRIP_RETRY,       /* the upstream refused an account-bound blob: resend once to the same
                                * account with every blob not known to be its own removed */
    VERDICT_RETRY_TURN,        /* after_output only, Responses: end the stream in the shape its client
                                * retries the turn in (another account serves the retry) */
} policy_action;

/* The action's name in a classify verdict ("failover", "retry_turn", ...). */
const char *policy_action_name(policy_action a);

typedef struct policy_verdict {
    int failover;              /* 1 when action is VERDICT_FAILOVER */
    policy_action action;
    char cls[32];              /* failure class, e.g. "rate_limit", "quota", "server", "network" */
    double cooldown;           /* seconds chosen by classify, or -1: ask the cooldown hook */
    double after;              /* VERDICT_RETRY: seconds to wait, 0..60 */
    int drain_bucket;          /* empty the account's local rpm bucket (the upstream says it is at its limit) */
    /* VERDICT_FAILOVER only: the account leaves the pool in this state until
     * an operator acts (`switchyard account reset`, a changed login), for a
     * refusal waiting does not heal, e.g. "deactivated_workspace",
     * "workspace_denied", "region_unsupported" (route/hold.h says what each
     * means and what to do). 1..31 of [a-z0-9_]; "" none. */
    char state[32];
    /* VERDICT_FAILOVER, rate_limit and quota: the limit is the model's on
     * this account (scope = "model": the API's per-model rate limits), so
     * only that model rests there; 0 the account's (the default) */
    int scope_model;
} policy_verdict;

void policy_classify(policy_engine *pe, const policy_event *ev, policy_verdict *out);

/* 1 when the loaded classify would resume a cut text-only stream of this
 * endpoint ("/v1/chat/completions", "/v1/responses"; asked once at load),
 * so the gateway keeps the delivered text only then. */
int policy_may_resume(const policy_engine *pe, const char *endpoint);

/* --- strip: what an account-bound blob becomes on its way to an account --- */
/* A blob is an opaque string only the account that minted it can read (a
 * reasoning item's encrypted_content, a compaction item, an encrypted
 * content part). The C side finds them and rewrites the body; the hook
 * decides, per blob, from what it is and where it came from. It is asked
 * only for a blob the target did not mint: one another account minted, and
 * (on a strip-retry, after the target refused a blob) one of unknown
 * origin; the target's own blobs always stay, and a blob of unknown origin
 * otherwise passes untouched. */
enum { STRIP_KEEP = 0, STRIP_DROP = 1, STRIP_TEXT = 2 };
typedef struct policy_blob {
    const char *item_type;     /* the input item's type: "reasoning", "compaction", "function_call_output", ... ("" none) */
    int in_part;               /* the blob is an element of an array inside the item (an encrypted content part) */
    const char *origin;        /* the account that minted it, "" unknown */
    const char *origin_kind;   /* its kind, "" unknown */
    const char *target;        /* the account the request goes to */
    const char *target_kind;
    int strip_retry;           /* the target already refused a blob of this request */
} policy_blob;

/* STRIP_KEEP (send it), STRIP_DROP (remove the item, or the part) or
 * STRIP_TEXT (replace it with a text the model can read). */
int policy_strip(policy_engine *pe, const policy_blob *b);

/* --- first_token: how long a stream may show no output before it fails over --- */
/* Asked once per streamed attempt, when its headers came: a stream that
 * shows no progress (docs/policies.md, "Slow first token": a text, refusal,
 * reasoning or tool-call delta, an output item, a terminal event) within
 * that many seconds fails over before anything reached the client.
 * Keepalives, comments and bookkeeping events (response.created,
 * response.in_progress) are no progress. */
typedef struct policy_first_token {
    const char *endpoint;      /* "/v1/responses", "/v1/chat/completions" */
    const char *model;         /* as the client asked ("" none) */
    const char *reasoning;     /* the request's reasoning effort (Responses reasoning.effort, chat
                                * reasoning_effort); "" when it asks for reasoning without an effort;
                                * NULL when it says nothing of reasoning */
    int stream;                /* the client asked for a stream */
    const char *account_kind;  /* "api_key" | "chatgpt" | "aggregate" */
    long prompt_kib;           /* the request body's size in KiB, rounded up to a power of two (1, 2, 4,
                                * ...): the prompt's size, coarse enough that answers are memoized */
} policy_first_token;

/* prompt_kib of a body of n bytes. */
long policy_prompt_kib(size_t n);

#define POLICY_FIRST_TOKEN_MAX 3600.0 /* seconds; the hook answers 1..this */

/* The hook's answer: seconds (the first-token limit alone), or a table
 * {seconds = s, after_output = t}: t (1..POLICY_FIRST_TOKEN_MAX) is the
 * longest silence once output reached the client, after which the stream
 * counts as cut (and is resumed where that is safe). */
typedef struct policy_silence {
    double first_token;        /* 1..POLICY_FIRST_TOKEN_MAX */
    double after_output;       /* 0: none given (the upstream idle limit alone) */
} policy_silence;

policy_silence policy_silence_limits(policy_engine *pe, const policy_first_token *ft);
/* Its first_token alone. */
double policy_first_token_limit(policy_engine *pe, const policy_first_token *ft);

/* --- exhausted: what a client is told when no account can serve --- */
typedef struct policy_out_account {
    const char *name, *kind;
    const char *why;           /* the router's reason, e.g. "cooling down for 280s after quota" */
    const char *last_class;    /* its last failure class ("quota", "rate_limit", ...; "" none) */
    double until;              /* when it can serve again (unix seconds), 0 unknown */
    double primary_used_pct, secondary_used_pct; /* -1 unknown */
    double primary_reset_at, secondary_reset_at; /* 0 unknown */
    const char *plan_type;     /* "" unknown */
} policy_out_account;

typedef struct policy_exhausted {
    const char *endpoint;
    double now;
    const policy_out_account *accounts; /* the enabled accounts that serve the endpoint */
    size_t n;
} policy_exhausted;

/* 1: answer as the ChatGPT backend does when a plan is spent (HTTP 429,
 * error.type usage_limit_reached, resets_at), which Codex shows as a usage
 * limit with its reset time; *resets_at the time to name (0 unknown) and
 * plan_type the plan to name ("" none). 0: today's 503 no_available_account. */
int policy_exhausted_answer(policy_engine *pe, const policy_exhausted *ex, double *resets_at, char *plan_type,
                            size_t plan_n);

/* --- alert: what the operator is told about an event --- */
/* The gateway raises an event (obs/alert.h deduplicates it first); the
 * hook answers with the webhook posts to send, which obs/alert.c sends off
 * the loop. The event carries names only, never a secret. */
typedef struct policy_alert_event {
    const char *kind;        /* "account_needs_login" | "account_held" | "pool_exhausted" | "budget" |
                              * "breaker_open" | "db_degraded" | "test" (the operator's) */
    const char *subject;     /* whom: an account name, "key NAME" / "account NAME", "pool", "database" */
    const char *state;       /* what of it: a hold state, "usage_limit", "80%", ... ("" none) */
    const char *text;        /* one line for a person */
    const char *webhook_url; /* the alert_webhook_url setting ("" none) */
    double now;
} policy_alert_event;

#define POLICY_ALERT_POSTS 4       /* posts one event may ask for */
#define POLICY_ALERT_URL_MAX 2048
#define POLICY_ALERT_BODY_MAX 16384
#define POLICY_ALERT_HEADERS 16

typedef struct policy_alert_post {
    char *url;               /* http:// or https:// */
    char *body;              /* sent as it is (a table body JSON-encoded) */
    size_t body_len;
    char *headers;           /* "Name: value\n" lines, "" none */
} policy_alert_post;

/* Fills out[0..n) with the posts the alert hook asks for (0: none) and
 * returns n (<= POLICY_ALERT_POSTS). Each post's strings are the caller's
 * (policy_alert_post_free). */
size_t policy_alert(policy_engine *pe, const policy_alert_event *ev, policy_alert_post out[POLICY_ALERT_POSTS]);
void policy_alert_post_free(policy_alert_post *p);

/* --- cooldown: how long an account rests after a failure --- */
typedef struct policy_state {
    int64_t account_id;
    int ladder_step;           /* 0 = no 429 yet */
    double last_429_at;        /* unix seconds, 0 none */
    double cooldown_until;
    double retry_after;        /* hint from the response, -1 none */
    double primary_used_pct;   /* the account's windows as last seen (headers or usage poll); -1 unknown */
    double primary_reset_at;   /* unix seconds, 0 unknown */
    double secondary_used_pct;
    double secondary_reset_at;
    /* The limit family the failure is about: "" (or NULL) the whole account;
     * else the family's name (e.g. "codex_bengalfox"): only that family of
     * the account rests, and the ladder and the windows above are the
     * family's own (store.h, account_family). */
    const char *family;
} policy_state;

/* Writes the cooldown seconds and the new ladder step. */
void policy_cooldown(policy_engine *pe, const policy_state *st, const char *cls, double now,
                     double *seconds, int *ladder_step);

/* --- guard and order: which accounts, in what order --- */
enum { GUARD_NORMAL = 0, GUARD_RESERVE = 1, GUARD_EXCLUDE = 2 };

typedef struct policy_candidate {
    int64_t id;
    const char *name;
    const char *kind;          /* "api_key" | "chatgpt" | "aggregate" */
    int sort;
    int64_t updated_at;
    double primary_used_pct;   /* 5 h window, -1 unknown */
    double secondary_used_pct; /* weekly window, -1 unknown */
    double primary_reset_at;   /* unix seconds, 0 unknown */
    double secondary_reset_at;
    double primary_window_s;   /* window lengths, 0 unknown */
    double secondary_window_s;
    const char *plan_type;     /* chatgpt plan, "" unknown */
    int has_credits;           /* -1 unknown */
    int credits_unlimited;     /* -1 unknown */
    double credits_balance;    /* -1 unknown */
    double success_rate;       /* EMA 0..1 */
    double latency_ema_ms;     /* 0: no history */
    double health_age_s;       /* seconds since success_rate last changed, 0 unknown */
    int inflight;
    int max_concurrency;       /* 0 unlimited */
    int reserve;               /* set by C from guard() before order() */
    int weight;                /* weighted strategy: the account's share (>= 0) */
    double current_weight;     /* weighted: smooth weighted round-robin state for this key + model */
    double success_rate_60s;   /* attempts that succeeded in the last 60 s, 0..1; -1 none */
    double latency_60s_ms;     /* mean latency of those successes, -1 none */
    int attempts_60s;
    int translated;            /* it does not speak the client's dialect: the request is translated */
    int unlisted;              /* its upstream's /models list is known and lacks the model (a hint only) */
} policy_candidate;

int policy_guard(policy_engine *pe, const policy_candidate *c); /* GUARD_* */

typedef struct policy_order_ctx {
    const char *strategy;      /* "ordered" | "balanced" | "weighted" */
    const char *rotation;      /* "account_rotation" | "aggregate_api_rotation" | "hybrid_rotation" | "hybrid_aggregate_first_rotation" */
    const char *model;
    int64_t platform_key_id;
    int64_t cursor;            /* balanced: account id tried first last time, 0 none */
    int64_t preferred;         /* preferred account id, 0 none */
    uint32_t seed;             /* randomness for P2C, chosen by C */
} policy_order_ctx;

/* Writes into perm the indices (into c) in try order; returns how many
 * (the policy may drop candidates). Invalid output falls back to the default. */
size_t policy_order(policy_engine *pe, const policy_candidate *c, size_t n,
                    const policy_order_ctx *ctx, size_t *perm);

/* How far one request may go (order.lua's max_attempts and max_seconds,
 * read when the file loads: no call per request): at most max_attempts
 * attempts (failovers and same-account retries alike), and no new attempt
 * or wait after max_seconds since the request arrived, until output has
 * reached the client. pe NULL: the built-in defaults. */
#define POLICY_MAX_ATTEMPTS_DEFAULT 16
#define POLICY_MAX_SECONDS_DEFAULT 120.0
void policy_request_bounds(const policy_engine *pe, int *max_attempts, double *max_seconds);

/* --- breaker: the circuit breaker of every account --- */
enum { BREAKER_CLOSED = 0, BREAKER_OPEN = 1, BREAKER_HALF_OPEN = 2 };

typedef struct policy_breaker_state {
    int64_t account_id;
    const char *kind;          /* "api_key" | "chatgpt" | "aggregate" */
    int state;                 /* BREAKER_* before this outcome */
    int consecutive_failures;  /* counts include this outcome */
    int consecutive_successes;
    int window_requests;       /* the account's last (up to) 20 outcomes */
    int window_failures;
} policy_breaker_state;

/* After an attempt's outcome (success 1 / failure 0): writes the new state
 * (BREAKER_*) and, when open, how many seconds it stays open. */
void policy_breaker(policy_engine *pe, const policy_breaker_state *st, int success, double now,
                    int *state, double *open_seconds);

/* --- price: what a model costs (policies/prices.lua) --- */
typedef struct policy_price {
    double input, cached_input, output; /* USD per million tokens */
} policy_price;

/* 1 and *out filled when the policy prices model; 0 when it does not (or
 * the hook failed: there is no built-in price list). Answers are kept per
 * engine, so the hook runs once per model and policy load. */
int policy_price_get(policy_engine *pe, const char *model, policy_price *out);

/* --- budget: is a budget used up (policies/budget.lua) --- */
typedef struct policy_budget {
    const char *kind;          /* "key" | "account" */
    const char *name;
    const char *period;        /* "month" | "<N>d" */
    double usd, spent;         /* the budget and what the current window spent */
    double start, resets_at, now; /* unix seconds */
} policy_budget;

/* 1 when the policy says the budget is used up ("over"), else 0. */
int policy_budget_over(policy_engine *pe, const policy_budget *b);

/* --- dialect: what an upstream accepts of a request (policies/dialect.lua) ---
 * Asked with the account's kind and the two dialects of an attempt; the
 * answer is data, kept per (kind, client, upstream) and policy load, so the
 * hook runs a few times per load, never per request (src/dialect/). */
typedef struct policy_dialect_ask {
    const char *kind;          /* "api_key" | "chatgpt" | "aggregate" | "anthropic" */
    const char *client;        /* "responses" | "chat": what the client speaks */
    const char *upstream;      /* what the request is sent in ("responses" | "chat" | "messages") */
} policy_dialect_ask;

#define POLICY_DIALECT_NAMES 48    /* fields per list, at most */
#define POLICY_DIALECT_NAME_MAX 48 /* a field's name, NUL included */
#define POLICY_DIALECT_TEXT_MAX 4096 /* the default instructions, NUL included */

typedef struct policy_dialect {
    int stream;                /* 1: the upstream request always streams (a client that asked no
                                * stream gets one aggregated answer); 0: as the client asked */
    int store_off;             /* 1: "store": false always upstream (the upstream keeps nothing:
                                * the gateway's conversation record serves what the client asked) */
    int input_list;            /* 1: a string "input" is sent as one user message item */
    int strip_item_ids;        /* 1: input items go without their "id" (an upstream that stores
                                * nothing refuses ids of items it would have to look up) */
    char system_role[16];      /* "" as sent; else the role a system message in "input" takes
                                * (the ChatGPT backend: "developer") */
    int has_instructions;      /* 1: a request without instructions gets instructions (below) */
    char instructions[POLICY_DIALECT_TEXT_MAX];
    size_t n_drop;             /* top-level fields removed before the request goes upstream */
    char drop[POLICY_DIALECT_NAMES][POLICY_DIALECT_NAME_MAX];
    size_t n_rename;           /* top-level fields renamed: rename_from[i] becomes rename_to[i] */
    char rename_from[POLICY_DIALECT_NAMES][POLICY_DIALECT_NAME_MAX];
    char rename_to[POLICY_DIALECT_NAMES][POLICY_DIALECT_NAME_MAX];
    size_t n_ignore;           /* fields (or "tools.<type>") a translation may leave out: the
                                * upstream would ignore them; any other untranslatable field is a 400 */
    char ignore[POLICY_DIALECT_NAMES][POLICY_DIALECT_NAME_MAX];
} policy_dialect;

/* The rules for an attempt: the dialect hook's answer (kept per engine,
 * kind and pair), or the built-in defaults (policy_defaults.c) when the
 * hook errs. Never NULL; valid until the engine is freed. */
const policy_dialect *policy_dialect_rules(policy_engine *pe, const policy_dialect_ask *ask);

/* `switchyard test [DIR] [--policies PDIR]`: runs the Lua specs. Returns the exit code. */
int policy_test_main(int argc, char **argv);

#endif
