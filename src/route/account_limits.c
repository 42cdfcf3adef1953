/* account_limits.c: per-account rpm / tpm buckets (see account_limits.h).
 * The buckets run on ratelimit_now() (monotonic); the `now` callers pass
 * (unix seconds) is for the budget, whose windows are calendar ones. */
#include "route/account_limits.h"
#include <stdio.h>

#define LIMITS_TPM_NEED 1.0 /* a request needs a positive token balance, not its (unknown) size */

int account_limits_over_budget(const pool_account *pa, double now)
{
    return pa->a.budget_usd > 0 && budget_over(&pa->budget, pa->a.budget_usd, now);
}

int account_limits_ok(const pool_account *pa, double now, char *why, size_t n)
{
    const account *a = &pa->a;
    if (account_limits_over_budget(pa, now)) {
        char b[200];
        budget_describe(&pa->budget, a->budget_usd, a->budget_period, b, sizeof b);
        snprintf(why, n, "over_budget: %s", b);
        return 0;
    }
    if (a->max_rpm > 0 && ratelimit_level(&pa->rpm, a->max_rpm, ratelimit_now()) < 1) {
        snprintf(why, n, "rate_limited_locally: %d requests per minute reached (next in %.1fs)", a->max_rpm,
                 ratelimit_wait_s(&pa->rpm, a->max_rpm, 1, ratelimit_now()));
        return 0;
    }
    if (a->max_tpm > 0 && ratelimit_level(&pa->tpm, a->max_tpm, ratelimit_now()) < LIMITS_TPM_NEED) {
        snprintf(why, n, "rate_limited_locally: %d tokens per minute reached (next in %.1fs)", a->max_tpm,
                 ratelimit_wait_s(&pa->tpm, a->max_tpm, LIMITS_TPM_NEED, ratelimit_now()));
        return 0;
    }
    return 1;
}

double account_limits_wait_s(const pool_account *pa, double now)
{
    double mono = ratelimit_now();
    double r = ratelimit_wait_s(&pa->rpm, pa->a.max_rpm, 1, mono);
    double t = ratelimit_wait_s(&pa->tpm, pa->a.max_tpm, LIMITS_TPM_NEED, mono);
    return r > t ? r : t;
}

void account_limits_start(pool_account *pa, double now)
{
    ratelimit_take(&pa->rpm, pa->a.max_rpm, 1, ratelimit_now());
}

void account_limits_drain(pool_account *pa, double now)
{
    ratelimit_drain(&pa->rpm, pa->a.max_rpm, ratelimit_now());
}

void account_limits_usage(pool_account *pa, long tokens, double now)
{
    if (tokens > 0)
        ratelimit_take(&pa->tpm, pa->a.max_tpm, (double)tokens, ratelimit_now());
}
