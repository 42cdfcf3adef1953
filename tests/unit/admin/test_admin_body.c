/* test_admin_body.c: the admin API's POST bodies read without the loop
 * (admin_body.c). */
#include "check.h"
#include "admin/admin_body.h"
#include <string.h>

static int parse(admin_body_kind kind, const char *s, admin_body *b)
{
    return admin_body_parse(kind, s, strlen(s), b);
}

static void test_account_action_reads_a_name_or_an_id_and_refuses_anything_else(void)
{
    admin_body b;
    CHECK_EQ_INT(parse(ADMIN_BODY_ACCOUNT, "{\"account\":\"a1\"}", &b), 0);
    CHECK_EQ_INT(b.account.kind, ADMIN_REF_NAME);
    CHECK_EQ_STR(b.account.name, "a1");
    admin_body_free(&b);
    CHECK_EQ_INT(parse(ADMIN_BODY_ACCOUNT, "{\"account\":7}", &b), 0);
    CHECK(b.account.kind == ADMIN_REF_ID && b.account.id == 7);
    admin_body_free(&b);
    /* a number no id can be names nothing (404 at the lookup), never a cast of 1e300 */
    CHECK_EQ_INT(parse(ADMIN_BODY_ACCOUNT, "{\"account\":1e300}", &b), 0);
    CHECK(b.account.kind == ADMIN_REF_NONE && !b.account.invalid);
    admin_body_free(&b);
    const char *bad[] = {"{}", "{\"account\":null}", "{\"account\":true}", "{\"account\":[1]}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(parse(ADMIN_BODY_ACCOUNT, bad[i], &b), -1);
        CHECK_EQ_INT(b.status, 400);
        CHECK_EQ_STR(b.code, "invalid_value");
        CHECK_EQ_STR(b.message, ADMIN_BODY_ACCOUNT_MSG);
        admin_body_free(&b);
    }
}

static void test_a_body_that_is_no_json_object_is_refused_with_why(void)
{
    admin_body b;
    CHECK_EQ_INT(parse(ADMIN_BODY_SETTINGS, "[1]", &b), -1);
    CHECK_EQ_STR(b.code, "invalid_json");
    CHECK_EQ_STR(b.message, "the body must be a JSON object: wrong type");
    admin_body_free(&b);
    CHECK_EQ_INT(parse(ADMIN_BODY_PREFER, "{\"key\":", &b), -1);
    CHECK_EQ_STR(b.code, "invalid_json");
    admin_body_free(&b);
    /* an empty body reads as {} (then refused for what it lacks) */
    CHECK_EQ_INT(admin_body_parse(ADMIN_BODY_ACCOUNT, "", 0, &b), -1);
    CHECK_EQ_STR(b.code, "invalid_value");
    admin_body_free(&b);
}

static void test_prefer_reads_key_and_account_and_leaves_the_lookups_to_the_api(void)
{
    admin_body b;
    CHECK_EQ_INT(parse(ADMIN_BODY_PREFER, "{\"key\":\"k\",\"account\":null}", &b), 0);
    CHECK(b.key.kind == ADMIN_REF_NAME && strcmp(b.key.name, "k") == 0 && b.account.kind == ADMIN_REF_NULL);
    admin_body_free(&b);
    CHECK_EQ_INT(parse(ADMIN_BODY_PREFER, "{\"key\":-5,\"account\":true}", &b), 0);
    CHECK(b.key.kind == ADMIN_REF_NONE && b.account.invalid);
    admin_body_free(&b);
}

static void test_settings_are_all_valid_or_refused_whole(void)
{
    admin_body b;
    CHECK_EQ_INT(parse(ADMIN_BODY_SETTINGS, "{\"strategy\":\"balanced\",\"rotation\":\"hybrid_rotation\"}", &b), 0);
    CHECK_EQ_STR(b.strategy, "balanced");
    CHECK_EQ_STR(b.rotation, "hybrid_rotation");
    admin_body_free(&b);
    CHECK_EQ_INT(parse(ADMIN_BODY_SETTINGS, "{\"strategy\":\"balanced\",\"rotation\":\"nope\"}", &b), -1);
    CHECK(!b.strategy && !b.rotation && strstr(b.message, "unknown rotation"));
    admin_body_free(&b);
    CHECK_EQ_INT(parse(ADMIN_BODY_SETTINGS, "{}", &b), -1);
    CHECK(strstr(b.message, "give 'strategy'") != NULL);
    admin_body_free(&b);
}

