/* test_stream_chat.c: a Responses stream made a Chat Completions stream,
 * event by event (stream_chat.c through dialect_stream_*). Every stream is
 * fed whole and in every cut, which must give the same bytes. */
#include "stream_check.h"

static const dialect_stream_opts USAGE_OPTS = {.include_usage = 1, .model = "asked-model"};
static const dialect_stream_opts PLAIN_OPTS = {.model = "asked-model"};

#define EV(type, json) "event: " type "\ndata: " json "\n\n"

static void test_a_chatgpt_stream_becomes_openai_shaped_chunks_in_every_cut(void)
{
    stream_run r;
    CHECK(stream_run_cuts(API_RESPONSES, API_CHAT, &USAGE_OPTS, RSP_FULL, &r));
    CHECK_EQ_INT(r.ended, 1);
    CHECK_EQ_INT(r.failed, 0);
    CHECK_EQ_INT(r.output_sent, 1);
    client_events c;
    client_read(r.out.p, r.out.len, 0, &c);
    CHECK_EQ_INT(c.bad_json, 0);
    CHECK_EQ_INT(c.done, 1);
    CHECK_EQ_INT(c.after_done, 0);
    CHECK_EQ_INT(c.n, 14);
    const char *first = "data: {\"id\":\"chatcmpl-abc\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"
                        "\"model\":\"gpt-5-codex\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
                        "\"content\":\"\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}],"
                        "\"usage\":null}\n\n";
    CHECK(strncmp(r.out.p, first, strlen(first)) == 0);
    CHECK(strstr(r.out.p, "\"delta\":{\"content\":\"Let me \\\"check\\\"\"}") != NULL);
    CHECK(strstr(r.out.p, "\"delta\":{},\"logprobs\":null,\"finish_reason\":\"tool_calls\"}],\"usage\":null}\n\n") != NULL);
    const char *tail = "data: {\"id\":\"chatcmpl-abc\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"
                       "\"model\":\"gpt-5-codex\",\"choices\":[],\"usage\":{\"prompt_tokens\":1200,"
                       "\"completion_tokens\":300,\"total_tokens\":1500,\"prompt_tokens_details\":{\"cached_tokens\":"
                       "1024},\"completion_tokens_details\":{\"reasoning_tokens\":128}}}\n\ndata: [DONE]\n\n";
    CHECK(r.out.len > strlen(tail) && strcmp(r.out.p + r.out.len - strlen(tail), tail) == 0);
    /* every chunk carries the same id, created and model */
    for (int i = 0; i < c.n - 1; i++) {
        json_value *d = client_event(&r.out, i);
        CHECK_EQ_STR(json_path_str(d, "id"), "chatcmpl-abc");
        CHECK_EQ_INT(json_path_num(d, "created"), 1700000000);
        CHECK_EQ_STR(json_path_str(d, "model"), "gpt-5-codex");
        CHECK_EQ_STR(json_path_str(d, "object"), "chat.completion.chunk");
        json_free(d);
    }
    sbuf_free(&c.types);
    sbuf_free(&r.out);
}

/* Concatenates what the chunks give of choices[0].delta.tool_calls[index == i]. */
static void tool_args(const sbuf *out, int n, long index, sbuf *args, sbuf *ids, sbuf *names)
{
    for (int k = 0; k < n; k++) {
        json_value *d = client_event(out, k);
        const json_value *calls = json_path(d, "choices.0.delta.tool_calls");
        for (const json_value *tc = calls ? calls->child : NULL; tc; tc = tc->next) {
            if (json_path_num(tc, "index") != index)
                continue;
            const char *a = json_path_str(tc, "function.arguments"), *id = json_path_str(tc, "id"),
                       *name = json_path_str(tc, "function.name");
            if (a)
                sbuf_puts(args, a);
            if (id)
                sbuf_puts(ids, id), sbuf_puts(ids, ";");
            if (name)
                sbuf_puts(names, name), sbuf_puts(names, ";");
        }
        json_free(d);
    }
}

