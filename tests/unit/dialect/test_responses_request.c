/* test_responses_request.c: a Responses request written as a Chat
 * Completions request (dialect/responses_request.c): docs/clients.md's
 * "Responses client ⇄ Chat Completions upstream" request mapping, the
 * merging of calls into assistant messages, custom tools, the refusals and
 * the ignore list. Every output is parsed back. */
#include "check.h"
#include "dialect_check.h"
#include "dialect/responses_request.h"

static json_value *tr_rules(const char *body, const policy_dialect *rules, dialect_error *err)
{
    json_value *doc = json_parse(body, strlen(body), NULL, 0);
    if (!doc) {
        fprintf(stderr, "  test body does not parse: %s\n", body);
        return NULL;
    }
    sbuf out = SBUF_INIT;
    dialect_error spare;
    if (!err)
        err = &spare;
    memset(err, 0, sizeof *err);
    int rc = responses_request_to_chat(doc, rules, &out, err);
    json_value *got = NULL;
    if (rc == 0) {
        got = json_parse(out.p, out.len, NULL, 0);
        if (!got)
            fprintf(stderr, "  output does not parse: %s\n", out.p);
    } else if (err->status != 400 || !err->code[0] || !err->message[0]) {
        fprintf(stderr, "  a refusal without status, code or message\n");
        check_cur_failed = 1;
    }
    sbuf_free(&out);
    json_free(doc);
    return got;
}

static json_value *tr(const char *body) { return tr_rules(body, NULL, NULL); }

static char *tr_text(const char *body)
{
    json_value *doc = json_parse(body, strlen(body), NULL, 0);
    sbuf out = SBUF_INIT;
    dialect_error err;
    char *s = NULL;
    if (doc && responses_request_to_chat(doc, NULL, &out, &err) == 0)
        s = strdup(out.p);
    sbuf_free(&out);
    json_free(doc);
    return s;
}

static void refused(const char *body, const policy_dialect *rules, const char *param, const char *code)
{
    dialect_error err;
    json_value *got = tr_rules(body, rules, &err);
    CHECK(got == NULL);
    CHECK_EQ_STR(err.param, param);
    CHECK_EQ_STR(err.code, code);
    json_free(got);
}

#define USER_ITEM "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"hi\"}]}"

