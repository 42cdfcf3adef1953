/* test_adapt.c: an upstream's rules applied to a body in its own dialect
 * (dialect/adapt.c): each rule alone, in place or appended, the member
 * order kept, and a Chat upstream getting only drop, rename and stream. */
#include "check.h"
#include "dialect_check.h"
#include "dialect/adapt.h"

/* body adapted for upstream under r: the output text (NULL on refusal),
 * *streams set; the output is checked to parse. */
static char *ad(api_kind upstream, const policy_dialect *r, const char *body, int *streams)
{
    json_value *doc = json_parse(body, strlen(body), NULL, 0);
    if (!doc) {
        fprintf(stderr, "  test body does not parse: %s\n", body);
        return NULL;
    }
    sbuf out = SBUF_INIT;
    dialect_error err;
    int st = -1;
    char *s = NULL;
    if (adapt_body(upstream, r, doc, &out, &st, &err) == 0) {
        json_value *back = json_parse(out.p, out.len, NULL, 0);
        CHECK(back != NULL);
        json_free(back);
        s = strdup(out.p);
    }
    if (streams)
        *streams = st;
    sbuf_free(&out);
    json_free(doc);
    return s;
}

static policy_dialect rules;

static void rules_none(void) { memset(&rules, 0, sizeof rules); }

static void test_no_rules_write_the_body_as_it_came(void)
{
    const char *b = "{\"model\":\"m\",\"input\":\"hi\",\"stream\":true,\"x\":[1,{\"y\":null}],\"t\":0.1}";
    int st;
    char *s = ad(API_RESPONSES, NULL, b, &st);
    CHECK_EQ_STR(s, b);
    CHECK_EQ_INT(st, 1);
    free(s);
    rules_none();
    s = ad(API_CHAT, &rules, "{\"messages\":[],\"stream\":false}", &st);
    CHECK_EQ_STR(s, "{\"messages\":[],\"stream\":false}");
    CHECK_EQ_INT(st, 0);
    free(s);
}

static void test_stream_is_forced_true_in_place_or_appended(void)
{
    rules_none();
    rules.stream = 1;
    int st = 0;
    char *s = ad(API_RESPONSES, &rules, "{\"model\":\"m\",\"stream\":false,\"input\":\"x\"}", &st);
    CHECK_EQ_STR(s, "{\"model\":\"m\",\"stream\":true,\"input\":\"x\"}");
    CHECK_EQ_INT(st, 1);
    free(s);
    s = ad(API_RESPONSES, &rules, "{\"model\":\"m\",\"input\":\"x\"}", &st);
    CHECK_EQ_STR(s, "{\"model\":\"m\",\"input\":\"x\",\"stream\":true}");
    CHECK_EQ_INT(st, 1);
    free(s);
}

static void test_store_is_false_when_store_off_in_place_or_appended(void)
{
    rules_none();
    rules.store_off = 1;
    char *s = ad(API_RESPONSES, &rules, "{\"store\":true,\"input\":\"x\"}", NULL);
    CHECK_EQ_STR(s, "{\"store\":false,\"input\":\"x\"}");
    free(s);
    s = ad(API_RESPONSES, &rules, "{\"input\":\"x\"}", NULL);
    CHECK_EQ_STR(s, "{\"input\":\"x\",\"store\":false}");
    free(s);
}

static void test_default_instructions_fill_only_absent_or_empty_ones(void)
{
    rules_none();
    rules.has_instructions = 1;
    strcpy(rules.instructions, "Default \"text\".");
    char *s = ad(API_RESPONSES, &rules, "{\"instructions\":\"mine\",\"input\":\"x\"}", NULL);
    CHECK_EQ_STR(s, "{\"instructions\":\"mine\",\"input\":\"x\"}");
    free(s);
    s = ad(API_RESPONSES, &rules, "{\"instructions\":\"\",\"input\":\"x\"}", NULL);
    CHECK_EQ_STR(s, "{\"instructions\":\"Default \\\"text\\\".\",\"input\":\"x\"}");
    free(s);
    s = ad(API_RESPONSES, &rules, "{\"instructions\":null,\"input\":\"x\"}", NULL);
    CHECK_EQ_STR(s, "{\"instructions\":\"Default \\\"text\\\".\",\"input\":\"x\"}");
    free(s);
    s = ad(API_RESPONSES, &rules, "{\"input\":\"x\"}", NULL);
    CHECK_EQ_STR(s, "{\"input\":\"x\",\"instructions\":\"Default \\\"text\\\".\"}");
    free(s);
}

