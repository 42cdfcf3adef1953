/* test_answer.c: plain answers made the other dialect's (dialect_answer)
 * and upstream error bodies made OpenAI error objects
 * (dialect_error_body): answer.c and errors.c. */
#include "stream_check.h"

static const char *RESPONSE =
    "{\"id\":\"resp_abc\",\"object\":\"response\",\"created_at\":1700000000,\"status\":\"completed\","
    "\"error\":null,\"incomplete_details\":null,\"model\":\"gpt-5\",\"output\":["
    "{\"id\":\"rs_1\",\"type\":\"reasoning\",\"encrypted_content\":\"gAAAASECRET\",\"summary\":["
    "{\"type\":\"summary_text\",\"text\":\"First.\"},{\"type\":\"summary_text\",\"text\":\"Second.\"}]},"
    "{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":["
    "{\"type\":\"output_text\",\"annotations\":[],\"text\":\"Hello \"},{\"type\":\"output_text\",\"text\":\"world\"}]},"
    "{\"id\":\"fc_1\",\"type\":\"function_call\",\"status\":\"completed\",\"arguments\":\"{\\\"a\\\":1}\","
    "\"call_id\":\"call_1\",\"name\":\"f\"},"
    "{\"id\":\"fc_2\",\"type\":\"function_call\",\"status\":\"completed\",\"arguments\":\"{}\","
    "\"call_id\":\"call_2\",\"name\":\"g\"}],"
    "\"usage\":{\"input_tokens\":100,\"input_tokens_details\":{\"cached_tokens\":64},\"output_tokens\":40,"
    "\"output_tokens_details\":{\"reasoning_tokens\":16},\"total_tokens\":140}}";

static json_value *answer_of(api_kind up, api_kind client, const char *body)
{
    sbuf out = SBUF_INIT;
    int r = dialect_answer(up, client, body, strlen(body), &out);
    json_value *doc = r == 0 ? json_parse(out.p, out.len, NULL, 0) : NULL;
    if (r == 0 && !doc)
        fprintf(stderr, "  not JSON: %s\n", out.p);
    sbuf_free(&out);
    return doc;
}

static void test_response_becomes_a_chat_completion_with_text_tool_calls_reasoning_and_usage(void)
{
    json_value *c = answer_of(API_RESPONSES, API_CHAT, RESPONSE);
    CHECK(c != NULL);
    CHECK_EQ_STR(json_path_str(c, "id"), "chatcmpl-abc");
    CHECK_EQ_STR(json_path_str(c, "object"), "chat.completion");
    CHECK_EQ_INT(json_path_num(c, "created"), 1700000000);
    CHECK_EQ_STR(json_path_str(c, "model"), "gpt-5");
    CHECK_EQ_STR(json_path_str(c, "choices.0.message.role"), "assistant");
    CHECK_EQ_STR(json_path_str(c, "choices.0.message.content"), "Hello world");
    CHECK(json_path(c, "choices.0.message.refusal")->type == JSON_NULL);
    CHECK_EQ_STR(json_path_str(c, "choices.0.message.reasoning_content"), "First.\n\nSecond.");
    CHECK_EQ_STR(json_path_str(c, "choices.0.message.tool_calls.0.id"), "call_1");
    CHECK_EQ_STR(json_path_str(c, "choices.0.message.tool_calls.0.type"), "function");
    CHECK_EQ_STR(json_path_str(c, "choices.0.message.tool_calls.0.function.name"), "f");
    CHECK_EQ_STR(json_path_str(c, "choices.0.message.tool_calls.0.function.arguments"), "{\"a\":1}");
    CHECK_EQ_STR(json_path_str(c, "choices.0.message.tool_calls.1.id"), "call_2");
    CHECK_EQ_STR(json_path_str(c, "choices.0.finish_reason"), "tool_calls");
    CHECK(json_path(c, "choices.0.logprobs")->type == JSON_NULL);
    CHECK_EQ_INT(json_path_num(c, "usage.prompt_tokens"), 100);
    CHECK_EQ_INT(json_path_num(c, "usage.completion_tokens"), 40);
    CHECK_EQ_INT(json_path_num(c, "usage.total_tokens"), 140);
    CHECK_EQ_INT(json_path_num(c, "usage.prompt_tokens_details.cached_tokens"), 64);
    CHECK_EQ_INT(json_path_num(c, "usage.completion_tokens_details.reasoning_tokens"), 16);
    json_free(c);
}

static void test_encrypted_reasoning_never_reaches_a_chat_client(void)
{
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(dialect_answer(API_RESPONSES, API_CHAT, RESPONSE, strlen(RESPONSE), &out), 0);
    CHECK(strstr(out.p, "SECRET") == NULL);
    CHECK(strstr(out.p, "encrypted") == NULL);
    sbuf_free(&out);
}

static const char *COMPLETION =
    "{\"id\":\"chatcmpl-xyz\",\"object\":\"chat.completion\",\"created\":1700000001,\"model\":\"gpt-4o\","
    "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Sure.\",\"refusal\":null,"
    "\"reasoning_content\":\"Hmm.\",\"tool_calls\":[{\"id\":\"call_A\",\"type\":\"function\",\"function\":"
    "{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}},{\"type\":\"function\","
    "\"function\":{\"name\":\"noid\",\"arguments\":{\"x\":1}}}]},\"logprobs\":null,\"finish_reason\":\"tool_calls\"}],"
    "\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":20,\"total_tokens\":70,\"prompt_tokens_details\":"
    "{\"cached_tokens\":32},\"completion_tokens_details\":{\"reasoning_tokens\":8}}}";

static void test_chat_completion_becomes_a_response_with_items_ids_and_usage(void)
{
    json_value *r = answer_of(API_CHAT, API_RESPONSES, COMPLETION);
    CHECK(r != NULL);
    CHECK_EQ_STR(json_path_str(r, "id"), "resp_chatcmpl-xyz");
    CHECK_EQ_STR(json_path_str(r, "object"), "response");
    CHECK_EQ_INT(json_path_num(r, "created_at"), 1700000001);
    CHECK_EQ_STR(json_path_str(r, "status"), "completed");
    CHECK_EQ_STR(json_path_str(r, "model"), "gpt-4o");
    CHECK_EQ_STR(json_path_str(r, "output.0.type"), "reasoning");
    CHECK_EQ_STR(json_path_str(r, "output.0.id"), "rs_xyz");
    CHECK_EQ_STR(json_path_str(r, "output.0.summary.0.text"), "Hmm.");
    CHECK_EQ_STR(json_path_str(r, "output.1.type"), "message");
    CHECK_EQ_STR(json_path_str(r, "output.1.id"), "msg_xyz");
    CHECK_EQ_STR(json_path_str(r, "output.1.role"), "assistant");
    CHECK_EQ_STR(json_path_str(r, "output.1.content.0.type"), "output_text");
    CHECK_EQ_STR(json_path_str(r, "output.1.content.0.text"), "Sure.");
    CHECK_EQ_STR(json_path_str(r, "output.2.type"), "function_call");
    CHECK_EQ_STR(json_path_str(r, "output.2.id"), "fc_xyz_0");
    CHECK_EQ_STR(json_path_str(r, "output.2.call_id"), "call_A");
    CHECK_EQ_STR(json_path_str(r, "output.2.name"), "get_weather");
    CHECK_EQ_STR(json_path_str(r, "output.2.arguments"), "{\"city\":\"Paris\"}");
    /* a relay's call without an id gets one; arguments given as an object become its text */
    CHECK_EQ_STR(json_path_str(r, "output.3.call_id"), "call_xyz_1");
    CHECK_EQ_STR(json_path_str(r, "output.3.arguments"), "{\"x\":1}");
    CHECK_EQ_INT(json_path_num(r, "usage.input_tokens"), 50);
    CHECK_EQ_INT(json_path_num(r, "usage.input_tokens_details.cached_tokens"), 32);
    CHECK_EQ_INT(json_path_num(r, "usage.output_tokens"), 20);
    CHECK_EQ_INT(json_path_num(r, "usage.output_tokens_details.reasoning_tokens"), 8);
    CHECK_EQ_INT(json_path_num(r, "usage.total_tokens"), 70);
    CHECK(json_path(r, "error")->type == JSON_NULL);
    CHECK(json_path(r, "incomplete_details")->type == JSON_NULL);
    json_free(r);
}

static void test_ids_come_back_after_a_round_trip(void)
{
    sbuf a = SBUF_INIT, b = SBUF_INIT;
    CHECK_EQ_INT(dialect_answer(API_CHAT, API_RESPONSES, COMPLETION, strlen(COMPLETION), &a), 0);
    CHECK_EQ_INT(dialect_answer(API_RESPONSES, API_CHAT, a.p, a.len, &b), 0);
    json_value *c = json_parse(b.p, b.len, NULL, 0);
    CHECK_EQ_STR(json_path_str(c, "id"), "chatcmpl-xyz");
    CHECK_EQ_STR(json_path_str(c, "choices.0.message.content"), "Sure.");
    CHECK_EQ_STR(json_path_str(c, "choices.0.message.reasoning_content"), "Hmm.");
    CHECK_EQ_STR(json_path_str(c, "choices.0.message.tool_calls.0.id"), "call_A");
    CHECK_EQ_STR(json_path_str(c, "choices.0.finish_reason"), "tool_calls");
    json_free(c);
    sbuf_free(&a);
    sbuf_free(&b);
}

static void test_a_refusal_goes_both_ways(void)
{
    const char *rsp = "{\"id\":\"resp_r\",\"object\":\"response\",\"status\":\"completed\",\"model\":\"m\",\"output\":"
                      "[{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"refusal\","
                      "\"refusal\":\"I can't help with that.\"}]}]}";
    json_value *c = answer_of(API_RESPONSES, API_CHAT, rsp);
    CHECK(json_path(c, "choices.0.message.content")->type == JSON_NULL);
    CHECK_EQ_STR(json_path_str(c, "choices.0.message.refusal"), "I can't help with that.");
    CHECK_EQ_STR(json_path_str(c, "choices.0.finish_reason"), "stop");
    CHECK(json_path(c, "usage") == NULL);
    json_free(c);
    const char *chat = "{\"id\":\"chatcmpl-r\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
                       "\"content\":null,\"refusal\":\"No.\"},\"finish_reason\":\"stop\"}]}";
    json_value *r = answer_of(API_CHAT, API_RESPONSES, chat);
    CHECK_EQ_STR(json_path_str(r, "output.0.content.0.type"), "refusal");
    CHECK_EQ_STR(json_path_str(r, "output.0.content.0.refusal"), "No.");
    CHECK(json_path(r, "usage")->type == JSON_NULL);
    json_free(r);
}

static void test_incomplete_maps_to_length_or_content_filter_and_back(void)
{
    const char *rsp = "{\"id\":\"resp_i\",\"object\":\"response\",\"status\":\"incomplete\",\"incomplete_details\":"
                      "{\"reason\":\"max_output_tokens\"},\"output\":[]}";
    json_value *c = answer_of(API_RESPONSES, API_CHAT, rsp);
    CHECK_EQ_STR(json_path_str(c, "choices.0.finish_reason"), "length");
    CHECK_EQ_STR(json_path_str(c, "choices.0.message.content"), "");
    json_free(c);
    rsp = "{\"id\":\"resp_i\",\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"content_filter\"},"
          "\"output\":[]}";
    c = answer_of(API_RESPONSES, API_CHAT, rsp);
    CHECK_EQ_STR(json_path_str(c, "choices.0.finish_reason"), "content_filter");
    json_free(c);
    const char *chat = "{\"id\":\"x\",\"choices\":[{\"index\":0,\"message\":{\"content\":\"cut\"},"
                       "\"finish_reason\":\"length\"}]}";
    json_value *r = answer_of(API_CHAT, API_RESPONSES, chat);
    CHECK_EQ_STR(json_path_str(r, "status"), "incomplete");
    CHECK_EQ_STR(json_path_str(r, "incomplete_details.reason"), "max_output_tokens");
    json_free(r);
    chat = "{\"id\":\"x\",\"choices\":[{\"index\":0,\"message\":{\"content\":\"\"},\"finish_reason\":\"content_filter\"}]}";
    r = answer_of(API_CHAT, API_RESPONSES, chat);
    CHECK_EQ_STR(json_path_str(r, "status"), "incomplete");
    CHECK_EQ_STR(json_path_str(r, "incomplete_details.reason"), "content_filter");
    CHECK_EQ_INT(json_path(r, "output")->count, 0);
    json_free(r);
}

static void test_chat_content_given_as_parts_is_joined(void)
{
    const char *chat = "{\"id\":\"x\",\"choices\":[{\"index\":0,\"message\":{\"content\":[{\"type\":\"text\","
                       "\"text\":\"a\"},{\"type\":\"image_url\"},{\"type\":\"text\",\"text\":\"b\"}]},"
                       "\"finish_reason\":\"stop\"}]}";
    json_value *r = answer_of(API_CHAT, API_RESPONSES, chat);
    CHECK_EQ_STR(json_path_str(r, "output.0.content.0.text"), "ab");
    json_free(r);
}

static void test_the_same_dialect_is_copied_as_it_is(void)
{
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(dialect_answer(API_RESPONSES, API_RESPONSES, RESPONSE, strlen(RESPONSE), &out), 0);
    CHECK_EQ_STR(out.p, RESPONSE);
    sbuf_reset(&out);
    CHECK_EQ_INT(dialect_answer(API_CHAT, API_CHAT, COMPLETION, strlen(COMPLETION), &out), 0);
    CHECK_EQ_STR(out.p, COMPLETION);
    sbuf_free(&out);
}

static void test_a_body_that_is_no_answer_is_refused_and_out_is_left_as_it_was(void)
{
    const char *bad[] = {
        "{\"error\":{\"message\":\"x\",\"type\":\"server_error\"}}",
        "{\"id\":\"resp_f\",\"object\":\"response\",\"status\":\"failed\",\"output\":[],\"error\":{\"code\":\"x\"}}",
        "not json",
        "[1,2]",
        "{\"object\":\"chat.completion\",\"choices\":[]}",
        "{\"choices\":[{\"message\":{}}],\"error\":{\"message\":\"x\"}}",
        "{\"object\":\"list\",\"output\":[]}",
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (int up = 0; up < 2; up++)
            for (int cl = 0; cl < 2; cl++) {
                sbuf out = SBUF_INIT;
                sbuf_puts(&out, "kept");
                int r = dialect_answer((api_kind)up, (api_kind)cl, bad[i], strlen(bad[i]), &out);
                /* the failed response and the chat with an error are no answers of either dialect;
                 * "choices":[] and the rest are no answers at all */
                CHECK_EQ_INT(r, -1);
                CHECK_EQ_STR(out.p, "kept");
                sbuf_free(&out);
            }
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(dialect_answer(API_RESPONSES, API_CHAT, COMPLETION, strlen(COMPLETION), &out), -1);
    CHECK_EQ_INT(dialect_answer(API_CHAT, API_RESPONSES, RESPONSE, strlen(RESPONSE), &out), -1);
    CHECK_EQ_INT(out.len, 0);
    sbuf_free(&out);
}

/* ---------- error bodies ---------- */

static json_value *error_of(int status, const char *body, size_t len)
{
    sbuf out = SBUF_INIT;
    dialect_error_body(status, body, len, &out);
    CHECK(out.len <= 16u << 10);
    json_value *doc = json_parse(out.p, out.len, NULL, 0);
    if (!doc)
        fprintf(stderr, "  not JSON: %s\n", out.p);
    CHECK(doc != NULL);
    CHECK(json_path(doc, "error.message") && json_path(doc, "error.message")->type == JSON_STRING);
    CHECK(json_path(doc, "error.type") && json_path(doc, "error.type")->type == JSON_STRING);
    CHECK(json_path(doc, "error.code") != NULL);
    CHECK(json_path(doc, "error.param") != NULL);
    sbuf_free(&out);
    return doc;
}

static void test_an_openai_error_object_is_copied_as_it_is(void)
{
    const char *b = "{\"error\":{\"message\":\"Rate limit reached\",\"type\":\"requests\",\"param\":null,"
                    "\"code\":\"rate_limit_exceeded\"}}";
    sbuf out = SBUF_INIT;
    dialect_error_body(429, b, strlen(b), &out);
    CHECK_EQ_STR(out.p, b);
    sbuf_free(&out);
}

static void test_the_backends_detail_text_keeps_its_message_with_a_code_from_the_status(void)
{
    const char *b = "{\"detail\":\"Stream must be set to true\"}";
    json_value *e = error_of(400, b, strlen(b));
    CHECK_EQ_STR(json_path_str(e, "error.message"), "Stream must be set to true");
    CHECK_EQ_STR(json_path_str(e, "error.type"), "invalid_request_error");
    CHECK_EQ_STR(json_path_str(e, "error.code"), "invalid_request");
    CHECK(json_path(e, "error.param")->type == JSON_NULL);
    json_free(e);
}

static void test_the_backends_detail_code_is_kept(void)
{
    const char *b = "{\"detail\":{\"code\":\"deactivated_workspace\"}}";
    json_value *e = error_of(402, b, strlen(b));
    CHECK_EQ_STR(json_path_str(e, "error.code"), "deactivated_workspace");
    CHECK(strstr(json_path_str(e, "error.message"), "deactivated_workspace") != NULL);
    json_free(e);
    b = "{\"detail\":{\"code\":\"usage_limit_reached\",\"message\":\"You've hit your usage limit\"}}";
    e = error_of(429, b, strlen(b));
    CHECK_EQ_STR(json_path_str(e, "error.code"), "usage_limit_reached");
    CHECK_EQ_STR(json_path_str(e, "error.message"), "You've hit your usage limit");
    CHECK_EQ_STR(json_path_str(e, "error.type"), "rate_limit_error");
    json_free(e);
}

static void test_the_type_comes_from_the_status_when_the_body_gives_none(void)
{
    struct {
        int status;
        const char *type;
    } cases[] = {{400, "invalid_request_error"}, {401, "authentication_error"}, {403, "permission_error"},
                 {404, "not_found_error"},       {429, "rate_limit_error"},     {500, "server_error"},
                 {502, "server_error"},          {503, "server_error"},         {409, "invalid_request_error"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *b = "{\"detail\":\"x\"}";
        json_value *e = error_of(cases[i].status, b, strlen(b));
        CHECK_EQ_STR(json_path_str(e, "error.type"), cases[i].type);
        json_free(e);
    }
    const char *q = "{\"error\":{\"message\":\"You exceeded your current quota\",\"code\":\"insufficient_quota\"},"
                    "\"pad\":\"" /* too large to copy: written again */;
    sbuf big = SBUF_INIT;
    sbuf_puts(&big, q);
    for (int i = 0; i < 20000; i++)
        sbuf_puts(&big, "x");
    sbuf_puts(&big, "\"}");
    json_value *e = error_of(429, big.p, big.len);
    CHECK_EQ_STR(json_path_str(e, "error.type"), "insufficient_quota");
    CHECK_EQ_STR(json_path_str(e, "error.code"), "insufficient_quota");
    CHECK_EQ_STR(json_path_str(e, "error.message"), "You exceeded your current quota");
    json_free(e);
    sbuf_free(&big);
}

static void test_html_and_text_are_quoted_in_the_message(void)
{
    const char *html = "<!DOCTYPE html>\n<html><head><title>404 Not\n  Found</title></head><body>nginx</body></html>";
    json_value *e = error_of(404, html, strlen(html));
    CHECK_EQ_STR(json_path_str(e, "error.message"), "the upstream answered 404: 404 Not Found");
    CHECK_EQ_STR(json_path_str(e, "error.type"), "not_found_error");
    CHECK_EQ_STR(json_path_str(e, "error.code"), "not_found");
    json_free(e);
    const char *text = "upstream connect error\x1b[31m \"quoted\"\xff";
    e = error_of(503, text, strlen(text));
    CHECK(strstr(json_path_str(e, "error.message"), "\x1b[31m \"quoted\"\xEF\xBF\xBD") != NULL);
    json_free(e);
    e = error_of(500, "", 0);
    CHECK_EQ_STR(json_path_str(e, "error.message"), "the upstream answered 500 with no error message");
    json_free(e);
    e = error_of(502, NULL, 0);
    CHECK_EQ_STR(json_path_str(e, "error.type"), "server_error");
    json_free(e);
}

static void test_a_huge_body_gives_at_most_16_kib_of_valid_json(void)
{
    sbuf big = SBUF_INIT;
    sbuf_puts(&big, "{\"detail\":\"");
    for (int i = 0; i < 100000; i++)
        sbuf_puts(&big, i % 7 ? "\\u0001" : "\\u00e9"); /* each escaped again on the way out */
    sbuf_puts(&big, "\"}");
    json_value *e = error_of(400, big.p, big.len);
    CHECK(json_path_str(e, "error.message") != NULL);
    json_free(e);
    sbuf_reset(&big);
    for (int i = 0; i < 3000000; i++)
        sbuf_append(&big, i % 3 ? "\x01" : "\xe2\x82", i % 3 ? 1 : 2); /* text, control bytes, cut characters */
    e = error_of(500, big.p, big.len);
    json_free(e);
    sbuf_free(&big);
}

static void test_errors_of_other_shapes_are_read(void)
{
    const char *b = "{\"error\":\"model overloaded\"}";
    json_value *e = error_of(503, b, strlen(b));
    CHECK_EQ_STR(json_path_str(e, "error.message"), "model overloaded");
    CHECK_EQ_STR(json_path_str(e, "error.type"), "server_error");
    json_free(e);
    b = "{\"type\":\"error\",\"sequence_number\":3,\"code\":\"rate_limit_exceeded\",\"message\":\"slow down\","
        "\"param\":null}";
    e = error_of(200, b, strlen(b)); /* an error inside a 2xx: its status from what it says */
    CHECK_EQ_STR(json_path_str(e, "error.type"), "rate_limit_error");
    CHECK_EQ_STR(json_path_str(e, "error.code"), "rate_limit_exceeded");
    CHECK_EQ_STR(json_path_str(e, "error.message"), "slow down");
    json_free(e);
    b = "{\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\","
        "\"message\":\"boom\"}}}";
    e = error_of(500, b, strlen(b));
    CHECK_EQ_STR(json_path_str(e, "error.message"), "boom");
    CHECK_EQ_STR(json_path_str(e, "error.code"), "server_error");
    json_free(e);
    b = "{\"detail\":[{\"loc\":[\"body\",\"model\"],\"msg\":\"field required\",\"type\":\"value_error.missing\"}]}";
    e = error_of(422, b, strlen(b));
    CHECK_EQ_STR(json_path_str(e, "error.message"), "field required");
    CHECK_EQ_STR(json_path_str(e, "error.type"), "invalid_request_error");
    json_free(e);
    b = "{\"error\":{\"message\":\"bad\",\"code\":429,\"param\":\"model\"},\"x\":\"";
    sbuf big = SBUF_INIT;
    sbuf_puts(&big, b);
    for (int i = 0; i < 17000; i++)
        sbuf_puts(&big, "y");
    sbuf_puts(&big, "\"}");
    e = error_of(429, big.p, big.len);
    CHECK_EQ_STR(json_path_str(e, "error.code"), "429");
    CHECK_EQ_STR(json_path_str(e, "error.param"), "model");
    json_free(e);
    sbuf_free(&big);
}

int main(void)
{
    RUN(test_response_becomes_a_chat_completion_with_text_tool_calls_reasoning_and_usage);
    RUN(test_encrypted_reasoning_never_reaches_a_chat_client);
    RUN(test_chat_completion_becomes_a_response_with_items_ids_and_usage);
    RUN(test_ids_come_back_after_a_round_trip);
    RUN(test_a_refusal_goes_both_ways);
    RUN(test_incomplete_maps_to_length_or_content_filter_and_back);
    RUN(test_chat_content_given_as_parts_is_joined);
    RUN(test_the_same_dialect_is_copied_as_it_is);
    RUN(test_a_body_that_is_no_answer_is_refused_and_out_is_left_as_it_was);
    RUN(test_an_openai_error_object_is_copied_as_it_is);
    RUN(test_the_backends_detail_text_keeps_its_message_with_a_code_from_the_status);
    RUN(test_the_backends_detail_code_is_kept);
    RUN(test_the_type_comes_from_the_status_when_the_body_gives_none);
    RUN(test_html_and_text_are_quoted_in_the_message);
    RUN(test_a_huge_body_gives_at_most_16_kib_of_valid_json);
    RUN(test_errors_of_other_shapes_are_read);
    return check_summary();
}
