/* test_metrics.c: the Prometheus text of metrics.c: counters by label,
 * cumulative histogram buckets, label escaping, accounts by state, and the
 * attempt outcomes the failover code may add. (The whole exposition is also
 * validated by promtool in tests/e2e/test_admin.py.) */
#include "check.h"
#include "obs/metrics.h"
#include "base/sbuf.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static const metrics_account test_accounts[] = {
    {1, "alpha", "available", 0, 1, 12.5, -1, 0.75, 420, 4},
    {2, "be\"ta\\", "cooling", 44.2, 0, -1, -1, 0, -1, 2},
    {3, "gamma", "cooling", 10, 0, -1, -1, -1, -1, 0},
};

static const metrics_key test_keys[] = {{7, "laptop"}, {8, "ci"}};

static char *test_format(sbuf *out)
{
    metrics_gauges g = {test_accounts, 3, 7, 5, 2, 9, 1, 4, 123.9, 2, 11, 4, 6, 3, 1, 2, 5, test_keys, 2, 1, 1, 8, 3, 32, 40, 2};
    sbuf_reset(out);
    metrics_format(out, &g);
    return out->p;
}

static int test_has(const char *text, const char *line)
{
    const char *p = strstr(text, line);
    return p && (p == text || p[-1] == '\n');
}

static void test_metrics_requests_count_by_endpoint_and_status(void)
{
    metrics_reset();
    sbuf b = SBUF_INIT;
    metrics_request("/v1/responses", 200);
    metrics_request("/v1/responses", 200);
    metrics_request("/v1/chat/completions", 503);
    metrics_request("/elsewhere", 404);
    const char *t = test_format(&b);
    CHECK(test_has(t, "# TYPE switchyard_requests_total counter\n"));
    CHECK(test_has(t, "switchyard_requests_total{endpoint=\"/v1/responses\",status=\"200\"} 2\n"));
    CHECK(test_has(t, "switchyard_requests_total{endpoint=\"/v1/chat/completions\",status=\"503\"} 1\n"));
    CHECK(test_has(t, "switchyard_requests_total{endpoint=\"other\",status=\"404\"} 1\n"));
    CHECK(!strstr(t, "status=\"500\""));
    sbuf_free(&b);
}

static void test_metrics_key_refusals_count_by_key_and_reason(void)
{
    metrics_reset();
    sbuf b = SBUF_INIT;
    metrics_key_refusal(8, "rate_limit_exceeded");
    metrics_key_refusal(8, "rate_limit_exceeded");
    metrics_key_refusal(8, "insufficient_quota");
    metrics_key_refusal(7, "model_not_allowed");
    metrics_key_refusal(7, "expired_api_key");
    metrics_key_refusal(42, "something_new"); /* a key revoked since, a code added later */
    const char *t = test_format(&b);
    CHECK(test_has(t, "# TYPE switchyard_key_refusals_total counter\n"));
    CHECK(test_has(t, "switchyard_key_refusals_total{key=\"ci\",reason=\"rpm\"} 2\n"));
    CHECK(test_has(t, "switchyard_key_refusals_total{key=\"ci\",reason=\"over_budget\"} 1\n"));
    CHECK(test_has(t, "switchyard_key_refusals_total{key=\"laptop\",reason=\"model_not_allowed\"} 1\n"));
    CHECK(test_has(t, "switchyard_key_refusals_total{key=\"laptop\",reason=\"expired\"} 1\n"));
    CHECK(test_has(t, "switchyard_key_refusals_total{key=\"id:42\",reason=\"other\"} 1\n"));
    CHECK(test_has(t, "switchyard_alerts_total{result=\"unsent\"} 8\n"));
    CHECK(test_has(t, "switchyard_account_polls_in_flight 3\n"));
    metrics_redis_dropped(METRICS_REDIS_DROP_LINK_DOWN);
    metrics_redis_dropped(METRICS_REDIS_DROP_LINK_DOWN);
    metrics_redis_dropped(METRICS_REDIS_DROP_UNREADABLE);
    t = test_format(&b);
    CHECK(test_has(t, "switchyard_redis_messages_dropped_total{reason=\"link_down\"} 2\n"));
    CHECK(test_has(t, "switchyard_redis_messages_dropped_total{reason=\"in_flight\"} 0\n"));
    CHECK(test_has(t, "switchyard_redis_messages_dropped_total{reason=\"unreadable\"} 1\n"));
    CHECK(test_has(t, "switchyard_account_polls_in_flight_max 32\n"));
    CHECK(test_has(t, "switchyard_account_polls_total{result=\"deferred\"} 2\n"));
    sbuf_free(&b);
}

