/* store.h: sqlite persistence (accounts, platform keys, account state,
 * request logs, settings, response-id owners, conversations) in WAL mode with versioned
 * migrations. The loop thread only
 * reads (with busy_timeout 0); every write from the serving path goes through
 * an in-process writer thread with its own connection, so no commit, busy
 * wait or flush ever runs on the event loop. The CLI writes synchronously. */
#ifndef SY_STORE_H
#define SY_STORE_H
#include <stddef.h>
#include <stdint.h>
#include "base/sbuf.h"

typedef struct store store;

/* anthropic: a key of the Anthropic API (x-api-key, anthropic-version); it
 * speaks the Messages API only (docs/claude.md). */
typedef enum { ACCOUNT_API_KEY = 0, ACCOUNT_CHATGPT = 1, ACCOUNT_AGGREGATE = 2, ACCOUNT_ANTHROPIC = 3 } account_kind;

const char *account_kind_name(account_kind k);          /* "api_key" | "chatgpt" | "aggregate" | "anthropic" */
int account_kind_parse(const char *s, account_kind *out); /* 0 ok, -1 unknown */

typedef struct account {
    int64_t id;
    char *name;
    account_kind kind;
    char *base_url;        /* e.g. https://api.openai.com/v1 or https://chatgpt.com/backend-api/codex */
    char *token;           /* secret: never log */
    char *chatgpt_account_id; /* chatgpt kind: ChatGPT-Account-Id header, may be NULL */
    char *model_map;       /* JSON object text {"req-model":"upstream-model"} or NULL */
    int sort;
    int enabled;
    int max_concurrency;   /* 0 = unlimited */
    int context_fallback;  /* a larger-context fallback: gets requests another account refused as too long */
    int64_t reset_gen;     /* bumped by `account reset`: the gateway clears its routing state */
    int64_t created_at, updated_at; /* unix seconds */
    /* A full ChatGPT login (chatgpt kind; NULL / 0 when not known). */
    char *refresh_token;   /* secret: never log */
    char *id_token;        /* secret: never log */
    char *email;
    char *plan_type;
    int64_t token_expires_at; /* the access token's JWT exp, unix seconds; 0 unknown */
    int64_t last_refresh_at;  /* last successful refresh (or the login's own last_refresh) */
    char *login_error;     /* needs_login: why the refresh token was refused; NULL when fine */
    int weight;            /* weighted strategy share (>= 0, default 1) */
    int max_rpm, max_tpm;  /* local rate limits per minute, 0 = none (ratelimit.c) */
    double budget_usd;     /* 0 = none (budget.c) */
    char budget_period[16]; /* "month" or "<N>d" */
    /* Held out of the pool until an operator acts (route/hold.h): the
     * upstream refused the account for a reason waiting does not heal. */
    char *hold;            /* the state (classify's verdict state), e.g. "deactivated_workspace"; NULL when not held */
    char *hold_detail;     /* what the upstream said, e.g. "HTTP 402 deactivated_workspace"; NULL none */
    int64_t hold_since;    /* unix seconds; 0 when not held */
    char *models;          /* the operator's model list, comma-separated exact names; NULL: no override */
    int prefill;           /* account_prefill: whether a stream resume's assistant prefill may go here */
    int speaks;            /* account_speaks: the dialects its upstream speaks, as the operator declared */
} account;

/* Which API dialects an account's upstream speaks (docs/clients.md): the
 * operator's word, or auto (the kind's default: a ChatGPT login speaks the
 * Responses API, a key or relay is taken to speak both until one answers
 * 404/405 to an endpoint, which the gateway learns: account_state's
 * dialects_refused). Stored as text in accounts.speaks. */
typedef enum { SPEAKS_AUTO = 0, SPEAKS_RESPONSES, SPEAKS_CHAT, SPEAKS_BOTH } account_speaks;
const char *account_speaks_name(int s);             /* "auto" | "responses" | "chat" | "both" */
/* "auto", "responses", "chat", "both" (also "responses,chat" and "chat,responses"): 0, -1 unknown */
int account_speaks_parse(const char *s, int *out);
/* Dialects as bits (the same bits as dialect.h's DIALECT_BIT of api_kind). */
#define ACCOUNT_DIALECT_CHAT 1u
#define ACCOUNT_DIALECT_RESPONSES 2u
#define ACCOUNT_DIALECT_MESSAGES 4u /* the Anthropic Messages API: an anthropic account's, and only it */
struct account_state;
/* What a's upstream speaks now: its declared or kind's dialects, less the
 * ones it was learned to refuse (st may be NULL); never none (a refusal of
 * everything is no dialect fact: the declared set is kept). */
