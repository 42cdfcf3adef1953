/* store_admin.h: the read queries behind the admin API, `switchyard
 * status` and `switchyard logs` (request log pages and filters, aggregates
 * over a time range, a per-bucket timeline) and the admin token's hash.
 * Reads run on the main connection with busy_timeout 0 and are bounded
 * (LIMIT, the ts index), so the loop may call them; the token is set by
 * the CLI only. */
#ifndef SY_STORE_ADMIN_H
#define SY_STORE_ADMIN_H
#include <stddef.h>
#include <stdint.h>
#include "store/store.h"

/* --- admin token (only its sha256 is stored) --- */
/* 0 found (hash copied), 1 none set, -1 error. Never waits for a lock. */
int store_admin_token_get(store *s, char hash[65]);
/* Replaces the token's hash (CLI, synchronous). 0 / -1 with err. */
int store_admin_token_set(store *s, const char *hash, const char *prefix, char *err, size_t errlen);

/* --- request logs --- */
typedef struct store_log_filter {
    int64_t before_id;       /* rows with id < this (paging back); 0: from the newest */
    int64_t after_id;        /* rows with id > this, oldest first (following); 0: off */
    const char *key;         /* platform key name or id; NULL any */
    const char *account;     /* account name: served by it or tried on it; NULL any */
    int status;              /* exact final status; 0 any */
    int failed;              /* only requests whose final status is not 2xx */
    double since, until;     /* ts range, 0: open */
    const char *model;       /* exact model asked for; NULL any */
    const char *endpoint;    /* exact endpoint ("/v1/responses"); NULL any */
    /* Text search: every word of q (at most STORE_LOG_QUERY_WORDS, split on
     * spaces, case-insensitive for ASCII) is found somewhere in the row's
     * model, the model sent upstream, endpoint, account, key name, error
     * class, error message, final status or attempts record (accounts,
     * models, outcomes, classes, statuses and error messages tried). NULL
     * or "": off. */
    const char *q;
    int64_t id;              /* that one row only; 0: off */
    int limit;               /* 1..1000 */
    /* Newest-first queries with a filter examine at most this many rows
     * below before_id (0: no bound), so a filter that matches nothing
     * cannot walk the whole table on the loop. */
    int64_t scan_max;
    int64_t scan_floor;      /* out: rows with id <= this were not examined (0: none left) */
} store_log_filter;
#define STORE_LOG_QUERY_WORDS 8
#define STORE_LOG_QUERY_MAX 256 /* bytes of q looked at */

typedef struct store_log_row {
    int64_t id;
    double ts;
    int64_t key_id;          /* 0 none */
    const char *key_name;    /* "" when the key is gone */
    const char *endpoint, *model;
    int stream;
    int64_t account_id;
    const char *account_name;
    int status, attempts;
    double latency_ms;
    const char *route_strategy, *error_class;
    long input_tokens, output_tokens, total_tokens; /* -1 unknown */
    const char *attempts_json; /* JSON array text, "[]" when none was recorded */
    const char *upstream_model; /* the model the serving account was sent; "" none */
    long cached_tokens;      /* -1 unknown */
    double cost_usd;         /* -1 unknown (no price, no usage) */
    int resumed;
    const char *error_message; /* what the client was told when it failed; "" none */
} store_log_row;

/* Calls fn per matching row (newest first, or oldest first with after_id).
 * Returns the number of rows, -1 on error. */
int store_logs_query(store *s, store_log_filter *f, void (*fn)(void *ud, const store_log_row *r), void *ud);

/* --- aggregates --- */
/* The request log's usage since since (the ts index), grouped by account
 * id, key id and model asked for: the dashboard's "today" at start-up. */
typedef struct store_usage_group {
    int64_t account_id, key_id;
    const char *model;
    int64_t requests, input_tokens, cached_tokens, output_tokens;
    double cost_usd;
} store_usage_group;
int store_logs_usage_since(store *s, double since, void (*fn)(void *ud, const store_usage_group *g), void *ud);

typedef struct store_stat_row {
    const char *label;       /* account / key name / model */
    int64_t requests;        /* requests that ended on it (account: served by it) */
    int64_t failed;          /* of those, final status not 2xx */
    int64_t attempts;        /* upstream attempts (account: attempts made on it) */
    int64_t failovers;       /* account: attempts on it that failed over; else attempts beyond the first */
    int64_t input_tokens, output_tokens, total_tokens;
} store_stat_row;

/* group: "account", "key" or "model". Returns rows, -1 on error or unknown group. */
int store_logs_stats(store *s, const char *group, double since, double until,
                     void (*fn)(void *ud, const store_stat_row *r), void *ud);

/* Requests, failovers (attempts beyond the first) and failed requests per
 * bucket of bucket_s seconds from since; only buckets with requests. */
int store_logs_timeline(store *s, double since, int bucket_s,
                        void (*fn)(void *ud, double bucket_start, int64_t requests, int64_t failovers, int64_t failed),
                        void *ud);

#endif