static void test_parallel_tool_calls_keep_their_own_index_while_arguments_interleave(void)
{
    stream_run r;
    CHECK(stream_run_cuts(API_RESPONSES, API_CHAT, &PLAIN_OPTS, RSP_FULL, &r));
    client_events c;
    client_read(r.out.p, r.out.len, 0, &c);
    sbuf a0 = SBUF_INIT, i0 = SBUF_INIT, n0 = SBUF_INIT, a1 = SBUF_INIT, i1 = SBUF_INIT, n1 = SBUF_INIT;
    tool_args(&r.out, c.n, 0, &a0, &i0, &n0);
    tool_args(&r.out, c.n, 1, &a1, &i1, &n1);
    CHECK_EQ_STR(a0.p, "{\"city\":\"Paris\"}");
    CHECK_EQ_STR(i0.p, "call_A;"); /* the id and name once, in the call's first chunk */
    CHECK_EQ_STR(n0.p, "get_weather;");
    CHECK_EQ_STR(a1.p, "{\"tz\":\"CET\"}");
    CHECK_EQ_STR(i1.p, "call_B;");
    CHECK_EQ_STR(n1.p, "get_time;");
    /* the header chunk: index, id, type, name and arguments "" */
    CHECK(strstr(r.out.p, "{\"tool_calls\":[{\"index\":1,\"id\":\"call_B\",\"type\":\"function\",\"function\":"
                          "{\"name\":\"get_time\",\"arguments\":\"\"}}]}") != NULL);
    /* without include_usage: no usage member, no usage chunk */
    CHECK(strstr(r.out.p, "usage") == NULL);
    CHECK(strstr(r.out.p, "\"choices\":[]") == NULL);
    sbuf *all[] = {&a0, &i0, &n0, &a1, &i1, &n1, &c.types, &r.out};
    for (size_t i = 0; i < 8; i++)
        sbuf_free(all[i]);
}

static void test_arguments_sent_only_whole_in_done_events_reach_the_client_once(void)
{
    /* call 1: added, no deltas, then arguments.done and item.done; call 2: only output_item.done */
    const char *in =
        EV("response.created", "{\"type\":\"response.created\",\"response\":{\"id\":\"resp_q\",\"created_at\":5}}")
        EV("response.output_item.added", "{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":"
           "{\"id\":\"fc_1\",\"type\":\"function_call\",\"arguments\":\"\",\"call_id\":\"c1\",\"name\":\"f\"}}")
        EV("response.function_call_arguments.done", "{\"type\":\"response.function_call_arguments.done\","
           "\"item_id\":\"fc_1\",\"output_index\":0,\"arguments\":\"{\\\"x\\\":1}\"}")
        EV("response.output_item.done", "{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":"
           "{\"id\":\"fc_1\",\"type\":\"function_call\",\"arguments\":\"{\\\"x\\\":1}\",\"call_id\":\"c1\",\"name\":\"f\"}}")
        EV("response.output_item.done", "{\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":"
           "{\"id\":\"fc_2\",\"type\":\"function_call\",\"arguments\":\"{}\",\"call_id\":\"c2\",\"name\":\"g\"}}")
        EV("response.completed", "{\"type\":\"response.completed\",\"response\":{\"id\":\"resp_q\",\"status\":"
           "\"completed\",\"output\":[]}}");
    stream_run r;
    CHECK(stream_run_cuts(API_RESPONSES, API_CHAT, &PLAIN_OPTS, in, &r));
    client_events c;
    client_read(r.out.p, r.out.len, 0, &c);
    CHECK_EQ_INT(c.bad_json, 0);
    CHECK_EQ_INT(c.n, 7); /* role, header 0, args 0, header 1, args 1, finish, [DONE] */
    sbuf a0 = SBUF_INIT, i0 = SBUF_INIT, n0 = SBUF_INIT, a1 = SBUF_INIT, i1 = SBUF_INIT, n1 = SBUF_INIT;
    tool_args(&r.out, c.n, 0, &a0, &i0, &n0);
    tool_args(&r.out, c.n, 1, &a1, &i1, &n1);
    CHECK_EQ_STR(a0.p, "{\"x\":1}");
    CHECK_EQ_STR(i0.p, "c1;");
    CHECK_EQ_STR(a1.p, "{}");
    CHECK_EQ_STR(n1.p, "g;");
    CHECK(strstr(r.out.p, "\"finish_reason\":\"tool_calls\"") != NULL);
    CHECK(strstr(r.out.p, "\"model\":\"asked-model\"") != NULL); /* the upstream named none */
    sbuf *all[] = {&a0, &i0, &n0, &a1, &i1, &n1, &c.types, &r.out};
    for (size_t i = 0; i < 8; i++)
        sbuf_free(all[i]);
}

