/* fuzz_usage.c: upstream numbers — a usage object, the usage endpoint's
 * payload, Retry-After and the x-codex-* headers — from any bytes: no undefined conversion (this target
 * is built with -fsanitize=float-cast-overflow) and every result in range. */
#include "fuzz_common.h"
#include "upstream/usage.h"
#include "accounts/usage_poll.h"
#include <math.h>
#include <string.h>

static const char *const names[] = {
    "x-codex-primary-used-percent", "x-codex-secondary-used-percent",
    "x-codex-primary-reset-after-seconds", "x-codex-secondary-reset-after-seconds", "x-codex-other"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    json_value *doc = json_parse((const char *)data, n, NULL, 0);
    if (doc) {
        usage_tokens t = {-1, -1, -1, -1};
        usage_tokens_read(doc, &t);
        usage_tokens_read(json_get(doc, "usage"), &t);
        FUZZ_CHECK(t.in >= -1 && t.in <= USAGE_TOKENS_MAX);
        FUZZ_CHECK(t.out >= -1 && t.out <= USAGE_TOKENS_MAX);
        FUZZ_CHECK(t.cached >= -1 && t.cached <= USAGE_TOKENS_MAX);
        FUZZ_CHECK(t.total >= -1 && t.total <= USAGE_TOKENS_MAX);
        double r = usage_resets_in(doc);
        FUZZ_CHECK(r == -1 || (r >= 0 && r <= USAGE_SECONDS_MAX));
        if (doc->type == JSON_NUMBER) {
            usage_count(doc->num);
            usage_clamp_int(doc->num, INT64_MIN, INT64_MAX, 0);
            usage_clamp_int(doc->num, -5, 5, 0);
        }
        json_free(doc);
    }
    account_state ps;
    memset(&ps, 0, sizeof ps);
    ps.primary_used_pct = ps.secondary_used_pct = -1;
    usage_poll_apply(&ps, (const char *)data, n, 1.7e9);
    FUZZ_CHECK(ps.primary_used_pct == -1 || (ps.primary_used_pct >= 0 && ps.primary_used_pct <= 100));
    FUZZ_CHECK(ps.secondary_used_pct == -1 || (ps.secondary_used_pct >= 0 && ps.secondary_used_pct <= 100));
    FUZZ_CHECK(ps.primary_reset_at <= 1.7e9 + USAGE_SECONDS_MAX && ps.secondary_reset_at <= 1.7e9 + USAGE_SECONDS_MAX);
    char v[256];
    size_t m = n < sizeof v - 1 ? n : sizeof v - 1;
    memcpy(v, data, m);
    v[m] = '\0';
    double s = usage_header_seconds(v);
    FUZZ_CHECK(s == -1 || (s >= 0 && s <= USAGE_SECONDS_MAX));
    account_state st;
    memset(&st, 0, sizeof st);
    st.primary_used_pct = st.secondary_used_pct = -1;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        usage_header_apply(&st, names[i], v, 1.7e9);
    FUZZ_CHECK(st.primary_used_pct == -1 || (st.primary_used_pct >= 0 && st.primary_used_pct <= 100));
    FUZZ_CHECK(st.secondary_used_pct == -1 || (st.secondary_used_pct >= 0 && st.secondary_used_pct <= 100));
    FUZZ_CHECK(isfinite(st.primary_reset_at) && isfinite(st.secondary_reset_at));
    return 0;
}
