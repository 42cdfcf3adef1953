/* account_limits.h: an account's local limits on the request path: its
 * budget (`--budget`, budget.c; an account over it is skipped with the
 * reason "over_budget") and its requests-per-minute and tokens-per-minute
 * token buckets (`account add --max-rpm/--max-tpm`). An account at a limit is not a candidate now
 * (reason "rate_limited_locally"); requests take from the rpm bucket when
 * they start, tokens are taken after the fact from the reported usage. A
 * 429 from the upstream changes no bucket: the cooldown ladder handles it.
 * `now` is unix seconds, for the budget (calendar windows); the buckets
 * read the monotonic clock themselves (ratelimit_now), so a step of the
 * wall clock leaves them as they are. */
#ifndef SY_ACCOUNT_LIMITS_H
#define SY_ACCOUNT_LIMITS_H
#include <stddef.h>
#include "route/pool.h"

/* 1 if pa has a budget and it is used up at now. */
int account_limits_over_budget(const pool_account *pa, double now);
/* 1 if pa is within its limits at now; else 0 with the reason in why. */
int account_limits_ok(const pool_account *pa, double now, char *why, size_t n);
/* Seconds until pa is within its limits again (0: now): what a request
 * that may wait for capacity would wait for this account. */
double account_limits_wait_s(const pool_account *pa, double now);
/* An attempt on pa starts: one request from its rpm bucket. */
void account_limits_start(pool_account *pa, double now);
/* The policy read a failure as "the upstream's limit is reached"
 * (classify's drain_bucket): pa's rpm bucket is emptied, so it rests until
 * the refill. Without that verdict a 429 changes no bucket. */
void account_limits_drain(pool_account *pa, double now);
/* pa's answer used tokens (total; ignored when < 0). */
void account_limits_usage(pool_account *pa, long tokens, double now);

#endif