static void test_instructions_become_a_first_system_message_and_a_string_input_one_user_message(void)
{
    char *s = tr_text("{\"model\":\"gpt-5\",\"input\":\"hello\",\"instructions\":\"Be brief.\",\"stream\":false}");
    CHECK_EQ_STR(s, "{\"model\":\"gpt-5\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                    "{\"role\":\"user\",\"content\":\"hello\"}],\"stream\":false}");
    free(s);
    /* empty instructions say nothing */
    s = tr_text("{\"instructions\":\"\",\"input\":\"x\"}");
    CHECK_EQ_STR(s, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");
    free(s);
}

static void test_developer_and_system_items_become_system_messages_of_one_string(void)
{
    json_value *o = tr("{\"input\":[{\"type\":\"message\",\"role\":\"developer\",\"content\":[{\"type\":\"input_text\","
                       "\"text\":\"a\"},{\"type\":\"input_text\",\"text\":\"b\"}]},{\"role\":\"system\",\"content\":\"c\"},"
                       USER_ITEM "]}");
    CHECK_EQ_INT(jcount(o, "messages"), 3);
    CHECK_EQ_STR(jstr(o, "messages.0.role"), "system");
    CHECK_EQ_STR(jstr(o, "messages.0.content"), "ab");
    CHECK_EQ_STR(jstr(o, "messages.1.role"), "system");
    CHECK_EQ_STR(jstr(o, "messages.1.content"), "c");
    CHECK_EQ_STR(jstr(o, "messages.2.content"), "hi"); /* all text: one string */
    json_free(o);
}

static void test_images_and_files_make_content_parts(void)
{
    char *s = tr_text("{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"see\"},"
                      "{\"type\":\"input_image\",\"image_url\":\"https://x/a.png\",\"detail\":\"low\"},"
                      "{\"type\":\"input_file\",\"file_id\":\"file-1\",\"filename\":\"a.pdf\"}]}]}");
    CHECK_EQ_STR(s, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"see\"},"
                    "{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://x/a.png\",\"detail\":\"low\"}},"
                    "{\"type\":\"file\",\"file\":{\"file_id\":\"file-1\",\"filename\":\"a.pdf\"}}]}]}");
    free(s);
    refused("{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"file_id\":\"file-1\"}]}]}", NULL,
            "input[0].content[0].file_id", "unsupported_parameter");
    refused("{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_file\",\"file_url\":\"https://x\"}]}]}", NULL,
            "input[0].content[0].file_url", "unsupported_parameter");
    refused("{\"input\":[{\"role\":\"system\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"u\"}]}]}", NULL,
            "input[0].content[0].type", "unsupported_parameter");
}

static void test_consecutive_function_calls_merge_into_one_assistant_message(void)
{
    json_value *o = tr("{\"input\":[" USER_ITEM ","
                       "{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_a\",\"name\":\"f\",\"arguments\":\"{}\"},"
                       "{\"type\":\"function_call\",\"call_id\":\"call_b\",\"name\":\"g\",\"arguments\":\"{\\\"x\\\":1}\"},"
                       "{\"type\":\"function_call_output\",\"call_id\":\"call_a\",\"output\":\"1\"},"
                       "{\"type\":\"function_call_output\",\"call_id\":\"call_b\",\"output\":\"2\"},"
                       "{\"type\":\"function_call\",\"call_id\":\"call_c\",\"name\":\"f\",\"arguments\":\"{}\"}]}");
    CHECK(o != NULL);
    CHECK_EQ_INT(jcount(o, "messages"), 5);
    CHECK_EQ_STR(jstr(o, "messages.1.role"), "assistant");
    CHECK(jpath(o, "messages.1.content") && jpath(o, "messages.1.content")->type == JSON_NULL);
    CHECK_EQ_INT(jcount(o, "messages.1.tool_calls"), 2);
    CHECK_EQ_STR(jstr(o, "messages.1.tool_calls.0.id"), "call_a");
    CHECK_EQ_STR(jstr(o, "messages.1.tool_calls.0.type"), "function");
    CHECK_EQ_STR(jstr(o, "messages.1.tool_calls.0.function.name"), "f");
    CHECK_EQ_STR(jstr(o, "messages.1.tool_calls.1.function.arguments"), "{\"x\":1}");
    CHECK_EQ_STR(jstr(o, "messages.2.role"), "tool");
    CHECK_EQ_STR(jstr(o, "messages.2.tool_call_id"), "call_a");
    CHECK_EQ_STR(jstr(o, "messages.2.content"), "1");
    CHECK_EQ_STR(jstr(o, "messages.3.tool_call_id"), "call_b");
    /* a call after the outputs is a new assistant message */
    CHECK_EQ_INT(jcount(o, "messages.4.tool_calls"), 1);
    CHECK_EQ_STR(jstr(o, "messages.4.tool_calls.0.id"), "call_c");
    json_free(o);
}

static void test_function_calls_join_the_assistant_text_before_them_even_across_reasoning(void)
{
    json_value *o = tr("{\"input\":[" USER_ITEM ",{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[],"
                       "\"encrypted_content\":\"gAAAA\"},{\"type\":\"message\",\"role\":\"assistant\",\"id\":\"msg_1\","
                       "\"content\":[{\"type\":\"output_text\",\"text\":\"Looking.\",\"annotations\":[]}]},"
                       "{\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"hm\"}]},"
                       "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"ls\",\"arguments\":\"{}\"},"
                       "{\"type\":\"compaction\",\"encrypted_content\":\"x\"}]}");
    CHECK_EQ_INT(jcount(o, "messages"), 2);
    CHECK_EQ_STR(jstr(o, "messages.1.role"), "assistant");
    CHECK_EQ_STR(jstr(o, "messages.1.content"), "Looking.");
    CHECK_EQ_STR(jstr(o, "messages.1.tool_calls.0.id"), "c1");
    json_free(o);
    /* two assistant messages in a row stay two; a refusal part goes to refusal */
    o = tr("{\"input\":[{\"role\":\"assistant\",\"content\":\"a\"},{\"type\":\"message\",\"role\":\"assistant\","
           "\"content\":[{\"type\":\"refusal\",\"refusal\":\"no\"}]}]}");
    CHECK_EQ_INT(jcount(o, "messages"), 2);
    CHECK(jpath(o, "messages.1.content") && jpath(o, "messages.1.content")->type == JSON_NULL);
    CHECK_EQ_STR(jstr(o, "messages.1.refusal"), "no");
    json_free(o);
}

static void test_tool_outputs_become_tool_messages_with_their_text(void)
{
    json_value *o = tr("{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":[{\"type\":"
                       "\"input_text\",\"text\":\"a\"},{\"type\":\"input_text\",\"text\":\"b\"}]}]}");
    CHECK_EQ_STR(jstr(o, "messages.0.role"), "tool");
    CHECK_EQ_STR(jstr(o, "messages.0.content"), "ab");
    json_free(o);
    refused("{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":[{\"type\":\"input_image\","
            "\"image_url\":\"u\"}]}]}",
            NULL, "input[0].output[0].type", "unsupported_parameter");
    refused("{\"input\":[{\"type\":\"function_call_output\",\"output\":\"x\"}]}", NULL, "input[0].call_id",
            "missing_required_parameter");
}

static void test_custom_tools_become_function_tools_with_one_string_input(void)
{
    json_value *o = tr("{\"input\":\"x\",\"tools\":[{\"type\":\"custom\",\"name\":\"apply_patch\",\"description\":"
                       "\"Edit files.\",\"format\":{\"type\":\"grammar\",\"syntax\":\"lark\",\"definition\":\"start: "
                       "\\\"*** Begin Patch\\\"\"}},{\"type\":\"custom\",\"name\":\"note\"}]}");
    CHECK_EQ_STR(jstr(o, "tools.0.type"), "function");
    CHECK_EQ_STR(jstr(o, "tools.0.function.name"), "apply_patch");
    CHECK_EQ_STR(jstr(o, "tools.0.function.description"), "Edit files.");
    CHECK_EQ_STR(jstr(o, "tools.0.function.parameters.type"), "object");
    CHECK_EQ_STR(jstr(o, "tools.0.function.parameters.properties.input.type"), "string");
    CHECK_EQ_STR(jstr(o, "tools.0.function.parameters.required.0"), "input");
    const char *d = jstr(o, "tools.0.function.parameters.properties.input.description");
    CHECK(d && strstr(d, "lark") && strstr(d, "start: \"*** Begin Patch\""));
    CHECK(!jpath(o, "tools.1.function.parameters.properties.input.description"));
    json_free(o);
}

static void test_custom_tool_calls_become_tool_calls_whose_arguments_hold_the_input(void)
{
    json_value *o = tr("{\"input\":[{\"type\":\"custom_tool_call\",\"id\":\"ctc_1\",\"call_id\":\"call_p\",\"name\":"
                       "\"apply_patch\",\"input\":\"*** Begin Patch\\n\\\"q\\\"\"},{\"type\":\"custom_tool_call_output\","
                       "\"call_id\":\"call_p\",\"output\":\"Done!\"}]}");
    CHECK_EQ_STR(jstr(o, "messages.0.tool_calls.0.id"), "call_p");
    CHECK_EQ_STR(jstr(o, "messages.0.tool_calls.0.function.name"), "apply_patch");
    const char *args = jstr(o, "messages.0.tool_calls.0.function.arguments");
    json_value *a = args ? json_parse(args, strlen(args), NULL, 0) : NULL;
    CHECK_EQ_STR(json_get_str(a, "input"), "*** Begin Patch\n\"q\"");
    CHECK_EQ_INT(a ? a->count : 0, 1);
    json_free(a);
    CHECK_EQ_STR(jstr(o, "messages.1.role"), "tool");
    CHECK_EQ_STR(jstr(o, "messages.1.tool_call_id"), "call_p");
    CHECK_EQ_STR(jstr(o, "messages.1.content"), "Done!");
    json_free(o);
}

static void test_function_tools_get_their_function_wrapper(void)
{
    char *s = tr_text("{\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"description\":\"d\",\"parameters\":"
                      "{\"type\":\"object\"},\"strict\":true}],\"input\":\"x\"}");
    CHECK_EQ_STR(s, "{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\","
                    "\"parameters\":{\"type\":\"object\"},\"strict\":true}}],\"messages\":[{\"role\":\"user\","
                    "\"content\":\"x\"}]}");
    free(s);
}

static void test_tool_choice_forms_are_translated(void)
{
    const char *forms[][2] = {
        {"\"auto\"", "\"auto\""},
        {"\"required\"", "\"required\""},
        {"{\"type\":\"function\",\"name\":\"f\"}", "{\"type\":\"function\",\"function\":{\"name\":\"f\"}}"},
        {"{\"type\":\"custom\",\"name\":\"p\"}", "{\"type\":\"function\",\"function\":{\"name\":\"p\"}}"},
        {"{\"type\":\"allowed_tools\",\"mode\":\"required\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"}]}",
         "{\"type\":\"allowed_tools\",\"allowed_tools\":{\"mode\":\"required\",\"tools\":[{\"type\":\"function\","
         "\"function\":{\"name\":\"f\"}}]}}"},
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char body[512], want[512];
        snprintf(body, sizeof body, "{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"}],"
                                    "\"tool_choice\":%s}", forms[i][0]);
        snprintf(want, sizeof want, "\"tool_choice\":%s", forms[i][1]);
        char *s = tr_text(body);
        CHECK(s && strstr(s, want));
        if (!s || !strstr(s, want))
            fprintf(stderr, "  %s\n  -> %s\n", body, s ? s : "(refused)");
        free(s);
    }
    refused("{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"}],\"tool_choice\":{\"type\":"
            "\"file_search\"}}",
            NULL, "tool_choice.type", "unsupported_parameter");
}