unsigned account_dialects(const account *a, const struct account_state *st);

/* Whether an account takes an assistant prefill (the continuation of a
 * stream cut after output, docs/policies.md "Stream resume"): the
 * operator's word (yes, no), or auto (learned: the first refusal, a 400 or
 * 422 to a continuation, makes it "refused" and is kept; `account reset`
 * makes it auto again). Stored as text in accounts.prefill. */
typedef enum { PREFILL_AUTO = 0, PREFILL_YES, PREFILL_NO, PREFILL_REFUSED } account_prefill;
const char *account_prefill_name(int p);             /* "auto" | "yes" | "no" | "refused" */
int account_prefill_parse(const char *s, int *out);  /* auto, yes, no (and refused): 0, -1 unknown */

/* A login's fields beside its access token, as account add, account update
 * and import hand them to the store (pointers into the caller's data; see
 * login_entry_login). In an account_patch, NULL / 0 keep what is stored. */
typedef struct account_login {
    const char *refresh_token, *id_token, *email, *plan_type; /* NULL: none */
    int64_t token_expires_at, last_refresh_at;                 /* 0: unknown */
} account_login;

typedef struct account_new {
    const char *name, *base_url, *token, *chatgpt_account_id, *model_map;
    account_kind kind;
    int sort;
    int max_concurrency;   /* -1: default for the kind (1 for chatgpt, 0 otherwise) */
    int context_fallback;
    account_login login;
    int weight;            /* 0: default (1) */
    int max_rpm, max_tpm;  /* 0: none */
    double budget_usd;     /* 0: none */
    const char *budget_period; /* NULL: "month" */
    const char *models;    /* NULL or "": no override */
    int disabled;          /* 1: added disabled (an import of an export that says "enabled": false) */
    int prefill;           /* account_prefill; 0: auto */
    int speaks;            /* account_speaks; 0: auto */
} account_new;

typedef struct platform_key {
    int64_t id;
    char *name;
    char hash[65];         /* sha256 hex of the key */
    char prefix[16];       /* first chars, safe to show */
    int64_t preferred_account_id; /* 0 = none */
    int revoked;
    /* rules (key_rules.c) */
    char *allowed_models;  /* comma-separated exact names or fnmatch patterns; NULL = every model */
    int max_rpm;           /* requests per minute, 0 = unlimited */
    int64_t expires_at;    /* unix seconds, 0 = never */
    double budget_usd;     /* 0 = none (budget.c) */
    char budget_period[16]; /* "month" or "<N>d" */
} platform_key;

/* A cooldown of one limit family of an account. The ChatGPT backend meters
 * some models apart from the account's main limit ("codex"): a family of
 * its own (x-codex-<family>-* headers, x-codex-active-limit naming it on
 * an answer for such a model). A 429 for a model of such a family cools
 * only that family: the account keeps serving other models. A few slots
 * per account (the oldest cooldown gives way); persisted with the state
 * (account_state.family_cooldowns, a JSON array). docs/codex.md. */
#define ACCOUNT_FAMILIES 4
#define ACCOUNT_FAMILY_MAX 32        /* a family name's room, NUL included */
#define ACCOUNT_FAMILY_MODEL_MAX 64  /* a model name's room, NUL included */
typedef struct account_family {
    char family[ACCOUNT_FAMILY_MAX];  /* the limit id, e.g. "codex_bengalfox"; "" a free slot */
    char model[ACCOUNT_FAMILY_MODEL_MAX]; /* the model whose 429 cooled it ("" one too long to keep) */
    double until;                     /* unix seconds; the family rests until then */
    double last_429_at;               /* the family's own 429 ladder */
    int ladder_step;
    double primary_used_pct, secondary_used_pct; /* the family's windows as its 429 said; -1 unknown */
    double primary_reset_at, secondary_reset_at; /* unix seconds, 0 unknown */
} account_family;

