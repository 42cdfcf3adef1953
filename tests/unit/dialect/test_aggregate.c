/* test_aggregate.c: an upstream's stream gathered into one plain answer for
 * a client that asked no stream (aggregate.c through dialect_stream_* with
 * opts.aggregate), in each of the four pairs, fed whole and in every cut. */
#include "stream_check.h"

static const dialect_stream_opts AGG = {.aggregate = 1, .model = "asked-model"};

#define EV(type, json) "event: " type "\ndata: " json "\n\n"

static json_value *aggregate(api_kind up, api_kind client, const char *in, stream_run *r)
{
    CHECK(stream_run_cuts(up, client, &AGG, in, r));
    json_value *doc = json_parse(r->out.p, r->out.len, NULL, 0);
    if (r->out.len && !doc)
        fprintf(stderr, "  not JSON: %s\n", r->out.p);
    return doc;
}

static void test_a_chatgpt_stream_with_an_empty_completed_output_is_answered_from_output_item_done(void)
{
    stream_run r;
    json_value *a = aggregate(API_RESPONSES, API_RESPONSES, RSP_FULL, &r);
    CHECK(a != NULL);
    CHECK_EQ_INT(r.ended, 1);
    CHECK_EQ_INT(r.failed, 0);
    CHECK_EQ_INT(r.output_sent, 1);
    CHECK_EQ_STR(json_path_str(a, "id"), "resp_abc");
    CHECK_EQ_STR(json_path_str(a, "object"), "response");
    CHECK_EQ_STR(json_path_str(a, "status"), "completed");
    CHECK_EQ_STR(json_path_str(a, "model"), "gpt-5-codex");
    CHECK_EQ_INT(json_path_num(a, "created_at"), 1700000000);
    CHECK_EQ_INT(json_path(a, "output")->count, 4);
    CHECK_EQ_STR(json_path_str(a, "output.0.id"), "rs_1");
    CHECK_EQ_STR(json_path_str(a, "output.0.encrypted_content"), "gAAA"); /* a Responses client keeps it */
    CHECK_EQ_STR(json_path_str(a, "output.1.content.0.text"), "Let me \"check\" both \xc3\xa9\n");
    CHECK_EQ_STR(json_path_str(a, "output.2.call_id"), "call_A");
    CHECK_EQ_STR(json_path_str(a, "output.3.arguments"), "{\"tz\":\"CET\"}");
    CHECK_EQ_INT(json_path_num(a, "usage.input_tokens_details.cached_tokens"), 1024);
    CHECK_EQ_INT(json_path_num(a, "usage.output_tokens_details.reasoning_tokens"), 128);
    json_free(a);
    sbuf_free(&r.out);
}

static void test_items_are_put_in_output_index_order_whatever_order_they_finish_in(void)
{
    const char *in =
        EV("response.output_item.done", "{\"type\":\"response.output_item.done\",\"output_index\":2,\"item\":"
           "{\"id\":\"c\",\"type\":\"function_call\"}}")
        EV("response.output_item.done", "{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":"
           "{\"id\":\"a\",\"type\":\"reasoning\"}}")
        EV("response.output_item.done", "{\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":"
           "{\"id\":\"b0\",\"type\":\"message\"}}")
        EV("response.output_item.done", "{\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":"
           "{\"id\":\"b\",\"type\":\"message\"}}")
        EV("response.completed", "{\"type\":\"response.completed\",\"response\":{\"id\":\"resp_o\",\"status\":"
           "\"completed\",\"output\":[]}}");
    stream_run r;
    json_value *a = aggregate(API_RESPONSES, API_RESPONSES, in, &r);
    CHECK_EQ_INT(json_path(a, "output")->count, 3);
    CHECK_EQ_STR(json_path_str(a, "output.0.id"), "a");
    CHECK_EQ_STR(json_path_str(a, "output.1.id"), "b"); /* a later item at an index replaces it */
    CHECK_EQ_STR(json_path_str(a, "output.2.id"), "c");
    CHECK_EQ_STR(json_path_str(a, "model"), "asked-model"); /* the upstream named none */
    json_free(a);
    sbuf_free(&r.out);
}