static void test_tool_choice_and_parallel_tool_calls_are_left_out_without_tools(void)
{
    char *s = tr_text("{\"input\":\"x\",\"tool_choice\":\"auto\",\"parallel_tool_calls\":true}");
    CHECK_EQ_STR(s, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}");
    free(s);
    s = tr_text("{\"input\":\"x\",\"tools\":[],\"tool_choice\":\"auto\",\"parallel_tool_calls\":true}");
    CHECK_EQ_STR(s, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}"); /* Chat refuses tools: [] */
    free(s);
}

static void test_text_format_becomes_response_format_and_plain_text_says_nothing(void)
{
    json_value *o = tr("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"pt\",\"schema\":"
                       "{\"type\":\"object\"},\"strict\":true},\"verbosity\":\"high\"}}");
    CHECK_EQ_STR(jstr(o, "response_format.type"), "json_schema");
    CHECK_EQ_STR(jstr(o, "response_format.json_schema.name"), "pt");
    CHECK_EQ_STR(jstr(o, "response_format.json_schema.schema.type"), "object");
    CHECK(jpath(o, "response_format.json_schema.strict") && !jpath(o, "response_format.json_schema.type"));
    CHECK_EQ_STR(jstr(o, "verbosity"), "high");
    CHECK(!json_get(o, "text"));
    json_free(o);
    o = tr("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"text\"}}}");
    CHECK(o && !json_get(o, "response_format") && !json_get(o, "text"));
    json_free(o);
    o = tr("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_object\"}}}");
    CHECK_EQ_STR(jstr(o, "response_format.type"), "json_object");
    json_free(o);
}

