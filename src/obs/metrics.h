/* metrics.h: the gateway's counters and histograms, kept as plain integers
 * on the loop thread (no locks, no allocation on the request path) and
 * formatted in the Prometheus text exposition format only when /metrics is
 * scraped. Gauges (accounts by state, cooldowns, writer queue, WebSockets
 * open) are read at
 * scrape time by the caller and passed in. */
#ifndef SY_METRICS_H
#define SY_METRICS_H
#include <stddef.h>
#include <stdint.h>
#include "base/sbuf.h"

/* --- recording (loop thread only) --- */
/* A client request ended with this status on endpoint ("/v1/responses", ...). */
void metrics_request(const char *endpoint, int status);
/* A request refused by its platform key's rules (route/key_rules.h): the
 * key's id and the refusal's code (expired_api_key, model_not_allowed,
 * insufficient_quota, rate_limit_exceeded); counted by key and reason. */
void metrics_key_refusal(int64_t key_id, const char *code);
/* One upstream attempt ended. outcome is a free word ("ok", "failover",
 * "returned", "interrupted", "client_closed", and those the failover code
 * adds: "retry", "wait", "resume", "breaker_skip"); cls the failure class
 * ("" or NULL for none). seconds: how long the attempt took (< 0: not timed). */
void metrics_attempt(int64_t account_id, const char *outcome, const char *cls, double seconds);
/* Upstream time to first byte (request sent -> response headers). */
void metrics_ttfb(double seconds);
/* A stream switched accounts inside the preflight window. */
void metrics_preflight_switch(void);
/* A conversation moved: an attempt went to another account than the one
 * that holds it: by 0, the account its turn state names; 1, the account
 * that minted blobs it carries; 2, the owner of its previous_response_id
 * (the request rebuilt from the gateway's record). */
void metrics_conversation_move(int by);
/* Blobs an attempt left out for its account: dropped (the item or part
 * removed) or replaced by text; and the strip-retries after a refusal. */
void metrics_blobs_stripped(int dropped, int replaced);
void metrics_strip_retry(void);
/* A resync with Redis: at a (re)connect (loss 0), or its data found lost (1). */
void metrics_redis_resync(int loss);
#define METRICS_REDIS_RTT_BUCKETS 11
#define METRICS_REDIS_WAITS 5
enum { METRICS_REDIS_WAIT_ASK, METRICS_REDIS_WAIT_SLOT, METRICS_REDIS_WAIT_CHAIN, METRICS_REDIS_WAIT_LIMITS,
       METRICS_REDIS_WAIT_ROTATION };
/* A round trip to Redis (the link's PING), and a wait for the pool that ran out (its kind). */
void metrics_redis_rtt(double seconds);
void metrics_redis_wait_expired(int kind);
/* A message to or from the pool that did not get through: a command not
 * sent (the link was down: the resync at the next connect makes up for
 * it), one whose answer was lost with the link, a published message that
 * could not be read. */
enum { METRICS_REDIS_DROP_LINK_DOWN, METRICS_REDIS_DROP_IN_FLIGHT, METRICS_REDIS_DROP_UNREADABLE, METRICS_REDIS_DROPS };
void metrics_redis_dropped(int why);
/* A request (kind key) or an attempt on an account (kind account) refused
 * because shared_limits_fail is closed and the pool's word on a limit
 * could not be had (shared/limits_fail.h). */
enum { METRICS_LIMITS_REFUSED_KEY, METRICS_LIMITS_REFUSED_ACCOUNT, METRICS_LIMITS_REFUSED_KINDS };
void metrics_redis_limits_refused(int kind);
/* An attempt translated between dialects: pair is "client>upstream" (dialect.h). */
void metrics_translation(const char *pair);
/* The same account is tried again after a delay (retry verdict). */
void metrics_retry(int64_t account_id);
/* A request waited for an account to become free; seconds waited. */
void metrics_wait(double seconds);
/* A response.create message over a WebSocket was served: by an upstream
 * turn (warmup 0) or as Codex's warm-up, answered by the gateway (1). */
void metrics_websocket_turn(int warmup);
/* A compressed request body was decoded (or refused while decoding), in slices loop turns. */
void metrics_body_decode(int slices);
/* A policy reload finished (SIGHUP or the admin API). */
void metrics_policy_reload(int ok);

/* --- the last hour per minute (the dashboard's chart) ---
 * Requests that reached the request log, at unix time now: the failovers
 * are the attempts beyond the first, failed the final status not 2xx. Kept
 * in memory so the chart costs no database scan; seeded from the request
 * log at start-up so a restart keeps the hour. */
void metrics_minute_request(double now, int status, int attempts);
void metrics_minute_seed(double minute_start, int64_t requests, int64_t failovers, int64_t failed);
/* Calls fn, oldest first, for each of the 60 minutes ending with the one
 * holding now that saw requests; returns the start of the first minute. */