static void test_metrics_attempts_and_failovers_by_account_and_class(void)
{
    metrics_reset();
    sbuf b = SBUF_INIT;
    metrics_attempt(1, "failover", "rate_limit", 0.2);
    metrics_attempt(1, "failover", "rate_limit", 0.3);
    metrics_attempt(3, "ok", "", 1.5);
    metrics_attempt(2, "retry", "server", 0.1); /* an outcome the failover code adds later */
    metrics_attempt(99, "failover", "network", 0.1); /* an account removed since */
    const char *t = test_format(&b);
    CHECK(test_has(t, "switchyard_upstream_attempts_total{account=\"alpha\",outcome=\"failover\",class=\"rate_limit\"} 2\n"));
    CHECK(test_has(t, "switchyard_upstream_attempts_total{account=\"gamma\",outcome=\"ok\",class=\"none\"} 1\n"));
    CHECK(test_has(t, "switchyard_upstream_attempts_total{account=\"be\\\"ta\\\\\",outcome=\"retry\",class=\"server\"} 1\n"));
    CHECK(test_has(t, "switchyard_failovers_total{account=\"alpha\",class=\"rate_limit\"} 2\n"));
    CHECK(test_has(t, "switchyard_failovers_total{account=\"id:99\",class=\"network\"} 1\n"));
    CHECK(!strstr(t, "switchyard_failovers_total{account=\"gamma\""));
    metrics_totals tot;
    metrics_totals_get(&tot);
    CHECK_EQ_INT(tot.attempts, 5);
    CHECK_EQ_INT(tot.failovers, 3);
    sbuf_free(&b);
}

static void test_metrics_histogram_buckets_are_cumulative(void)
{
    metrics_reset();
    sbuf b = SBUF_INIT;
    metrics_ttfb(0.004);  /* first bucket */
    metrics_ttfb(0.3);    /* le 0.5 */
    metrics_ttfb(0.5);    /* le 0.5: the bound is inclusive */
    metrics_ttfb(1000);   /* only +Inf */
    metrics_ttfb(-1);     /* not timed: ignored */
    const char *t = test_format(&b);
    CHECK(test_has(t, "# TYPE switchyard_upstream_ttfb_seconds histogram\n"));
    CHECK(test_has(t, "switchyard_upstream_ttfb_seconds_bucket{le=\"0.005\"} 1\n"));
    CHECK(test_has(t, "switchyard_upstream_ttfb_seconds_bucket{le=\"0.25\"} 1\n"));
    CHECK(test_has(t, "switchyard_upstream_ttfb_seconds_bucket{le=\"0.5\"} 3\n"));
    CHECK(test_has(t, "switchyard_upstream_ttfb_seconds_bucket{le=\"300\"} 3\n"));
    CHECK(test_has(t, "switchyard_upstream_ttfb_seconds_bucket{le=\"+Inf\"} 4\n"));
    CHECK(test_has(t, "switchyard_upstream_ttfb_seconds_count 4\n"));
    CHECK(test_has(t, "switchyard_upstream_ttfb_seconds_sum 1000.804\n"));
    sbuf_free(&b);
}

