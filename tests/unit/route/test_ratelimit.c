/* test_ratelimit.c: token buckets (ratelimit.c) and key model patterns
 * (key_rules.c). */
#include "check.h"
#include "route/key_rules.h"
#include "route/account_limits.h"
#include "route/ratelimit.h"
#include <string.h>

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

/* a wall clock stepped back 600 s used to leave an emptied bucket empty for 600 s (no
 * refill while now < stamp): a 429 for everything until the clock caught up */
static void test_a_clock_stepping_back_never_leaves_a_bucket_empty(void)
{
    ratelimit b = {0};
    ratelimit_take(&b, 60, 60, 1000.0);          /* empty at 1000 */
    CHECK(!ratelimit_allows(&b, 60, 1, 400.0));  /* the clock goes back 600 s: still empty now ... */
    CHECK(ratelimit_allows(&b, 60, 1, 401.0));   /* ... but it refills from there: one a second */
    CHECK(ratelimit_wait_s(&b, 60, 1, 401.0) == 0);
    ratelimit c = {0};
    ratelimit_take(&c, 60, 60, 1000.0);
    CHECK(ratelimit_wait_s(&c, 60, 1, 400.0) <= 1.0); /* the wait it tells is not the 600 s step */
}

static double fake_mono;
static double fake_clock(void) { return fake_mono; }

/* an account's rpm bucket runs on the injected (monotonic) clock, whatever wall time the
 * router passes: a wall clock that steps back does not stop its refill */
static void test_account_buckets_ignore_the_wall_clock(void)
{
    ratelimit_set_clock(fake_clock);
    pool_account pa;
    memset(&pa, 0, sizeof pa);
    pa.a.max_rpm = 2; /* one request back every 30 s */
    char why[200];
    fake_mono = 100.0;
    account_limits_start(&pa, 1000.0);
    account_limits_start(&pa, 1000.0);
    CHECK(!account_limits_ok(&pa, 1000.0, why, sizeof why));
    CHECK(strstr(why, "rate_limited_locally") != NULL);
    fake_mono = 131.0; /* 31 s later, on a wall clock stepped back 600 s meanwhile */
    CHECK(account_limits_ok(&pa, 431.0, why, sizeof why));
    CHECK(account_limits_wait_s(&pa, 431.0) == 0);
    fake_mono = 131.5; /* and a wall clock stepped forward fills nothing */
    account_limits_start(&pa, 9000.0);
    account_limits_start(&pa, 9000.0);
    CHECK(!account_limits_ok(&pa, 9000.0, why, sizeof why));
    ratelimit_set_clock(NULL);
    CHECK(ratelimit_now() > 0);
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
    RUN(test_a_clock_stepping_back_never_leaves_a_bucket_empty);
    RUN(test_account_buckets_ignore_the_wall_clock);
    return check_summary();
}