static void test_a_message_sent_only_whole_reaches_the_client_once(void)
{
    const char *in =
        EV("response.output_item.added", "{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":"
           "{\"id\":\"m\",\"type\":\"message\",\"content\":[]}}")
        EV("response.output_text.done", "{\"type\":\"response.output_text.done\",\"item_id\":\"m\","
           "\"output_index\":0,\"content_index\":0,\"text\":\"whole\"}")
        EV("response.content_part.done", "{\"type\":\"response.content_part.done\",\"item_id\":\"m\","
           "\"output_index\":0,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":\"whole\"}}")
        EV("response.output_item.done", "{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":"
           "{\"id\":\"m\",\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"whole\"}]}}")
        EV("response.output_item.done", "{\"type\":\"response.output_item.done\",\"output_index\":1,\"item\":"
           "{\"id\":\"m2\",\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\" too\"}]}}")
        EV("response.completed", "{\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"}}");
    stream_run r;
    CHECK(stream_run_cuts(API_RESPONSES, API_CHAT, &PLAIN_OPTS, in, &r));
    client_events c;
    client_read(r.out.p, r.out.len, 0, &c);
    CHECK_EQ_INT(c.n, 5); /* role, "whole", " too", finish, [DONE] */
    CHECK(strstr(r.out.p, "{\"content\":\"whole\"}") != NULL);
    CHECK(strstr(r.out.p, "{\"content\":\" too\"}") != NULL);
    CHECK(strstr(r.out.p, "\"id\":\"chatcmpl-switchyard\"") != NULL); /* no response id given */
    CHECK(strstr(r.out.p, "\"finish_reason\":\"stop\"") != NULL);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
}

static void test_an_answer_sent_only_in_response_completed_reaches_the_client_once(void)
{
    /* an upstream whose stream is the opening and the whole response at the end */
    const char *in = RSP_CREATED
        EV("response.completed", "{\"type\":\"response.completed\",\"response\":{\"id\":\"resp_abc\",\"status\":"
           "\"completed\",\"output\":[{\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":"
           "\"r\"}]},{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"all at once\"}]},"
           "{\"type\":\"function_call\",\"call_id\":\"c9\",\"name\":\"f\",\"arguments\":\"{}\"}]}}");
    stream_run r;
    CHECK(stream_run_cuts(API_RESPONSES, API_CHAT, &PLAIN_OPTS, in, &r));
    client_events c;
    client_read(r.out.p, r.out.len, 0, &c);
    CHECK_EQ_INT(c.n, 7); /* role, reasoning, text, call header, arguments, finish, [DONE] */
    CHECK(strstr(r.out.p, "{\"reasoning_content\":\"r\"}") != NULL);
    CHECK(strstr(r.out.p, "{\"content\":\"all at once\"}") != NULL);
    CHECK(strstr(r.out.p, "\"id\":\"c9\",\"type\":\"function\"") != NULL);
    CHECK(strstr(r.out.p, "\"finish_reason\":\"tool_calls\"") != NULL);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
    /* the API's own completed output repeats the items streamed before: nothing twice */
    const char *again = RSP_CREATED RSP_MESSAGE
        EV("response.completed", "{\"type\":\"response.completed\",\"response\":{\"id\":\"resp_abc\",\"status\":"
           "\"completed\",\"output\":[{\"id\":\"msg_1\",\"type\":\"message\",\"content\":[{\"type\":"
           "\"output_text\",\"text\":\"Let me\"}]}]}}");
    CHECK(stream_run_cuts(API_RESPONSES, API_CHAT, &PLAIN_OPTS, again, &r));
    client_read(r.out.p, r.out.len, 0, &c);
    CHECK_EQ_INT(c.n, 5); /* role, two deltas, finish, [DONE] */
    sbuf_free(&c.types);
    sbuf_free(&r.out);
}

