/* test_chat_request.c: a Chat Completions request written as a Responses
 * request (dialect/chat_request.c): docs/clients.md's Request table, row
 * by row, the refusals and the ignore list. Every output is parsed back. */
#include "check.h"
#include "dialect_check.h"
#include "dialect/chat_request.h"

/* body translated with rules: the parsed output (NULL when refused, err
 * filled; the output is then not looked at). */
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
    int rc = chat_request_to_responses(doc, rules, &out, err);
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

/* The translation's output text (for exact comparisons). */
static char *tr_text(const char *body)
{
    json_value *doc = json_parse(body, strlen(body), NULL, 0);
    sbuf out = SBUF_INIT;
    dialect_error err;
    char *s = NULL;
    if (doc && chat_request_to_responses(doc, NULL, &out, &err) == 0)
        s = strdup(out.p);
    sbuf_free(&out);
    json_free(doc);
    return s;
}

/* body is refused naming param with code. */
static void refused(const char *body, const policy_dialect *rules, const char *param, const char *code)
{
    dialect_error err;
    json_value *got = tr_rules(body, rules, &err);
    CHECK(got == NULL);
    CHECK_EQ_STR(err.param, param);
    CHECK_EQ_STR(err.code, code);
    CHECK_EQ_INT(err.status, 400);
    json_free(got);
}

#define USER "{\"role\":\"user\",\"content\":\"hi\"}"