static void test_the_completed_events_output_is_used_when_it_has_items(void)
{
    const char *in =
        EV("response.output_item.done", "{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":"
           "{\"id\":\"from_done\",\"type\":\"message\"}}")
        EV("response.completed", "{\"type\":\"response.completed\",\"response\":{\"id\":\"resp_o\",\"model\":\"m\","
           "\"status\":\"completed\",\"output\":[{\"id\":\"from_completed\",\"type\":\"message\"}]}}");
    stream_run r;
    json_value *a = aggregate(API_RESPONSES, API_RESPONSES, in, &r);
    CHECK_EQ_INT(json_path(a, "output")->count, 1);
    CHECK_EQ_STR(json_path_str(a, "output.0.id"), "from_completed");
    CHECK_EQ_STR(json_path_str(a, "model"), "m");
    json_free(a);
    sbuf_free(&r.out);
}

static void test_an_aggregated_responses_stream_answers_a_chat_client(void)
{
    stream_run r;
    json_value *a = aggregate(API_RESPONSES, API_CHAT, RSP_FULL, &r);
    CHECK(a != NULL);
    CHECK_EQ_STR(json_path_str(a, "id"), "chatcmpl-abc");
    CHECK_EQ_STR(json_path_str(a, "object"), "chat.completion");
    CHECK_EQ_STR(json_path_str(a, "choices.0.message.content"), "Let me \"check\" both \xc3\xa9\n");
    CHECK_EQ_STR(json_path_str(a, "choices.0.message.reasoning_content"), "**Plan**\n\nCheck weather.");
    CHECK_EQ_STR(json_path_str(a, "choices.0.message.tool_calls.1.function.name"), "get_time");
    CHECK_EQ_STR(json_path_str(a, "choices.0.finish_reason"), "tool_calls");
    CHECK_EQ_INT(json_path_num(a, "usage.prompt_tokens_details.cached_tokens"), 1024);
    CHECK(strstr(r.out.p, "gAAA") == NULL);
    json_free(a);
    sbuf_free(&r.out);
}

static void test_an_aggregated_chat_stream_is_the_chat_completion_the_sdks_would_build(void)
{
    stream_run r;
    const char *in = "data: {\"id\":\"chatcmpl-xyz\",\"created\":7,\"model\":\"gpt-4o\",\"system_fingerprint\":"
                     "\"fp_1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n" CHAT_FULL;
    json_value *a = aggregate(API_CHAT, API_CHAT, in, &r);
    CHECK(a != NULL);
    CHECK_EQ_STR(json_path_str(a, "id"), "chatcmpl-xyz");
    CHECK_EQ_INT(json_path_num(a, "created"), 7);
    CHECK_EQ_STR(json_path_str(a, "system_fingerprint"), "fp_1");
    CHECK_EQ_STR(json_path_str(a, "choices.0.message.content"), "Hi \"there\" \xc3\xa9");
    CHECK_EQ_STR(json_path_str(a, "choices.0.message.reasoning_content"), "Think hard.");
    CHECK_EQ_STR(json_path_str(a, "choices.0.message.tool_calls.0.id"), "call_A");
    CHECK_EQ_STR(json_path_str(a, "choices.0.message.tool_calls.0.function.arguments"), "{\"city\":\"Paris\"}");
    CHECK_EQ_STR(json_path_str(a, "choices.0.message.tool_calls.1.function.arguments"), "{\"tz\":\"CET\"}");
    CHECK_EQ_STR(json_path_str(a, "choices.0.finish_reason"), "tool_calls");
    CHECK_EQ_INT(json_path_num(a, "usage.completion_tokens_details.reasoning_tokens"), 8);
    json_free(a);
    sbuf_free(&r.out);
}

