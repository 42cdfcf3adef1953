/* test_shared_limits.c: what the pool's rate limits and budgets read back
 * from Redis and from the other gateways (shared/shared_limits.c): the
 * bucket script's answer, Redis's float texts, a spend message's body;
 * anything else is refused, never half taken. And a local bucket set to
 * the pool's level (ratelimit_set). */
#include "check.h"
#include "shared/shared_limits.h"
#include "route/ratelimit.h"
#include <hiredis/hiredis.h>
#include <math.h>

static redisReply r_int(long long v)
{
    redisReply r;
    memset(&r, 0, sizeof r);
    r.type = REDIS_REPLY_INTEGER;
    r.integer = v;
    return r;
}

static redisReply r_str(const char *s)
{
    redisReply r;
    memset(&r, 0, sizeof r);
    r.type = REDIS_REPLY_STRING;
    r.str = (char *)s;
    r.len = strlen(s);
    return r;
}

static redisReply r_arr(redisReply **e, size_t n)
{
    redisReply r;
    memset(&r, 0, sizeof r);
    r.type = REDIS_REPLY_ARRAY;
    r.element = e;
    r.elements = n;
    return r;
}

static void test_a_bucket_answer_reads_its_verdict_and_both_levels(void)
{
    redisReply ok = r_int(1), l1 = r_str("3.5"), l2 = r_str("-1200");
    redisReply *e[] = {&ok, &l1, &l2};
    redisReply r = r_arr(e, 3);
    shared_bucket_answer a;
    CHECK_EQ_INT(shared_bucket_answer_read(&r, &a), 0);
    CHECK_EQ_INT(a.ok, 1);
    CHECK(a.level[0] == 3.5 && a.level[1] == -1200);
    ok = r_int(0);
    l1 = r_str("0.25000000000000006");
    CHECK_EQ_INT(shared_bucket_answer_read(&r, &a), 0);
    CHECK_EQ_INT(a.ok, 0);
    CHECK(fabs(a.level[0] - 0.25) < 1e-9);
}

static void test_a_bucket_answer_of_another_shape_is_refused(void)
{
    shared_bucket_answer a;
    CHECK_EQ_INT(shared_bucket_answer_read(NULL, &a), -1);
    redisReply two = r_int(2), ok = r_int(1), l = r_str("1"), bad = r_str("1x"), inf = r_str("inf"),
               huge = r_str("1e300"), empty = r_str("");
    redisReply *verdict2[] = {&two, &l, &l}, *short_[] = {&ok, &l}, *text[] = {&ok, &bad, &l},
               *infs[] = {&ok, &l, &inf}, *huges[] = {&ok, &huge, &l}, *empties[] = {&ok, &empty, &l},
               *intlevel[] = {&ok, &ok, &l};
    redisReply r = r_arr(verdict2, 3);
    CHECK_EQ_INT(shared_bucket_answer_read(&r, &a), -1);
    r = r_arr(short_, 2);
    CHECK_EQ_INT(shared_bucket_answer_read(&r, &a), -1);
    r = r_arr(text, 3);
    CHECK_EQ_INT(shared_bucket_answer_read(&r, &a), -1);
    r = r_arr(infs, 3);
    CHECK_EQ_INT(shared_bucket_answer_read(&r, &a), -1);
    r = r_arr(huges, 3);
    CHECK_EQ_INT(shared_bucket_answer_read(&r, &a), -1);
    r = r_arr(empties, 3);
    CHECK_EQ_INT(shared_bucket_answer_read(&r, &a), -1);
    r = r_arr(intlevel, 3);
    CHECK_EQ_INT(shared_bucket_answer_read(&r, &a), -1);
    redisReply s = r_str("1");
    CHECK_EQ_INT(shared_bucket_answer_read(&s, &a), -1);
}

static void test_redis_float_texts_read_whole_or_not_at_all(void)
{
    double v = -1;
    CHECK_EQ_INT(shared_limits_number("0.8000000000000000444", 21, &v), 0);
    CHECK(fabs(v - 0.8) < 1e-12);
    CHECK_EQ_INT(shared_limits_number("1.5e-05", 7, &v), 0);
    CHECK(fabs(v - 1.5e-05) < 1e-15);
    CHECK_EQ_INT(shared_limits_number("12", 1, &v), 0); /* only the n bytes given */
    CHECK(v == 1);
    CHECK_EQ_INT(shared_limits_number("nan", 3, &v), -1);
    CHECK_EQ_INT(shared_limits_number("3 ", 2, &v), -1);
    CHECK_EQ_INT(shared_limits_number("", 0, &v), -1);
    CHECK_EQ_INT(shared_limits_number(NULL, 3, &v), -1);
    char big[100];
    memset(big, '1', sizeof big);
    CHECK_EQ_INT(shared_limits_number(big, sizeof big, &v), -1);
}

