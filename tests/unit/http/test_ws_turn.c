/* test_ws_turn.c: Responses WebSocket messages as the HTTP requests the
 * gateway serves (ws_frame_request): what is dropped, what is forced, what
 * becomes headers, a continuation of the connection's last response
 * rebuilt whole, warm-ups and acknowledgements, bad messages; and what a
 * turn's events leave for the next one (ws_collect). */
#include "check.h"
#include "http/ws_turn.h"
#include "base/json.h"
#include <string.h>

static json_value *parse(const sbuf *b) { return json_parse(b->p, b->len, NULL, 0); }

/* ws_frame_request on a copy of f, as the socket's buffer holds a message */
static ws_frame_kind frame_request(const char *f, const conv_link *l, ws_request *r)
{
    sbuf m = SBUF_INIT;
    sbuf_append(&m, f, strlen(f));
    ws_frame_kind k = ws_frame_request(&m, l, r);
    CHECK(m.p == NULL && m.len == 0); /* taken */
    return k;
}

/* The request is written over the message: members before and after the
 * dropped ones, no whitespace at all or a lot of it, come out whole. */
static void test_the_request_is_written_over_the_message_in_place(void)
{
    const char *f[] = {"{\"model\":\"m\",\"type\":\"response.create\",\"input\":\"x\"}",
                       "{\"type\":\"response.create\"}",
                       "  {  \"a\" : [1, {\"b\":\"}\"}] ,\n \"type\" :\"response.create\", \"stream\":false,\"c\":null }  "};
    const char *want[] = {"{\"model\":\"m\",\"input\":\"x\",\"stream\":true}", "{\"stream\":true}",
                          "{\"a\" : [1, {\"b\":\"}\"}],\"c\":null,\"stream\":true}"};
    for (size_t i = 0; i < 3; i++) {
        sbuf m = SBUF_INIT;
        sbuf_append(&m, f[i], strlen(f[i]));
        char *buf = m.p;
        ws_request r;
        CHECK_EQ_INT(ws_frame_request(&m, NULL, &r), WS_FRAME_CREATE);
        CHECK(r.body.p == buf); /* the message's own buffer, not a copy */
        CHECK_EQ_STR(r.body.p, want[i]);
        ws_request_free(&r);
    }
}

static void test_create_drops_type_and_forces_stream(void)
{
    const char *f = "{\"type\":\"response.create\",\"model\":\"gpt-5\","
                    "\"input\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                    "\"stream\":false,\"store\":false,\"temperature\":0.10}";
    ws_request r;
    CHECK_EQ_INT(frame_request(f, NULL, &r), WS_FRAME_CREATE);
    json_value *d = parse(&r.body);
    CHECK(d != NULL);
    CHECK(json_get(d, "type") == NULL);
    CHECK_EQ_INT(json_get_bool(d, "stream", 0), 1);
    CHECK_EQ_INT(json_get_bool(d, "store", 1), 0);
    CHECK_EQ_STR(json_get_str(d, "model"), "gpt-5");
    CHECK(strstr(r.body.p, "\"temperature\":0.10") != NULL); /* spliced as written, not re-serialized */
    CHECK_EQ_STR(r.model, "gpt-5");
    CHECK_EQ_INT(r.chained, 0);
    json_free(d);
    ws_request_free(&r);
}

static void test_client_metadata_becomes_forwarded_headers_only(void)
{
    const char *f = "{\"type\":\"response.create\",\"model\":\"m\",\"input\":[],\"client_metadata\":"
                    "{\"x-codex-turn-state\":\"ts1\",\"x-codex-turn-metadata\":\"{\\\"a\\\":1}\","
                    "\"ws_request_header_traceparent\":\"00-abc\",\"x-openai-subagent\":\"bad\\nvalue\"}}";
    ws_request r;
    CHECK_EQ_INT(frame_request(f, NULL, &r), WS_FRAME_CREATE);
    CHECK_EQ_STR(ws_request_header(&r, "x-codex-turn-state"), "ts1");
    CHECK_EQ_STR(ws_request_header(&r, "x-codex-turn-metadata"), "{\"a\":1}");
    CHECK(ws_request_header(&r, "x-openai-subagent") == NULL); /* a line break is never a header */
    CHECK_EQ_INT(r.n_headers, 2);
    CHECK(strstr(r.body.p, "client_metadata") == NULL);
    CHECK(strstr(r.body.p, "traceparent") == NULL);
    ws_request_free(&r);
}

