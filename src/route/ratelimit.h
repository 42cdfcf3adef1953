/* ratelimit.h: token buckets for local rate limits (an account's requests
 * and tokens per minute, a platform key's requests per minute). A bucket
 * holds up to `per_minute` units and refills at per_minute / 60 per second;
 * a request takes one unit when it starts, tokens are taken after the fact
 * (from the usage the upstream reported), so a bucket may go negative and
 * then stays empty until the refill has paid the debt. Plain state; callers
 * pass `now`, which is ratelimit_now(): a bucket measures an interval, so
 * it runs on the monotonic clock, and a step of the wall clock (NTP, an
 * operator's `date -s`) neither empties nor fills it. A `now` behind the
 * bucket's stamp (a clock that stepped back anyway) restarts the refill
 * from there: never a bucket stuck empty until the clock catches up. */
#ifndef SY_RATELIMIT_H
#define SY_RATELIMIT_H

typedef struct ratelimit {
    double level;      /* units available (may be negative after a debt) */
    double stamp;      /* when level was last brought up to date, 0 never */
    int per_minute;    /* the limit the level was computed for; 0 = unlimited */
} ratelimit;

/* Seconds on the monotonic clock (CLOCK_MONOTONIC), or on the clock a test
 * set with ratelimit_set_clock. */
double ratelimit_now(void);
/* Tests: the clock ratelimit_now reads (NULL: the monotonic clock again). */
void ratelimit_set_clock(double (*now)(void));

/* The level b would have at now, without changing b. */
double ratelimit_level(const ratelimit *b, int per_minute, double now);
/* Brings b up to date for a limit of per_minute (0: unlimited). A bucket
 * first seen, or whose limit changed, starts full. */
void ratelimit_refill(ratelimit *b, int per_minute, double now);
/* 1 if `units` can be taken now (always 1 when unlimited). */
int ratelimit_allows(ratelimit *b, int per_minute, double units, double now);
/* Takes units (the level may go below zero). */
void ratelimit_take(ratelimit *b, int per_minute, double units, double now);
/* Empties b (keeps any debt): the upstream said the limit is reached. */
void ratelimit_drain(ratelimit *b, int per_minute, double now);
/* Seconds until `units` can be taken (0 if now): what a caller that may
 * wait for capacity waits. */
double ratelimit_wait_s(const ratelimit *b, int per_minute, double units, double now);
/* b's level becomes level (no more than a full bucket) at now: the level
 * of the pool's bucket of the same limit, which several gateways take
 * from (shared/shared.h). */
void ratelimit_set(ratelimit *b, int per_minute, double level, double now);

#endif