static int spend_read(const char *text, shared_spend_total *t)
{
    json_value *doc = json_parse(text, strlen(text), NULL, 0);
    int rc = shared_spend_read(doc, t);
    json_free(doc);
    return rc;
}

static void test_a_spend_message_reads_its_window_and_total(void)
{
    shared_spend_total t;
    CHECK_EQ_INT(spend_read("{\"p\":\"month\",\"w\":1764547200,\"usd\":0.80000000000000004}", &t), 0);
    CHECK_EQ_STR(t.period, "month");
    CHECK(t.start == 1764547200.0 && fabs(t.usd - 0.8) < 1e-12);
    CHECK_EQ_INT(spend_read("{\"p\":\"7d\",\"w\":0,\"usd\":0}", &t), 0);
    CHECK_EQ_STR(t.period, "7d");
}

static void test_a_spend_message_out_of_range_is_refused(void)
{
    shared_spend_total t;
    const char *bad[] = {
        "{\"p\":\"week\",\"w\":1764547200,\"usd\":1}",   /* not a period */
        "{\"p\":\"0d\",\"w\":1764547200,\"usd\":1}",
        "{\"p\":\"month\",\"w\":1764547200.5,\"usd\":1}", /* not a whole second */
        "{\"p\":\"month\",\"w\":-1,\"usd\":1}",
        "{\"p\":\"month\",\"w\":1e20,\"usd\":1}",
        "{\"p\":\"month\",\"w\":1764547200,\"usd\":-0.5}",
        "{\"p\":\"month\",\"w\":1764547200,\"usd\":1e13}",
        "{\"p\":\"month\",\"w\":1764547200,\"usd\":\"1\"}",
        "{\"p\":\"month\",\"w\":1764547200}",
        "{\"p\":\"monthmonthmonthmonth\",\"w\":1,\"usd\":1}",
        "[1,2]",
        "null",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_EQ_INT(spend_read(bad[i], &t), -1);
    CHECK_EQ_INT(shared_spend_read(NULL, &t), -1);
}

static void test_the_wait_for_a_bucket_is_what_it_lacks_at_its_rate(void)
{
    CHECK(shared_bucket_wait_s(1.0, 60, 1) == 0);
    CHECK(fabs(shared_bucket_wait_s(0.5, 60, 1) - 0.5) < 1e-9);
    CHECK(fabs(shared_bucket_wait_s(-300, 600, 1) - 30.1) < 1e-9); /* a token debt */
    CHECK(shared_bucket_wait_s(-5, 0, 1) == 0);                    /* no limit */
}

static void test_a_local_bucket_set_to_the_pools_level_refills_from_there(void)
{
    ratelimit b = {0};
    ratelimit_take(&b, 60, 1, 100.0); /* 59 left here; the pool says 0.5 */
    ratelimit_set(&b, 60, 0.5, 100.0);
    CHECK(!ratelimit_allows(&b, 60, 1, 100.0));
    CHECK(ratelimit_allows(&b, 60, 1, 100.5)); /* one a second */
    ratelimit_set(&b, 60, 500, 101.0);        /* never above a full bucket */
    CHECK(ratelimit_level(&b, 60, 101.0) == 60);
    ratelimit_set(&b, 0, -5, 102.0); /* no limit: nothing to set */
    CHECK(ratelimit_level(&b, 60, 102.0) == 60);
}

int main(void)
{
    RUN(test_a_bucket_answer_reads_its_verdict_and_both_levels);
    RUN(test_a_bucket_answer_of_another_shape_is_refused);
    RUN(test_redis_float_texts_read_whole_or_not_at_all);
    RUN(test_a_spend_message_reads_its_window_and_total);
    RUN(test_a_spend_message_out_of_range_is_refused);
    RUN(test_the_wait_for_a_bucket_is_what_it_lacks_at_its_rate);
    RUN(test_a_local_bucket_set_to_the_pools_level_refills_from_there);
    return check_summary();
}