static void test_a_refusal_becomes_delta_refusal(void)
{
    const char *in =
        EV("response.created", "{\"type\":\"response.created\",\"response\":{\"id\":\"resp_r\"}}")
        EV("response.refusal.delta", "{\"type\":\"response.refusal.delta\",\"item_id\":\"m\",\"output_index\":0,"
           "\"content_index\":0,\"delta\":\"I can't\"}")
        EV("response.refusal.delta", "{\"type\":\"response.refusal.delta\",\"item_id\":\"m\",\"output_index\":0,"
           "\"content_index\":0,\"delta\":\" help.\"}")
        EV("response.refusal.done", "{\"type\":\"response.refusal.done\",\"item_id\":\"m\",\"output_index\":0,"
           "\"content_index\":0,\"refusal\":\"I can't help.\"}")
        EV("response.completed", "{\"type\":\"response.completed\",\"response\":{\"id\":\"resp_r\",\"status\":"
           "\"completed\"}}");
    stream_run r;
    CHECK(stream_run_cuts(API_RESPONSES, API_CHAT, &PLAIN_OPTS, in, &r));
    CHECK(strstr(r.out.p, "\"delta\":{\"refusal\":\"I can't\"}") != NULL);
    CHECK(strstr(r.out.p, "\"delta\":{\"refusal\":\" help.\"}") != NULL);
    CHECK(strstr(r.out.p, "can't help.\"") == NULL); /* the done event adds nothing */
    CHECK_EQ_INT(r.output_sent, 1);
    sbuf_free(&r.out);
}

static void test_reasoning_summary_parts_become_reasoning_content_a_blank_line_apart(void)
{
    stream_run r;
    CHECK(stream_run_cuts(API_RESPONSES, API_CHAT, &PLAIN_OPTS, RSP_CREATED RSP_REASONING RSP_COMPLETED_EMPTY, &r));
    CHECK(strstr(r.out.p, "\"delta\":{\"reasoning_content\":\"**Plan**\"}") != NULL);
    CHECK(strstr(r.out.p, "\"delta\":{\"reasoning_content\":\"\\n\\nCheck weather.\"}") != NULL);
    CHECK(strstr(r.out.p, "gAAA") == NULL); /* encrypted reasoning stays upstream */
    CHECK(strstr(r.out.p, "\"finish_reason\":\"stop\"") != NULL);
    sbuf_free(&r.out);
}