/* Persisted routing state of one account; the in-memory copy is authoritative
 * while serving and is written through the writer thread on every change. */
typedef struct account_state {
    int64_t account_id;
    double cooldown_until;   /* unix seconds (fractional) */
    int ladder_step;         /* 429 ladder position, 0 = none yet */
    double last_429_at;
    char last_error[32];     /* last failure class */
    double primary_used_pct; /* -1 unknown */
    double secondary_used_pct;
    double primary_reset_at, secondary_reset_at; /* unix seconds, 0 unknown */
    double primary_window_s, secondary_window_s; /* window lengths, 0 unknown */
    char plan_type[24];      /* chatgpt plan ("plus", "pro", ...), "" unknown */
    int has_credits;         /* -1 unknown, 0/1 */
    int credits_unlimited;   /* -1 unknown, 0/1 */
    double credits_balance;  /* -1 unknown */
    double usage_polled_at;  /* last usage poll answered (any status), 0 never */
    int usage_poll_status;   /* HTTP status of that poll, 0 none / network error */
    double success_ema;      /* 0..1 */
    double latency_ema_ms;
    double updated_at;
    /* the last 60 s as of updated_at (health_window.c): for `account list` */
    double success_rate_60s; /* -1 no attempts */
    double latency_60s_ms;   /* -1 none */
    int attempts_60s;
    account_family fam[ACCOUNT_FAMILIES]; /* cooldowns per limit family (above) */
    /* dialects its upstream answered 404/405 to (an endpoint it does not
     * have), learned by the gateway: a bit per api_kind (1 << API_CHAT,
     * 1 << API_RESPONSES); `account reset` and `account update --speaks` forget them */
    int dialects_refused;
} account_state;

/* The family slots of st as the JSON array stored in
 * account_state.family_cooldowns (appended to out; "" when none is used),
 * and back: text that is not such an array, or slots that do not fit,
 * leave st's slots as they are (cleared first). */
void store_families_json(const account_state *st, sbuf *out);
void store_families_parse(account_state *st, const char *text);

typedef struct request_log {
    double ts;
    int64_t platform_key_id;
    char endpoint[32];
    char model[128];
    char upstream_model[128]; /* the model the serving attempt was sent (after its model map); "" none */
    int stream;
    int64_t account_id;      /* 0 = none: the account that finally served (or failed last) */
    char account_name[128];
    int status;
    int attempts;
    double latency_ms;
    char route_strategy[32];
    char error_class[32];
    long input_tokens, output_tokens, total_tokens; /* -1 unknown */
    /* JSON array of the attempts ({account, account_id, model, outcome,
     * class, status, ms}), heap-allocated; store_writer_put_log takes it
     * over (and frees it). NULL: none recorded. */
    char *attempts_json;
    int resumed;             /* a cut stream was finished on another account (opt-in stream resume) */
    long cached_tokens;      /* of input_tokens; -1 unknown */
    double cost_usd;         /* from the price policy (spend.c); -1 unknown */
    /* What the client was told when the request failed (the upstream's
     * error message or the gateway's own), already made fit to keep
     * (log_redact_message: one line, no credentials), heap-allocated;
     * store_writer_put_log takes it over and cuts it to
     * STORE_LOG_MESSAGE_MAX bytes. NULL: none (every success). */
    char *error_message;
} request_log;
#define STORE_LOG_MESSAGE_MAX 300

/* Opens (creating with mode 0600 if missing) and migrates. Returns NULL and
 * fills err on failure: a message that names the database once and the
 * cause ("cannot open database X: <reason>"); callers add no prefix. */
store *store_open(const char *path, char *err, size_t errlen);
void store_close(store *s);   /* stops the writer (draining its queue) first */
const char *store_path(const store *s);
/* The main connection, for the read-only query modules beside this one
 * (store_admin.c). Loop-thread reads only: busy_timeout 0. */
struct sqlite3 *store_db(store *s);

/* Fills out[0..n) (no NUL added) with uniformly random base62 characters
 * from getrandom(). 0 ok, -1 failure. */
int store_random_base62(char *out, size_t n);

