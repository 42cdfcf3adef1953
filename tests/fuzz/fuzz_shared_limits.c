/* fuzz_shared_limits.c: what another gateway (or anyone able to write to
 * the pool's Redis) may send about rate limits and budgets
 * (shared/shared_limits.c): any bytes as a spend message's body, and as
 * the float text of a bucket level or a total. What holds: a body read
 * has a valid period, a whole-second window start and a finite total in
 * 0..1e12; a number read is finite and within +-1e15. */
#include "fuzz_common.h"
#include "shared/shared_limits.h"
#include "base/budget.h"
#include <math.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    json_value *doc = json_parse((const char *)data, n, NULL, 0);
    shared_spend_total t;
    if (shared_spend_read(doc, &t) == 0) {
        FUZZ_CHECK(budget_period_valid(t.period) == 0);
        FUZZ_CHECK(t.start >= 0 && t.start <= 1e11 && t.start == floor(t.start));
        FUZZ_CHECK(isfinite(t.usd) && t.usd >= 0 && t.usd <= 1e12);
    }
    json_free(doc);
    double v = 0;
    if (shared_limits_number((const char *)data, n, &v) == 0)
        FUZZ_CHECK(isfinite(v) && v <= 1e15 && v >= -1e15);
    FUZZ_CHECK(shared_bucket_wait_s(v, 60, 1) >= 0);
    return 0;
}