static void test_metrics_gauges_accounts_policy_and_writer(void)
{
    metrics_reset();
    sbuf b = SBUF_INIT;
    metrics_preflight_switch();
    metrics_retry(2);
    metrics_wait(1.5);
    metrics_policy_reload(1);
    metrics_policy_reload(0);
    metrics_policy_reload(1);
    metrics_websocket_turn(0);
    metrics_websocket_turn(0);
    metrics_websocket_turn(1);
    const char *t = test_format(&b);
    CHECK(test_has(t, "switchyard_accounts{state=\"available\"} 1\n"));
    CHECK(test_has(t, "switchyard_accounts{state=\"cooling\"} 2\n"));
    CHECK(test_has(t, "switchyard_accounts{state=\"disabled\"} 0\n"));
    CHECK(test_has(t, "switchyard_account_cooldown_seconds{account=\"be\\\"ta\\\\\"} 45\n"));
    CHECK(test_has(t, "switchyard_account_cooldown_seconds{account=\"alpha\"} 0\n"));
    CHECK(test_has(t, "switchyard_account_usage_ratio{account=\"alpha\",window=\"primary\"} 0.125\n"));
    CHECK(!strstr(t, "window=\"secondary\""));
    CHECK(test_has(t, "switchyard_preflight_switches_total 1\n"));
    CHECK(test_has(t, "switchyard_retries_total{account=\"be\\\"ta\\\\\"} 1\n"));
    CHECK(test_has(t, "switchyard_waits_total 1\n"));
    CHECK(test_has(t, "switchyard_wait_seconds_total 1.5\n"));
    CHECK(test_has(t, "switchyard_policy_fallbacks_total 7\n"));
    CHECK(test_has(t, "switchyard_policy_reloads_total{result=\"ok\"} 2\n"));
    CHECK(test_has(t, "switchyard_policy_reloads_total{result=\"error\"} 1\n"));
    CHECK(test_has(t, "switchyard_writer_queue_depth{kind=\"request_logs\"} 5\n"));
    CHECK(test_has(t, "switchyard_dropped_log_rows_total 9\n"));
    CHECK(test_has(t, "switchyard_uptime_seconds 123\n"));
    CHECK(test_has(t, "switchyard_websockets_open 2\n"));
    CHECK(test_has(t, "switchyard_alerts_total{result=\"raised\"} 11\n"));
    CHECK(test_has(t, "switchyard_alerts_total{result=\"suppressed\"} 4\n"));
    CHECK(test_has(t, "switchyard_alert_posts_total{result=\"sent\"} 6\n"));
    CHECK(test_has(t, "switchyard_alert_posts_total{result=\"retried\"} 3\n"));
    CHECK(test_has(t, "switchyard_alert_posts_total{result=\"failed\"} 1\n"));
    CHECK(test_has(t, "switchyard_alert_posts_total{result=\"dropped\"} 2\n"));
    CHECK(test_has(t, "switchyard_alert_queue_depth 5\n"));
    CHECK(test_has(t, "switchyard_websocket_turns_total{kind=\"turn\"} 2\n"));
    CHECK(test_has(t, "switchyard_websocket_turns_total{kind=\"warmup\"} 1\n"));
    /* every sample line belongs to a family announced by HELP and TYPE */
    for (const char *line = t; *line; line = strchr(line, '\n') + 1) {
        if (*line != '#') {
            char name[96];
            size_t n = strcspn(line, "{ ");
            snprintf(name, sizeof name, "%.*s", (int)n, line);
            char *suffix = strstr(name, "_bucket");
            if (!suffix)
                suffix = strstr(name, "_count");
            if (!suffix && strstr(name, "_sum") && strstr(name, "_seconds_sum"))
                suffix = strstr(name, "_sum");
            if (suffix)
                *suffix = '\0';
            char want[160];
            snprintf(want, sizeof want, "# TYPE %s ", name);
            if (!strstr(t, want)) {
                fprintf(stderr, "  no TYPE line for %s\n", name);
                CHECK(0);
            }
        }
        if (!strchr(line, '\n'))
            break;
    }
    sbuf_free(&b);
}

