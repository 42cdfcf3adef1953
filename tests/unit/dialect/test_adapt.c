/* test_adapt.c: an upstream's rules applied to a body in its own dialect
 * (dialect/adapt.c, on the raw bytes): each rule alone, in place or
 * appended, the member order kept, a Chat upstream getting only drop,
 * rename and stream; every byte no rule changes as it came (big integers,
 * escapes, whitespace); the leading system/developer messages that become
 * the instructions; bodies that are no JSON object refused. */
#include "check.h"
#include "dialect_check.h"
#include "dialect/adapt.h"

/* body adapted for upstream under r: the output text (NULL on refusal),
 * *streams set; the output is checked to parse. */
static char *ad(api_kind upstream, const policy_dialect *r, const char *body, int *streams)
{
    sbuf out = SBUF_INIT;
    dialect_error err;
    int st = -1;
    char *s = NULL;
    if (adapt_body(upstream, r, body, strlen(body), &out, &st, &err) == 0) {
        json_value *back = json_parse(out.p, out.len, NULL, 0);
        CHECK(back != NULL);
        if (!back)
            fprintf(stderr, "  output does not parse: %s\n", out.p);
        json_free(back);
        s = strdup(out.p);
    }
    if (streams)
        *streams = st;
    sbuf_free(&out);
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

static void test_a_body_that_is_no_object_or_no_json_is_refused_and_out_left_as_it_was(void)
{
    static const char *const bad[] = {"[1]", "", "  ", "\"x\"", "{", "{\"a\":1,}", "{\"a\":1} x", "{\"a\" 1}",
                                      "{\"input\":[{\"id\":1,}]}", "{\"input\":[1 2]}", "{\"a\":\"\x01\"}",
                                      "{\"a\":01}"};
    rules_chatgpt(&rules);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sbuf out = SBUF_INIT;
        sbuf_puts(&out, "kept");
        dialect_error err;
        memset(&err, 0, sizeof err);
        int st = 7;
        CHECK_EQ_INT(adapt_body(API_RESPONSES, &rules, bad[i], strlen(bad[i]), &out, &st, &err), -1);
        CHECK_EQ_INT(err.status, 400);
        CHECK_EQ_STR(err.code, bad[i][0] == '{' ? "invalid_value" : "invalid_type");
        CHECK_EQ_STR(out.p, "kept");
        CHECK_EQ_INT(st, 7);
        sbuf_free(&out);
    }
}

/* A 2^60 integer (a double would round it), -0.0e+0, escapes and odd
 * whitespace: every member no rule changes is the same bytes, and the two
 * edits in input (an id out, a role in) touch nothing around them. */
static void test_members_no_rule_changes_go_byte_for_byte(void)
{
    rules_chatgpt(&rules);
    const char *b = " {  \"model\" : \"gpt-5\" ,\n  \"seed\": 1152921504606846976 , \"t\" : -0.0e+0,\n"
                    "  \"text\" : \"caf\\u00e9 \\ud83d\\ude00 \\u001b[0m \\/\",\n"
                    "  \"input\" : [ { \"type\" : \"message\" , \"id\" : \"msg_1\" , \"role\" : \"system\" , "
                    "\"content\" : \"x\\u0020y\" } ,\n"
                    "    {\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"\\u00e9\"} ],\n"
                    "  \"instructions\" : \"Be \\u0022brief\\u0022\",\n  \"store\" : false , \"stream\" : true }\n";
    const char *want = " {  \"model\" : \"gpt-5\" ,\n  \"seed\": 1152921504606846976 , \"t\" : -0.0e+0,\n"
                       "  \"text\" : \"caf\\u00e9 \\ud83d\\ude00 \\u001b[0m \\/\",\n"
                       "  \"input\" : [ { \"type\" : \"message\" , \"role\" : \"developer\" , "
                       "\"content\" : \"x\\u0020y\" } ,\n"
                       "    {\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"\\u00e9\"} ],\n"
                       "  \"instructions\" : \"Be \\u0022brief\\u0022\",\n  \"store\" : false , \"stream\" : true }\n";
    int st = 0;
    char *s = ad(API_RESPONSES, &rules, b, &st);
    CHECK_EQ_STR(s, want);
    CHECK_EQ_INT(st, 1);
    free(s);
}

