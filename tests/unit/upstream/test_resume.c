/* test_resume.c: the continuation request of a cut stream and the splice
 * of a Responses continuation (resume.c). */
#include "check.h"
#include "base/json.h"
#include "upstream/resume.h"

static void test_resume_body_appends_the_delivered_text_as_an_assistant_message(void)
{
    const char *in = "{\"model\":\"gpt-5\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                     "\"temperature\":0.2,\"tools\":[]}";
    json_value *doc = json_parse(in, strlen(in), NULL, 0);
    CHECK(doc != NULL);
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(resume_body_build(doc, "Hello \"you\"\n", 12, &out), 0);
    CHECK_EQ_STR(out.p, "{\"model\":\"gpt-5\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                        "{\"role\":\"assistant\",\"content\":\"Hello \\\"you\\\"\\n\"}],\"temperature\":0.2,"
                        "\"tools\":[]}");
    json_value *again = json_parse(out.p, out.len, NULL, 0);
    CHECK(again != NULL);
    CHECK_EQ_INT(json_get(again, "messages")->count, 2);
    json_free(again);
    sbuf_free(&out);
    json_free(doc);
}

static void test_resume_body_keeps_an_empty_message_list_valid(void)
{
    const char *in = "{\"messages\":[]}";
    json_value *doc = json_parse(in, strlen(in), NULL, 0);
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(resume_body_build(doc, "x", 1, &out), 0);
    CHECK_EQ_STR(out.p, "{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\"}]}");
    sbuf_free(&out);
    json_free(doc);
}

static void test_resume_body_needs_a_messages_array(void)
{
    const char *in = "{\"input\":\"hi\"}";
    json_value *doc = json_parse(in, strlen(in), NULL, 0);
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(resume_body_build(doc, "x", 1, &out), -1);
    CHECK_EQ_INT(out.len, 0);
    CHECK_EQ_INT(resume_body_build(NULL, "x", 1, &out), -1);
    sbuf_free(&out);
    json_free(doc);
}

static void test_responses_body_turns_a_string_input_into_messages_and_appends_the_prefill(void)
{
    const char *in = "{\"model\":\"m\",\"input\":\"hi\",\"stream\":true}";
    json_value *doc = json_parse(in, strlen(in), NULL, 0);
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(resume_responses_body_build(doc, "He", 2, &out), 0);
    CHECK_EQ_STR(out.p, "{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":\"hi\"},"
                        "{\"role\":\"assistant\",\"content\":\"He\"}],\"stream\":true}");
    json_free(doc);
    sbuf_reset(&out);
    in = "{\"input\":[{\"type\":\"message\",\"role\":\"user\",\"content\":\"q\"}]}";
    doc = json_parse(in, strlen(in), NULL, 0);
    CHECK_EQ_INT(resume_responses_body_build(doc, "x", 1, &out), 0);
    CHECK_EQ_STR(out.p, "{\"input\":[{\"type\":\"message\",\"role\":\"user\",\"content\":\"q\"},"
                        "{\"role\":\"assistant\",\"content\":\"x\"}]}");
    json_free(doc);
    sbuf_reset(&out);
    in = "{\"messages\":[]}";
    doc = json_parse(in, strlen(in), NULL, 0);
    CHECK_EQ_INT(resume_responses_body_build(doc, "x", 1, &out), -1);
    CHECK_EQ_INT(out.len, 0);
    json_free(doc);
    sbuf_free(&out);
}

/* The continuation an upstream sends for a prefill: its own response,
 * reasoning first, then a message, then (tool) a function call. */
static void splice_continuation(sbuf *b, int tool)
{
    sbuf_puts(b, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,"
                 "\"response\":{\"id\":\"resp_B\",\"status\":\"in_progress\",\"output\":[]}}\n\n"
                 "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\","
                 "\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"rs_B\",\"type\":\"reasoning\"}}\n\n"
                 "event: response.reasoning_summary_text.delta\ndata: {\"type\":\"response.reasoning_summary_text.delta\","
                 "\"sequence_number\":2,\"item_id\":\"rs_B\",\"output_index\":0,\"delta\":\"think\"}\n\n"
                 "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\","
                 "\"sequence_number\":3,\"output_index\":0,\"item\":{\"id\":\"rs_B\",\"type\":\"reasoning\"}}\n\n"
                 "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\","
                 "\"sequence_number\":4,\"output_index\":1,\"item\":{\"id\":\"msg_B\",\"type\":\"message\",\"content\":[]}}\n\n"
                 "event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"sequence_number\":5,"
                 "\"item_id\":\"msg_B\",\"output_index\":1,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":\"\"}}\n\n"
                 "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":6,"
                 "\"item_id\":\"msg_B\",\"output_index\":1,\"content_index\":0,\"delta\":\"lo!\"}\n\n");
    if (!tool)
        sbuf_puts(b, "event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"sequence_number\":7,"
                     "\"item_id\":\"msg_B\",\"output_index\":1,\"content_index\":0,\"text\":\"lo!\"}\n\n"
                     "event: response.content_part.done\ndata: {\"type\":\"response.content_part.done\",\"sequence_number\":8,"
                     "\"item_id\":\"msg_B\",\"output_index\":1,\"content_index\":0,\"part\":{\"type\":\"output_text\","
                     "\"text\":\"lo!\",\"annotations\":[]}}\n\n"
                     "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":9,"
                     "\"output_index\":1,\"item\":{\"id\":\"msg_B\",\"type\":\"message\",\"role\":\"assistant\","
                     "\"content\":[{\"type\":\"output_text\",\"text\":\"lo!\",\"annotations\":[]}]}}\n\n"
                     "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":10,"
                     "\"response\":{\"id\":\"resp_B\",\"status\":\"completed\",\"output\":[{\"id\":\"rs_B\",\"type\":\"reasoning\"},"
                     "{\"id\":\"msg_B\",\"type\":\"message\"}],\"usage\":{\"total_tokens\":9}}}\n\n");
    else
        sbuf_puts(b, "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":7,"
                     "\"output_index\":2,\"item\":{\"id\":\"fc_B\",\"type\":\"function_call\",\"name\":\"f\"}}\n\n"
                     "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":8,"
                     "\"output_index\":2,\"item\":{\"id\":\"fc_B\",\"type\":\"function_call\",\"name\":\"f\"}}\n\n"
                     "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":9,"
                     "\"response\":{\"id\":\"resp_B\",\"status\":\"completed\",\"output\":[{\"id\":\"rs_B\",\"type\":\"reasoning\"},"
                     "{\"id\":\"msg_B\",\"type\":\"message\"},{\"id\":\"fc_B\",\"type\":\"function_call\",\"name\":\"f\"}]}}\n\n");
}

static void splice_run(int tool, size_t piece, sbuf *out)
{
    resume_splice s;
    resume_cut cut = {.response_id = "resp_A", .item_id = "msg_A", .output_index = 1, .content_index = 0,
                      .last_seq = 6, .text = "Hel", .text_len = 3, .done_items = "{\"id\":\"rs_A\",\"type\":\"reasoning\"}",
                      .done_len = strlen("{\"id\":\"rs_A\",\"type\":\"reasoning\"}")};
    resume_splice_init(&s, &cut);
    sbuf in = SBUF_INIT;
    splice_continuation(&in, tool);
    for (size_t off = 0; off < in.len; off += piece) /* any cut of the bytes: events are parsed whole */
        resume_splice_feed(&s, in.p + off, in.len - off < piece ? in.len - off : piece, out);
    sbuf_free(&in);
    resume_splice_free(&s);
}

static void test_splice_makes_the_continuation_the_cut_message_and_completes_it_with_the_whole_text(void)
{
    static const char want[] =
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":7,"
        "\"item_id\":\"msg_A\",\"output_index\":1,\"content_index\":0,\"delta\":\"lo!\"}\n\n"
        "event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"sequence_number\":8,"
        "\"item_id\":\"msg_A\",\"output_index\":1,\"content_index\":0,\"text\":\"Hello!\"}\n\n"
        "event: response.content_part.done\ndata: {\"type\":\"response.content_part.done\",\"sequence_number\":9,"
        "\"item_id\":\"msg_A\",\"output_index\":1,\"content_index\":0,\"part\":{\"type\":\"output_text\","
        "\"text\":\"Hello!\",\"annotations\":[]}}\n\n"
        "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":10,"
        "\"output_index\":1,\"item\":{\"id\":\"msg_A\",\"type\":\"message\",\"role\":\"assistant\","
        "\"content\":[{\"type\":\"output_text\",\"text\":\"Hello!\",\"annotations\":[]}]}}\n\n"
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":11,"
        "\"response\":{\"id\":\"resp_A\",\"status\":\"completed\",\"output\":[{\"id\":\"rs_A\",\"type\":\"reasoning\"},"
        "{\"id\":\"msg_A\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\","
        "\"text\":\"Hello!\",\"annotations\":[]}]}],\"usage\":{\"total_tokens\":9}}}\n\n";
    size_t pieces[] = {1, 7, 100000};
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        sbuf out = SBUF_INIT;
        splice_run(0, pieces[i], &out);
        CHECK_EQ_STR(out.p, want);
        sbuf_free(&out);
    }
}