static void test_an_aggregated_chat_stream_equals_the_last_event_of_the_translated_stream(void)
{
    stream_run agg, streamed;
    json_value *a = aggregate(API_CHAT, API_RESPONSES, CHAT_FULL, &agg);
    CHECK(a != NULL);
    const dialect_stream_opts plain = {.model = "asked-model"};
    stream_run_go(API_CHAT, API_RESPONSES, &plain, CHAT_FULL, strlen(CHAT_FULL), 0, 0, &streamed);
    json_value *done = client_last(&streamed.out, "response.completed");
    sbuf want = SBUF_INIT;
    json_write(&want, json_path(done, "response"));
    CHECK_EQ_STR(agg.out.p, want.p);
    sbuf_free(&want);
    json_free(done);
    json_free(a);
    sbuf_free(&agg.out);
    sbuf_free(&streamed.out);
}

static void test_a_failed_stream_aggregates_into_an_error_with_its_status(void)
{
    stream_run r;
    const char *in = RSP_CREATED RSP_MESSAGE
        EV("response.failed", "{\"type\":\"response.failed\",\"response\":{\"id\":\"resp_abc\",\"status\":\"failed\","
           "\"error\":{\"code\":\"rate_limit_exceeded\",\"message\":\"Too many\"}}}");
    for (int client = 0; client < 2; client++) {
        json_value *a = aggregate(API_RESPONSES, (api_kind)client, in, &r);
        CHECK_EQ_INT(r.ended, 1);
        CHECK_EQ_INT(r.failed, 1);
        CHECK_EQ_INT(r.status, 429);
        CHECK_EQ_INT(r.output_sent, 0);
        CHECK_EQ_STR(json_path_str(a, "error.message"), "Too many");
        CHECK_EQ_STR(json_path_str(a, "error.type"), "rate_limit_error");
        CHECK_EQ_STR(json_path_str(a, "error.code"), "rate_limit_exceeded");
        json_free(a);
        sbuf_free(&r.out);
    }
    in = RSP_CREATED EV("error", "{\"type\":\"error\",\"code\":\"context_length_exceeded\",\"message\":\"Too long\","
                        "\"param\":\"input\"}");
    json_value *a = aggregate(API_RESPONSES, API_RESPONSES, in, &r);
    CHECK_EQ_INT(r.status, 400);
    CHECK_EQ_STR(json_path_str(a, "error.type"), "invalid_request_error");
    CHECK_EQ_STR(json_path_str(a, "error.param"), "input");
    json_free(a);
    sbuf_free(&r.out);
    in = "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"par\"}}]}\n\n"
         "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\",\"code\":null}}\n\n";
    for (int client = 0; client < 2; client++) {
        a = aggregate(API_CHAT, (api_kind)client, in, &r);
        CHECK_EQ_INT(r.failed, 1);
        CHECK_EQ_INT(r.status, 500);
        CHECK_EQ_STR(json_path_str(a, "error.message"), "overloaded");
        CHECK_EQ_STR(json_path_str(a, "error.type"), "server_error");
        json_free(a);
        sbuf_free(&r.out);
    }
}

static void test_a_stream_cut_before_its_terminal_event_gives_no_answer(void)
{
    stream_run r;
    const char *in[] = {RSP_CREATED RSP_MESSAGE, CHAT_HEAD "{\"content\":\"x\"}" CHAT_TAIL};
    for (int up = 0; up < 2; up++)
        for (int client = 0; client < 2; client++) {
            CHECK(stream_run_cuts((api_kind)up, (api_kind)client, &AGG, in[up == API_CHAT], &r));
            CHECK_EQ_INT(r.ended, 0);
            CHECK_EQ_INT(r.failed, 0);
            CHECK_EQ_INT(r.output_sent, 0);
            CHECK_EQ_INT(r.out.len, 0);
            sbuf_free(&r.out);
        }
}