static void test_metrics_words_beyond_the_table_count_as_other(void)
{
    metrics_reset();
    sbuf b = SBUF_INIT;
    char cls[16];
    for (int i = 0; i < 40; i++) {
        snprintf(cls, sizeof cls, "class%d", i);
        metrics_attempt(1, "failover", cls, 0.01);
    }
    const char *t = test_format(&b);
    CHECK(test_has(t, "switchyard_failovers_total{account=\"alpha\",class=\"class0\"} 1\n"));
    CHECK(strstr(t, "class=\"other\"") != NULL);
    metrics_totals tot;
    metrics_totals_get(&tot);
    CHECK_EQ_INT(tot.failovers, 40);
    sbuf_free(&b);
}

typedef struct test_minutes {
    int n;
    double t[64];
    int64_t req[64], fo[64], failed[64];
} test_minutes;

static void test_minute_cb(void *ud, double t, int64_t requests, int64_t failovers, int64_t failed)
{
    test_minutes *m = ud;
    m->t[m->n] = t;
    m->req[m->n] = requests;
    m->fo[m->n] = failovers;
    m->failed[m->n++] = failed;
}

static void test_metrics_last_hour_per_minute(void)
{
    metrics_reset();
    double now = 1800000000.0 + 30; /* 30 s into a minute */
    metrics_minute_seed(now - 3600 - 30, 99, 9, 9);  /* 61 minutes ago: out of the hour */
    metrics_minute_seed(now - 59 * 60 - 30, 4, 1, 0); /* the oldest minute shown */
    metrics_minute_request(now - 5 * 60, 200, 1);
    metrics_minute_request(now - 5 * 60, 503, 3);
    metrics_minute_request(now, 200, 2);
    metrics_minute_request(now - 70 * 60, 200, 1); /* a request that started long ago: its slot moved on */
    test_minutes m = {0};
    double since = metrics_minutes(now, test_minute_cb, &m);
    CHECK(since == now - 30 - 59 * 60);
    CHECK_EQ_INT(m.n, 3);
    CHECK(m.t[0] == since);
    CHECK_EQ_INT(m.req[0], 4);
    CHECK_EQ_INT(m.req[1], 2);
    CHECK_EQ_INT(m.fo[1], 2);
    CHECK_EQ_INT(m.failed[1], 1);
    CHECK(m.t[2] == now - 30);
    CHECK_EQ_INT(m.fo[2], 1);
    /* an hour later the ring has moved on: nothing old is shown */
    test_minutes later = {0};
    metrics_minutes(now + 3600, test_minute_cb, &later);
    CHECK_EQ_INT(later.n, 0);
}

static void test_metrics_sixty_second_success_and_latency_per_account(void)
{
    metrics_reset();
    sbuf b = SBUF_INIT;
    const char *t = test_format(&b);
    CHECK(test_has(t, "# TYPE switchyard_account_success_ratio_60s gauge\n"));
    CHECK(test_has(t, "switchyard_account_success_ratio_60s{account=\"alpha\"} 0.75\n"));
    CHECK(test_has(t, "switchyard_account_success_ratio_60s{account=\"be\\\"ta\\\\\"} 0\n"));
    CHECK(!strstr(t, "switchyard_account_success_ratio_60s{account=\"gamma\"}")); /* no attempts: no figure */
    CHECK(test_has(t, "switchyard_account_latency_60s_seconds{account=\"alpha\"} 0.42\n"));
    CHECK(!strstr(t, "switchyard_account_latency_60s_seconds{account=\"be"));
    sbuf_free(&b);
}

