/* test_shared_state.c: the texts several gateways exchange through Redis
 * (shared/shared_state.c): a rest written by one instance and merged by
 * another lengthens its rest and never shortens one; the newer 429 brings
 * its ladder step; an open breaker and a family's rest travel; fields out
 * of range are skipped; a login round-trips and one with a token unfit for
 * a header is refused; messages that are not ours are refused. */
#include "check.h"
#include "shared/shared_state.h"
#include "policy/policy.h"

#define NOW 1700000000.0

static void pa_init(pool_account *pa, const char *name)
{
    memset(pa, 0, sizeof *pa);
    pa->a.name = (char *)name;
    pa->st.success_ema = 1.0;
}

static int merge_text(pool_account *pa, const char *text)
{
    json_value *doc = json_parse(text, strlen(text), NULL, 0);
    int rc = shared_rest_merge(pa, doc, NOW);
    json_free(doc);
    return rc;
}

static void test_a_rest_written_by_one_instance_is_merged_by_another(void)
{
    pool_account src, dst;
    pa_init(&src, "a");
    pa_init(&dst, "a");
    src.st.cooldown_until = NOW + 600;
    src.st.last_429_at = NOW;
    src.st.ladder_step = 3;
    snprintf(src.st.last_error, sizeof src.st.last_error, "rate_limit");
    src.breaker.state = BREAKER_OPEN;
    src.breaker.open_until = NOW + 30;
    account_family *f = pool_family_slot(&src, "codex_bengalfox");
    f->until = NOW + 900;
    f->last_429_at = NOW;
    f->ladder_step = 2;
    snprintf(f->model, sizeof f->model, "gpt-5-codex");
    sbuf b = SBUF_INIT;
    shared_rest_write(&src, &b);
    CHECK_EQ_INT(merge_text(&dst, b.p), 1);
    CHECK(dst.st.cooldown_until == NOW + 600);
    CHECK_EQ_INT(dst.st.ladder_step, 3);
    CHECK_EQ_STR(dst.st.last_error, "rate_limit");
    CHECK_EQ_INT(dst.breaker.state, BREAKER_OPEN);
    CHECK(dst.breaker.open_until == NOW + 30);
    const account_family *g = pool_family_cooling(&dst, "gpt-5-codex", "codex_bengalfox", NOW);
    CHECK(g && g->until == NOW + 900 && g->ladder_step == 2);
    CHECK_EQ_INT(merge_text(&dst, b.p), 0); /* heard twice: nothing moves */
    sbuf_free(&b);
}

static void test_merging_never_shortens_a_rest_and_an_older_429_keeps_the_ladder(void)
{
    pool_account pa;
    pa_init(&pa, "a");
    pa.st.cooldown_until = NOW + 1000;
    pa.st.last_429_at = NOW;
    pa.st.ladder_step = 4;
    CHECK_EQ_INT(merge_text(&pa, "{\"until\":1700000100,\"l429\":1699999000,\"step\":1,\"class\":\"x\"}"), 0);
    CHECK(pa.st.cooldown_until == NOW + 1000);
    CHECK_EQ_INT(pa.st.ladder_step, 4);
}

static void test_fields_out_of_range_or_of_the_wrong_type_are_skipped(void)
{
    pool_account pa;
    pa_init(&pa, "a");
    CHECK_EQ_INT(merge_text(&pa, "{\"until\":1e300,\"l429\":\"now\",\"step\":99999,\"brk\":-5,"
                                 "\"fam\":[{\"f\":\"\"},{\"f\":1},7,{\"f\":\"x\",\"until\":1e300}]}"), 0);
    CHECK(pa.st.cooldown_until == 0);
    CHECK(pa.breaker.state == 0);
    CHECK(pa.st.fam[0].family[0] == '\0');
    CHECK_EQ_INT(merge_text(&pa, "[1,2]"), -1);
    CHECK_EQ_INT(shared_rest_merge(&pa, NULL, NOW), -1);
    /* a step out of range leaves the ladder, the newer 429 still counts */
    CHECK_EQ_INT(merge_text(&pa, "{\"l429\":1700000000,\"step\":65,\"class\":\"bad\\u0001\"}"), 1);
    CHECK_EQ_INT(pa.st.ladder_step, 0);
    CHECK_EQ_STR(pa.st.last_error, "");
}