/* --- synchronous API (CLI, start-up, tests) --- */
int store_account_add(store *s, const account_new *a, int64_t *id_out, char *err, size_t errlen);
int store_accounts_load(store *s, account **out, size_t *n); /* ORDER BY sort ASC, updated_at DESC, id ASC */
void store_accounts_free(account *a, size_t n);
/* Frees (and wipes the secrets of) one account's members. */
void store_account_clear(account *a);
/* Creates a platform key; writes the plaintext key (shown once) into key_out. */
int store_key_add(store *s, const char *name, char *key_out, size_t keylen, int64_t *id_out,
                  char *err, size_t errlen);
/* A new platform key without storing it: the plaintext (keylen >= 44),
 * its sha256 hex and its display prefix. 0 ok, -1 (err filled). */
int store_key_generate(char *key_out, size_t keylen, char hash[65], char prefix[16], char *err, size_t errlen);
int store_key_set_preferred(store *s, int64_t key_id, int64_t account_id);
int store_keys_load(store *s, platform_key **out, size_t *n);
void store_keys_free(platform_key *k, size_t n);
int store_states_load(store *s, account_state **out, size_t *n);
/* The model lists learned from the accounts' upstreams (migration 18):
 * fn per account with one, ids the comma-separated list (NULL unknown),
 * codex the Codex form's "models" array text (NULL none). 0 ok, -1 error.
 * Never waits for a lock. */
int store_models_load(store *s, void (*fn)(void *ud, int64_t account_id, const char *ids, const char *codex),
                      void *ud);
/* A counter bumped (by triggers) whenever accounts or platform_keys change,
 * from any process: the server polls it to reload its snapshot. -1 on error. */
int64_t store_config_version(store *s);
/* Number of request_logs rows (tests, diagnostics). */
int64_t store_request_log_count(store *s);

/* Administration by name (CLI). Each returns -1 and fills err when the name
 * is unknown or the write fails. Enabling or disabling leaves updated_at
 * alone, so the routing order does not change. Removing an account also
 * drops its state and response owners and clears it as any key's preferred
 * account; its request logs stay. */
int store_account_set_enabled(store *s, const char *name, int enabled, char *err, size_t errlen);
/* Clears the account's cooldown, 429 ladder, health and hold, and bumps its
 * reset_gen so a running gateway clears its in-memory state (breaker too). */
int store_account_reset(store *s, const char *name, char *err, size_t errlen);
int store_account_remove(store *s, const char *name, char *err, size_t errlen);
/* Keys are named by the CLI with --id, --prefix or --name. store_key_select
 * finds the one key a selector means (id > 0; else prefix, matching the
 * start `key list` shows or more of the key; else name, a live key before
 * revoked ones): 1 with *out, 0 no such key, -1 when two live keys match
 * (a name from before names were unique, a short prefix) or on error; err
 * says which. store_key_add refuses a name a live key has. */
int store_key_select(store *s, int64_t id, const char *prefix, const char *name, int64_t *out, char *err,
                     size_t errlen);
int store_key_live_by_name(store *s, const char *name, int64_t *id, char prefix[16]);
/* The key's preferred account by name (NULL clears it): 0, -1 (err). */
int store_key_prefer(store *s, int64_t key_id, const char *account_name, char *err, size_t errlen);
/* 1 revoked, 0 it already was, -1 (err) */
int store_key_revoke_id(store *s, int64_t id, char *err, size_t errlen);

/* --- for the query files of other tables (store_codex.c); CLI path only ---
 * The main connection, and the busy wait a synchronous write brackets
 * itself with (the loop never waits: it runs with busy_timeout 0). */
struct sqlite3 *store_sqlite(store *s);
void store_sync_write_begin(store *s);
void store_sync_write_end(store *s);
/* What `key add/update` changes; a field applies when its set_ flag is on.
 * allowed_models NULL (with set_models) allows every model again. */
typedef struct key_update {
    int set_models, set_rpm, set_expires, set_budget, set_period;
    const char *allowed_models;
    int max_rpm;
    int64_t expires_at;
    double budget_usd;
    const char *budget_period;
} key_update;
/* Applies u to the key with this id (key_id > 0) or to every key called
 * name. Returns how many keys changed, -1 with err filled on error or when
 * no key matched. (store_controls.c) */
int store_key_update(store *s, int64_t key_id, const char *name, const key_update *u, char *err, size_t errlen);

/* One line of `switchyard usage`: requests since a time, grouped. Token sums
 * count only the requests that reported usage; unpriced counts requests
 * with usage but no price (their cost is not in cost_usd). */