static size_t test_count(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void test_metrics_tokens_and_cost_by_account_key_and_model(void)
{
    metrics_reset();
    sbuf b = SBUF_INIT;
    double now = 1800000000.0;
    metrics_usage(now, 1, 7, "gpt-5", 100, 40, 20, 0.0025);
    metrics_usage(now, 1, 7, "gpt-5", 10, -1, 5, -1); /* no price known: tokens, no cost */
    metrics_usage(now, 99, 8, "gpt-5", 1, 0, 1, 0.5); /* an account gone from the pool */
    metrics_usage(now, 0, 0, "", -1, -1, -1, -1);     /* nothing served: no usage, no series */
    const char *t = test_format(&b);
    CHECK(test_has(t, "# TYPE switchyard_tokens_total counter\n"));
    CHECK(test_has(t, "switchyard_tokens_total{direction=\"input\",account=\"alpha\",key=\"laptop\",model=\"gpt-5\"} 110\n"));
    CHECK(test_has(t, "switchyard_tokens_total{direction=\"cached\",account=\"alpha\",key=\"laptop\",model=\"gpt-5\"} 40\n"));
    CHECK(test_has(t, "switchyard_tokens_total{direction=\"output\",account=\"alpha\",key=\"laptop\",model=\"gpt-5\"} 25\n"));
    CHECK(test_has(t, "switchyard_tokens_total{direction=\"input\",account=\"id:99\",key=\"ci\",model=\"gpt-5\"} 1\n"));
    CHECK(test_has(t, "# TYPE switchyard_cost_usd_total counter\n"));
    CHECK(test_has(t, "switchyard_cost_usd_total{account=\"alpha\",key=\"laptop\",model=\"gpt-5\"} 0.0025\n"));
    CHECK(test_has(t, "switchyard_cost_usd_total{account=\"id:99\",key=\"ci\",model=\"gpt-5\"} 0.5\n"));
    CHECK(!strstr(t, "account=\"none\"")); /* a request without usage makes no series */
    sbuf_free(&b);
}

static void test_metrics_models_beyond_the_table_fold_into_other(void)
{
    metrics_reset();
    sbuf b = SBUF_INIT;
    char model[32];
    for (int i = 0; i < 100; i++) { /* refused before any upstream: the names take no slot */
        snprintf(model, sizeof model, "junk%03d", i);
        metrics_usage(1800000000.0, 0, 7, model, -1, -1, -1, -1);
    }
    for (int i = 0; i < 200; i++) { /* served, a new model name with every request */
        snprintf(model, sizeof model, "m%03d", i);
        metrics_usage(1800000000.0, 1, 7, model, 10, 0, 1, 0.01);
    }
    const char *t = test_format(&b);
    CHECK_EQ_INT(test_count(t, "switchyard_cost_usd_total{"), METRICS_MODELS); /* 63 names and "other" */
    CHECK(test_has(t, "switchyard_tokens_total{direction=\"input\",account=\"alpha\",key=\"laptop\",model=\"m000\"} 10\n"));
    CHECK(test_has(t, "switchyard_tokens_total{direction=\"input\",account=\"alpha\",key=\"laptop\",model=\"m062\"} 10\n"));
    /* 200 - 63 models counted under "other": nothing is lost */
    CHECK(test_has(t, "switchyard_tokens_total{direction=\"input\",account=\"alpha\",key=\"laptop\",model=\"other\"} 1370\n"));
    sbuf_free(&b);
}

static void test_metrics_usage_cells_beyond_the_table_count_as_other(void)
{
    metrics_reset();
    sbuf b = SBUF_INIT;
    for (int i = 1; i <= METRICS_USAGE_SLOTS + 10; i++)
        metrics_usage(1800000000.0, 1, i, "gpt-5", 1, 0, 0, 0);
    const char *t = test_format(&b);
    CHECK_EQ_INT(test_count(t, "direction=\"input\""), METRICS_USAGE_SLOTS + 1);
    CHECK(test_has(t, "switchyard_tokens_total{direction=\"input\",account=\"other\",key=\"other\",model=\"other\"} 10\n"));
    sbuf_free(&b);
}

typedef struct test_today {
    int n;
    metrics_usage_row r[8];
    char models[8][32];
} test_today;

static void test_today_cb(void *ud, const metrics_usage_row *r)
{
    test_today *t = ud;
    if (t->n == 8)
        return;
    t->r[t->n] = *r;
    if (r->model)
        snprintf(t->models[t->n], sizeof t->models[0], "%s", r->model);
    t->n++;
}

static const metrics_usage_row *test_today_row(const test_today *t, int64_t account, int64_t key, const char *model)
{
    for (int i = 0; i < t->n; i++)
        if (t->r[i].account_id == account && t->r[i].key_id == key && (!model || strcmp(t->models[i], model) == 0))
            return &t->r[i];
    return NULL;
}

static void test_metrics_today_sums_by_account_key_and_model_and_starts_over_each_day(void)
{
    metrics_reset();
    double day = 1800000000.0 - fmod(1800000000.0, 86400), now = day + 3600;
    metrics_usage_seed_day(day + 10, 1, 7, "gpt-5", 3, 300, 30, 60, 0.3); /* earlier today, from the log */
    metrics_usage(now, 1, 7, "gpt-5", 100, 0, 10, 0.1);
    metrics_usage(now, 2, 7, "o3", 50, 0, 5, 0.05);
    metrics_usage(now - 86400, 2, 8, "o3", 999, 0, 999, 9.9); /* yesterday */
    test_today acc = {0}, key = {0}, mod = {0};
    CHECK_EQ_INT(metrics_usage_today(now, "account", test_today_cb, &acc), 2);
    const metrics_usage_row *a1 = test_today_row(&acc, 1, 0, NULL);
    CHECK(a1 && a1->requests == 4 && a1->input == 400 && a1->cached == 30 && a1->output == 70);
    CHECK(a1 && fabs(a1->cost_usd - 0.4) < 1e-9);
    const metrics_usage_row *a2 = test_today_row(&acc, 2, 0, NULL);
    CHECK(a2 && a2->requests == 1 && a2->input == 50); /* yesterday's cell started over */
    CHECK_EQ_INT(metrics_usage_today(now, "key", test_today_cb, &key), 1);
    CHECK(key.r[0].key_id == 7 && key.r[0].requests == 5 && fabs(key.r[0].cost_usd - 0.45) < 1e-9);
    CHECK_EQ_INT(metrics_usage_today(now, "model", test_today_cb, &mod), 2);
    const metrics_usage_row *m = test_today_row(&mod, 0, 0, "o3");
    CHECK(m && m->requests == 1 && m->output == 5);
    CHECK_EQ_INT(metrics_usage_today(now, "nonsense", test_today_cb, &mod), -1);
    /* the next day: nothing yet */
    test_today next = {0};
    CHECK_EQ_INT(metrics_usage_today(now + 86400, "account", test_today_cb, &next), 0);
}

int main(void)
{
    RUN(test_metrics_tokens_and_cost_by_account_key_and_model);
    RUN(test_metrics_models_beyond_the_table_fold_into_other);
    RUN(test_metrics_usage_cells_beyond_the_table_count_as_other);
    RUN(test_metrics_today_sums_by_account_key_and_model_and_starts_over_each_day);
    RUN(test_metrics_sixty_second_success_and_latency_per_account);
    RUN(test_metrics_requests_count_by_endpoint_and_status);
    RUN(test_metrics_attempts_and_failovers_by_account_and_class);
    RUN(test_metrics_key_refusals_count_by_key_and_reason);
    RUN(test_metrics_histogram_buckets_are_cumulative);
    RUN(test_metrics_gauges_accounts_policy_and_writer);
    RUN(test_metrics_words_beyond_the_table_count_as_other);
    RUN(test_metrics_last_hour_per_minute);
    return check_summary();
}
