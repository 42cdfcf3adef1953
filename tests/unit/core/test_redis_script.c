/* test_redis_script.c: a script's SHA1 is the one Redis gives it (SCRIPT
 * LOAD answers the SHA1 of the text), so EVALSHA finds what SCRIPT LOAD
 * loaded; NOSCRIPT is recognised, other errors and answers are not. */
#include "check.h"
#include "core/redis_script.h"
#include <string.h>

static void test_the_sha_is_the_sha1_of_the_text_as_redis_computes_it(void)
{
    redis_script s;
    redis_script_init(&s, "return 1");
    CHECK_EQ_STR(s.sha, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
    redis_script_init(&s, "");
    CHECK_EQ_STR(s.sha, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    CHECK(s.text[0] == '\0');
}

static void test_only_a_noscript_error_is_a_missing_script(void)
{
    redis_script s;
    redis_script_init(&s, "return 1");
    char noscript[] = "NOSCRIPT No matching script. Please use EVAL.", wrong[] = "ERR wrong number of arguments";
    redisReply err = {.type = REDIS_REPLY_ERROR, .str = noscript, .len = sizeof noscript - 1};
    redisReply other = {.type = REDIS_REPLY_ERROR, .str = wrong, .len = sizeof wrong - 1};
    redisReply ok = {.type = REDIS_REPLY_INTEGER, .integer = 1};
    CHECK_EQ_INT(redis_script_missing(&s, NULL, &err), 1); /* loaded again: on no link, nothing sent */
    CHECK_EQ_INT(redis_script_missing(&s, NULL, &other), 0);
    CHECK_EQ_INT(redis_script_missing(&s, NULL, &ok), 0);
    CHECK_EQ_INT(redis_script_missing(&s, NULL, NULL), 0);
}

static void test_a_call_with_too_many_arguments_is_not_sent(void)
{
    redis_script s;
    redis_script_init(&s, "return 1");
    const char *k[REDIS_SCRIPT_ARGS_MAX + 1];
    for (int i = 0; i <= REDIS_SCRIPT_ARGS_MAX; i++)
        k[i] = "k";
    CHECK_EQ_INT(redis_script_eval(&s, NULL, 0, NULL, NULL, REDIS_SCRIPT_ARGS_MAX + 1, k, 0, NULL), -1);
    CHECK_EQ_INT(redis_script_eval(&s, NULL, 0, NULL, NULL, 1, k, 0, NULL), -1); /* no link: not sent */
    const char *none[] = {NULL};
    CHECK_EQ_INT(redis_script_eval(&s, NULL, 0, NULL, NULL, 1, none, 0, NULL), -1); /* a missing key: not sent */
}

int main(void)
{
    RUN(test_the_sha_is_the_sha1_of_the_text_as_redis_computes_it);
    RUN(test_only_a_noscript_error_is_a_missing_script);
    RUN(test_a_call_with_too_many_arguments_is_not_sent);
    return check_summary();
}
