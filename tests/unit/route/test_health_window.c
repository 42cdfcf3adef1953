/* test_health_window.c: the 60 s success rate and latency window. */
#include "check.h"
#include "route/health_window.h"

static void test_empty_window_has_no_rate(void)
{
    health_window w = {0};
    health_figures f;
    health_window_read(&w, 1000.0, &f);
    CHECK_EQ_INT(f.attempts, 0);
    CHECK(f.success_rate < 0 && f.latency_ms < 0);
}

static void test_rate_and_latency_of_the_last_minute(void)
{
    health_window w = {0};
    health_figures f;
    health_window_record(&w, 1000.2, 1, 100);
    health_window_record(&w, 1000.7, 0, 0);
    health_window_record(&w, 1030.0, 1, 300);
    health_window_record(&w, 1031.0, 1, 200);
    health_window_read(&w, 1031.5, &f);
    CHECK_EQ_INT(f.attempts, 4);
    CHECK(f.success_rate > 0.749 && f.success_rate < 0.751);
    CHECK(f.latency_ms > 199.9 && f.latency_ms < 200.1);
}

static void test_old_attempts_slide_out(void)
{
    health_window w = {0};
    health_figures f;
    health_window_record(&w, 1000.0, 0, 0);
    health_window_record(&w, 1059.0, 1, 50);
    health_window_read(&w, 1059.9, &f);
    CHECK_EQ_INT(f.attempts, 2);
    health_window_read(&w, 1060.0, &f); /* second 1000 is now 60 s back */
    CHECK_EQ_INT(f.attempts, 1);
    CHECK(f.success_rate > 0.99);
    health_window_record(&w, 1120.0, 0, 0); /* reuses the slot of second 1000 ... */
    health_window_read(&w, 1120.0, &f);
    CHECK_EQ_INT(f.attempts, 1); /* ... and the minute-old success is gone too */
    CHECK(f.success_rate < 0.01);
}

/* the wall clock steps back 600 s: the window starts over at the new time, where it
 * counted nothing (and kept showing the old minute) until the clock caught up */
static void test_a_clock_step_back_starts_the_window_over(void)
{
    health_window w = {0};
    health_figures f;
    health_window_record(&w, 1000.0, 0, 0);
    health_window_record(&w, 1001.0, 0, 0);
    health_window_read(&w, 401.0, &f);
    CHECK_EQ_INT(f.attempts, 0); /* the failures were "a minute ahead": not now's */
    health_window_record(&w, 401.0, 1, 80);
    health_window_record(&w, 402.0, 1, 120);
    health_window_read(&w, 402.5, &f);
    CHECK_EQ_INT(f.attempts, 2);
    CHECK(f.success_rate > 0.99);
    CHECK(f.latency_ms > 99.9 && f.latency_ms < 100.1);
}

int main(void)
{
    RUN(test_empty_window_has_no_rate);
    RUN(test_rate_and_latency_of_the_last_minute);
    RUN(test_old_attempts_slide_out);
    RUN(test_a_clock_step_back_starts_the_window_over);
    return check_summary();
}
