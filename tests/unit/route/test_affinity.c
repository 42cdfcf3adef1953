/* test_affinity.c: the session -> account table (src/route/affinity.c): lookups,
 * moves, idle expiry, the least-recently-used bound, and a randomized run
 * against a simple model. */
#include "route/affinity.h"
#include "check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_affinity_remembers_and_moves_a_session(void)
{
    affinity *a = affinity_new(8, 3600);
    CHECK_EQ_INT(affinity_get(a, "s1", 100), 0);
    affinity_put(a, "s1", 7, 100);
    CHECK_EQ_INT(affinity_get(a, "s1", 101), 7);
    affinity_put(a, "s1", 9, 102); /* failed over: the session moves */
    CHECK_EQ_INT(affinity_get(a, "s1", 103), 9);
    CHECK_EQ_INT(affinity_count(a), 1);
    CHECK_EQ_INT(affinity_get(a, "", 103), 0);
    CHECK_EQ_INT(affinity_get(a, NULL, 103), 0);
    affinity_put(a, "", 3, 103);
    CHECK_EQ_INT(affinity_count(a), 1);
    affinity_free(a);
}

static void test_affinity_forgets_a_session_after_its_idle_time(void)
{
    affinity *a = affinity_new(8, 60);
    affinity_put(a, "s", 1, 1000);
    CHECK_EQ_INT(affinity_get(a, "s", 1060), 1);  /* exactly the idle time: still known */
    affinity_put(a, "s", 1, 1060);                /* a use restarts the clock */
    CHECK_EQ_INT(affinity_get(a, "s", 1120), 1);
    CHECK_EQ_INT(affinity_get(a, "s", 1121), 0);
    CHECK_EQ_INT(affinity_count(a), 0);
    affinity_free(a);
}

static void test_affinity_full_table_drops_the_least_recently_used(void)
{
    affinity *a = affinity_new(3, 3600);
    affinity_put(a, "a", 1, 10);
    affinity_put(a, "b", 2, 11);
    affinity_put(a, "c", 3, 12);
    affinity_put(a, "a", 1, 13); /* a is now the most recent; b the oldest */
    affinity_put(a, "d", 4, 14);
    CHECK_EQ_INT(affinity_count(a), 3);
    CHECK_EQ_INT(affinity_get(a, "b", 15), 0);
    CHECK_EQ_INT(affinity_get(a, "a", 15), 1);
    CHECK_EQ_INT(affinity_get(a, "c", 15), 3);
    CHECK_EQ_INT(affinity_get(a, "d", 15), 4);
    affinity_free(a);
}

static void test_affinity_idle_sessions_go_before_recent_ones(void)
{
    affinity *a = affinity_new(3, 100);
    affinity_put(a, "old1", 1, 0);
    affinity_put(a, "old2", 2, 1);
    affinity_put(a, "new", 3, 150);
    affinity_put(a, "newer", 4, 160); /* drops both idle entries, keeps "new" */
    CHECK_EQ_INT(affinity_count(a), 2);
    CHECK_EQ_INT(affinity_get(a, "new", 161), 3);
    CHECK_EQ_INT(affinity_get(a, "newer", 161), 4);
    affinity_free(a);
}

/* Random puts and gets against a model kept as arrays with a use clock. */
static void test_affinity_matches_a_simple_model(void)
{
    enum { MAX = 16, KEYS = 40, STEPS = 20000 };
    affinity *a = affinity_new(MAX, 50);
    int64_t acct[KEYS] = {0};
    double used[KEYS] = {0};
    int present[KEYS] = {0};
    unsigned seed = 12345;
    int mismatches = 0;
    for (int step = 0; step < STEPS; step++) {
        seed = seed * 1103515245u + 12345u;
        int k = (int)((seed >> 8) % KEYS);
        double now = step * 0.5;
        char key[16];
        snprintf(key, sizeof key, "k%d", k);
        if ((seed >> 20) & 1) {
            int64_t want = present[k] && now - used[k] <= 50 ? acct[k] : 0;
            if (present[k] && now - used[k] > 50)
                present[k] = 0;
            if (affinity_get(a, key, now) != want)
                mismatches++;
        } else {
            if (!present[k]) {
                int live = 0, oldest = -1;
                for (int i = 0; i < KEYS; i++) {
                    if (present[i] && now - used[i] > 50)
                        present[i] = 0; /* idle ones are dropped first */
                    if (present[i]) {
                        live++;
                        if (oldest < 0 || used[i] < used[oldest])
                            oldest = i;
                    }
                }
                if (live == MAX)
                    present[oldest] = 0;
            }
            present[k] = 1;
            acct[k] = 1 + (int64_t)((seed >> 4) % 5);
            used[k] = now;
            affinity_put(a, key, acct[k], now);
        }
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK(affinity_count(a) <= MAX);
    affinity_free(a);
}

static void test_affinity_put_says_when_an_entry_is_worth_telling_other_gateways(void)
{
    affinity *a = affinity_new(8, 400);
    CHECK_EQ_INT(affinity_put(a, "s", 1, 1000), 1);  /* new */
    CHECK_EQ_INT(affinity_put(a, "s", 1, 1050), 0);  /* the same account soon after: nothing new */
    CHECK_EQ_INT(affinity_put(a, "s", 2, 1060), 1);  /* moved */
    CHECK_EQ_INT(affinity_put(a, "s", 2, 1160), 0);  /* a quarter of the idle time since it was told */
    CHECK_EQ_INT(affinity_put(a, "s", 2, 1161), 1);  /* past it: told again before the shared copy expires */
    CHECK_EQ_INT(affinity_put(a, "", 2, 1162), 0);
    CHECK_EQ_INT(affinity_put(a, "s", 0, 1162), 0);
    affinity_free(a);
}

int main(void)
{
    RUN(test_affinity_put_says_when_an_entry_is_worth_telling_other_gateways);
    RUN(test_affinity_remembers_and_moves_a_session);
    RUN(test_affinity_forgets_a_session_after_its_idle_time);
    RUN(test_affinity_full_table_drops_the_least_recently_used);
    RUN(test_affinity_idle_sessions_go_before_recent_ones);
    RUN(test_affinity_matches_a_simple_model);
    return check_summary();
}