static conv_link last_turn(void)
{
    conv_link l;
    memset(&l, 0, sizeof l);
    l.response_id = "resp_1";
    l.input_json = "[{\"role\":\"user\",\"content\":\"one\"}]";
    l.input_len = strlen(l.input_json);
    l.output_json = "[{\"type\":\"message\",\"role\":\"assistant\","
                    "\"content\":[{\"type\":\"output_text\",\"text\":\"two\"}]}]";
    l.output_len = strlen(l.output_json);
    return l;
}

static void test_continuation_of_the_last_response_is_rebuilt_whole(void)
{
    conv_link l = last_turn();
    const char *f = "{\"type\":\"response.create\",\"model\":\"m\",\"previous_response_id\":\"resp_1\","
                    "\"input\":[{\"role\":\"user\",\"content\":\"three\"}]}";
    ws_request r;
    CHECK_EQ_INT(frame_request(f, &l, &r), WS_FRAME_CREATE);
    CHECK_EQ_INT(r.chained, 1);
    json_value *d = parse(&r.body);
    CHECK(d != NULL);
    CHECK(json_get(d, "previous_response_id") == NULL);
    const json_value *in = json_get(d, "input");
    CHECK(in && in->count == 3);
    CHECK_EQ_STR(json_get_str(json_at(in, 0), "content"), "one");
    CHECK_EQ_STR(json_get_str(json_at(in, 1), "role"), "assistant");
    CHECK_EQ_STR(json_get_str(json_at(in, 2), "content"), "three");
    CHECK_EQ_INT(json_get_bool(d, "stream", 0), 1);
    json_free(d);
    ws_request_free(&r);
}

static void test_unknown_previous_response_id_passes_unchanged(void)
{
    conv_link l = last_turn();
    const char *f = "{\"type\":\"response.create\",\"model\":\"m\","
                    "\"previous_response_id\":\"resp_other\",\"input\":[]}";
    ws_request r;
    CHECK_EQ_INT(frame_request(f, &l, &r), WS_FRAME_CREATE);
    CHECK_EQ_INT(r.chained, 0);
    json_value *d = parse(&r.body);
    CHECK_EQ_STR(json_get_str(d, "previous_response_id"), "resp_other");
    json_free(d);
    ws_request_free(&r);
    const char *n = "{\"type\":\"response.create\",\"previous_response_id\":null,\"input\":[]}";
    CHECK_EQ_INT(frame_request(n, &l, &r), WS_FRAME_CREATE);
    CHECK_EQ_INT(r.chained, 0);
    ws_request_free(&r);
}

static void test_generate_false_is_a_warmup_and_processed_is_ignored(void)
{
    const char *w = "{\"type\":\"response.create\",\"model\":\"m\",\"generate\":false,\"input\":[]}";
    ws_request r;
    CHECK_EQ_INT(frame_request(w, NULL, &r), WS_FRAME_WARMUP);
    CHECK(strstr(r.body.p, "generate") == NULL);
    ws_request_free(&r);
    const char *g = "{\"type\":\"response.create\",\"model\":\"m\",\"generate\":true,\"input\":[]}";
    CHECK_EQ_INT(frame_request(g, NULL, &r), WS_FRAME_CREATE);
    ws_request_free(&r);
    const char *p = "{\"type\":\"response.processed\",\"response_id\":\"resp_1\"}";
    CHECK_EQ_INT(frame_request(p, NULL, &r), WS_FRAME_IGNORE);
    ws_request_free(&r);
}

static void test_bad_messages_get_a_400_with_a_code(void)
{
    const char *bad[] = {"", "[]", "{\"type\":\"response.create\"", "{\"model\":\"m\"}", "{\"type\":7}",
                         "{\"type\":\"response.append\",\"input\":[]}", "{\"type\":\"x\"} trailing",
                         "{\"type\":\"response.create\",\"input\":5,\"previous_response_id\":\"resp_1\"}"};
    conv_link l = last_turn();
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ws_request r;
        CHECK_EQ_INT(frame_request(bad[i], &l, &r), WS_FRAME_BAD);
        CHECK_EQ_INT(r.error_status, 400);
        CHECK(r.error_code && *r.error_code && r.error_message[0]);
        ws_request_free(&r);
    }
}

