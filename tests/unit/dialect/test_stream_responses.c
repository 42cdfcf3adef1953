/* test_stream_responses.c: a Chat Completions stream made a Responses
 * stream, chunk by chunk (stream_responses.c through dialect_stream_*).
 * Every stream is fed whole and in every cut, which must give the same
 * bytes; every event's data parses, sequence numbers count from 0 and the
 * event: name is the data's type. */
#include "stream_check.h"

static const dialect_stream_opts OPTS = {.model = "asked-model"};

#define CHUNK(delta, finish)                                                                                         \
    "data: {\"id\":\"chatcmpl-xyz\",\"object\":\"chat.completion.chunk\",\"created\":1700000001,\"model\":"       \
    "\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":" delta ",\"logprobs\":null,\"finish_reason\":" finish "}]}\n\n"

/* Runs in every cut and checks the client's events are sound. */
static void run_sound(const char *in, stream_run *r, client_events *c)
{
    CHECK(stream_run_cuts(API_CHAT, API_RESPONSES, &OPTS, in, r));
    client_read(r->out.p, r->out.len, 1, c);
    CHECK_EQ_INT(c->bad_json, 0);
    CHECK_EQ_INT(c->bad_seq, 0);
    CHECK_EQ_INT(c->bad_name, 0);
    CHECK_EQ_INT(c->done, 0);
}

static void test_a_chat_stream_becomes_the_whole_responses_event_sequence(void)
{
    stream_run r;
    client_events c;
    run_sound(CHAT_FULL, &r, &c);
    CHECK_EQ_INT(r.ended, 1);
    CHECK_EQ_INT(r.output_sent, 1);
    CHECK_EQ_STR(c.types.p, "response.created\n"
                            "response.in_progress\n"
                            "response.output_item.added\n"
                            "response.reasoning_summary_part.added\n"
                            "response.reasoning_summary_text.delta\n"
                            "response.reasoning_summary_text.delta\n"
                            "response.reasoning_summary_text.done\n"
                            "response.reasoning_summary_part.done\n"
                            "response.output_item.done\n"
                            "response.output_item.added\n"
                            "response.content_part.added\n"
                            "response.output_text.delta\n"
                            "response.output_text.delta\n"
                            "response.output_text.done\n"
                            "response.content_part.done\n"
                            "response.output_item.done\n"
                            "response.output_item.added\n"
                            "response.function_call_arguments.delta\n"
                            "response.output_item.added\n"
                            "response.function_call_arguments.delta\n"
                            "response.function_call_arguments.delta\n"
                            "response.function_call_arguments.delta\n"
                            "response.function_call_arguments.done\n"
                            "response.output_item.done\n"
                            "response.function_call_arguments.done\n"
                            "response.output_item.done\n"
                            "response.completed\n");
    json_value *created = client_event(&r.out, 0);
    CHECK_EQ_STR(json_path_str(created, "response.id"), "resp_chatcmpl-xyz");
    CHECK_EQ_STR(json_path_str(created, "response.status"), "in_progress");
    CHECK_EQ_STR(json_path_str(created, "response.model"), "gpt-4o");
    CHECK_EQ_INT(json_path_num(created, "response.created_at"), 1700000001);
    json_free(created);
    json_value *done = client_last(&r.out, "response.completed");
    CHECK_EQ_STR(json_path_str(done, "response.id"), "resp_chatcmpl-xyz");
    CHECK_EQ_STR(json_path_str(done, "response.status"), "completed");
    CHECK_EQ_INT(json_path(done, "response.output")->count, 4);
    CHECK_EQ_STR(json_path_str(done, "response.output.0.summary.0.text"), "Think hard.");
    CHECK_EQ_STR(json_path_str(done, "response.output.1.content.0.text"), "Hi \"there\" \xc3\xa9");
    CHECK_EQ_STR(json_path_str(done, "response.output.2.arguments"), "{\"city\":\"Paris\"}");
    CHECK_EQ_STR(json_path_str(done, "response.output.2.call_id"), "call_A");
    CHECK_EQ_STR(json_path_str(done, "response.output.3.arguments"), "{\"tz\":\"CET\"}");
    CHECK_EQ_STR(json_path_str(done, "response.output.3.name"), "get_time");
    CHECK_EQ_INT(json_path_num(done, "response.usage.input_tokens"), 50);
    CHECK_EQ_INT(json_path_num(done, "response.usage.input_tokens_details.cached_tokens"), 32);
    CHECK_EQ_INT(json_path_num(done, "response.usage.output_tokens"), 20);
    CHECK_EQ_INT(json_path_num(done, "response.usage.output_tokens_details.reasoning_tokens"), 8);
    CHECK_EQ_INT(json_path_num(done, "response.usage.total_tokens"), 70);
    json_free(done);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
}

