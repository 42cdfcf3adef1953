/* limits_fail.h: what a limit held across the gateways does when the
 * pool's word on it cannot be had (docs/scale-out.md, "Fail-closed
 * limits"): Redis out of reach, silent past SWITCHYARD_REDIS_WAIT_MS, or
 * the link dropping before the answer.
 *
 *   open (the default): the local copy decides, as a lone gateway would;
 *     N instances then let through up to N times a limit meanwhile.
 *   closed (shared_limits_fail): the limit is not checked, so the request
 *     is not let through on it: a platform key's rpm limit answers 503
 *     `limits_unavailable`, an account's rpm, tpm or concurrency limit
 *     makes it a skip (the request fails over to an account without such a
 *     limit, or ends 503 naming the reason).
 *
 * Only limits that exist are affected: a key or an account without one is
 * never refused because Redis is away. A lone gateway (no Redis) has
 * nothing to miss: its local limits are the whole story. */
#ifndef SY_LIMITS_FAIL_H
#define SY_LIMITS_FAIL_H
#include <stddef.h>
#include "core/gateway.h"
#include "store/store.h"

/* Why the pool's word is missing. */
typedef enum limits_unseen {
    LIMITS_SEEN = 0,      /* it was had (or nothing was asked) */
    LIMITS_UNSEEN_DOWN,   /* the link is down: nothing could be asked */
    LIMITS_UNSEEN_LATE,   /* no answer within SWITCHYARD_REDIS_WAIT_MS */
    LIMITS_UNSEEN_FAILED, /* the link dropped before the answer, or Redis answered an error */
} limits_unseen;

/* 1 when shared_limits_fail is closed and k has a limit the pool holds (its rpm). */
int limits_fail_key_strict(const gateway *gw, const platform_key *k);
/* 1 when shared_limits_fail is closed and a has a limit the pool holds
 * (max_rpm, max_tpm or max_concurrency). */
int limits_fail_account_strict(const gateway *gw, const account *a);
/* LIMITS_UNSEEN_DOWN when the limits are shared and the link is down now,
 * else LIMITS_SEEN (a lone gateway included). */
limits_unseen limits_fail_reach(const gateway *gw);
/* "Redis did not answer within 50 ms" and the like, for messages. */
void limits_fail_why(const gateway *gw, limits_unseen cause, char *out, size_t n);

#endif
