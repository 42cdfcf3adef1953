/* test_budget.c: budget windows (month, N days), charges across a window's
 * end, and when a budget counts as used up (budget.c). */
#include "base/budget.h"
#include "check.h"

#define T_2026_12_15 1797292800.0 /* 2026-12-15T00:00:00Z */
#define T_2027_01_01 1798761600.0
#define T_2026_12_01 1796083200.0

static void test_month_window_wraps_the_year(void)
{
    double s, e;
    budget_window("month", T_2026_12_15, &s, &e);
    CHECK_EQ_INT((long long)s, (long long)T_2026_12_01);
    CHECK_EQ_INT((long long)e, (long long)T_2027_01_01);
}

static void test_day_windows_count_from_the_epoch(void)
{
    double s, e;
    budget_window("7d", T_2026_12_15 + 5, &s, &e);
    CHECK_EQ_INT((long long)(e - s), 7 * 86400);
    CHECK(s <= T_2026_12_15 + 5 && T_2026_12_15 + 5 < e);
    CHECK_EQ_INT((long long)s % (7 * 86400), 0);
}

static void test_periods_are_validated(void)
{
    CHECK_EQ_INT(budget_period_valid("month"), 0);
    CHECK_EQ_INT(budget_period_valid("30d"), 0);
    CHECK_EQ_INT(budget_period_valid("0d"), -1);
    CHECK_EQ_INT(budget_period_valid("week"), -1);
    CHECK_EQ_INT(budget_period_valid("7"), -1);
    CHECK_EQ_INT(budget_period_valid(NULL), -1);
}

static void test_charges_add_up_until_the_window_ends(void)
{
    budget_state b = {0};
    budget_charge(&b, "month", 3.0, T_2026_12_15);
    budget_charge(&b, "month", 2.5, T_2026_12_15 + 60);
    CHECK(b.spent > 5.49 && b.spent < 5.51);
    CHECK(!budget_over(&b, 5.0, T_2026_12_15 + 60)); /* over is the policy's word, not the sum's */
    b.over = 1;                                      /* (spend.c sets it from policies/budget.lua) */
    CHECK(budget_over(&b, 5.0, T_2026_12_15 + 60));
    CHECK(!budget_over(&b, 0, T_2026_12_15 + 60)); /* no budget: never over */
    CHECK(!budget_over(&b, 5.0, T_2027_01_01));    /* a new month starts fresh ... */
    budget_charge(&b, "month", 1.0, T_2027_01_01 + 1);
    CHECK(b.spent > 0.99 && b.spent < 1.01); /* ... its first charge is all it holds ... */
    CHECK(!b.over);                          /* ... and it is not over until the policy says so */
}

static void test_description_names_budget_and_reset(void)
{
    budget_state b = {0};
    budget_charge(&b, "month", 5.25, T_2026_12_15);
    char why[200];
    budget_describe(&b, 5.0, "month", why, sizeof why);
    CHECK_EQ_STR(why, "$5.25 of its $5.00 monthly budget used; it resets at 2027-01-01T00:00:00Z");
}

int main(void)
{
    RUN(test_month_window_wraps_the_year);
    RUN(test_day_windows_count_from_the_epoch);
    RUN(test_periods_are_validated);
    RUN(test_charges_add_up_until_the_window_ends);
    RUN(test_description_names_budget_and_reset);
    return check_summary();
}