static void test_ids_and_indexes_stay_the_same_for_each_item(void)
{
    stream_run r;
    client_events c;
    run_sound(CHAT_FULL, &r, &c);
    /* every event naming fc_xyz_1 gives output_index 3; the deltas of each call add up */
    sbuf a0 = SBUF_INIT, a1 = SBUF_INIT;
    for (int i = 0; i < c.n; i++) {
        json_value *d = client_event(&r.out, i);
        const char *item = json_path_str(d, "item_id");
        const char *type = json_path_str(d, "type");
        if (item && strcmp(item, "fc_xyz_1") == 0)
            CHECK_EQ_INT(json_path_num(d, "output_index"), 3);
        if (item && strcmp(item, "msg_xyz") == 0)
            CHECK_EQ_INT(json_path_num(d, "output_index"), 1);
        if (type && strcmp(type, "response.function_call_arguments.delta") == 0)
            sbuf_puts(strcmp(item, "fc_xyz_0") == 0 ? &a0 : &a1, json_path_str(d, "delta"));
        json_free(d);
    }
    CHECK_EQ_STR(a0.p, "{\"city\":\"Paris\"}");
    CHECK_EQ_STR(a1.p, "{\"tz\":\"CET\"}");
    sbuf_free(&a0);
    sbuf_free(&a1);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
}

static void test_a_refusal_becomes_a_refusal_part_after_the_text_part(void)
{
    const char *in = CHUNK("{\"role\":\"assistant\",\"content\":\"\"}", "null")
        CHUNK("{\"content\":\"Well\"}", "null") CHUNK("{\"refusal\":\"No.\"}", "null") CHUNK("{}", "\"stop\"")
        "data: [DONE]\n\n";
    stream_run r;
    client_events c;
    run_sound(in, &r, &c);
    CHECK(strstr(c.types.p, "response.output_text.done\nresponse.content_part.done\n"
                            "response.content_part.added\nresponse.refusal.delta\nresponse.refusal.done\n") != NULL);
    json_value *done = client_last(&r.out, "response.completed");
    CHECK_EQ_STR(json_path_str(done, "response.output.0.content.0.text"), "Well");
    CHECK_EQ_STR(json_path_str(done, "response.output.0.content.1.type"), "refusal");
    CHECK_EQ_STR(json_path_str(done, "response.output.0.content.1.refusal"), "No.");
    CHECK(json_path(done, "response.usage")->type == JSON_NULL); /* none came */
    json_free(done);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
}

static void test_length_and_content_filter_become_response_incomplete(void)
{
    const char *in = CHUNK("{\"content\":\"cut sho\"}", "null") CHUNK("{}", "\"length\"") "data: [DONE]\n\n";
    stream_run r;
    client_events c;
    run_sound(in, &r, &c);
    json_value *done = client_last(&r.out, "response.incomplete");
    CHECK(done != NULL);
    CHECK_EQ_STR(json_path_str(done, "response.status"), "incomplete");
    CHECK_EQ_STR(json_path_str(done, "response.incomplete_details.reason"), "max_output_tokens");
    CHECK_EQ_STR(json_path_str(done, "response.output.0.content.0.text"), "cut sho");
    CHECK(strstr(c.types.p, "response.completed") == NULL);
    json_free(done);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
    in = CHUNK("{\"content\":\"\"}", "\"content_filter\"") "data: [DONE]\n\n";
    run_sound(in, &r, &c);
    done = client_last(&r.out, "response.incomplete");
    CHECK_EQ_STR(json_path_str(done, "response.incomplete_details.reason"), "content_filter");
    CHECK_EQ_INT(json_path(done, "response.output")->count, 0);
    json_free(done);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
}