static void test_without_rules_or_with_nothing_to_do_the_body_is_the_same_bytes(void)
{
    const char *b = "\n  {\n \"a\" : [ 1 , 2.50 , 1E2 ] , \"b\":\"\\u00e9\\n\" ,\"c\" : {\"d\":null} }\n\n";
    char *s = ad(API_RESPONSES, NULL, b, NULL);
    CHECK_EQ_STR(s, b);
    free(s);
    rules_none();
    s = ad(API_CHAT, &rules, b, NULL);
    CHECK_EQ_STR(s, b);
    free(s);
    /* the ChatGPT rules on a body already as the backend wants it */
    rules_chatgpt(&rules);
    const char *ready = "{ \"model\":\"gpt-5\", \"instructions\" : \"i\",\"input\":[ {\"type\":\"message\",\"role\":"
                        "\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"hi\"}]} ], \"store\":false,"
                        "\"stream\":true }";
    s = ad(API_RESPONSES, &rules, ready, NULL);
    CHECK_EQ_STR(s, ready);
    free(s);
}

static void test_members_left_out_take_their_separator_and_keep_the_layout(void)
{
    rules_none();
    rules_add(rules.drop, &rules.n_drop, "temperature");
    rules_add(rules.drop, &rules.n_drop, "top_p");
    char *s = ad(API_RESPONSES, &rules,
                 "{\n  \"temperature\": 0.2,\n  \"model\": \"m\",\n  \"top_p\": 1,\n  \"stream\": true\n}", NULL);
    CHECK_EQ_STR(s, "{\n  \"model\": \"m\",\n  \"stream\": true\n}");
    free(s);
    s = ad(API_RESPONSES, &rules, "{ \"temperature\": 0.2 , \"top_p\": 1 }", NULL);
    CHECK_EQ_STR(s, "{ }");
    free(s);
    s = ad(API_RESPONSES, &rules, "{\"model\":\"m\" , \"top_p\":1 }", NULL);
    CHECK_EQ_STR(s, "{\"model\":\"m\" }");
    free(s);
    rules_none();
    rules.strip_item_ids = 1;
    s = ad(API_RESPONSES, &rules,
           "{\"input\":[{\n \"id\": \"rs_1\",\n \"type\": \"reasoning\"\n},{\"id\":\"a\",\"id\":\"b\"},"
           "{\"type\":\"message\",\"id\":\"c\",\"id\":\"d\"}]}",
           NULL);
    CHECK_EQ_STR(s, "{\"input\":[{\n \"type\": \"reasoning\"\n},{},{\"type\":\"message\"}]}");
    free(s);
}

/* Real Codex CLI on a custom provider sends no instructions and its prompt
 * as a leading developer message; the ChatGPT backend refuses that
 * ("Instructions are required"). */