typedef struct usage_row {
    char group[160];
    int64_t requests, input_tokens, cached_tokens, output_tokens, total_tokens, unpriced;
    double cost_usd;
} usage_row;
/* by: NULL (one total line), "key", "account", "model" or "day" (UTC).
 * Calls fn per group (day: in date order; others: by cost, then requests,
 * descending). 0 ok, -1 error (err filled). (store_controls.c) */
int store_usage_report(store *s, const char *by, double since, void (*fn)(void *ud, const usage_row *r), void *ud,
                       char *err, size_t errlen);

/* USD spent (request_logs.cost_usd) since `since` by a platform key
 * (by_key) or an account; 0 ok, -1 error. Never waits for a lock.
 * (store_controls.c) */
int store_spent_since(store *s, int by_key, int64_t id, double since, double *out);
/* The same, and how many of those requests had a price (cost > 0): the
 * budget's typical request cost at start (route/budget_hold.h). */
int store_spend_since(store *s, int by_key, int64_t id, double since, double *spent, int64_t *priced);
/* What each platform key did lately, for `key list`: its requests and USD
 * since day_start (today), and the time of its latest request, read from
 * the newest STORE_KEY_ACTIVITY_ROWS request log rows since `since` at most
 * (the ts index), so the read stays bounded however long the log is; a key
 * not among them is reported by no call. 0 ok, -1 error. (store_controls.c) */
#define STORE_KEY_ACTIVITY_ROWS 500000
typedef struct store_key_activity {
    int64_t key_id, requests_today;
    double usd_today, last_used_at;
} store_key_activity;
int store_keys_activity(store *s, double day_start, double since, void (*fn)(void *ud, const store_key_activity *a),
                        void *ud);

/* --- settings (key/value text, managed by `switchyard config`) ---
 * Any change bumps config_version. The store does not validate keys or
 * values; cli.c knows the keys. */
/* 0 found (value copied into out), 1 not set, -1 error or out too small.
 * Never waits for a lock (busy_timeout 0), so the loop may call it. */
int store_setting_get(store *s, const char *key, char *out, size_t n);
int store_setting_set(store *s, const char *key, const char *value, char *err, size_t errlen); /* 0 / -1 */
/* 0 deleted, 1 was not set, -1 error. */
int store_setting_delete(store *s, const char *key, char *err, size_t errlen);
/* Calls fn for every setting in key order; 0 ok, -1 error. */
int store_settings_load(store *s, void (*fn)(void *ud, const char *key, const char *value), void *ud);

/* --- response owners (previous_response_id pinning across restarts) ---
 * Calls fn for the most recent max owners, oldest first (so replaying them
 * into a bounded map keeps the newest). Returns the number of rows, -1 on
 * error. Never waits for a lock. */
int store_owners_load(store *s, size_t max, void (*fn)(void *ud, const char *response_id, int64_t account_id),
                      void *ud);

/* --- logins (src/store/store_accounts.c) --- */

/* Changes of `account update`: NULL / unset fields stay as they are. */
typedef struct account_patch {
    const char *token, *base_url, *model_map, *chatgpt_account_id;
    account_login login;                         /* NULL / 0 fields: keep */
    int has_sort, sort;
    int has_max_concurrency, max_concurrency;
    int has_context_fallback, context_fallback;
    int has_weight, weight;                      /* >= 0 */
    int has_max_rpm, max_rpm, has_max_tpm, max_tpm; /* 0: no limit */
    int has_budget;
    double budget_usd;                           /* 0: none */
    const char *budget_period;                   /* NULL: keep; "month" or "<N>d" */
    const char *models;                          /* NULL: keep; "": clear the override */
    int has_prefill, prefill;                    /* account_prefill (auto, yes or no) */
    int has_speaks, speaks;                      /* account_speaks; also forgets what was learned */
} account_patch;
/* Changes the named account in place (id, state, history and order kept).
 * A new token clears needs_login; a token or refresh token that differs
 * from the stored one also clears the hold (a changed login). -1 with err
 * on an unknown name or a bad value. */
int store_account_update(store *s, const char *name, const account_patch *p, char *err, size_t errlen);

