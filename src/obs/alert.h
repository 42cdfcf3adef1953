/* obs/alert.h: alerts for the operator, sent to a webhook off the loop.
 * The gateway raises an event where it happens (an account needs login or
 * was held, the pool is exhausted, a budget crossed a threshold, a breaker
 * opened, the database is degraded). alert_raise deduplicates it (the same
 * kind, subject and state at most once per dedup window, so a storm posts
 * once), asks the `alert` policy hook (policy.h) what to post, and queues
 * the posts for a worker thread that sends them with libcurl, with
 * retries and backoff; the loop never waits for a webhook. The queue is
 * bounded: past it the oldest post is dropped and counted. The event holds
 * names only, never a secret. docs/operating.md, "Alerts". */
#ifndef SY_ALERT_H
#define SY_ALERT_H
#include <stddef.h>
#include <stdint.h>
#include "policy/policy.h"

typedef struct alert_sender alert_sender;

typedef struct alert_config {
    double dedup_s;     /* the same kind + subject + state at most once per this many seconds; 0 every time */
    long backoff_ms;    /* wait before the first retry; doubles after each */
    int retries;        /* retries after the first try */
    long timeout_ms;    /* one POST, connect to the last byte */
    size_t queue_max;   /* posts waiting to be sent; past it the oldest is dropped */
} alert_config;

#define ALERT_DEDUP_S 600.0
#define ALERT_BACKOFF_MS 1000
#define ALERT_RETRIES 3
#define ALERT_TIMEOUT_MS 10000
#define ALERT_QUEUE_MAX 64
#define ALERT_DEDUP_SLOTS 256 /* events remembered for the dedup window (the oldest are forgotten first) */

typedef struct alert_stats {
    uint64_t raised;     /* events raised */
    uint64_t suppressed; /* of those, deduplicated away */
    uint64_t sent;       /* posts the webhook took (a 2xx answer) */
    uint64_t retried;    /* tries after a failure */
    uint64_t failed;     /* posts given up after their retries */
    uint64_t dropped;    /* posts dropped from a full queue */
    size_t queued;       /* posts waiting now */
} alert_stats;

/* Starts the worker thread. NULL on failure (logged). */
alert_sender *alert_new(const alert_config *cfg);
/* Stops the worker (a POST in flight is aborted) and drops what is queued. */
void alert_free(alert_sender *as);

/* The alert_webhook_url setting the hook sees ("" none). Loop thread. */
void alert_set_webhook(alert_sender *as, const char *url);

/* Raises an event (loop thread): kind, subject and state as in
 * policy_alert_event, text printf-style (names only). Deduplicated, then
 * the alert hook of pe (NULL: the built-in default) decides the posts,
 * which are queued. Returns the number queued. as NULL: nothing. */
size_t alert_raise(alert_sender *as, policy_engine *pe, const char *kind, const char *subject, const char *state,
                   double now, const char *fmt, ...) __attribute__((format(printf, 7, 8)));

void alert_stats_get(alert_sender *as, alert_stats *out);

#endif