double metrics_minutes(double now, void (*fn)(void *ud, double t, int64_t requests, int64_t failovers, int64_t failed),
                       void *ud);

/* --- tokens and cost (the request log's usage, counted as it is written) ---
 * Per (account, platform key, model): requests, input tokens (cached ones
 * included, as the upstream reports them), cached input tokens, output
 * tokens and USD, since start (the /metrics counters) and for the current
 * UTC day (the dashboard's "today", seeded from the request log at start).
 * The label sets are bounded: at most METRICS_MODELS - 1 distinct models
 * (the rest count under "other"; names cut to METRICS_MODEL_LEN - 1
 * bytes), and METRICS_USAGE_SLOTS (account, key, model) cells, past which
 * usage counts under account, key and model "other". Accounts and keys are
 * the pool's (ids; names given at scrape time). */
#define METRICS_MODELS 64
#define METRICS_MODEL_LEN 96
#define METRICS_USAGE_SLOTS 4096
/* A request ended at now. account_id 0: no account served it; key_id 0: no
 * key; input/cached/output -1 unknown; cost_usd < 0 unknown. */
void metrics_usage(double now, int64_t account_id, int64_t key_id, const char *model, long input, long cached,
                   long output, double cost_usd);
/* Adds a group of the request log's rows of the UTC day holding day_ts to
 * that day's figures only (start-up; the counters since start stay 0). */
void metrics_usage_seed_day(double day_ts, int64_t account_id, int64_t key_id, const char *model, int64_t requests,
                            int64_t input, int64_t cached, int64_t output, double cost_usd);

typedef struct metrics_usage_row {
    int64_t account_id, key_id; /* 0 none; METRICS_USAGE_OTHER: the overflow cell */
    const char *model;          /* "none" for requests without one, "other" past METRICS_MODELS */
    uint64_t requests, input, cached, output;
    double cost_usd;
} metrics_usage_row;
#define METRICS_USAGE_OTHER (-2)
/* Today's figures (the UTC day holding now) summed by "account", "key" or
 * "model" (the other fields of each row are 0 / NULL), in no set order.
 * Returns the number of rows; -1 for an unknown grouping. */
int metrics_usage_today(double now, const char *by, void (*fn)(void *ud, const metrics_usage_row *r), void *ud);

/* --- formatting (at scrape time) --- */

/* An account's routing state, as /metrics, the admin API and the dashboard
 * name it (admin_account_state decides which). */
#define METRICS_ACCOUNT_STATES 10
extern const char *const metrics_account_states[METRICS_ACCOUNT_STATES];

typedef struct metrics_account {
    int64_t id;
    const char *name;
    const char *state;       /* one of metrics_account_states */
    double cooldown_left;    /* seconds, 0 none */
    int inflight;
    double primary_used_pct, secondary_used_pct; /* -1 unknown */
    double success_rate_60s, latency_60s_ms;     /* the last 60 s (health_window.c); -1 none */
    int attempts_60s;
} metrics_account;

typedef struct metrics_key {
    int64_t id;
    const char *name;
} metrics_key;

typedef struct metrics_gauges {
    const metrics_account *accounts;
    size_t n_accounts;
    uint64_t policy_fallbacks;  /* since start, over every engine */
    size_t writer_pending_logs, writer_pending_states;
    uint64_t dropped_logs, failed_commits;
    size_t active_requests;
    double uptime_s;
    size_t websockets_open; /* Responses WebSocket connections (http/ws.h) */
    /* alerts (obs/alert.h, alert_stats) */
    uint64_t alerts_raised, alerts_suppressed, alerts_sent, alerts_retried, alerts_failed, alerts_dropped;
    size_t alerts_queued;
    const metrics_key *keys; /* platform keys, to name the usage counters' key label */
    size_t n_keys;
    int redis, redis_up; /* a pool on Redis: whether its link is up */
    uint64_t alerts_unsent; /* events the alert policy posted nowhere (no webhook) */
    /* the per-account polls (accounts/account_poll.h) */
    size_t polls_in_flight, polls_in_flight_max;
    uint64_t polls_started, polls_deferred;
} metrics_gauges;

/* Appends the whole exposition to out. Accounts and keys named by g (by
 * id); those no longer in g are labelled "id:N". */
void metrics_format(sbuf *out, const metrics_gauges *g);

/* Totals for the admin API's overview. */
typedef struct metrics_totals {
    uint64_t requests, attempts, failovers, preflight_switches, retries, waits;
    uint64_t reloads_ok, reloads_failed;
} metrics_totals;
void metrics_totals_get(metrics_totals *out);

/* Forgets everything (tests). */
void metrics_reset(void);

#endif