static void test_reasoning_effort_max_output_tokens_and_stream_are_chat_s_own(void)
{
    json_value *o = tr("{\"input\":\"x\",\"reasoning\":{\"effort\":\"high\"},\"max_output_tokens\":500,"
                       "\"stream\":true,\"stream_options\":{\"include_obfuscation\":false}}");
    CHECK_EQ_STR(jstr(o, "reasoning_effort"), "high");
    CHECK_EQ_INT(json_get_num(o, "max_tokens", -1), 500);
    CHECK(json_get(o, "stream")->type == JSON_TRUE);
    CHECK(jpath(o, "stream_options.include_usage") && jpath(o, "stream_options.include_usage")->type == JSON_TRUE);
    CHECK_EQ_INT(jcount(o, "stream_options"), 1);
    CHECK(!json_get(o, "reasoning") && !json_get(o, "max_output_tokens"));
    json_free(o);
}

static void test_hosted_tools_and_their_items_are_refused_naming_them_unless_ignored(void)
{
    const char *body = "{\"input\":[" USER_ITEM ",{\"type\":\"web_search_call\",\"id\":\"ws_1\",\"status\":"
                       "\"completed\"}],\"tools\":[{\"type\":\"web_search\"},{\"type\":\"function\",\"name\":\"f\"}]}";
    dialect_error err;
    json_value *o = tr_rules(body, NULL, &err);
    CHECK(o == NULL);
    CHECK_EQ_STR(err.param, "input[1].type");
    CHECK(strstr(err.message, "web_search_call") && strstr(err.message, "Chat Completions"));
    refused("{\"input\":\"x\",\"tools\":[{\"type\":\"code_interpreter\",\"container\":{\"type\":\"auto\"}}]}", NULL,
            "tools[0].type", "unsupported_parameter");
    policy_dialect r;
    rules_chat_relay(&r);
    o = tr_rules(body, &r, NULL);
    CHECK_EQ_INT(jcount(o, "messages"), 1);
    CHECK_EQ_INT(jcount(o, "tools"), 1);
    CHECK_EQ_STR(jstr(o, "tools.0.function.name"), "f");
    json_free(o);
    /* only ignored tools: no tools member at all */
    o = tr_rules("{\"input\":\"x\",\"tools\":[{\"type\":\"web_search_preview\"}],\"tool_choice\":\"auto\"}", &r, NULL);
    CHECK(o && !json_get(o, "tools") && !json_get(o, "tool_choice"));
    json_free(o);
}