static void test_splice_closes_the_message_before_a_tool_call_and_numbers_the_call_after_it(void)
{
    sbuf out = SBUF_INIT;
    splice_run(1, 13, &out);
    /* the message's done events (ours, whole text), then the call at output_index 2 */
    const char *text_done = strstr(out.p, "\"type\":\"response.output_text.done\",\"sequence_number\":8,"
                                          "\"item_id\":\"msg_A\",\"output_index\":1,\"content_index\":0,\"text\":\"Hello!\"");
    const char *call = strstr(out.p, "{\"type\":\"response.output_item.added\",\"sequence_number\":11,\"output_index\":2,"
                                     "\"item\":{\"id\":\"fc_B\"");
    CHECK(text_done != NULL);
    CHECK(call != NULL && text_done < call);
    CHECK(strstr(out.p, "\"output\":[{\"id\":\"rs_A\",\"type\":\"reasoning\"},{\"id\":\"msg_A\",\"type\":\"message\","
                        "\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\","
                        "\"annotations\":[],\"text\":\"Hello!\"}]},{\"id\":\"fc_B\",\"type\":\"function_call\",\"name\":\"f\"}]") != NULL);
    CHECK(strstr(out.p, "rs_B") == NULL);     /* the continuation's reasoning is not the client's */
    CHECK(strstr(out.p, "resp_B") == NULL);
    CHECK(strstr(out.p, "\"sequence_number\":13,") != NULL && strstr(out.p, "\"sequence_number\":14") == NULL);
    sbuf_free(&out);
}