/* Adds or updates logins in one transaction: an entry whose ChatGPT account
 * id (and e-mail, when both sides have one) matches an existing chatgpt
 * account updates that account's login in place, as does a key entry
 * (api_key, aggregate) whose name and kind match (token and base URL); an
 * update whose token or refresh token differs from the stored one clears
 * the account's hold (a changed login); any other entry is added under its
 * name. All or nothing: on any failure nothing is written and err
 * names the entry (1-based) and why. labels[i] names entry i in errors. */
int store_accounts_import(store *s, const account_new *list, size_t n, const char *const *labels, int *added,
                          int *updated, char *err, size_t errlen);

/* --- asynchronous writer (serving path) --- */
int store_writer_start(store *s, char *err, size_t errlen);
void store_writer_put_state(store *s, const account_state *st); /* upsert; never blocks on disk */
void store_writer_put_log(store *s, const request_log *rl);     /* insert (takes attempts_json, error_message); never blocks on disk */
/* Upserts the owner of a response id (stamped with the current time);
 * never blocks on disk. The writer deletes owners older than 7 days, at
 * most once an hour. Ids longer than STORE_OWNER_ID_MAX are ignored. */
#define STORE_OWNER_ID_MAX 512
void store_writer_put_owner(store *s, const char *response_id, int64_t account_id);
/* --- conversations (issue 21; reading them back: store_conversations.h) ---
 * A turn relayed on the Responses API with store: true: the response's id,
 * the account that answered, the response it continued (NULL or "" for
 * none) and what it added to the conversation, the request's input and the
 * response's output, each a JSON array text (upstream/conversation.h
 * extracts them). Everything is copied; never blocks on disk. Ids of 1 to
 * STORE_CONV_ID_MAX bytes and account_id > 0, else ignored. The same id
 * again replaces the row. Turns and deletes wait in one queue, in order;
 * beyond STORE_CONV_QUEUE_MAX of them or STORE_CONV_QUEUE_BYTES bytes the
 * oldest are dropped (dropped_conversations), and so is a turn larger than
 * the retention's max_bytes or STORE_CONV_TURN_MAX (it could never be
 * kept). With max_rows or max_bytes 0 nothing is recorded. */
#define STORE_CONV_ID_MAX 127
#define STORE_CONV_QUEUE_MAX 10000
#define STORE_CONV_QUEUE_BYTES ((size_t)128 << 20)
#define STORE_CONV_TURN_MAX ((size_t)64 << 20)
void store_writer_put_conversation(store *s, const char *response_id, int64_t account_id,
                                   const char *previous_response_id, const char *input_json, size_t input_len,
                                   const char *output_json, size_t output_len);
/* Deletes the turn of response_id (DELETE /v1/responses/{id}), through the
 * same queue, after any turn queued before it. 0 queued, -1 not an id that
 * could have been stored. Later turns that continued it stay: their chain
 * then has a missing link, as it has upstream. */
int store_conversation_delete(store *s, const char *response_id);
/* The retention, applied by the writer thread (never the loop): at most
 * max_rows turns, max_bytes of input and output together, none older than
 * max_days; the oldest go first. The writer sweeps after
 * STORE_CONV_SWEEP_EVERY_N recorded turns or, with any recorded,
 * STORE_CONV_SWEEP_EVERY_S seconds after the last sweep, deleting at most
 * STORE_CONV_SWEEP_ROWS rows per commit (an unfinished sweep goes on in
 * the next commit, one group window later), so no commit stalls for long.
 * Reads treat turns older than max_days as gone even before a sweep. */
typedef struct store_conversation_limits {
    int64_t max_rows, max_bytes, max_days;
} store_conversation_limits;
#define STORE_CONV_MAX_ROWS_DEFAULT 20000
#define STORE_CONV_MAX_BYTES_DEFAULT ((int64_t)256 << 20)
#define STORE_CONV_MAX_DAYS_DEFAULT 30
#define STORE_CONV_SWEEP_EVERY_N 64
#define STORE_CONV_SWEEP_EVERY_S 30.0
#define STORE_CONV_SWEEP_ROWS 256
/* Replaces the limits (negative values count as 0, max_days at least 1);
 * a change makes the writer sweep at once. */
void store_conversation_limits_set(store *s, const store_conversation_limits *l);
void store_conversation_limits_get(store *s, store_conversation_limits *out);
/* Makes the writer sweep now, whatever is due (tests, an operator's
 * command); store_writer_sync then waits for that sweep's first commit. */