static void test_an_error_chunk_mid_stream_becomes_response_failed(void)
{
    const char *in = CHUNK("{\"content\":\"partial\"}", "null")
        "data: {\"error\":{\"message\":\"Rate limit reached for gpt-4o\",\"type\":\"requests\",\"code\":"
        "\"rate_limit_exceeded\",\"param\":null}}\n\n" CHUNK("{\"content\":\"late\"}", "null") "data: [DONE]\n\n";
    stream_run r;
    client_events c;
    run_sound(in, &r, &c);
    CHECK_EQ_INT(r.ended, 1);
    CHECK_EQ_INT(r.failed, 1);
    CHECK_EQ_INT(r.status, 429);
    CHECK_EQ_STR(c.types.p, "response.created\nresponse.in_progress\nresponse.output_item.added\n"
                            "response.content_part.added\nresponse.output_text.delta\nresponse.failed\n");
    json_value *f = client_last(&r.out, "response.failed");
    CHECK_EQ_STR(json_path_str(f, "response.status"), "failed");
    CHECK_EQ_STR(json_path_str(f, "response.error.code"), "rate_limit_exceeded");
    CHECK_EQ_STR(json_path_str(f, "response.error.message"), "Rate limit reached for gpt-4o");
    json_free(f);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
    /* an error before any chunk still opens the response first */
    run_sound("data: {\"error\":\"upstream overloaded\"}\n\n", &r, &c);
    CHECK_EQ_STR(c.types.p, "response.created\nresponse.in_progress\nresponse.failed\n");
    CHECK_EQ_INT(r.status, 500);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
}

static void test_reasoning_named_reasoning_is_read_when_reasoning_content_is_absent(void)
{
    const char *in = CHUNK("{\"reasoning\":\"Let me see\"}", "null")
        CHUNK("{\"reasoning\":\"dup\",\"reasoning_content\":\" more\"}", "null") CHUNK("{\"content\":\"A\"}", "\"stop\"")
        "data: [DONE]\n\n";
    stream_run r;
    client_events c;
    run_sound(in, &r, &c);
    json_value *done = client_last(&r.out, "response.completed");
    CHECK_EQ_STR(json_path_str(done, "response.output.0.type"), "reasoning");
    CHECK_EQ_STR(json_path_str(done, "response.output.0.summary.0.text"), "Let me see more");
    CHECK_EQ_STR(json_path_str(done, "response.output.1.content.0.text"), "A");
    json_free(done);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
}

static void test_a_finish_without_done_completes_at_the_end_and_a_cut_stream_does_not(void)
{
    const char *in = CHUNK("{\"content\":\"x\"}", "\"stop\"");
    stream_run r;
    client_events c;
    run_sound(in, &r, &c);
    CHECK_EQ_INT(r.ended, 1);
    CHECK(strstr(c.types.p, "response.completed\n") != NULL);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
    in = CHUNK("{\"content\":\"x\"}", "null");
    run_sound(in, &r, &c);
    CHECK_EQ_INT(r.ended, 0);
    CHECK_EQ_INT(r.output_sent, 1);
    CHECK(strstr(c.types.p, "response.completed") == NULL);
    CHECK(strstr(c.types.p, "response.output_text.done") == NULL);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
}

static void test_text_after_a_tool_call_opens_a_second_message_item(void)
{
    const char *in = CHUNK("{\"content\":\"a\"}", "null")
        CHUNK("{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}", "null")
        CHUNK("{\"content\":\"b\"}", "null") CHUNK("{}", "\"tool_calls\"") "data: [DONE]\n\n";
    stream_run r;
    client_events c;
    run_sound(in, &r, &c);
    json_value *done = client_last(&r.out, "response.completed");
    CHECK_EQ_STR(json_path_str(done, "response.output.0.id"), "msg_xyz");
    CHECK_EQ_STR(json_path_str(done, "response.output.1.id"), "fc_xyz_0");
    CHECK_EQ_STR(json_path_str(done, "response.output.2.id"), "msg_xyz_1");
    CHECK_EQ_STR(json_path_str(done, "response.output.2.content.0.text"), "b");
    json_free(done);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
}

static void test_tool_calls_without_an_index_each_become_their_own_item(void)
{
    /* some relays send each call whole, without "index" */
    const char *in =
        CHUNK("{\"tool_calls\":[{\"id\":\"c1\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]}", "null")
        CHUNK("{\"tool_calls\":[{\"id\":\"c2\",\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]}", "null")
        CHUNK("{\"tool_calls\":[{\"function\":{\"arguments\":\"\"}}]}", "null") CHUNK("{}", "\"tool_calls\"")
        "data: [DONE]\n\n";
    stream_run r;
    client_events c;
    run_sound(in, &r, &c);
    json_value *done = client_last(&r.out, "response.completed");
    CHECK_EQ_INT(json_path(done, "response.output")->count, 2);
    CHECK_EQ_STR(json_path_str(done, "response.output.0.call_id"), "c1");
    CHECK_EQ_STR(json_path_str(done, "response.output.0.arguments"), "{\"a\":1}");
    CHECK_EQ_STR(json_path_str(done, "response.output.1.call_id"), "c2");
    CHECK_EQ_STR(json_path_str(done, "response.output.1.name"), "g");
    json_free(done);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
}