static void test_item_reference_is_refused_unless_ignored(void)
{
    const char *body = "{\"input\":[" USER_ITEM ",{\"type\":\"item_reference\",\"id\":\"msg_1\"}]}";
    refused(body, NULL, "input[1].type", "unsupported_parameter");
    policy_dialect r;
    memset(&r, 0, sizeof r);
    rules_add(r.ignore, &r.n_ignore, "input.item_reference");
    json_value *o = tr_rules(body, &r, NULL);
    CHECK_EQ_INT(jcount(o, "messages"), 1);
    json_free(o);
}

static void test_responses_only_fields_are_refused_unless_harmless_or_ignored(void)
{
    const char *fields[][3] = {
        {"include", "[\"reasoning.encrypted_content\"]", "include"},
        {"truncation", "\"auto\"", "truncation"},
        {"background", "true", "background"},
        {"previous_response_id", "\"resp_1\"", "previous_response_id"},
        {"conversation", "\"conv_1\"", "conversation"},
        {"prompt", "{\"id\":\"pmpt_1\"}", "prompt"},
        {"max_tool_calls", "3", "max_tool_calls"},
        {"top_logprobs", "2", "top_logprobs"},
        {"reasoning", "{\"effort\":\"low\",\"summary\":\"auto\"}", "reasoning.summary"},
        {"reasoning", "{\"generate_summary\":\"concise\"}", "reasoning.generate_summary"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"input\":\"x\",\"%s\":%s}", fields[i][0], fields[i][1]);
        dialect_error err;
        json_value *o = tr_rules(body, NULL, &err);
        CHECK(o == NULL);
        CHECK_EQ_STR(err.param, fields[i][2]);
        CHECK_EQ_STR(err.code, "unsupported_parameter");
        CHECK(strstr(err.message, "Chat Completions") != NULL);
        json_free(o);
    }
    json_value *o = tr("{\"input\":\"x\",\"include\":[],\"truncation\":\"disabled\",\"background\":false,"
                       "\"previous_response_id\":null,\"top_logprobs\":0,\"reasoning\":{\"summary\":null}}");
    CHECK(o != NULL);
    CHECK_EQ_INT(o ? o->count : 0, 1);
    json_free(o);
    policy_dialect r;
    rules_chat_relay(&r);
    o = tr_rules("{\"model\":\"m\",\"input\":\"x\",\"include\":[\"reasoning.encrypted_content\"],\"truncation\":\"auto\","
                 "\"reasoning\":{\"effort\":\"low\",\"summary\":\"auto\"},\"store\":false,\"metadata\":{\"a\":\"b\"},"
                 "\"prompt_cache_key\":\"k\",\"temperature\":0.5}",
                 &r, NULL);
    CHECK(o != NULL);
    static const char *const gone[] = {"include", "truncation", "reasoning", "store", "metadata", "prompt_cache_key"};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        CHECK(!json_get(o, gone[i]));
    CHECK_EQ_STR(jstr(o, "reasoning_effort"), "low");
    CHECK_EQ_INT(json_get_num(o, "temperature", 0) * 10, 5);
    json_free(o);
}