static void test_leading_system_and_developer_messages_become_the_instructions(void)
{
    rules_chatgpt(&rules);
    char *s = ad(API_RESPONSES, &rules,
                 "{\"model\":\"m\",\"input\":[{\"type\":\"message\",\"id\":\"msg_0\",\"role\":\"developer\","
                 "\"content\":[{\"type\":\"input_text\",\"text\":\"You are Codex.\"},{\"type\":\"text\","
                 "\"text\":\" Be brief.\"}]},"
                 "{\"role\":\"system\",\"content\":\"\"},{\"role\":\"system\",\"content\":\"Line\\nTwo \\u00e9\"},"
                 "{\"type\":\"message\",\"id\":\"msg_1\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
                 "\"text\":\"hi\"}]}],\"stream\":true,\"store\":false}",
                 NULL);
    CHECK_EQ_STR(s, "{\"model\":\"m\",\"input\":[{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":"
                    "\"input_text\",\"text\":\"hi\"}]}],\"stream\":true,\"store\":false,"
                    "\"instructions\":\"You are Codex. Be brief.\\n\\nLine\\nTwo \\u00e9\"}");
    free(s);
    /* in the place of instructions that are null or empty */
    s = ad(API_RESPONSES, &rules,
           "{\"instructions\":null,\"input\":[{\"role\":\"developer\",\"content\":\"d\"},{\"role\":\"user\","
           "\"content\":\"u\"}],\"instructions\":\"\"}",
           NULL);
    CHECK_EQ_STR(s, "{\"input\":[{\"role\":\"user\",\"content\":\"u\"}],\"instructions\":\"d\",\"stream\":true,"
                    "\"store\":false}");
    free(s);
    /* every item moves: the input is left empty, its layout kept */
    s = ad(API_RESPONSES, &rules, "{\"input\":[ {\"role\":\"system\",\"content\":\"s\"} ],\"stream\":true}", NULL);
    CHECK_EQ_STR(s, "{\"input\":[ ],\"stream\":true,\"store\":false,\"instructions\":\"s\"}");
    free(s);
    /* only the ones that open the input, and only while they are all text */
    s = ad(API_RESPONSES, &rules,
           "{\"input\":[{\"role\":\"developer\",\"content\":\"a\"},{\"role\":\"developer\",\"content\":[{\"type\":"
           "\"input_text\",\"text\":\"b\"},{\"type\":\"input_image\",\"image_url\":\"x\"}]},{\"role\":\"developer\","
           "\"content\":\"c\"}]}",
           NULL);
    CHECK_EQ_STR(s, "{\"input\":[{\"role\":\"developer\",\"content\":[{\"type\":\"input_text\",\"text\":\"b\"},"
                    "{\"type\":\"input_image\",\"image_url\":\"x\"}]},{\"role\":\"developer\",\"content\":\"c\"}],"
                    "\"stream\":true,\"store\":false,\"instructions\":\"a\"}");
    free(s);
}

static void test_without_leading_text_messages_the_default_goes_in_and_input_stays(void)
{
    rules_chatgpt(&rules);
    static const char *const inputs[] = {
        "[{\"role\":\"user\",\"content\":\"u\"},{\"role\":\"developer\",\"content\":\"d\"}]",
        "[{\"role\":\"developer\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"x\"}]}]",
        "[{\"role\":\"developer\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"u\"}]",
        "[{\"type\":\"function_call_output\",\"role\":\"developer\",\"content\":\"d\"}]",
        "[{\"role\":\"developer\",\"content\":[{\"type\":\"input_text\",\"text\":7}]}]",
        "[{\"role\":\"developer\"}]",
        "[]",
        "\"just text\"",
    };
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        char body[512], want[512];
        snprintf(body, sizeof body, "{\"input\":%s,\"stream\":true,\"store\":false}", inputs[i]);
        if (inputs[i][0] == '"')
            snprintf(want, sizeof want, "{\"input\":[{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":"
                                        "\"input_text\",\"text\":%s}]}],\"stream\":true,\"store\":false,"
                                        "\"instructions\":\"You are a helpful assistant.\"}", inputs[i]);
        else
            snprintf(want, sizeof want, "{\"input\":%s,\"stream\":true,\"store\":false,"
                                        "\"instructions\":\"You are a helpful assistant.\"}", inputs[i]);
        char *s = ad(API_RESPONSES, &rules, body, NULL);
        CHECK_EQ_STR(s, want);
        free(s);
    }
    /* instructions of its own: the developer message stays where it is */
    const char *mine = "{\"instructions\":\"mine\",\"input\":[{\"role\":\"developer\",\"content\":\"d\"}],"
                       "\"stream\":true,\"store\":false}";
    char *s = ad(API_RESPONSES, &rules, mine, NULL);
    CHECK_EQ_STR(s, mine);
    free(s);
    /* a rule that owns no instructions moves nothing */
    rules.has_instructions = 0;
    const char *plain = "{\"input\":[{\"role\":\"developer\",\"content\":\"d\"}],\"stream\":true,\"store\":false}";
    s = ad(API_RESPONSES, &rules, plain, NULL);
    CHECK_EQ_STR(s, plain);
    free(s);
}