static void test_drop_and_rename_keep_the_order_of_the_rest(void)
{
    rules_none();
    rules_add(rules.drop, &rules.n_drop, "temperature");
    rules_add(rules.drop, &rules.n_drop, "top_p");
    rules_add(rules.rename_from, &rules.n_rename, "max_output_tokens");
    strcpy(rules.rename_to[0], "max_completion_tokens");
    char *s = ad(API_RESPONSES, &rules,
                 "{\"model\":\"m\",\"temperature\":0.2,\"max_output_tokens\":50,\"input\":\"x\",\"top_p\":1,\"z\":0}",
                 NULL);
    CHECK_EQ_STR(s, "{\"model\":\"m\",\"max_completion_tokens\":50,\"input\":\"x\",\"z\":0}");
    free(s);
}

static void test_a_rename_gives_way_to_a_member_already_named_so(void)
{
    rules_none();
    rules_add(rules.rename_from, &rules.n_rename, "max_tokens");
    strcpy(rules.rename_to[0], "max_completion_tokens");
    char *s = ad(API_CHAT, &rules, "{\"max_tokens\":10,\"max_completion_tokens\":20,\"messages\":[]}", NULL);
    CHECK_EQ_STR(s, "{\"max_completion_tokens\":20,\"messages\":[]}");
    free(s);
    /* nor into a name the rules drop */
    rules_add(rules.drop, &rules.n_drop, "max_completion_tokens");
    s = ad(API_CHAT, &rules, "{\"max_tokens\":10,\"messages\":[]}", NULL);
    CHECK_EQ_STR(s, "{\"messages\":[]}");
    free(s);
}

static void test_input_list_turns_a_string_input_into_one_user_message(void)
{
    rules_none();
    rules.input_list = 1;
    char *s = ad(API_RESPONSES, &rules, "{\"input\":\"Say \\\"hi\\\"\",\"model\":\"m\"}", NULL);
    CHECK_EQ_STR(s, "{\"input\":[{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
                    "\"text\":\"Say \\\"hi\\\"\"}]}],\"model\":\"m\"}");
    free(s);
    const char *list = "{\"input\":[{\"role\":\"user\",\"content\":\"x\"}]}";
    s = ad(API_RESPONSES, &rules, list, NULL);
    CHECK_EQ_STR(s, list);
    free(s);
}

static void test_system_role_renames_system_messages_in_input_only(void)
{
    rules_none();
    strcpy(rules.system_role, "developer");
    char *s = ad(API_RESPONSES, &rules,
                 "{\"instructions\":\"i\",\"input\":[{\"role\":\"system\",\"content\":\"a\"},{\"type\":\"message\","
                 "\"role\":\"system\",\"content\":[{\"type\":\"input_text\",\"text\":\"system\"}]},{\"role\":\"user\","
                 "\"content\":\"system\"},{\"type\":\"function_call_output\",\"role\":\"system\",\"output\":\"o\"}]}",
                 NULL);
    CHECK_EQ_STR(s, "{\"instructions\":\"i\",\"input\":[{\"role\":\"developer\",\"content\":\"a\"},{\"type\":\"message\","
                    "\"role\":\"developer\",\"content\":[{\"type\":\"input_text\",\"text\":\"system\"}]},"
                    "{\"role\":\"user\",\"content\":\"system\"},{\"type\":\"function_call_output\",\"role\":\"system\","
                    "\"output\":\"o\"}]}");
    free(s);
}

static void test_strip_item_ids_removes_the_ids_of_items_but_not_of_references(void)
{
    rules_none();
    rules.strip_item_ids = 1;
    char *s = ad(API_RESPONSES, &rules,
                 "{\"input\":[{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[],\"encrypted_content\":\"e\"},"
                 "{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\","
                 "\"text\":\"t\",\"id\":\"keep: not an item\"}]},{\"type\":\"item_reference\",\"id\":\"msg_0\"},7]}",
                 NULL);
    CHECK_EQ_STR(s, "{\"input\":[{\"type\":\"reasoning\",\"summary\":[],\"encrypted_content\":\"e\"},"
                    "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"t\","
                    "\"id\":\"keep: not an item\"}]},{\"type\":\"item_reference\",\"id\":\"msg_0\"},7]}");
    free(s);
}