static void test_store_metadata_and_cache_key_pass_as_they_are_unless_ignored(void)
{
    json_value *o = tr("{\"input\":\"x\",\"store\":true,\"metadata\":{\"a\":\"b\"},\"prompt_cache_key\":\"k\","
                       "\"user\":\"u\",\"x_vendor\":1}");
    CHECK(json_get(o, "store") && json_get(o, "store")->type == JSON_TRUE);
    CHECK_EQ_STR(jstr(o, "metadata.a"), "b");
    CHECK_EQ_STR(jstr(o, "prompt_cache_key"), "k");
    CHECK_EQ_STR(jstr(o, "user"), "u");
    CHECK_EQ_INT(json_get_num(o, "x_vendor", 0), 1);
    json_free(o);
}

static void test_a_schema_nested_too_deep_for_chat_is_refused_not_sent_unparseable(void)
{
    /* parameters nested 125 deep: 128 in the Responses body, 129 in Chat's */
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":");
    for (int i = 0; i < 125; i++)
        sbuf_puts(&b, "[");
    for (int i = 0; i < 125; i++)
        sbuf_puts(&b, "]");
    sbuf_puts(&b, "}]}");
    json_value *in = json_parse(b.p, b.len, NULL, 0); /* the client's body itself is within bounds */
    CHECK(in != NULL);
    json_free(in);
    refused(b.p, NULL, "tools[0].parameters", "invalid_value");
    /* one level less fits */
    sbuf_reset(&b);
    sbuf_puts(&b, "{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":");
    for (int i = 0; i < 124; i++)
        sbuf_puts(&b, "[");
    for (int i = 0; i < 124; i++)
        sbuf_puts(&b, "]");
    sbuf_puts(&b, "}]}");
    json_value *o = tr(b.p);
    CHECK(o != NULL);
    json_free(o);
    sbuf_free(&b);
}