static void test_splice_passes_what_is_not_an_api_event_and_survives_garbage(void)
{
    resume_cut cut = {.response_id = "r", .item_id = "m", .last_seq = -1, .text = "", .text_len = 0};
    resume_splice s;
    resume_splice_init(&s, &cut);
    sbuf out = SBUF_INIT;
    const char in[] = "data: [DONE]\n\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":\"x\"}\n\n"
                      "data: {\"type\":\"response.completed\",\"response\":7}\n\ndata: {\"a\":\n\n";
    resume_splice_feed(&s, in, sizeof in - 1, &out);
    CHECK(strncmp(out.p, "data: [DONE]\n\n", 14) == 0);
    CHECK(strstr(out.p, "\"type\":\"response.output_item.done\"") != NULL); /* the message closed before the end */
    CHECK(strstr(out.p, "data: {\"a\":\n\n") != NULL);
    sbuf_free(&out);
    resume_splice_free(&s);
}

int main(void)
{
    RUN(test_resume_body_appends_the_delivered_text_as_an_assistant_message);
    RUN(test_resume_body_keeps_an_empty_message_list_valid);
    RUN(test_resume_body_needs_a_messages_array);
    RUN(test_responses_body_turns_a_string_input_into_messages_and_appends_the_prefill);
    RUN(test_splice_makes_the_continuation_the_cut_message_and_completes_it_with_the_whole_text);
    RUN(test_splice_closes_the_message_before_a_tool_call_and_numbers_the_call_after_it);
    RUN(test_splice_passes_what_is_not_an_api_event_and_survives_garbage);
    return check_summary();
}