static void test_a_chat_upstream_gets_only_drop_rename_and_stream_with_usage(void)
{
    rules_chatgpt(&rules);
    rules_add(rules.drop, &rules.n_drop, "seed");
    int st = 0;
    char *s = ad(API_CHAT, &rules,
                 "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"s\",\"id\":\"x\"}],\"store\":true,"
                 "\"temperature\":1,\"seed\":3,\"input\":\"not chat\"}",
                 &st);
    CHECK_EQ_STR(s, "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"s\",\"id\":\"x\"}],\"store\":true,"
                    "\"input\":\"not chat\",\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
    CHECK_EQ_INT(st, 1);
    free(s);
    /* a client already streaming keeps its own stream_options */
    s = ad(API_CHAT, &rules, "{\"messages\":[],\"stream\":true}", &st);
    CHECK_EQ_STR(s, "{\"messages\":[],\"stream\":true}");
    free(s);
}

static void test_forced_members_win_over_drop_and_are_written_once_at_the_last_copy(void)
{
    rules_chatgpt(&rules);
    rules_add(rules.drop, &rules.n_drop, "stream");
    rules_add(rules.drop, &rules.n_drop, "store");
    rules_add(rules.rename_from, &rules.n_rename, "x");
    strcpy(rules.rename_to[0], "stream");
    int st = 0;
    char *s = ad(API_RESPONSES, &rules,
                 "{\"stream\":false,\"input\":[],\"store\":true,\"x\":false,\"stream\":false,\"instructions\":\"a\","
                 "\"instructions\":\"b\"}",
                 &st);
    CHECK_EQ_STR(s, "{\"input\":[],\"store\":false,\"stream\":true,\"instructions\":\"b\"}");
    CHECK_EQ_INT(st, 1);
    free(s);
}

static void test_the_chatgpt_rules_together_on_a_codex_like_body(void)
{
    rules_chatgpt(&rules);
    int st = 0;
    char *s = ad(API_RESPONSES, &rules,
                 "{\"model\":\"gpt-5\",\"input\":\"hi\",\"temperature\":0.7,\"max_output_tokens\":99}", &st);
    CHECK_EQ_STR(s, "{\"model\":\"gpt-5\",\"input\":[{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":"
                    "\"input_text\",\"text\":\"hi\"}]}],\"stream\":true,\"store\":false,"
                    "\"instructions\":\"You are a helpful assistant.\"}");
    CHECK_EQ_INT(st, 1);
    free(s);
}

static void test_has_work_names_the_rules_that_apply_to_each_dialect(void)
{
    rules_none();
    CHECK_EQ_INT(adapt_has_work(API_RESPONSES, NULL), 0);
    CHECK_EQ_INT(adapt_has_work(API_RESPONSES, &rules), 0);
    rules_add(rules.ignore, &rules.n_ignore, "n"); /* ignore is the translators' business */
    CHECK_EQ_INT(adapt_has_work(API_RESPONSES, &rules), 0);
    rules.store_off = 1;
    CHECK_EQ_INT(adapt_has_work(API_RESPONSES, &rules), 1);
    CHECK_EQ_INT(adapt_has_work(API_CHAT, &rules), 0);
    rules.stream = 1;
    CHECK_EQ_INT(adapt_has_work(API_CHAT, &rules), 1);
    rules_none();
    strcpy(rules.system_role, "developer");
    CHECK_EQ_INT(adapt_has_work(API_RESPONSES, &rules), 1);
    rules_none();
    rules_add(rules.drop, &rules.n_drop, "seed");
    CHECK_EQ_INT(adapt_has_work(API_CHAT, &rules), 1);
}

static void test_a_body_that_is_no_object_is_refused(void)
{
    json_value *doc = json_parse("[1]", 3, NULL, 0);
    sbuf out = SBUF_INIT;
    dialect_error err;
    CHECK_EQ_INT(adapt_body(API_RESPONSES, NULL, doc, &out, NULL, &err), -1);
    CHECK_EQ_INT(err.status, 400);
    CHECK_EQ_STR(err.code, "invalid_type");
    sbuf_free(&out);
    json_free(doc);
}

int main(void)
{
    RUN(test_no_rules_write_the_body_as_it_came);
    RUN(test_stream_is_forced_true_in_place_or_appended);
    RUN(test_store_is_false_when_store_off_in_place_or_appended);
    RUN(test_default_instructions_fill_only_absent_or_empty_ones);
    RUN(test_drop_and_rename_keep_the_order_of_the_rest);
    RUN(test_a_rename_gives_way_to_a_member_already_named_so);
    RUN(test_input_list_turns_a_string_input_into_one_user_message);
    RUN(test_system_role_renames_system_messages_in_input_only);
    RUN(test_strip_item_ids_removes_the_ids_of_items_but_not_of_references);
    RUN(test_a_chat_upstream_gets_only_drop_rename_and_stream_with_usage);
    RUN(test_forced_members_win_over_drop_and_are_written_once_at_the_last_copy);
    RUN(test_the_chatgpt_rules_together_on_a_codex_like_body);
    RUN(test_has_work_names_the_rules_that_apply_to_each_dialect);
    RUN(test_a_body_that_is_no_object_is_refused);
    return check_summary();
}
