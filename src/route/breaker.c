/* breaker.c: the circuit breaker of every account (see breaker.h). C keeps
 * the counters (failures and successes in a row, the last 20 outcomes as a
 * bit window); the `breaker` hook turns them into closed / open / half-open.
 * Successes while closed never reach the hook: the hot path stays a few
 * integer updates. */
#include "route/breaker.h"
#include "obs/alert.h"
#include "route/pool.h"
#include "policy/policy.h"
#include "store/store.h"
#include "base/log.h"
#include <stdio.h>
#include <string.h>

#define BREAKER_WINDOW 20 /* outcomes kept for the error rate */

static int breaker_window_failures(const pool_breaker *b)
{
    return __builtin_popcount(b->window & ((1u << BREAKER_WINDOW) - 1));
}

void breaker_record(gateway *gw, pool_account *pa, int success, double now)
{
    pool_breaker *b = &pa->breaker;
    b->window = (b->window << 1) | (success ? 0u : 1u);
    if (b->window_n < BREAKER_WINDOW)
        b->window_n++;
    if (success) {
        b->fails_in_row = 0;
        b->successes_in_row++;
    } else {
        b->successes_in_row = 0;
        b->fails_in_row++;
        b->last_failure_at = now;
    }
    if (success && b->state == BREAKER_CLOSED)
        return;
    int was = b->state == BREAKER_OPEN ? BREAKER_HALF_OPEN : b->state; /* an attempt after the open time is a probe */
    policy_breaker_state st = {pa->a.id, account_kind_name(pa->a.kind), was, b->fails_in_row, b->successes_in_row,
                               b->window_n, breaker_window_failures(b)};
    int next;
    double secs;
    policy_breaker(gw->policy, &st, success, now, &next, &secs);
    if (next == BREAKER_OPEN) {
        b->open_until = now + secs;
        if (was == BREAKER_CLOSED) {
            log_warn("account %s: circuit open after %d failures in a row (%d of the last %d), for %.0fs",
                     pa->a.name, b->fails_in_row, st.window_failures, st.window_requests, secs);
            alert_raise(gw->alerts, gw->policy, "breaker_open", pa->a.name, "", now,
                        "account %s: circuit open after %d failures in a row (%d of the last %d), for %.0fs",
                        pa->a.name, b->fails_in_row, st.window_failures, st.window_requests, secs);
        } else
            log_info("account %s: probe failed, circuit open again for %.0fs", pa->a.name, secs);
    } else if (next == BREAKER_CLOSED && was != BREAKER_CLOSED) {
        log_info("account %s: probe succeeded, circuit closed", pa->a.name);
        b->window = 0;
        b->window_n = 0;
    }
    b->state = next;
}

double breaker_open_until(const pool_account *pa)
{
    return pa->breaker.state == BREAKER_OPEN ? pa->breaker.open_until : 0;
}

int breaker_available(const pool_account *pa, double now, char *why, size_t n)
{
    const pool_breaker *b = &pa->breaker;
    if (b->state == BREAKER_OPEN && b->open_until > now) {
        snprintf(why, n, "breaker_open: circuit open for %.0fs after %d failures in a row", b->open_until - now,
                 b->fails_in_row);
        return 0;
    }
    /* after a failure (its cooldown over) or with the breaker not closed, the
     * account is probed: one request at a time until one succeeds */
    if ((b->fails_in_row > 0 || b->state != BREAKER_CLOSED) && pa->inflight > 0) {
        snprintf(why, n, "half-open after %d failures: a probe request is in flight", b->fails_in_row);
        return 0;
    }
    return 1;
}

const char *breaker_state_name(const pool_account *pa, double now)
{
    const pool_breaker *b = &pa->breaker;
    if (b->state == BREAKER_OPEN && b->open_until > now)
        return "open";
    return b->state != BREAKER_CLOSED || b->fails_in_row > 0 ? "half_open" : "closed";
}
