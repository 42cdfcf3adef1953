/* test_rate_event.c: a codex.rate_limits event of a Responses stream is
 * told in the pool's numbers (rounded as the x-codex-* headers are), only
 * its rate_limits member changes, and only for the main limit; a family's
 * event, other events and anything malformed pass byte for byte. */
#include "check.h"
#include "route/rate_event.h"

#define NOW 1700000000.0

static pool_usage test_pool(void)
{
    pool_usage u;
    memset(&u, 0, sizeof u);
    u.primary = (pool_window){1, 42.4, 18000, NOW + 600.2};
    u.secondary = (pool_window){1, 10.6, 604800, 0};
    return u;
}

static const char account_event[] =
    "{\"type\":\"codex.rate_limits\",\"plan_type\":\"pro\",\"rate_limits\":{\"allowed\":true,\"limit_reached\":false,"
    "\"primary\":{\"used_percent\":97,\"window_minutes\":300,\"reset_at\":1700000100},\"secondary\":null},"
    "\"credits\":{\"has_credits\":false,\"unlimited\":false,\"balance\":null}}";

static const char pool_event[] =
    "{\"type\":\"codex.rate_limits\",\"plan_type\":\"pro\",\"rate_limits\":{\"allowed\":true,\"limit_reached\":false,"
    "\"primary\":{\"used_percent\":42,\"window_minutes\":300,\"reset_after_seconds\":601,\"reset_at\":1700000601},"
    "\"secondary\":{\"used_percent\":11,\"window_minutes\":10080}},"
    "\"credits\":{\"has_credits\":false,\"unlimited\":false,\"balance\":null}}";

static int rewrite(const char *data, const pool_usage *u, sbuf *out)
{
    sbuf_reset(out);
    return rate_event_rewrite(data, strlen(data), u, NOW, out);
}

static void test_main_limit_event_gets_the_pools_windows_and_keeps_the_rest(void)
{
    pool_usage u = test_pool();
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(rewrite(account_event, &u, &out), 1);
    CHECK_EQ_STR(out.p, pool_event);
    /* named "codex" (either field, any spelling Codex accepts) is the main limit too */
    CHECK_EQ_INT(rewrite("{\"type\":\"codex.rate_limits\",\"metered_limit_name\":\"Codex\",\"rate_limits\":{}}", &u, &out), 1);
    /* metered_limit_name wins over limit_name, as in Codex */
    CHECK_EQ_INT(rewrite("{\"type\":\"codex.rate_limits\",\"metered_limit_name\":\"codex\",\"limit_name\":\"x\","
                         "\"rate_limits\":{}}", &u, &out), 1);
    CHECK_EQ_INT(rewrite("{\"type\":\"codex.rate_limits\",\"metered_limit_name\":null,\"limit_name\":\"codex\","
                         "\"rate_limits\":{}}", &u, &out), 1);
    sbuf_free(&out);
}

static void test_spent_pool_is_limit_reached_and_unknown_window_is_null(void)
{
    pool_usage u = test_pool();
    u.primary.used_pct = 100;
    u.secondary.known = 0;
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(rewrite("{\"type\":\"codex.rate_limits\",\"rate_limits\":null}", &u, &out), 1);
    CHECK_EQ_STR(out.p, "{\"type\":\"codex.rate_limits\",\"rate_limits\":{\"allowed\":false,\"limit_reached\":true,"
                        "\"primary\":{\"used_percent\":100,\"window_minutes\":300,\"reset_after_seconds\":601,"
                        "\"reset_at\":1700000601},\"secondary\":null}}");
    sbuf_free(&out);
}

static void test_family_event_and_others_pass_unchanged(void)
{
    pool_usage u = test_pool(), none;
    memset(&none, 0, sizeof none);
    sbuf out = SBUF_INIT;
    sbuf_puts(&out, "kept");
    const char *const left[] = {
        "{\"type\":\"codex.rate_limits\",\"metered_limit_name\":\"codex_bengalfox\",\"rate_limits\":{}}",
        "{\"type\":\"codex.rate_limits\",\"limit_name\":\"codex-bengalfox\",\"rate_limits\":{}}",
        "{\"type\":\"codex.rate_limits\",\"metered_limit_name\":7,\"rate_limits\":{}}",
        "{\"type\":\"codex.rate_limits\",\"metered_limit_name\":\"co dex\",\"rate_limits\":{}}",
        "{\"type\":\"codex.rate_limits\",\"plan_type\":\"pro\"}", /* no rate_limits: nothing to tell */
        "{\"type\":\"response.output_text.delta\",\"delta\":\"codex.rate_limits\",\"rate_limits\":{}}",
        "{\"type\":\"codex.rate_limits\",\"rate_limits\":{}", /* not JSON */
        "[\"codex.rate_limits\"]",
    };
    for (size_t i = 0; i < sizeof left / sizeof *left; i++)
        CHECK_EQ_INT(rate_event_rewrite(left[i], strlen(left[i]), &u, NOW, &out), 0);
    CHECK_EQ_INT(rate_event_rewrite(account_event, strlen(account_event), &none, NOW, &out), 0); /* pool knows nothing */
    CHECK_EQ_STR(out.p, "kept");
    sbuf_free(&out);
}

static void test_sse_rewrites_whole_events_only_and_keeps_every_other_byte(void)
{
    pool_usage u = test_pool();
    sbuf in = SBUF_INIT, out = SBUF_INIT, want = SBUF_INIT;
    sbuf_printf(&in, ": hi\r\nevent: codex.rate_limits\r\ndata: %s\r\n\r\ndata: {\"type\":\"response.created\"}\n\n"
                     "event: codex.rate_limits\ndata:%s\n\ndata: %s\n",
                account_event, account_event, account_event);
    sbuf_printf(&want, ": hi\r\nevent: codex.rate_limits\r\ndata: %s\r\n\r\ndata: {\"type\":\"response.created\"}\n\n"
                       "event: codex.rate_limits\ndata:%s\n\ndata: %s\n",
                pool_event, pool_event, account_event); /* the last event is not ended in buf */
    CHECK_EQ_INT(rate_event_rewrite_sse(in.p, in.len, &u, NOW, &out), 1);
    CHECK_EQ_INT(out.len, want.len);
    CHECK_EQ_STR(out.p, want.p);
    /* two data: lines are one data text joined: left alone */
    sbuf_reset(&in);
    sbuf_printf(&in, "data: %s\ndata: {}\n\n", account_event);
    CHECK_EQ_INT(rate_event_rewrite_sse(in.p, in.len, &u, NOW, &out), 0);
    /* a family's event: nothing changes */
    const char fam[] = "data: {\"type\":\"codex.rate_limits\",\"metered_limit_name\":\"codex_x\",\"rate_limits\":{}}\n\n";
    CHECK_EQ_INT(rate_event_rewrite_sse(fam, sizeof fam - 1, &u, NOW, &out), 0);
    sbuf_free(&in);
    sbuf_free(&out);
    sbuf_free(&want);
}

int main(void)
{
    RUN(test_main_limit_event_gets_the_pools_windows_and_keeps_the_rest);
    RUN(test_spent_pool_is_limit_reached_and_unknown_window_is_null);
    RUN(test_family_event_and_others_pass_unchanged);
    RUN(test_sse_rewrites_whole_events_only_and_keeps_every_other_byte);
    return check_summary();
}
