/* obs/alert.h: alerts for the operator, sent to a webhook off the loop.
 * The gateway raises an event where it happens (an account needs login or
 * was held, the pool is exhausted, a budget crossed a threshold, a breaker
 * opened, the database is degraded). alert_raise deduplicates it (the same
 * kind, subject and state at most once per dedup window, so a storm posts
 * once), asks the `alert` policy hook (policy.h) what to post, and queues
 * the posts for a worker thread that sends them with libcurl, with
 * retries and backoff; the loop never waits for a webhook. The queue is
 * bounded: past it the oldest post is dropped and counted. The event holds
 * names only, never a secret. The last ALERT_LOG_MAX events stay listed
 * with what became of each (raised and not sent for want of a webhook,
 * suppressed, queued, sent, failed, dropped) for /admin/api/alerts, the
 * dashboard and `switchyard alerts`; each is logged once when raised.
 * Only an event that could be sent counts toward the dedup window: events
 * raised before a webhook was set do not suppress the first real ones
 * after (issue 34). docs/operating.md, "Alerts". */
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
    uint64_t unsent;     /* events the hook posted nowhere (no webhook set) */
} alert_stats;

#define ALERT_LOG_MAX 200 /* events listed (the oldest are forgotten first) */

/* What became of an event. */
typedef enum {
    ALERT_UNSENT,     /* the hook posted it nowhere (no alert_webhook_url); not counted for dedup */
    ALERT_SUPPRESSED, /* the same kind, subject and state went out within the dedup window */
    ALERT_QUEUED,     /* its posts are waiting or being tried */
    ALERT_SENT,       /* every post was taken (2xx) */
    ALERT_FAILED,     /* a post failed after its retries (detail says why) */
    ALERT_DROPPED     /* a post was dropped from a full queue */
} alert_outcome;

/* One listed event. A repeat of the newest event with the same outcome
 * (a storm, suppressed or unsent) folds into it: count and last_at. */
typedef struct alert_entry {
    uint64_t id;         /* 1, 2, ... since start */
    double at, last_at;  /* unix seconds: raised first, last */
    uint32_t count;      /* times raised */
    alert_outcome outcome;
    char kind[32], subject[160], state[64];
    char text[512];
    char detail[200];    /* why a post failed, "" none */
    int posts, posts_done; /* posts the hook asked for; of those finished */
} alert_entry;

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

/* A test event from the operator (kind "test", subject "operator"): never
 * deduplicated, otherwise raised as any other. Its id (0: as NULL). */
uint64_t alert_test(alert_sender *as, policy_engine *pe, double now);

/* The listed events, newest first, at most max into out; returns how many.
 * id_only non-zero: that event alone (0 or 1). Any thread. */
size_t alert_list(alert_sender *as, alert_entry *out, size_t max, uint64_t id_only);
/* "unsent", "suppressed", "queued", "sent", "failed", "dropped". */
const char *alert_outcome_name(alert_outcome o);
/* 1 when the alert_webhook_url setting is set. */
int alert_has_webhook(alert_sender *as);

#endif