static void test_the_ttl_covers_the_last_rest_plus_an_hour(void)
{
    pool_account pa;
    pa_init(&pa, "a");
    CHECK_EQ_INT(shared_rest_ttl_ms(&pa, NOW), 3600000);
    pa.st.cooldown_until = NOW + 100;
    pa.breaker.state = BREAKER_OPEN;
    pa.breaker.open_until = NOW + 200;
    CHECK_EQ_INT(shared_rest_ttl_ms(&pa, NOW), 3800000);
    pa.st.cooldown_until = NOW + 1e9;
    CHECK_EQ_INT(shared_rest_ttl_ms(&pa, NOW), 30LL * 86400 * 1000);
}

static void test_a_login_round_trips_and_a_token_unfit_for_a_header_is_refused(void)
{
    account a, back;
    memset(&a, 0, sizeof a);
    memset(&back, 0, sizeof back);
    a.token = "eyJ.access.x";
    a.refresh_token = "rt_x_2";
    a.email = "x@example.com";
    a.token_expires_at = 1700003600;
    a.last_refresh_at = 1700000000;
    sbuf b = SBUF_INIT;
    shared_login_write(&a, &b);
    json_value *doc = json_parse(b.p, b.len, NULL, 0);
    CHECK_EQ_INT(shared_login_read(doc, &back), 0);
    CHECK_EQ_STR(back.token, "eyJ.access.x");
    CHECK_EQ_STR(back.refresh_token, "rt_x_2");
    CHECK_EQ_STR(back.email, "x@example.com");
    CHECK(back.id_token == NULL);
    CHECK_EQ_INT(back.token_expires_at, 1700003600);
    CHECK_EQ_INT(back.last_refresh_at, 1700000000);
    json_free(doc);
    store_account_clear(&back);
    sbuf_free(&b);
    static const char *const bad[] = {"{\"token\":\"a b\"}", "{\"token\":\"\"}", "{\"refresh_token\":\"r\"}",
                                      "{\"token\":\"t\",\"refresh_token\":\"r\\n\"}", "{\"token\":\"t\",\"id_token\":5}",
                                      "\"t\""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        memset(&back, 0, sizeof back);
        doc = json_parse(bad[i], strlen(bad[i]), NULL, 0);
        CHECK_EQ_INT(shared_login_read(doc, &back), -1);
        CHECK(back.token == NULL && back.refresh_token == NULL);
        json_free(doc);
    }
}

static void test_messages_are_read_back_and_others_refused(void)
{
    sbuf b = SBUF_INIT;
    shared_message_write(&b, "rest", "abc123", "team \"a\"", "{\"until\":1}");
    shared_message m;
    CHECK_EQ_INT(shared_message_read(b.p, b.len, &m), 0);
    CHECK_EQ_STR(m.type, "rest");
    CHECK_EQ_STR(m.from, "abc123");
    CHECK_EQ_STR(m.name, "team \"a\"");
    CHECK(m.body && m.body->type == JSON_OBJECT);
    json_free(m.doc);
    sbuf_free(&b);
    static const char *const bad[] = {"", "{}", "{\"t\":\"rest\",\"from\":\"x\"}", "{\"t\":1,\"from\":\"x\",\"name\":\"n\"}",
                                      "{\"t\":\"\",\"from\":\"x\",\"name\":\"n\"}", "not json"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_EQ_INT(shared_message_read(bad[i], strlen(bad[i]), &m), -1);
        CHECK(m.doc == NULL);
    }
}

int main(void)
{
    RUN(test_a_rest_written_by_one_instance_is_merged_by_another);
    RUN(test_merging_never_shortens_a_rest_and_an_older_429_keeps_the_ladder);
    RUN(test_fields_out_of_range_or_of_the_wrong_type_are_skipped);
    RUN(test_the_ttl_covers_the_last_rest_plus_an_hour);
    RUN(test_a_login_round_trips_and_a_token_unfit_for_a_header_is_refused);
    RUN(test_messages_are_read_back_and_others_refused);
    return check_summary();
}