void store_conversation_sweep_now(store *s);

/* The request logs' retention, applied by the writer thread (never the
 * loop) in the commits that write request logs and at least every
 * STORE_LOG_SWEEP_EVERY_S seconds: none older than max_days, at most
 * max_rows (the oldest go first); at most STORE_LOG_SWEEP_ROWS rows per
 * commit, so no commit stalls (an unfinished sweep goes on in the next).
 * Under a steady 180 requests/s the table grew 8.5 MB a minute without
 * bound. */
typedef struct store_log_limits {
    int64_t max_rows, max_days;
} store_log_limits;
/* about 1 GB of database at the rows' usual size; a failed request's row is
 * larger by its error message (STORE_LOG_MESSAGE_MAX) and its attempts'
 * (about 1.4 KiB at most, proxy_finish.c): at worst 1.7 GB more */
#define STORE_LOG_MAX_ROWS_DEFAULT 1000000
#define STORE_LOG_MAX_DAYS_DEFAULT 90
#define STORE_LOG_SWEEP_EVERY_S 30.0
#define STORE_LOG_SWEEP_ROWS 2048
/* Replaces the limits (each at least 1); a change makes the writer sweep
 * at once. Until the first call there is no retention (a CLI command or a
 * test opening the store deletes nothing). */
void store_log_limits_set(store *s, const store_log_limits *l);

/* A change asked for through the admin API, written by the writer thread
 * (the tables' triggers then bump config_version, so the pool reloads it). */
/* ACCOUNT_UNHOLD (the admin API's reset of a held account) clears the hold
 * and bumps reset_gen, as `switchyard account reset` does. */
typedef enum {
    STORE_OP_ACCOUNT_ENABLED,
    STORE_OP_KEY_PREFERRED,
    STORE_OP_SETTING,
    STORE_OP_ACCOUNT_UNHOLD,
    STORE_OP_PREFILL_REFUSED /* the account refused a stream resume's prefill (yes becomes refused) */
} store_admin_op_kind;
typedef struct store_admin_op {
    store_admin_op_kind kind;
    int64_t id;         /* account id (ENABLED) or key id (PREFERRED) */
    int64_t value;      /* enabled 0/1, or the preferred account id (0 clears) */
    char key[32];       /* SETTING: key and value */
    char text[64];
} store_admin_op;
/* Queues op; -1 when too many changes are already waiting. Never blocks on disk. */
int store_writer_put_admin(store *s, const store_admin_op *op);
/* Queues ops[0..n) all or none: 0, all queued and committed in one
 * transaction (a batch takes the queued changes whole); -1, none queued,
 * when they do not all fit now (retry after the writer's next commit). */
int store_writer_put_admin_ops(store *s, const store_admin_op *ops, size_t n);
/* A refreshed login (tokens set, login_error cleared) or, when login_error
 * is set, the account marked needs_login (tokens untouched; only while its
 * refresh token is still expect_refresh, so a login imported meanwhile is
 * not marked). Strings are copied. The writer commits logins at once (no
 * group window). Returns the ticket: the login is durable once
 * store_writer_committed() >= ticket; the writer then makes
 * store_writer_notify_fd() readable. 0 when it could not be queued. */
typedef struct store_login {
    int64_t account_id;
    const char *access_token, *refresh_token, *id_token, *email, *plan_type, *chatgpt_account_id;
    int64_t token_expires_at, last_refresh_at;
    const char *login_error;
    const char *expect_refresh;
} store_login;
uint64_t store_writer_put_login(store *s, const store_login *l);
/* An account held out of the pool (route/hold.h): state is the hold's name
 * (at most STORE_HOLD_STATE_MAX bytes), detail what the upstream said (cut
 * to STORE_HOLD_DETAIL_MAX bytes). Written only while the account's token
 * is still expect_token and its reset_gen still expect_gen, so an account
 * whose login was changed, or that was reset, since the failed attempt is
 * not held. Strings are copied; committed at once, in order with the
 * logins. Returns the ticket as store_writer_put_login does, 0 when it
 * could not be queued. */