static void test_an_incomplete_response_finishes_with_length_or_content_filter(void)
{
    const char *in = RSP_CREATED EV("response.output_text.delta", "{\"type\":\"response.output_text.delta\","
                                    "\"item_id\":\"m\",\"output_index\":0,\"delta\":\"cut sho\"}")
        EV("response.incomplete", "{\"type\":\"response.incomplete\",\"response\":{\"id\":\"resp_abc\",\"status\":"
           "\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"}," RSP_USAGE "}}");
    stream_run r;
    CHECK(stream_run_cuts(API_RESPONSES, API_CHAT, &USAGE_OPTS, in, &r));
    CHECK_EQ_INT(r.ended, 1);
    CHECK(strstr(r.out.p, "\"finish_reason\":\"length\"") != NULL);
    CHECK(strstr(r.out.p, "\"choices\":[],\"usage\":{\"prompt_tokens\":1200") != NULL);
    CHECK(strstr(r.out.p, "data: [DONE]\n\n") != NULL);
    sbuf_free(&r.out);
    in = RSP_CREATED EV("response.incomplete", "{\"type\":\"response.incomplete\",\"response\":{\"status\":"
                        "\"incomplete\",\"incomplete_details\":{\"reason\":\"content_filter\"}}}");
    CHECK(stream_run_cuts(API_RESPONSES, API_CHAT, &USAGE_OPTS, in, &r));
    CHECK(strstr(r.out.p, "\"finish_reason\":\"content_filter\"") != NULL);
    CHECK(strstr(r.out.p, "\"choices\":[]") == NULL); /* no usage given: no usage chunk */
    sbuf_free(&r.out);
}

static void test_a_failed_response_mid_stream_becomes_an_error_chunk_without_done(void)
{
    const char *in = RSP_CREATED RSP_MESSAGE
        EV("response.failed", "{\"type\":\"response.failed\",\"sequence_number\":14,\"response\":{\"id\":"
           "\"resp_abc\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"The model "
           "failed.\"}}}")
        EV("response.output_text.delta", "{\"type\":\"response.output_text.delta\",\"delta\":\"late\"}");
    stream_run r;
    CHECK(stream_run_cuts(API_RESPONSES, API_CHAT, &USAGE_OPTS, in, &r));
    CHECK_EQ_INT(r.ended, 1);
    CHECK_EQ_INT(r.failed, 1);
    CHECK_EQ_INT(r.status, 500);
    client_events c;
    client_read(r.out.p, r.out.len, 0, &c);
    CHECK_EQ_INT(c.bad_json, 0);
    CHECK_EQ_INT(c.done, 0);
    CHECK(strstr(r.out.p, "data: {\"error\":{\"message\":\"The model failed.\",\"type\":\"server_error\","
                          "\"code\":\"server_error\",\"param\":null}}\n\n") != NULL);
    CHECK(strstr(r.out.p, "late") == NULL); /* nothing after the failure */
    sbuf_free(&c.types);
    sbuf_free(&r.out);
    in = RSP_CREATED EV("error", "{\"type\":\"error\",\"sequence_number\":2,\"code\":\"rate_limit_exceeded\","
                        "\"message\":\"Slow down\",\"param\":null}");
    CHECK(stream_run_cuts(API_RESPONSES, API_CHAT, &USAGE_OPTS, in, &r));
    CHECK_EQ_INT(r.failed, 1);
    CHECK_EQ_INT(r.status, 429);
    CHECK_EQ_INT(r.output_sent, 0);
    CHECK(strstr(r.out.p, "\"type\":\"rate_limit_error\",\"code\":\"rate_limit_exceeded\"") != NULL);
    CHECK(strstr(r.out.p, "[DONE]") == NULL);
    sbuf_free(&r.out);
}

static void test_a_stream_cut_before_its_terminal_event_ends_without_done(void)
{
    stream_run r;
    CHECK(stream_run_cuts(API_RESPONSES, API_CHAT, &PLAIN_OPTS, RSP_CREATED RSP_MESSAGE, &r));
    CHECK_EQ_INT(r.ended, 0);
    CHECK_EQ_INT(r.failed, 0);
    CHECK_EQ_INT(r.output_sent, 1);
    CHECK(strstr(r.out.p, "[DONE]") == NULL);
    CHECK(strstr(r.out.p, "finish_reason\":\"") == NULL);
    sbuf_free(&r.out);
    /* only the opening: the client has its role chunk, but no output */
    CHECK(stream_run_cuts(API_RESPONSES, API_CHAT, &PLAIN_OPTS, RSP_CREATED, &r));
    CHECK_EQ_INT(r.ended, 0);
    CHECK_EQ_INT(r.output_sent, 0);
    sbuf_free(&r.out);
}