static void test_login_body_takes_an_optional_plain_name(void)
{
    admin_body b;
    CHECK_EQ_INT(parse(ADMIN_BODY_LOGIN, "{\"name\":\"work\"}", &b), 0);
    CHECK_EQ_STR(b.name, "work");
    admin_body_free(&b);
    const char *none[] = {"{}", "{\"name\":null}", "{\"name\":\"\"}"};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
        CHECK_EQ_INT(parse(ADMIN_BODY_LOGIN, none[i], &b), 0);
        CHECK(b.name == NULL);
        admin_body_free(&b);
    }
    const char *bad[] = {"{\"name\":7}", "{\"name\":\"a\\nb\"}", "{\"name\":\"a\\u0000b\"}",
                         "{\"name\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_EQ_INT(parse(ADMIN_BODY_LOGIN, bad[i], &b), -1);
        CHECK(b.name == NULL && strstr(b.message, "'name'") != NULL);
        admin_body_free(&b);
    }
}

static void test_login_body_takes_a_sort_and_models_for_the_account_it_adds(void)
{
    admin_body b;
    CHECK_EQ_INT(parse(ADMIN_BODY_LOGIN, "{\"sort\":-3,\"models\":\" gpt-5, o3,gpt-5\"}", &b), 0);
    CHECK(b.has_sort && b.sort == -3);
    CHECK_EQ_STR(b.models, "gpt-5,o3");
    admin_body_free(&b);
    CHECK_EQ_INT(parse(ADMIN_BODY_LOGIN, "{\"sort\":2147483647,\"models\":[\"gpt-5\",\"o3\"]}", &b), 0);
    CHECK(b.has_sort && b.sort == 2147483647);
    CHECK_EQ_STR(b.models, "gpt-5,o3");
    admin_body_free(&b);
    const char *none[] = {"{}", "{\"sort\":null,\"models\":null}", "{\"models\":\"\"}", "{\"models\":[]}"};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
        CHECK_EQ_INT(parse(ADMIN_BODY_LOGIN, none[i], &b), 0);
        CHECK(!b.has_sort && b.models == NULL);
        admin_body_free(&b);
    }
    const char *bad_sort[] = {"{\"sort\":1.5}", "{\"sort\":\"3\"}", "{\"sort\":2147483648}", "{\"sort\":1e300}",
                              "{\"sort\":true}"};
    for (size_t i = 0; i < sizeof bad_sort / sizeof *bad_sort; i++) {
        CHECK_EQ_INT(parse(ADMIN_BODY_LOGIN, bad_sort[i], &b), -1);
        CHECK(b.status == 400 && strstr(b.message, "'sort'") != NULL);
        admin_body_free(&b);
    }
    const char *bad_models[] = {"{\"models\":7}", "{\"models\":[\"a,b\"]}", "{\"models\":[\"a\",1]}",
                                "{\"models\":\"gpt 5\"}", "{\"models\":[\"\"]}", "{\"name\":\"n\",\"models\":\"a,,b\"}"};
    for (size_t i = 0; i < sizeof bad_models / sizeof *bad_models; i++) {
        CHECK_EQ_INT(parse(ADMIN_BODY_LOGIN, bad_models[i], &b), -1);
        CHECK(b.status == 400 && strstr(b.message, "'models'") != NULL);
        CHECK(b.name == NULL && b.models == NULL);
        admin_body_free(&b);
    }
}

int main(void)
{
    RUN(test_login_body_takes_an_optional_plain_name);
    RUN(test_login_body_takes_a_sort_and_models_for_the_account_it_adds);
    RUN(test_account_action_reads_a_name_or_an_id_and_refuses_anything_else);
    RUN(test_a_body_that_is_no_json_object_is_refused_with_why);
    RUN(test_prefer_reads_key_and_account_and_leaves_the_lookups_to_the_api);
    RUN(test_settings_are_all_valid_or_refused_whole);
    return check_summary();
}