#define STORE_HOLD_STATE_MAX 31
#define STORE_HOLD_DETAIL_MAX 200
typedef struct store_hold {
    int64_t account_id;
    const char *state, *detail;
    const char *expect_token;
    int64_t expect_gen;
} store_hold;
uint64_t store_writer_put_hold(store *s, const store_hold *h);
/* An account's learned model list changed (ids NULL: unknown; codex NULL:
 * no Codex form): written to account_state (store_models_load reads it
 * back at start). Strings are copied; committed at once, in order with the
 * logins. The ticket as store_writer_put_login's, 0 when not queued. */
uint64_t store_writer_put_models(store *s, int64_t account_id, const char *ids, const char *codex);
/* An account to add or update as `account import` does (store_accounts_import,
 * one entry; a ChatGPT login updates the account holding it), for a sign-in
 * the gateway itself ran (accounts/signin.h): every string is copied, and
 * the entry is committed at once, in order with the logins, in a savepoint
 * of its own (a refused entry leaves the rest of the batch alone). label
 * names it in errors. The ticket as store_writer_put_login's, 0 when not
 * queued; store_writer_import_result tells the outcome once committed. */
uint64_t store_writer_put_import(store *s, const account_new *a, const char *label);
typedef enum {
    STORE_IMPORT_UNKNOWN = 0, /* not committed yet, or too long ago (the latest 16 are kept) */
    STORE_IMPORT_ADDED,
    STORE_IMPORT_UPDATED,
    STORE_IMPORT_FAILED
} store_import_outcome;
/* The outcome of the import with that ticket; name (the account holding the
 * login) and err (why it failed) filled. */
store_import_outcome store_writer_import_result(store *s, uint64_t ticket, char *name, size_t namelen, char *err,
                                                size_t errlen);
uint64_t store_writer_committed(store *s);
/* The ticket of the last item queued (0 when no writer runs): everything
 * queued so far is durable once store_writer_committed() >= it. */
uint64_t store_writer_queued(store *s);
/* 1 while a change the loop applied to the running gateway when it queued
 * it (the admin API's changes, holds) is not committed yet, else 0 (also
 * when no writer runs). A pool reload from the database meanwhile would
 * read those rows as they were and undo the change in the running gateway
 * until the reload its commit causes: pool_refresh waits instead. */
int store_writer_unwritten_changes(store *s);
/* An eventfd that becomes readable after a batch holding logins committed
 * (read it to reset). -1 before store_writer_start. */
int store_writer_notify_fd(store *s);

/* Blocks until everything queued so far is committed (shutdown, tests). */
void store_writer_sync(store *s);

/* Writer queue counters (diagnostics such as a health endpoint, and tests). */
typedef struct store_writer_stats {
    size_t pending_logs;     /* request logs queued, not yet taken into a batch */
    size_t pending_states;   /* accounts with a coalesced state upsert queued */
    size_t pending_changes;  /* admin changes queued, not yet taken into a batch (at most 64) */
    uint64_t dropped_logs;   /* oldest request logs dropped because the queue was full */
    uint64_t failed_commits; /* batch commits that failed (and were retried) */
    size_t pending_owners;   /* response owners queued */
    uint64_t dropped_owners; /* oldest response owners dropped because the queue was full */
    size_t pending_conversations;   /* conversation turns and deletes queued */
    uint64_t dropped_conversations; /* turns dropped: the queue was full, or too large to keep */
    uint64_t swept_conversations;   /* turns the retention deleted */
    uint64_t swept_logs;            /* request_logs rows the retention deleted */
    uint64_t conversation_sweeps;   /* commits that swept (a sweep deletes at most STORE_CONV_SWEEP_ROWS) */
    int failing;             /* the latest commit failed (disk full, I/O error, ...); it is being retried */
    int idle;                /* the writer waits for work: nothing taken and not committed */
    char last_error[128];    /* the latest failure, e.g. "database or disk is full (sqlite code 13)" */
    /* what happened to the database file while the gateway runs (deleted,
     * replaced, made unreadable, truncated), "" while it is fine: checked
     * every second by the writer thread, logged once per change */
    char file_problem[192];
    /* the disk the database uses, measured by the same watch: the file and
     * its WAL, and what the file system has left (-1 unknown) */
    long long db_bytes, wal_bytes, disk_free_bytes;
} store_writer_stats;
void store_writer_stats_get(store *s, store_writer_stats *out);

#endif