static void test_a_spent_budget_keeps_the_deltas_flowing_and_every_event_whole(void)
{
    dialect_stream *s = dialect_stream_new(API_CHAT, API_RESPONSES, &OPTS);
    dialect_stream_set_budget(s, 40);
    sbuf out = SBUF_INIT;
    const char *in = CHAT_FULL;
    dialect_stream_feed(s, in, strlen(in), &out);
    CHECK_EQ_INT(dialect_stream_end(s, &out), 1);
    CHECK_EQ_INT(dialect_stream_failed(s, NULL), 0);
    dialect_stream_free(s);
    client_events c;
    client_read(out.p, out.len, 1, &c);
    CHECK_EQ_INT(c.bad_json, 0);
    CHECK_EQ_INT(c.bad_seq, 0);
    CHECK(strstr(c.types.p, "response.output_text.delta\nresponse.output_text.delta\n") != NULL);
    CHECK(strstr(c.types.p, "response.completed\n") != NULL);
    sbuf_free(&c.types);
    sbuf_free(&out);
}

static void test_a_chunk_with_several_choices_is_read_for_index_0_only(void)
{
    const char *in = "data: {\"id\":\"chatcmpl-n\",\"choices\":[{\"index\":1,\"delta\":{\"content\":\"B\"}},"
                     "{\"index\":0,\"delta\":{\"content\":\"A\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    stream_run r;
    client_events c;
    run_sound(in, &r, &c);
    json_value *done = client_last(&r.out, "response.completed");
    CHECK_EQ_STR(json_path_str(done, "response.output.0.content.0.text"), "A");
    CHECK_EQ_STR(json_path_str(done, "response.model"), "asked-model"); /* the upstream named none */
    json_free(done);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
}

static void test_azures_empty_first_chunk_does_not_name_the_response(void)
{
    const char *in = "data: {\"choices\":[],\"created\":0,\"id\":\"\",\"model\":\"\",\"object\":\"\","
                     "\"prompt_filter_results\":[{\"prompt_index\":0,\"content_filter_results\":{}}]}\n\n"
        CHUNK("{\"role\":\"assistant\",\"content\":\"\"}", "null") CHUNK("{\"content\":\"hi\"}", "\"stop\"")
        "data: [DONE]\n\n";
    stream_run r;
    client_events c;
    run_sound(in, &r, &c);
    json_value *created = client_event(&r.out, 0);
    CHECK_EQ_STR(json_path_str(created, "response.id"), "resp_chatcmpl-xyz");
    CHECK_EQ_STR(json_path_str(created, "response.model"), "gpt-4o");
    CHECK_EQ_INT(json_path_num(created, "response.created_at"), 1700000001);
    json_free(created);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
    const dialect_stream_opts agg = {.aggregate = 1};
    stream_run_go(API_CHAT, API_CHAT, &agg, in, strlen(in), 0, 0, &r);
    json_value *a = json_parse(r.out.p, r.out.len, NULL, 0);
    CHECK_EQ_STR(json_path_str(a, "id"), "chatcmpl-xyz");
    CHECK_EQ_INT(json_path_num(a, "created"), 1700000001);
    CHECK_EQ_STR(json_path_str(a, "choices.0.message.content"), "hi");
    json_free(a);
    sbuf_free(&r.out);
}

int main(void)
{
    RUN(test_a_chat_stream_becomes_the_whole_responses_event_sequence);
    RUN(test_ids_and_indexes_stay_the_same_for_each_item);
    RUN(test_a_refusal_becomes_a_refusal_part_after_the_text_part);
    RUN(test_length_and_content_filter_become_response_incomplete);
    RUN(test_an_error_chunk_mid_stream_becomes_response_failed);
    RUN(test_reasoning_named_reasoning_is_read_when_reasoning_content_is_absent);
    RUN(test_a_finish_without_done_completes_at_the_end_and_a_cut_stream_does_not);
    RUN(test_text_after_a_tool_call_opens_a_second_message_item);
    RUN(test_tool_calls_without_an_index_each_become_their_own_item);
    RUN(test_a_spent_budget_keeps_the_deltas_flowing_and_every_event_whole);
    RUN(test_a_chunk_with_several_choices_is_read_for_index_0_only);
    RUN(test_azures_empty_first_chunk_does_not_name_the_response);
    return check_summary();
}
