/* test_ratelimit.c: token buckets (ratelimit.c) and key model patterns
 * (key_rules.c). */
#include "check.h"
#include "route/key_rules.h"
#include "route/ratelimit.h"

static void test_bucket_starts_full_and_empties(void)
{
    ratelimit b = {0};
    for (int i = 0; i < 3; i++) {
        CHECK(ratelimit_allows(&b, 3, 1, 100.0));
        ratelimit_take(&b, 3, 1, 100.0);
    }
    CHECK(!ratelimit_allows(&b, 3, 1, 100.0));
}

static void test_bucket_refills_at_limit_per_minute(void)
{
    ratelimit b = {0};
    ratelimit_take(&b, 60, 60, 100.0); /* empty: one unit per second comes back */
    CHECK(!ratelimit_allows(&b, 60, 1, 100.5));
    CHECK(ratelimit_wait_s(&b, 60, 1, 100.5) > 0.49 && ratelimit_wait_s(&b, 60, 1, 100.5) < 0.51);
    CHECK(ratelimit_allows(&b, 60, 1, 101.0));
    CHECK(ratelimit_allows(&b, 60, 60, 1000.0)); /* never above the limit ... */
    CHECK(!ratelimit_allows(&b, 60, 61, 1000.0));
}

static void test_debt_after_the_fact_keeps_bucket_empty(void)
{
    ratelimit b = {0};
    ratelimit_take(&b, 600, 1200, 0.5); /* 600 tokens per minute, 1200 used */
    CHECK(!ratelimit_allows(&b, 600, 1, 30.0));
    CHECK(ratelimit_wait_s(&b, 600, 0.001, 30.5) > 29.9); /* -300 left, 10 a second */
    CHECK(!ratelimit_allows(&b, 600, 1, 60.0));
    CHECK(ratelimit_allows(&b, 600, 1, 61.0));
}

static void test_unlimited_and_changed_limits(void)
{
    ratelimit b = {0};
    CHECK(ratelimit_allows(&b, 0, 1e9, 1.0));
    CHECK_EQ_INT((long)ratelimit_wait_s(&b, 0, 5, 1.0), 0);
    ratelimit_take(&b, 2, 2, 1.0);
    CHECK(!ratelimit_allows(&b, 2, 1, 1.0));
    CHECK(ratelimit_allows(&b, 5, 1, 1.0)); /* a new limit starts full */
}

static void test_model_patterns(void)
{
    CHECK(key_rules_model_allowed(NULL, "x"));
    CHECK(key_rules_model_allowed("gpt-5*, o3", "gpt-5-codex"));
    CHECK(key_rules_model_allowed("gpt-5*, o3", "o3"));
    CHECK(!key_rules_model_allowed("gpt-5*, o3", "o3-mini"));
    CHECK(!key_rules_model_allowed("gpt-5*", "gpt-4o"));
    CHECK(!key_rules_model_allowed("gpt-5*", ""));
    CHECK(key_rules_model_allowed("a,,b", "b"));
}

int main(void)
{
    RUN(test_bucket_starts_full_and_empties);
    RUN(test_bucket_refills_at_limit_per_minute);
    RUN(test_debt_after_the_fact_keeps_bucket_empty);
    RUN(test_unlimited_and_changed_limits);
    RUN(test_model_patterns);
    return check_summary();
}