static void test_leading_system_and_developer_messages_become_instructions_joined_by_a_blank_line(void)
{
    json_value *o = tr("{\"model\":\"gpt-5\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                       "{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"Use \"},"
                       "{\"type\":\"text\",\"text\":\"tools.\"}]},{\"role\":\"system\",\"content\":\"\"}," USER "]}");
    CHECK(o != NULL);
    CHECK_EQ_STR(jstr(o, "instructions"), "Be brief.\n\nUse tools.");
    CHECK_EQ_INT(jcount(o, "input"), 1);
    CHECK_EQ_STR(jstr(o, "input.0.role"), "user");
    CHECK_EQ_STR(jstr(o, "model"), "gpt-5");
    json_free(o);
    /* no system message: no instructions (adapt fills a default if the upstream needs one) */
    o = tr("{\"messages\":[" USER "]}");
    CHECK(o && !json_get(o, "instructions"));
    json_free(o);
}

static void test_a_later_system_message_becomes_a_developer_input_message(void)
{
    json_value *o = tr("{\"messages\":[" USER ",{\"role\":\"system\",\"content\":\"now in French\"},"
                       "{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                       "{\"type\":\"text\",\"text\":\"b\"}]}]}");
    CHECK(o != NULL);
    CHECK(!json_get(o, "instructions"));
    CHECK_EQ_INT(jcount(o, "input"), 3);
    CHECK_EQ_STR(jstr(o, "input.1.type"), "message");
    CHECK_EQ_STR(jstr(o, "input.1.role"), "developer");
    CHECK_EQ_STR(jstr(o, "input.1.content.0.type"), "input_text");
    CHECK_EQ_STR(jstr(o, "input.1.content.0.text"), "now in French");
    CHECK_EQ_INT(jcount(o, "input.2.content"), 2);
    CHECK_EQ_STR(jstr(o, "input.2.content.1.text"), "b");
    json_free(o);
}

static void test_user_parts_become_input_text_image_and_file_parts(void)
{
    char *s = tr_text("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"What is this?\"},"
                      "{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://x/a.png\",\"detail\":\"high\"}},"
                      "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,AAAA\"}},"
                      "{\"type\":\"file\",\"file\":{\"file_id\":\"file-1\",\"filename\":\"a.pdf\"}}],\"name\":\"bob\"}]}");
    CHECK_EQ_STR(s, "{\"input\":[{\"type\":\"message\",\"role\":\"user\",\"content\":["
                    "{\"type\":\"input_text\",\"text\":\"What is this?\"},"
                    "{\"type\":\"input_image\",\"image_url\":\"https://x/a.png\",\"detail\":\"high\"},"
                    "{\"type\":\"input_image\",\"image_url\":\"data:image/png;base64,AAAA\"},"
                    "{\"type\":\"input_file\",\"file_id\":\"file-1\",\"filename\":\"a.pdf\"}]}],\"store\":false}");
    free(s);
    /* a string content is one input_text part */
    s = tr_text("{\"messages\":[" USER "]}");
    CHECK_EQ_STR(s, "{\"input\":[{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
                    "\"text\":\"hi\"}]}],\"store\":false}");
    free(s);
}

static void test_assistant_text_and_refusal_become_output_text_and_refusal_parts(void)
{
    json_value *o = tr("{\"messages\":[" USER ",{\"role\":\"assistant\",\"content\":\"Hello\"},"
                       "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                       "{\"type\":\"refusal\",\"refusal\":\"no\"}]},{\"role\":\"assistant\",\"content\":null,"
                       "\"refusal\":\"I can't\"}]}");
    CHECK(o != NULL);
    CHECK_EQ_INT(jcount(o, "input"), 4);
    CHECK_EQ_STR(jstr(o, "input.1.role"), "assistant");
    CHECK_EQ_STR(jstr(o, "input.1.content.0.type"), "output_text");
    CHECK_EQ_STR(jstr(o, "input.1.content.0.text"), "Hello");
    CHECK_EQ_STR(jstr(o, "input.2.content.0.type"), "output_text");
    CHECK_EQ_STR(jstr(o, "input.2.content.1.type"), "refusal");
    CHECK_EQ_STR(jstr(o, "input.2.content.1.refusal"), "no");
    CHECK_EQ_INT(jcount(o, "input.3.content"), 1);
    CHECK_EQ_STR(jstr(o, "input.3.content.0.refusal"), "I can't");
    json_free(o);
}

static void test_parallel_tool_calls_become_one_function_call_item_each(void)
{
    json_value *o = tr("{\"messages\":[" USER ",{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":["
                       "{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}},"
                       "{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":{\"b\":2}}},"
                       "{\"id\":\"call_3\",\"function\":{\"name\":\"h\"}}]}]}");
    CHECK(o != NULL);
    /* "" beside tool calls is no message of its own */
    CHECK_EQ_INT(jcount(o, "input"), 4);
    CHECK_EQ_STR(jstr(o, "input.1.type"), "function_call");
    CHECK_EQ_STR(jstr(o, "input.1.call_id"), "call_1");
    CHECK_EQ_STR(jstr(o, "input.1.name"), "f");
    CHECK_EQ_STR(jstr(o, "input.1.arguments"), "{\"a\":1}");
    CHECK_EQ_STR(jstr(o, "input.2.call_id"), "call_2");
    CHECK_EQ_STR(jstr(o, "input.2.arguments"), "{\"b\":2}"); /* an object sent as arguments: its text */
    CHECK_EQ_STR(jstr(o, "input.3.arguments"), "{}");        /* none: an empty object */
    json_free(o);
    /* assistant text beside the calls stays a message item before them */
    o = tr("{\"messages\":[" USER ",{\"role\":\"assistant\",\"content\":\"Let me look.\",\"tool_calls\":["
           "{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}");
    CHECK_EQ_INT(jcount(o, "input"), 3);
    CHECK_EQ_STR(jstr(o, "input.1.content.0.text"), "Let me look.");
    CHECK_EQ_STR(jstr(o, "input.2.type"), "function_call");
    json_free(o);
}

static void test_tool_messages_become_function_call_outputs_with_their_text(void)
{
    json_value *o = tr("{\"messages\":[" USER ",{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"42\"},"
                       "{\"role\":\"tool\",\"tool_call_id\":\"call_2\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                       "{\"type\":\"text\",\"text\":\"b\"}]}]}");
    CHECK(o != NULL);
    CHECK_EQ_STR(jstr(o, "input.1.type"), "function_call_output");
    CHECK_EQ_STR(jstr(o, "input.1.call_id"), "call_1");
    CHECK_EQ_STR(jstr(o, "input.1.output"), "42");
    CHECK_EQ_STR(jstr(o, "input.2.output"), "ab");
    json_free(o);
}

static void test_function_tools_lose_their_wrapper_and_say_strict_false_when_unsaid(void)
{
    char *s = tr_text("{\"messages\":[" USER "],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
                      "\"description\":\"does f\",\"parameters\":{\"type\":\"object\",\"properties\":{}},\"strict\":true}},"
                      "{\"type\":\"function\",\"function\":{\"name\":\"g\"}}]}");
    CHECK(s && strstr(s, "\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"description\":\"does f\","
                         "\"parameters\":{\"type\":\"object\",\"properties\":{}},\"strict\":true},"
                         "{\"type\":\"function\",\"name\":\"g\",\"parameters\":{\"type\":\"object\",\"properties\":{}},"
                         "\"strict\":false}]"));
    free(s);
}

static void test_tool_choice_forms_are_translated(void)
{
    const char *forms[][2] = {
        {"\"auto\"", "\"auto\""},
        {"\"none\"", "\"none\""},
        {"\"required\"", "\"required\""},
        {"{\"type\":\"function\",\"function\":{\"name\":\"f\"}}", "{\"type\":\"function\",\"name\":\"f\"}"},
        {"{\"type\":\"allowed_tools\",\"allowed_tools\":{\"mode\":\"auto\",\"tools\":[{\"type\":\"function\","
         "\"function\":{\"name\":\"f\"}}]}}",
         "{\"type\":\"allowed_tools\",\"mode\":\"auto\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"}]}"},
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char body[512], want[512];
        snprintf(body, sizeof body, "{\"messages\":[" USER "],\"tool_choice\":%s}", forms[i][0]);
        snprintf(want, sizeof want, "\"tool_choice\":%s", forms[i][1]);
        char *s = tr_text(body);
        CHECK(s && strstr(s, want));
        if (!s || !strstr(s, want))
            fprintf(stderr, "  %s\n  -> %s\n", body, s ? s : "(refused)");
        free(s);
    }
    refused("{\"messages\":[" USER "],\"tool_choice\":\"sometimes\"}", NULL, "tool_choice", "invalid_value");
    refused("{\"messages\":[" USER "],\"tool_choice\":{\"type\":\"function\"}}", NULL, "tool_choice.function",
            "missing_required_parameter");
    refused("{\"messages\":[" USER "],\"tool_choice\":{\"type\":\"custom\",\"custom\":{\"name\":\"x\"}}}", NULL,
            "tool_choice.type", "unsupported_parameter");
}

static void test_response_format_json_schema_becomes_text_format_with_verbosity(void)
{
    char *s = tr_text("{\"messages\":[" USER "],\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
                      "{\"name\":\"pt\",\"description\":\"a point\",\"schema\":{\"type\":\"object\"},\"strict\":true}},"
                      "\"verbosity\":\"low\"}");
    CHECK(s && strstr(s, "\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"pt\",\"description\":\"a point\","
                         "\"schema\":{\"type\":\"object\"},\"strict\":true},\"verbosity\":\"low\"}"));
    CHECK(s && !strstr(s, "response_format") && !strstr(s, "{\"verbosity\""));
    free(s);
    s = tr_text("{\"messages\":[" USER "],\"response_format\":{\"type\":\"json_object\"}}");
    CHECK(s && strstr(s, "\"text\":{\"format\":{\"type\":\"json_object\"}}"));
    free(s);
    s = tr_text("{\"verbosity\":\"high\",\"messages\":[" USER "]}");
    CHECK(s && strstr(s, "{\"text\":{\"verbosity\":\"high\"},\"input\":"));
    free(s);
    refused("{\"messages\":[" USER "],\"response_format\":{\"type\":\"yaml\"}}", NULL, "response_format.type",
            "invalid_value");
    refused("{\"messages\":[" USER "],\"response_format\":{\"type\":\"json_schema\"}}", NULL,
            "response_format.json_schema", "missing_required_parameter");
}

static void test_reasoning_effort_becomes_a_reasoning_object(void)
{
    json_value *o = tr("{\"messages\":[" USER "],\"reasoning_effort\":\"minimal\"}");
    CHECK_EQ_STR(jstr(o, "reasoning.effort"), "minimal");
    CHECK(!json_get(o, "reasoning_effort"));
    json_free(o);
    refused("{\"messages\":[" USER "],\"reasoning_effort\":[[1]]}", NULL, "reasoning_effort", "invalid_type");
}

static void test_max_completion_tokens_wins_over_max_tokens_and_small_limits_rise_to_16(void)
{
    json_value *o = tr("{\"max_tokens\":100,\"messages\":[" USER "],\"max_completion_tokens\":200}");
    CHECK_EQ_INT(json_get_num(o, "max_output_tokens", -1), 200);
    CHECK(!json_get(o, "max_tokens") && !json_get(o, "max_completion_tokens"));
    json_free(o);
    o = tr("{\"messages\":[" USER "],\"max_tokens\":300}");
    CHECK_EQ_INT(json_get_num(o, "max_output_tokens", -1), 300);
    json_free(o);
    o = tr("{\"messages\":[" USER "],\"max_tokens\":1}");
    CHECK_EQ_INT(json_get_num(o, "max_output_tokens", -1), 16);
    json_free(o);
}

static void test_same_fields_and_unknown_fields_pass_unchanged_in_order(void)
{
    char *s = tr_text("{\"model\":\"m\",\"temperature\":0.25,\"messages\":[" USER "],\"top_p\":1,\"user\":\"u\","
                      "\"metadata\":{\"k\":\"v\"},\"service_tier\":\"flex\",\"prompt_cache_key\":\"p\","
                      "\"safety_identifier\":\"s\",\"parallel_tool_calls\":false,\"store\":true,"
                      "\"x_vendor\":{\"deep\":[1,2]},\"stream\":false}");
    CHECK_EQ_STR(s, "{\"model\":\"m\",\"temperature\":0.25,\"input\":[{\"type\":\"message\",\"role\":\"user\","
                    "\"content\":[{\"type\":\"input_text\",\"text\":\"hi\"}]}],\"top_p\":1,\"user\":\"u\","
                    "\"metadata\":{\"k\":\"v\"},\"service_tier\":\"flex\",\"prompt_cache_key\":\"p\","
                    "\"safety_identifier\":\"s\",\"parallel_tool_calls\":false,\"store\":true,"
                    "\"x_vendor\":{\"deep\":[1,2]},\"stream\":false}");
    free(s);
}

static void test_store_is_false_when_unsaid_since_chat_stores_nothing_unasked(void)
{
    json_value *o = tr("{\"messages\":[" USER "]}");
    CHECK(json_get(o, "store") && json_get(o, "store")->type == JSON_FALSE);
    json_free(o);
    o = tr("{\"messages\":[" USER "],\"store\":null}");
    CHECK(json_get(o, "store") && json_get(o, "store")->type == JSON_FALSE);
    json_free(o);
    /* the rules ignore store: nothing said (adapt then says what the upstream needs) */
    policy_dialect r;
    memset(&r, 0, sizeof r);
    rules_add(r.ignore, &r.n_ignore, "store");
    o = tr_rules("{\"messages\":[" USER "],\"store\":true}", &r, NULL);
    CHECK(o && !json_get(o, "store"));
    json_free(o);
}

static void test_stream_passes_and_stream_options_keep_only_obfuscation(void)
{
    json_value *o = tr("{\"messages\":[" USER "],\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
    CHECK(json_get(o, "stream") && json_get(o, "stream")->type == JSON_TRUE);
    CHECK(!json_get(o, "stream_options"));
    json_free(o);
    o = tr("{\"messages\":[" USER "],\"stream\":true,\"stream_options\":{\"include_usage\":true,"
           "\"include_obfuscation\":false}}");
    CHECK(jpath(o, "stream_options.include_obfuscation") && !jpath(o, "stream_options.include_usage"));
    json_free(o);
}

static void test_n_above_one_is_refused_naming_n(void)
{
    dialect_error err;
    json_value *o = tr_rules("{\"messages\":[" USER "],\"n\":3}", NULL, &err);
    CHECK(o == NULL);
    CHECK_EQ_STR(err.param, "n");
    CHECK_EQ_STR(err.code, "unsupported_parameter");
    CHECK(strncmp(err.message, "'n' > 1 cannot be served by an account that speaks the Responses API", 67) == 0);
}

static void test_every_refused_top_level_field_is_named_and_says_the_api(void)
{
    const char *fields[][2] = {
        {"n", "2"},
        {"logprobs", "true"},
        {"top_logprobs", "3"},
        {"audio", "{\"voice\":\"alloy\",\"format\":\"wav\"}"},
        {"modalities", "[\"text\",\"audio\"]"},
        {"prediction", "{\"type\":\"content\",\"content\":\"x\"}"},
        {"seed", "7"},
        {"stop", "[\"\\n\"]"},
        {"frequency_penalty", "0.5"},
        {"presence_penalty", "-1"},
        {"logit_bias", "{\"50256\":-100}"},
        {"functions", "[{\"name\":\"f\"}]"},
        {"function_call", "{\"name\":\"f\"}"},
        {"web_search_options", "{}"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"messages\":[" USER "],\"%s\":%s}", fields[i][0], fields[i][1]);
        dialect_error err;
        json_value *o = tr_rules(body, NULL, &err);
        CHECK(o == NULL);
        CHECK_EQ_STR(err.param, fields[i][0]);
        CHECK_EQ_STR(err.code, "unsupported_parameter");
        CHECK(strstr(err.message, fields[i][0]) && strstr(err.message, "Responses API"));
        json_free(o);
        /* and each is left out when the rules ignore it */
        policy_dialect r;
        memset(&r, 0, sizeof r);
        rules_add(r.ignore, &r.n_ignore, fields[i][0]);
        o = tr_rules(body, &r, NULL);
        CHECK(o && !json_get(o, fields[i][0]));
        json_free(o);
    }
}

static void test_harmless_values_of_refused_fields_are_left_out(void)
{
    json_value *o = tr("{\"messages\":[" USER "],\"n\":1,\"logprobs\":false,\"top_logprobs\":0,\"stop\":[],"
                       "\"frequency_penalty\":0,\"presence_penalty\":0,\"logit_bias\":{},\"modalities\":[\"text\"],"
                       "\"functions\":[],\"function_call\":\"none\",\"seed\":null,\"audio\":null,\"stop\":null}");
    CHECK(o != NULL);
    static const char *const gone[] = {"n", "logprobs", "top_logprobs", "stop", "frequency_penalty",
                                       "presence_penalty", "logit_bias", "modalities", "functions", "function_call",
                                       "seed", "audio"};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        CHECK(!json_get(o, gone[i]));
    json_free(o);
}

static void test_input_audio_part_is_refused_naming_its_path_unless_ignored(void)
{
    const char *body = "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"}," USER ",{\"role\":\"assistant\","
                       "\"content\":\"ok\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"listen\"},"
                       "{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"AAAA\",\"format\":\"wav\"}}]}]}";
    dialect_error err;
    refused(body, NULL, "messages[3].content[1].type", "unsupported_parameter");
    json_free(tr_rules(body, NULL, &err));
    CHECK(strstr(err.message, "input_audio") != NULL);
    policy_dialect r;
    memset(&r, 0, sizeof r);
    rules_add(r.ignore, &r.n_ignore, "content.input_audio");
    json_value *o = tr_rules(body, &r, NULL);
    CHECK_EQ_INT(jcount(o, "input.2.content"), 1);
    CHECK_EQ_STR(jstr(o, "input.2.content.0.text"), "listen");
    json_free(o);
}

static void test_a_tool_that_is_not_a_function_is_refused_naming_tools_index_type_unless_ignored(void)
{
    const char *body = "{\"messages\":[" USER "],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}},"
                       "{\"type\":\"custom\",\"custom\":{\"name\":\"patch\"}}]}";
    refused(body, NULL, "tools[1].type", "unsupported_parameter");
    policy_dialect r;
    memset(&r, 0, sizeof r);
    rules_add(r.ignore, &r.n_ignore, "tools.custom");
    json_value *o = tr_rules(body, &r, NULL);
    CHECK_EQ_INT(jcount(o, "tools"), 1);
    CHECK_EQ_STR(jstr(o, "tools.0.name"), "f");
    json_free(o);
    /* a custom call in the history has no translation either */
    refused("{\"messages\":[" USER ",{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":\"custom\","
            "\"custom\":{\"name\":\"p\",\"input\":\"x\"}}]}]}",
            NULL, "messages[1].tool_calls[0].type", "unsupported_parameter");
}

static void test_function_role_and_legacy_assistant_fields_are_refused_unless_ignored(void)
{
    const char *body = "{\"messages\":[" USER ",{\"role\":\"function\",\"name\":\"f\",\"content\":\"1\"}]}";
    refused(body, NULL, "messages[1].role", "unsupported_parameter");
    policy_dialect r;
    memset(&r, 0, sizeof r);
    rules_add(r.ignore, &r.n_ignore, "role.function");
    json_value *o = tr_rules(body, &r, NULL);
    CHECK_EQ_INT(jcount(o, "input"), 1);
    json_free(o);
    refused("{\"messages\":[" USER ",{\"role\":\"assistant\",\"content\":null,\"function_call\":{\"name\":\"f\","
            "\"arguments\":\"{}\"}}]}",
            NULL, "messages[1].function_call", "unsupported_parameter");
    refused("{\"messages\":[" USER ",{\"role\":\"assistant\",\"content\":null,\"audio\":{\"id\":\"audio_1\"}}]}", NULL,
            "messages[1].audio", "unsupported_parameter");
}

static void test_malformed_requests_are_refused_with_the_path_of_the_fault(void)
{
    refused("{\"model\":\"m\"}", NULL, "messages", "missing_required_parameter");
    refused("{\"messages\":{}}", NULL, "messages", "invalid_type");
    refused("{\"messages\":[1]}", NULL, "messages[0]", "invalid_type");
    refused("{\"messages\":[{\"content\":\"x\"}]}", NULL, "messages[0].role", "missing_required_parameter");
    refused("{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", NULL, "messages[0].role", "invalid_value");
    refused("{\"messages\":[" USER ",{\"role\":\"tool\",\"content\":\"x\"}]}", NULL, "messages[1].tool_call_id",
            "missing_required_parameter");
    refused("{\"messages\":[{\"role\":\"user\"}]}", NULL, "messages[0].content", "missing_required_parameter");
    refused("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}", NULL, "messages[0].content[0].text",
            "missing_required_parameter");
    refused("{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}]}", NULL,
            "messages[0].content[0].image_url.url", "missing_required_parameter");
    refused("{\"messages\":[" USER ",{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\","
            "\"function\":{\"name\":\"f\"}}]}]}",
            NULL, "messages[1].tool_calls[0].id", "missing_required_parameter");
    refused("{\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"image_url\",\"image_url\":\"u\"}]}]}", NULL,
            "messages[0].content[0].type", "unsupported_parameter");
    refused("[1,2]", NULL, "", "invalid_type");
}

static void test_the_last_copy_of_a_name_counts_as_json_get_reads_it(void)
{
    json_value *o = tr("{\"messages\":[{\"role\":\"user\",\"content\":\"old\"}],\"n\":5,\"n\":1,"
                       "\"temperature\":1,\"messages\":[" USER "],\"temperature\":0}");
    CHECK(o != NULL);
    CHECK_EQ_STR(jstr(o, "input.0.content.0.text"), "hi");
    CHECK_EQ_INT(json_get_num(o, "temperature", -1), 0);
    size_t temps = 0;
    for (const json_value *m = o->child; m; m = m->next)
        temps += strcmp(m->key, "temperature") == 0;
    CHECK_EQ_INT(temps, 1);
    json_free(o);
}

static void test_an_unknown_member_named_like_a_translated_field_gives_way_only_when_it_would_clash(void)
{
    /* the system message makes instructions: the client's own goes */
    json_value *o = tr("{\"instructions\":\"mine\",\"messages\":[{\"role\":\"system\",\"content\":\"sys\"}," USER "],"
                       "\"input\":\"x\"}");
    CHECK_EQ_STR(jstr(o, "instructions"), "sys");
    CHECK_EQ_INT(jcount(o, "input"), 1);
    size_t n = 0;
    for (const json_value *m = o->child; m; m = m->next)
        n += strcmp(m->key, "instructions") == 0 || strcmp(m->key, "input") == 0;
    CHECK_EQ_INT(n, 2);
    json_free(o);
    /* nothing to clash with: it passes (the upstream judges it) */
    o = tr("{\"instructions\":\"mine\",\"reasoning\":{\"effort\":\"low\"},\"messages\":[" USER "]}");
    CHECK_EQ_STR(jstr(o, "instructions"), "mine");
    CHECK_EQ_STR(jstr(o, "reasoning.effort"), "low");
    json_free(o);
}

int main(void)
{
    RUN(test_leading_system_and_developer_messages_become_instructions_joined_by_a_blank_line);
    RUN(test_a_later_system_message_becomes_a_developer_input_message);
    RUN(test_user_parts_become_input_text_image_and_file_parts);
    RUN(test_assistant_text_and_refusal_become_output_text_and_refusal_parts);
    RUN(test_parallel_tool_calls_become_one_function_call_item_each);
    RUN(test_tool_messages_become_function_call_outputs_with_their_text);
    RUN(test_function_tools_lose_their_wrapper_and_say_strict_false_when_unsaid);
    RUN(test_tool_choice_forms_are_translated);
    RUN(test_response_format_json_schema_becomes_text_format_with_verbosity);
    RUN(test_reasoning_effort_becomes_a_reasoning_object);
    RUN(test_max_completion_tokens_wins_over_max_tokens_and_small_limits_rise_to_16);
    RUN(test_same_fields_and_unknown_fields_pass_unchanged_in_order);
    RUN(test_store_is_false_when_unsaid_since_chat_stores_nothing_unasked);
    RUN(test_stream_passes_and_stream_options_keep_only_obfuscation);
    RUN(test_n_above_one_is_refused_naming_n);
    RUN(test_every_refused_top_level_field_is_named_and_says_the_api);
    RUN(test_harmless_values_of_refused_fields_are_left_out);
    RUN(test_input_audio_part_is_refused_naming_its_path_unless_ignored);
    RUN(test_a_tool_that_is_not_a_function_is_refused_naming_tools_index_type_unless_ignored);
    RUN(test_function_role_and_legacy_assistant_fields_are_refused_unless_ignored);
    RUN(test_malformed_requests_are_refused_with_the_path_of_the_fault);
    RUN(test_the_last_copy_of_a_name_counts_as_json_get_reads_it);
    RUN(test_an_unknown_member_named_like_a_translated_field_gives_way_only_when_it_would_clash);
    return check_summary();
}