static void test_escaped_keys_are_read_as_their_names(void)
{
    const char *f = "{\"\\u0074ype\":\"response.create\",\"model\":\"m\",\"input\":[]}";
    ws_request r;
    CHECK_EQ_INT(frame_request(f, NULL, &r), WS_FRAME_CREATE);
    CHECK(strstr(r.body.p, "ype") == NULL); /* the type member, however written, is not sent */
    ws_request_free(&r);
}

static void feed(ws_collect *c, const char *s) { ws_collect_event(c, s, strlen(s)); }

static void test_collect_takes_streamed_items_when_completed_output_is_empty(void)
{
    ws_collect c;
    ws_collect_init(&c, 1 << 20);
    feed(&c, "{\"type\":\"response.created\",\"response\":{\"id\":\"resp_9\",\"output\":[]}}");
    feed(&c, "{\"type\":\"response.output_item.done\",\"item\":{\"type\":\"reasoning\",\"id\":\"rs_1\"}}");
    feed(&c, "{\"type\":\"response.output_text.delta\",\"delta\":\"x\"}");
    feed(&c, "{\"type\":\"response.output_item.done\",\"item\":{\"type\":\"message\",\"id\":\"msg_1\"}}");
    CHECK_EQ_INT(c.terminal, 0);
    feed(&c, "{\"type\":\"response.completed\",\"response\":{\"id\":\"resp_9\",\"output\":[]}}");
    CHECK_EQ_INT(c.terminal, 1);
    CHECK_EQ_INT(c.completed, 1);
    CHECK_EQ_STR(c.response_id, "resp_9");
    json_value *o = json_parse(c.output.p, c.output.len, NULL, 0);
    CHECK(o && o->type == JSON_ARRAY && o->count == 2);
    CHECK_EQ_STR(json_get_str(json_at(o, 1), "id"), "msg_1");
    json_free(o);
    ws_collect_free(&c);
}

static void test_collect_prefers_the_completed_output_and_sees_failures(void)
{
    ws_collect c;
    ws_collect_init(&c, 1 << 20);
    feed(&c, "{\"type\":\"response.output_item.done\",\"item\":{\"id\":\"a\"}}");
    feed(&c, "{\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"output\":[{\"id\":\"b\"}]}}");
    CHECK(strstr(c.output.p, "\"b\"") && !strstr(c.output.p, "\"a\""));
    ws_collect_free(&c);
    ws_collect_init(&c, 1 << 20);
    feed(&c, "{\"type\":\"response.failed\",\"response\":{\"id\":\"r\",\"output\":[]}}");
    CHECK_EQ_INT(c.terminal, 1);
    CHECK_EQ_INT(c.completed, 0);
    ws_collect_free(&c);
}

static void test_collect_past_its_bound_keeps_nothing(void)
{
    ws_collect c;
    ws_collect_init(&c, 64);
    feed(&c, "{\"type\":\"response.output_item.done\",\"item\":{\"text\":\"0123456789012345678901234567890123456789"
             "0123456789012345678901234567890123456789\"}}");
    CHECK_EQ_INT(c.overflow, 1);
    CHECK_EQ_INT(c.n_items, 0);
    ws_collect_free(&c);
}

static void test_event_type_reads_only_a_plain_type(void)
{
    char t[64];
    ws_event_type("{\"type\": \"response.completed\",\"x\":1}", 37, t, sizeof t);
    CHECK_EQ_STR(t, "response.completed");
    ws_event_type("{\"type\":\"resp", 13, t, sizeof t);
    CHECK_EQ_STR(t, "");
    ws_event_type("{\"x\":1}", 7, t, sizeof t);
    CHECK_EQ_STR(t, "");
}

int main(void)
{
    RUN(test_the_request_is_written_over_the_message_in_place);
    RUN(test_create_drops_type_and_forces_stream);
    RUN(test_client_metadata_becomes_forwarded_headers_only);
    RUN(test_continuation_of_the_last_response_is_rebuilt_whole);
    RUN(test_unknown_previous_response_id_passes_unchanged);
    RUN(test_generate_false_is_a_warmup_and_processed_is_ignored);
    RUN(test_bad_messages_get_a_400_with_a_code);
    RUN(test_escaped_keys_are_read_as_their_names);
    RUN(test_collect_takes_streamed_items_when_completed_output_is_empty);
    RUN(test_collect_prefers_the_completed_output_and_sees_failures);
    RUN(test_collect_past_its_bound_keeps_nothing);
    RUN(test_event_type_reads_only_a_plain_type);
    return check_summary();
}