static void test_an_incomplete_stream_aggregates_into_an_incomplete_answer(void)
{
    const char *in = RSP_CREATED RSP_MESSAGE
        EV("response.incomplete", "{\"type\":\"response.incomplete\",\"response\":{\"id\":\"resp_abc\",\"status\":"
           "\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"output\":[]}}");
    stream_run r;
    json_value *a = aggregate(API_RESPONSES, API_RESPONSES, in, &r);
    CHECK_EQ_STR(json_path_str(a, "status"), "incomplete");
    CHECK_EQ_STR(json_path_str(a, "incomplete_details.reason"), "max_output_tokens");
    CHECK_EQ_INT(json_path(a, "output")->count, 1);
    json_free(a);
    sbuf_free(&r.out);
    a = aggregate(API_RESPONSES, API_CHAT, in, &r);
    CHECK_EQ_STR(json_path_str(a, "choices.0.finish_reason"), "length");
    json_free(a);
    sbuf_free(&r.out);
    in = CHAT_HEAD "{\"content\":\"cut\"}" CHAT_TAIL "data: {\"id\":\"chatcmpl-xyz\",\"choices\":[{\"index\":0,"
                   "\"delta\":{},\"finish_reason\":\"length\"}]}\n\n";
    a = aggregate(API_CHAT, API_RESPONSES, in, &r); /* no [DONE]: the finish_reason made it whole */
    CHECK_EQ_INT(r.ended, 1);
    CHECK_EQ_STR(json_path_str(a, "status"), "incomplete");
    CHECK_EQ_STR(json_path_str(a, "output.0.content.0.text"), "cut");
    json_free(a);
    sbuf_free(&r.out);
}

static void test_an_answer_larger_than_the_budget_is_a_502_not_a_cut_answer(void)
{
    for (int up = 0; up < 2; up++) {
        dialect_stream *s = dialect_stream_new((api_kind)up, API_RESPONSES, &AGG);
        dialect_stream_set_budget(s, 300);
        sbuf out = SBUF_INIT;
        const char *in = up == API_RESPONSES ? RSP_FULL : CHAT_FULL;
        dialect_stream_feed(s, in, strlen(in), &out);
        CHECK_EQ_INT(dialect_stream_end(s, &out), 1);
        int status = 0;
        CHECK_EQ_INT(dialect_stream_failed(s, &status), 1);
        CHECK_EQ_INT(status, 502);
        CHECK_EQ_INT(dialect_stream_output_sent(s), 0);
        json_value *a = json_parse(out.p, out.len, NULL, 0);
        CHECK_EQ_STR(json_path_str(a, "error.code"), "answer_too_large");
        json_free(a);
        dialect_stream_free(s);
        sbuf_free(&out);
    }
}

static void test_a_terminal_event_that_is_no_answer_is_a_502_for_a_chat_client(void)
{
    const char *in = EV("response.completed", "{\"type\":\"response.completed\",\"response\":{\"object\":\"list\"}}");
    stream_run r;
    json_value *a = aggregate(API_RESPONSES, API_CHAT, in, &r);
    CHECK_EQ_INT(r.failed, 1);
    CHECK_EQ_INT(r.status, 502);
    CHECK_EQ_STR(json_path_str(a, "error.code"), "invalid_upstream_answer");
    json_free(a);
    sbuf_free(&r.out);
    /* a completed event without its response: an answer of ours around the items */
    in = EV("response.completed", "{\"type\":\"response.completed\"}");
    a = aggregate(API_RESPONSES, API_CHAT, in, &r);
    CHECK_EQ_INT(r.failed, 0);
    CHECK_EQ_STR(json_path_str(a, "model"), "asked-model");
    json_free(a);
    sbuf_free(&r.out);
}

int main(void)
{
    RUN(test_a_chatgpt_stream_with_an_empty_completed_output_is_answered_from_output_item_done);
    RUN(test_items_are_put_in_output_index_order_whatever_order_they_finish_in);
    RUN(test_the_completed_events_output_is_used_when_it_has_items);
    RUN(test_an_aggregated_responses_stream_answers_a_chat_client);
    RUN(test_an_aggregated_chat_stream_is_the_chat_completion_the_sdks_would_build);
    RUN(test_an_aggregated_chat_stream_equals_the_last_event_of_the_translated_stream);
    RUN(test_a_failed_stream_aggregates_into_an_error_with_its_status);
    RUN(test_a_stream_cut_before_its_terminal_event_gives_no_answer);
    RUN(test_an_incomplete_stream_aggregates_into_an_incomplete_answer);
    RUN(test_an_answer_larger_than_the_budget_is_a_502_not_a_cut_answer);
    RUN(test_a_terminal_event_that_is_no_answer_is_a_502_for_a_chat_client);
    return check_summary();
}