static void test_malformed_items_are_refused_with_the_path_of_the_fault(void)
{
    refused("{\"input\":7}", NULL, "input", "invalid_type");
    refused("{\"input\":[1]}", NULL, "input[0]", "invalid_type");
    refused("{\"input\":[{\"content\":\"x\"}]}", NULL, "input[0].type", "missing_required_parameter");
    refused("{\"input\":[{\"type\":\"message\",\"content\":\"x\"}]}", NULL, "input[0].role", "missing_required_parameter");
    refused("{\"input\":[{\"role\":\"critic\",\"content\":\"x\"}]}", NULL, "input[0].role", "invalid_value");
    refused("{\"input\":[{\"role\":\"user\"}]}", NULL, "input[0].content", "missing_required_parameter");
    refused("{\"input\":[{\"type\":\"function_call\",\"name\":\"f\"}]}", NULL, "input[0].call_id",
            "missing_required_parameter");
    refused("{\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\"}]}", NULL, "input[0].name",
            "missing_required_parameter");
    refused("{\"input\":[{\"type\":\"telepathy\"}]}", NULL, "input[0].type", "unsupported_parameter");
    refused("{\"instructions\":[1],\"input\":\"x\"}", NULL, "instructions", "invalid_type");
    refused("{\"input\":\"x\",\"tools\":[{\"type\":\"function\"}]}", NULL, "tools[0].name", "missing_required_parameter");
    refused("{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"xml\"}}}", NULL, "text.format.type", "invalid_value");
    refused("\"x\"", NULL, "", "invalid_type");
}

static void test_is_custom_tool_names_only_custom_tools(void)
{
    const char *b = "{\"tools\":[{\"type\":\"custom\",\"name\":\"apply_patch\"},{\"type\":\"function\",\"name\":\"ls\"}]}";
    json_value *doc = json_parse(b, strlen(b), NULL, 0);
    CHECK_EQ_INT(responses_request_is_custom_tool(doc, "apply_patch"), 1);
    CHECK_EQ_INT(responses_request_is_custom_tool(doc, "ls"), 0);
    CHECK_EQ_INT(responses_request_is_custom_tool(doc, "x"), 0);
    CHECK_EQ_INT(responses_request_is_custom_tool(NULL, "x"), 0);
    json_free(doc);
}

int main(void)
{
    RUN(test_instructions_become_a_first_system_message_and_a_string_input_one_user_message);
    RUN(test_developer_and_system_items_become_system_messages_of_one_string);
    RUN(test_images_and_files_make_content_parts);
    RUN(test_consecutive_function_calls_merge_into_one_assistant_message);
    RUN(test_function_calls_join_the_assistant_text_before_them_even_across_reasoning);
    RUN(test_tool_outputs_become_tool_messages_with_their_text);
    RUN(test_custom_tools_become_function_tools_with_one_string_input);
    RUN(test_custom_tool_calls_become_tool_calls_whose_arguments_hold_the_input);
    RUN(test_function_tools_get_their_function_wrapper);
    RUN(test_tool_choice_forms_are_translated);
    RUN(test_tool_choice_and_parallel_tool_calls_are_left_out_without_tools);
    RUN(test_text_format_becomes_response_format_and_plain_text_says_nothing);
    RUN(test_reasoning_effort_max_output_tokens_and_stream_are_chat_s_own);
    RUN(test_hosted_tools_and_their_items_are_refused_naming_them_unless_ignored);
    RUN(test_item_reference_is_refused_unless_ignored);
    RUN(test_responses_only_fields_are_refused_unless_harmless_or_ignored);
    RUN(test_store_metadata_and_cache_key_pass_as_they_are_unless_ignored);
    RUN(test_a_schema_nested_too_deep_for_chat_is_refused_not_sent_unparseable);
    RUN(test_malformed_items_are_refused_with_the_path_of_the_fault);
    RUN(test_is_custom_tool_names_only_custom_tools);
    return check_summary();
}