static void test_names_are_read_as_json_get_reads_them(void)
{
    rules_chatgpt(&rules);
    char *s = ad(API_RESPONSES, &rules, "{\"inp\\u0075t\":\"hi\",\"m\\u006fdel\":\"x\",\"st\\u0072eam\":false,"
                                        "\"temper\\u0061ture\":1,\"store\\u0000x\":true}",
                 NULL);
    CHECK_EQ_STR(s, "{\"inp\\u0075t\":[{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
                    "\"text\":\"hi\"}]}],\"m\\u006fdel\":\"x\",\"st\\u0072eam\":true,\"store\\u0000x\":false,"
                    "\"instructions\":\"You are a helpful assistant.\"}");
    free(s);
    /* values compare whole: "system\u0000" is no system role */
    s = ad(API_RESPONSES, &rules, "{\"instructions\":\"i\",\"input\":[{\"role\":\"syst\\u0065m\"},{\"role\":"
                                  "\"system\\u0000\"}],\"stream\":true,\"store\":false}",
           NULL);
    CHECK_EQ_STR(s, "{\"instructions\":\"i\",\"input\":[{\"role\":\"developer\"},{\"role\":\"system\\u0000\"}],"
                    "\"stream\":true,\"store\":false}");
    free(s);
}

static void test_a_repeated_input_is_written_once_from_its_last_copy(void)
{
    rules_chatgpt(&rules);
    char *s = ad(API_RESPONSES, &rules,
                 "{\"input\":[{\"id\":\"a\",\"role\":\"developer\",\"content\":\"x\"}],\"instructions\":\"i\","
                 "\"input\":[{\"id\":\"b\",\"role\":\"system\",\"content\":\"y\"}]}",
                 NULL);
    CHECK_EQ_STR(s, "{\"instructions\":\"i\",\"input\":[{\"role\":\"developer\",\"content\":\"y\"}],\"stream\":true,"
                    "\"store\":false}");
    free(s);
    /* the last copy is a string: nothing of the array before it moves */
    s = ad(API_RESPONSES, &rules, "{\"input\":[{\"role\":\"developer\",\"content\":\"x\"}],\"input\":\"hi\"}", NULL);
    CHECK_EQ_STR(s, "{\"input\":[{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
                    "\"text\":\"hi\"}]}],\"stream\":true,\"store\":false,"
                    "\"instructions\":\"You are a helpful assistant.\"}");
    free(s);
}

static void test_a_chat_upstream_moves_nothing_out_of_its_messages(void)
{
    rules_chatgpt(&rules);
    const char *b = "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"}],\"input\":[{\"role\":\"developer\","
                    "\"content\":\"d\",\"id\":\"x\"}],\"stream\":true}";
    char *s = ad(API_CHAT, &rules, b, NULL);
    CHECK_EQ_STR(s, b);
    free(s);
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
    RUN(test_a_body_that_is_no_object_or_no_json_is_refused_and_out_left_as_it_was);
    RUN(test_members_no_rule_changes_go_byte_for_byte);
    RUN(test_without_rules_or_with_nothing_to_do_the_body_is_the_same_bytes);
    RUN(test_members_left_out_take_their_separator_and_keep_the_layout);
    RUN(test_leading_system_and_developer_messages_become_the_instructions);
    RUN(test_without_leading_text_messages_the_default_goes_in_and_input_stays);
    RUN(test_names_are_read_as_json_get_reads_them);
    RUN(test_a_repeated_input_is_written_once_from_its_last_copy);
    RUN(test_a_chat_upstream_moves_nothing_out_of_its_messages);
    return check_summary();
}
