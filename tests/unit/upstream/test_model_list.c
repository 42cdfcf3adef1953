/* test_model_list.c: model lists (model_list.c): the operator's --models
 * override is normalized or refused, upstream /models answers in both forms
 * are read, and membership is exact. */
#include "check.h"
#include "upstream/model_list.h"

static void test_membership_is_exact_name_match(void)
{
    CHECK_EQ_INT(model_list_has("gpt-5,gpt-5-codex", "gpt-5"), 1);
    CHECK_EQ_INT(model_list_has("gpt-5,gpt-5-codex", "gpt-5-codex"), 1);
    CHECK_EQ_INT(model_list_has("gpt-5-codex", "gpt-5"), 0);
    CHECK_EQ_INT(model_list_has("gpt-5,gpt-5-codex", "gpt"), 0);
    CHECK_EQ_INT(model_list_has("", "gpt-5"), 0);
    CHECK_EQ_INT(model_list_has("gpt-5", ""), 0);
    CHECK_EQ_INT(model_list_has(NULL, "gpt-5"), 0);
}

static void test_override_is_trimmed_and_deduplicated(void)
{
    sbuf o = SBUF_INIT;
    char err[160] = "";
    CHECK_EQ_INT(model_list_normalize(" a, b ,a,c ", &o, err, sizeof err), 0);
    CHECK_EQ_STR(o.p, "a,b,c");
    CHECK_EQ_INT(model_list_normalize("   ", &o, err, sizeof err), 0);
    CHECK_EQ_STR(o.p, "");
    sbuf_free(&o);
}

static void test_override_with_bad_names_is_refused(void)
{
    sbuf o = SBUF_INIT;
    char err[160] = "";
    CHECK_EQ_INT(model_list_normalize("a,,b", &o, err, sizeof err), -1);
    CHECK(strstr(err, "empty") != NULL);
    CHECK_EQ_INT(model_list_normalize("a,b c", &o, err, sizeof err), -1);
    CHECK_EQ_INT(model_list_normalize("a\"b", &o, err, sizeof err), -1);
    char big[MODEL_LIST_NAME_MAX + 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK_EQ_INT(model_list_normalize(big, &o, err, sizeof err), -1);
    /* the refusal quotes the name escaped: it reaches a terminal (an import file's "models") */
    CHECK_EQ_INT(model_list_normalize("n{}\":[3\x1b[2JZ", &o, err, sizeof err), -1);
    for (const char *p = err; *p; p++)
        CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
    CHECK(strstr(err, "\\x1b") != NULL);
    sbuf_free(&o);
}

static void test_openai_list_answer_gives_ids(void)
{
    sbuf ids = SBUF_INIT;
    const char *b = "{\"object\":\"list\",\"data\":[{\"id\":\"gpt-5\",\"object\":\"model\"},{\"id\":\"o3\"},"
                    "{\"id\":\"gpt-5\"},{\"id\":\"bad name\"},{\"nope\":1},7]}";
    CHECK_EQ_INT(model_list_parse_upstream(b, strlen(b), &ids, NULL), 0);
    CHECK_EQ_STR(ids.p, "gpt-5,o3");
    sbuf_free(&ids);
}

static void test_codex_models_answer_gives_slugs_and_the_objects_kept(void)
{
    sbuf ids = SBUF_INIT, objs = SBUF_INIT;
    const char *b = "{\"models\":[{\"slug\":\"gpt-5-codex\",\"display_name\":\"GPT-5 Codex\",\"priority\":1},"
                    "{\"slug\":\"gpt-5\"},{\"slug\":\"gpt-5\",\"dup\":true},{\"slug\":\"\"},[1]]}";
    CHECK_EQ_INT(model_list_parse_upstream(b, strlen(b), &ids, &objs), 1);
    CHECK_EQ_STR(ids.p, "gpt-5-codex,gpt-5");
    CHECK_EQ_STR(objs.p, "[{\"slug\":\"gpt-5-codex\",\"display_name\":\"GPT-5 Codex\",\"priority\":1},"
                         "{\"slug\":\"gpt-5\"}]");
    sbuf_free(&ids);
    sbuf_free(&objs);
}

static void test_ids_are_appended_to_a_list_without_duplicates(void)
{
    sbuf ids = SBUF_INIT;
    sbuf_puts(&ids, "o3,gpt-5");
    const char *b = "{\"data\":[{\"id\":\"gpt-5\"},{\"id\":\"o4\"}]}";
    CHECK_EQ_INT(model_list_parse_upstream(b, strlen(b), &ids, NULL), 0);
    CHECK_EQ_STR(ids.p, "o3,gpt-5,o4");
    sbuf_free(&ids);
}

static void test_answer_of_another_shape_is_not_a_list(void)
{
    sbuf ids = SBUF_INIT;
    const char *bad[] = {"", "{", "[]", "{\"data\":{}}", "{\"models\":\"x\"}", "{\"error\":{\"message\":\"no\"}}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_EQ_INT(model_list_parse_upstream(bad[i], strlen(bad[i]), &ids, NULL), -1);
    CHECK_EQ_INT((long long)ids.len, 0);
    sbuf_free(&ids);
}

int main(void)
{
    RUN(test_membership_is_exact_name_match);
    RUN(test_override_is_trimmed_and_deduplicated);
    RUN(test_override_with_bad_names_is_refused);
    RUN(test_openai_list_answer_gives_ids);
    RUN(test_codex_models_answer_gives_slugs_and_the_objects_kept);
    RUN(test_ids_are_appended_to_a_list_without_duplicates);
    RUN(test_answer_of_another_shape_is_not_a_list);
    return check_summary();
}