static void test_unknown_events_comments_and_bad_data_are_ignored(void)
{
    const char *in = ": keep-alive\n\n" RSP_CREATED
        EV("codex.rate_limits", "{\"type\":\"codex.rate_limits\",\"rate_limits\":{\"primary\":{}}}")
        EV("response.output_text.annotation.added", "{\"type\":\"response.output_text.annotation.added\"}")
        "data: not json\n\n"
        "data: [1,2]\n\n"
        "data: [DONE]\n\n"
        EV("response.output_text.delta", "{\"type\":\"response.output_text.delta\",\"delta\":\"ok\"}")
        RSP_COMPLETED_EMPTY;
    stream_run r;
    CHECK(stream_run_cuts(API_RESPONSES, API_CHAT, &PLAIN_OPTS, in, &r));
    client_events c;
    client_read(r.out.p, r.out.len, 0, &c);
    CHECK_EQ_INT(c.bad_json, 0);
    CHECK_EQ_STR(c.types.p, "chunk\nchunk\nchunk\n[DONE]\n");
    CHECK_EQ_INT(r.ended, 1);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
}

static void test_a_last_event_without_its_blank_line_still_counts_at_the_end(void)
{
    const char *in = RSP_CREATED "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":"
                                 "{\"status\":\"completed\"}}\n";
    stream_run r;
    stream_run_go(API_RESPONSES, API_CHAT, &PLAIN_OPTS, in, strlen(in), 0, 0, &r);
    CHECK_EQ_INT(r.ended, 1);
    CHECK(strstr(r.out.p, "data: [DONE]\n\n") != NULL);
    sbuf_free(&r.out);
}

static void test_a_same_dialect_stream_has_no_translator(void)
{
    CHECK(dialect_stream_new(API_RESPONSES, API_RESPONSES, &PLAIN_OPTS) == NULL);
    CHECK(dialect_stream_new(API_CHAT, API_CHAT, NULL) == NULL);
    dialect_stream *s = dialect_stream_new(API_RESPONSES, API_CHAT, NULL); /* no opts: defaults */
    CHECK(s != NULL);
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(dialect_stream_end(s, &out), 0);
    CHECK_EQ_INT(dialect_stream_end(s, &out), 0); /* twice: the same, nothing more */
    CHECK_EQ_INT(out.len, 0);
    dialect_stream_free(s);
    sbuf_free(&out);
}

int main(void)
{
    RUN(test_a_chatgpt_stream_becomes_openai_shaped_chunks_in_every_cut);
    RUN(test_parallel_tool_calls_keep_their_own_index_while_arguments_interleave);
    RUN(test_arguments_sent_only_whole_in_done_events_reach_the_client_once);
    RUN(test_a_message_sent_only_whole_reaches_the_client_once);
    RUN(test_an_answer_sent_only_in_response_completed_reaches_the_client_once);
    RUN(test_a_refusal_becomes_delta_refusal);
    RUN(test_reasoning_summary_parts_become_reasoning_content_a_blank_line_apart);
    RUN(test_an_incomplete_response_finishes_with_length_or_content_filter);
    RUN(test_a_failed_response_mid_stream_becomes_an_error_chunk_without_done);
    RUN(test_a_stream_cut_before_its_terminal_event_ends_without_done);
    RUN(test_unknown_events_comments_and_bad_data_are_ignored);
    RUN(test_a_last_event_without_its_blank_line_still_counts_at_the_end);
    RUN(test_a_same_dialect_stream_has_no_translator);
    return check_summary();
}
