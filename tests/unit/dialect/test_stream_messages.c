/* test_stream_messages.c: a Responses stream and a Chat Completions stream
 * made an Anthropic Messages stream (stream_messages.c through
 * dialect_stream_*), the aggregated and plain answers a Messages client
 * gets (aggregate.c, answer.c), and the errors in Anthropic's shape
 * (errors.c). Every stream is fed whole, byte by byte, in pieces and in
 * random cuts, which must all give the same bytes; every event is read
 * against Anthropic's order (stream_check.h, messages_read). */
#include "stream_check.h"
#include "dialect_check.h"

static const dialect_stream_opts OPTS = {.model = "claude-sonnet-4-5"};
static const dialect_stream_opts AGG = {.aggregate = 1, .model = "claude-sonnet-4-5"};

#define EV(type, json) "event: " type "\ndata: " json "\n\n"
#define CHUNK(delta, finish)                                                                                         \
    "data: {\"id\":\"chatcmpl-q\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\","          \
    "\"choices\":[{\"index\":0,\"delta\":" delta ",\"finish_reason\":" finish "}]}\n\n"

/* Runs in every cut stream_run_cuts makes, and in 200 random ones (a
 * fixed seed: the same cuts every run); 1 when all gave the whole's bytes. */
static int run_all_cuts(api_kind up, const dialect_stream_opts *o, const char *in, stream_run *whole)
{
    int same = stream_run_cuts(up, API_MESSAGES, o, in, whole);
    size_t len = strlen(in);
    uint32_t x = 12345;
    for (int k = 0; k < 200 && same; k++) {
        dialect_stream *s = dialect_stream_new(up, API_MESSAGES, o);
        sbuf out = SBUF_INIT;
        for (size_t at = 0; at < len;) {
            x = x * 1103515245u + 12345u;
            size_t piece = ((x >> 16) % 97) + 1;
            if (piece > len - at)
                piece = len - at;
            dialect_stream_feed(s, in + at, piece, &out);
            at += piece;
        }
        int ended = dialect_stream_end(s, &out);
        dialect_stream_free(s);
        if (ended != whole->ended || out.len != whole->out.len || memcmp(out.p, whole->out.p, out.len) != 0) {
            fprintf(stderr, "  a random cut (%d) gave other output\n", k);
            same = 0;
        }
        sbuf_free(&out);
    }
    return same;
}

/* The concatenated text of the deltas of block `index` (text or arguments). */
static void block_text(const sbuf *out, int n, long index, sbuf *acc)
{
    for (int k = 0; k < n; k++) {
        json_value *d = client_event(out, k);
        const char *type = json_path_str(d, "type");
        if (type && strcmp(type, "content_block_delta") == 0 && json_path_num(d, "index") == index) {
            const char *t = json_path_str(d, "delta.text");
            const char *a = json_path_str(d, "delta.partial_json");
            sbuf_puts(acc, t ? t : a ? a : "");
        }
        json_free(d);
    }
    if (!acc->p)
        sbuf_puts(acc, "");
}

/* Runs in through every cut (run_all_cuts: r keeps the whole's output),
 * reads it against Anthropic's order (into m, its types to free), and
 * checks its n blocks hold texts (text or arguments) in order. */
static void blocks_are(api_kind up, const char *in, const char *const *texts, int n, stream_run *r, messages_events *m)
{
    CHECK(run_all_cuts(up, &OPTS, in, r));
    messages_read(r->out.p, r->out.len, m);
    CHECK_EQ_INT(m->bad, 0);
    CHECK_EQ_INT(m->blocks, n);
    for (int k = 0; k < n; k++) {
        sbuf t = SBUF_INIT;
        block_text(&r->out, m->n, k, &t);
        CHECK_EQ_STR(t.p, texts[k]);
        sbuf_free(&t);
    }
}

static void test_a_chatgpt_stream_becomes_anthropic_events_in_order_in_every_cut(void)
{
    stream_run r;
    messages_events m;
    static const char *const texts[] = {"Let me \"check\" both \xc3\xa9\n", "{\"city\":\"Paris\"}", "{\"tz\":\"CET\"}"};
    blocks_are(API_RESPONSES, RSP_FULL, texts, 3, &r, &m);
    CHECK_EQ_INT(r.ended, 1);
    CHECK_EQ_INT(r.failed, 0);
    CHECK_EQ_INT(r.output_sent, 1);
    CHECK_EQ_INT(m.stopped, 1);
    /* exactly Anthropic's order: the reasoning item left out, the text,
     * then the two calls one after the other */
    CHECK_EQ_STR(m.types.p, "message_start\nping\n"
                            "content_block_start\ncontent_block_delta\ncontent_block_delta\ncontent_block_stop\n"
                            "content_block_start\ncontent_block_delta\ncontent_block_delta\ncontent_block_stop\n"
                            "content_block_start\ncontent_block_delta\ncontent_block_delta\ncontent_block_stop\n"
                            "message_delta\nmessage_stop\n");
    json_value *start = client_event(&r.out, 0);
    CHECK_EQ_STR(json_path_str(start, "message.id"), "msg_abc");
    CHECK_EQ_STR(json_path_str(start, "message.model"), "gpt-5-codex");
    CHECK(json_path(start, "message.stop_sequence")->type == JSON_NULL);
    CHECK_EQ_INT(json_path_num(start, "message.usage.input_tokens"), 0);
    json_free(start);
    json_value *call = client_event(&r.out, 6);
    CHECK_EQ_STR(json_path_str(call, "content_block.id"), "call_A");
    CHECK_EQ_STR(json_path_str(call, "content_block.name"), "get_weather");
    CHECK_EQ_INT(json_path(call, "content_block.input")->count, 0);
    json_free(call);
    json_value *delta = client_event(&r.out, m.n - 2);
    CHECK_EQ_STR(json_path_str(delta, "delta.stop_reason"), "tool_use");
    /* Anthropic counts cache reads apart: 1200 in, 1024 of them cached */
    CHECK_EQ_INT(json_path_num(delta, "usage.input_tokens"), 176);
    CHECK_EQ_INT(json_path_num(delta, "usage.cache_read_input_tokens"), 1024);
    CHECK_EQ_INT(json_path_num(delta, "usage.cache_creation_input_tokens"), 0);
    CHECK_EQ_INT(json_path_num(delta, "usage.output_tokens"), 300);
    json_free(delta);
    /* the reasoning summary never reaches the client, signed or not */
    CHECK(strstr(r.out.p, "thinking") == NULL && strstr(r.out.p, "signature") == NULL);
    CHECK(strstr(r.out.p, "Plan") == NULL && strstr(r.out.p, "gAAA") == NULL);
    CHECK_EQ_STR(dialect_stream_response_id(NULL), "");
    sbuf_free(&m.types);
    sbuf_free(&r.out);
}

static void test_a_chat_stream_becomes_anthropic_events_in_order_in_every_cut(void)
{
    /* call_B's arguments came while call_A was the open block: they wait,
     * then come whole when its turn comes */
    stream_run r;
    messages_events m;
    static const char *const texts[] = {"Hi \"there\" \xc3\xa9", "{\"city\":\"Paris\"}", "{\"tz\":\"CET\"}"};
    blocks_are(API_CHAT, CHAT_FULL, texts, 3, &r, &m);
    CHECK_EQ_INT(r.ended, 1);
    CHECK_EQ_INT(m.stopped, 1);
    json_value *start = client_event(&r.out, 0);
    CHECK_EQ_STR(json_path_str(start, "message.id"), "msg_xyz");
    json_free(start);
    json_value *delta = client_event(&r.out, m.n - 2);
    CHECK_EQ_STR(json_path_str(delta, "delta.stop_reason"), "tool_use");
    CHECK_EQ_INT(json_path_num(delta, "usage.input_tokens"), 18);
    CHECK_EQ_INT(json_path_num(delta, "usage.cache_read_input_tokens"), 32);
    CHECK_EQ_INT(json_path_num(delta, "usage.output_tokens"), 20);
    json_free(delta);
    CHECK(strstr(r.out.p, "Think") == NULL && strstr(r.out.p, "thinking") == NULL);
    sbuf_free(&m.types);
    sbuf_free(&r.out);
}

/* The string at path of the stream's event `back` from its end (1: the
 * last), a copy (NULL: none); the events read against Anthropic's order
 * first, in every cut. */
static char *event_str(api_kind up, const char *in, int back, const char *path, stream_run *r, messages_events *m)
{
    CHECK(run_all_cuts(up, &OPTS, in, r));
    messages_read(r->out.p, r->out.len, m);
    CHECK_EQ_INT(m->bad, 0);
    json_value *d = client_event(&r->out, m->n - back);
    const char *s = json_path_str(d, path);
    char *got = s ? strdup(s) : NULL;
    json_free(d);
    sbuf_free(&m->types);
    sbuf_free(&r->out);
    return got;
}

/* The stop_reason a stream ends with (its message_delta, the last event
 * but one). */
static char *stop_reason_of(api_kind up, const char *in)
{
    stream_run r;
    messages_events m;
    char *got = event_str(up, in, 2, "delta.stop_reason", &r, &m);
    CHECK_EQ_INT(m.stopped, 1);
    return got;
}

#define RSP_TEXT(delta)                                                                                              \
    EV("response.created", "{\"type\":\"response.created\",\"response\":{\"id\":\"resp_s\",\"model\":\"m\"}}")        \
    EV("response.output_text.delta", "{\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\","               \
                                     "\"output_index\":0,\"content_index\":0,\"delta\":" delta "}")

static void test_stop_reasons_follow_the_upstreams_ending(void)
{
    static const char *const cases[][3] = {
        {RSP_TEXT("\"hi\"") EV("response.completed", "{\"type\":\"response.completed\",\"response\":{\"status\":"
                                                     "\"completed\",\"output\":[]}}"),
         "end_turn", "r"},
        {RSP_TEXT("\"hi\"") EV("response.incomplete", "{\"type\":\"response.incomplete\",\"response\":{\"status\":"
                                                      "\"incomplete\",\"incomplete_details\":{\"reason\":"
                                                      "\"max_output_tokens\"},\"output\":[]}}"),
         "max_tokens", "r"},
        {RSP_TEXT("\"hi\"") EV("response.incomplete", "{\"type\":\"response.incomplete\",\"response\":{\"status\":"
                                                      "\"incomplete\",\"incomplete_details\":{\"reason\":"
                                                      "\"content_filter\"}}}"),
         "refusal", "r"},
        {EV("response.refusal.delta", "{\"type\":\"response.refusal.delta\",\"item_id\":\"m\",\"output_index\":0,"
                                      "\"delta\":\"I can't help with that.\"}")
             EV("response.completed", "{\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"}}"),
         "refusal", "r"},
        {CHUNK("{\"content\":\"hi\"}", "null") CHUNK("{}", "\"stop\"") "data: [DONE]\n\n", "end_turn", "c"},
        {CHUNK("{\"content\":\"hi\"}", "\"length\"") "data: [DONE]\n\n", "max_tokens", "c"},
        {CHUNK("{\"refusal\":\"no\"}", "\"stop\"") "data: [DONE]\n\n", "refusal", "c"},
        {CHUNK("{\"content\":\"hi\"}", "\"content_filter\"") "data: [DONE]\n\n", "refusal", "c"},
        /* a finish_reason and no [DONE]: the end closes the message */
        {CHUNK("{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}",
               "\"tool_calls\""),
         "tool_use", "c"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = stop_reason_of(cases[i][2][0] == 'r' ? API_RESPONSES : API_CHAT, cases[i][0]);
        CHECK_EQ_STR(got, cases[i][1]);
        free(got);
    }
}

static void test_an_answer_sent_only_whole_reaches_the_client_once(void)
{
    /* no deltas: the text in its .done events and the item, the call only
     * in response.completed's output */
    static const char in[] =
        EV("response.created", "{\"type\":\"response.created\",\"response\":{\"id\":\"resp_w\"}}")
        EV("response.output_item.added", "{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":"
                                         "{\"id\":\"msg_1\",\"type\":\"message\",\"content\":[]}}")
        EV("response.output_text.done", "{\"type\":\"response.output_text.done\",\"item_id\":\"msg_1\","
                                        "\"output_index\":0,\"text\":\"whole\"}")
        EV("response.content_part.done", "{\"type\":\"response.content_part.done\",\"item_id\":\"msg_1\","
                                         "\"output_index\":0,\"part\":{\"type\":\"output_text\",\"text\":\"whole\"}}")
        EV("response.output_item.done", "{\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"id\":"
                                        "\"msg_1\",\"type\":\"message\",\"content\":[{\"type\":\"output_text\","
                                        "\"text\":\"whole\"}]}}")
        EV("response.completed", "{\"type\":\"response.completed\",\"response\":{\"id\":\"resp_w\",\"status\":"
                                 "\"completed\",\"output\":[{\"id\":\"msg_1\",\"type\":\"message\",\"content\":[{"
                                 "\"type\":\"output_text\",\"text\":\"whole\"}]},{\"id\":\"fc_1\",\"type\":"
                                 "\"function_call\",\"call_id\":\"call_9\",\"name\":\"f\",\"arguments\":"
                                 "\"{\\\"a\\\":1}\"}]}}");
    stream_run r;
    messages_events m;
    static const char *const texts[] = {"whole", "{\"a\":1}"};
    blocks_are(API_RESPONSES, in, texts, 2, &r, &m);
    CHECK(strstr(r.out.p, "\"id\":\"call_9\"") != NULL);
    sbuf_free(&m.types);
    sbuf_free(&r.out);
}

static void test_text_after_a_call_waits_for_the_call_and_gets_its_own_block(void)
{
    static const char in[] =
        CHUNK("{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"f\","
              "\"arguments\":\"{\\\"x\\\"\"}}]}",
              "null")
        CHUNK("{\"content\":\"and text\"}", "null")
        CHUNK("{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]}", "null")
        CHUNK("{}", "\"tool_calls\"") "data: [DONE]\n\n";
    stream_run r;
    messages_events m;
    static const char *const texts[] = {"{\"x\":1}", "and text"};
    blocks_are(API_CHAT, in, texts, 2, &r, &m);
    sbuf_free(&m.types);
    sbuf_free(&r.out);
}

/* The error event a stream ends with: its type (NULL when none). */
static char *error_type_of(api_kind up, const char *in, int *status)
{
    stream_run r;
    messages_events m;
    char *got = event_str(up, in, 1, "error.type", &r, &m);
    CHECK_EQ_INT(m.stopped, 0);
    CHECK_EQ_INT(m.error, 1);
    CHECK_EQ_INT(r.ended, 1);
    CHECK_EQ_INT(r.failed, 1);
    *status = r.status;
    return got;
}

static void test_upstream_errors_become_anthropic_error_events(void)
{
    int status = 0;
    char *t = error_type_of(API_RESPONSES,
                            RSP_TEXT("\"par\"") EV("response.failed", "{\"type\":\"response.failed\",\"response\":{"
                                                                      "\"status\":\"failed\",\"error\":{\"code\":"
                                                                      "\"rate_limit_exceeded\",\"message\":\"slow "
                                                                      "down\"}}}"),
                            &status);
    CHECK_EQ_STR(t, "rate_limit_error");
    CHECK_EQ_INT(status, 429);
    free(t);
    t = error_type_of(API_RESPONSES,
                      EV("error", "{\"type\":\"error\",\"code\":\"server_is_overloaded\",\"message\":\"busy\"}"),
                      &status);
    CHECK_EQ_STR(t, "overloaded_error");
    CHECK_EQ_INT(status, 503);
    free(t);
    t = error_type_of(API_CHAT,
                      CHUNK("{\"content\":\"x\"}", "null") "data: {\"error\":{\"message\":\"bad\",\"type\":"
                                                           "\"invalid_request_error\"}}\n\n",
                      &status);
    CHECK_EQ_STR(t, "invalid_request_error");
    CHECK_EQ_INT(status, 400);
    free(t);
    t = error_type_of(API_CHAT, "data: {\"error\":{\"message\":\"boom\"}}\n\n", &status);
    CHECK_EQ_STR(t, "api_error");
    free(t);
}

static void test_a_stream_cut_before_its_end_gives_no_message_stop(void)
{
    stream_run r;
    CHECK(run_all_cuts(API_RESPONSES, &OPTS, RSP_CREATED RSP_MESSAGE, &r));
    CHECK_EQ_INT(r.ended, 0);
    messages_events m;
    messages_read(r.out.p, r.out.len, &m);
    CHECK_EQ_INT(m.bad, 0);
    CHECK_EQ_INT(m.stopped, 0);
    CHECK_EQ_INT(m.blocks, 1);
    sbuf_free(&m.types);
    sbuf_free(&r.out);
    /* a chat stream with no finish_reason is cut too */
    CHECK(run_all_cuts(API_CHAT, &OPTS, CHUNK("{\"content\":\"x\"}", "null"), &r));
    CHECK_EQ_INT(r.ended, 0);
    sbuf_free(&r.out);
}

static void test_what_cannot_be_kept_in_order_fails_with_an_api_error(void)
{
    /* the second call waits while the first is open; a budget too small
     * for what waits must not give it cut arguments */
    dialect_stream *s = dialect_stream_new(API_CHAT, API_MESSAGES, &OPTS);
    dialect_stream_set_budget(s, 600);
    sbuf out = SBUF_INIT, big = SBUF_INIT;
    sbuf_puts(&big, CHUNK("{\"tool_calls\":[{\"index\":0,\"id\":\"c0\",\"function\":{\"name\":\"f\",\"arguments\":"
                          "\"{\"}},{\"index\":1,\"id\":\"c1\",\"function\":{\"name\":\"g\",\"arguments\":\"{\"}}]}",
                          "null"));
    for (int i = 0; i < 40; i++)
        sbuf_puts(&big, CHUNK("{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"0123456789\"}}]}", "null"));
    sbuf_puts(&big, CHUNK("{}", "\"tool_calls\"") "data: [DONE]\n\n");
    dialect_stream_feed(s, big.p, big.len, &out);
    CHECK_EQ_INT(dialect_stream_end(s, &out), 1);
    int status = 0;
    CHECK_EQ_INT(dialect_stream_failed(s, &status), 1);
    CHECK_EQ_INT(status, 502);
    messages_events m;
    messages_read(out.p, out.len, &m);
    CHECK_EQ_INT(m.bad, 0);
    CHECK_EQ_INT(m.error, 1);
    CHECK_EQ_INT(m.stopped, 0);
    CHECK(strstr(out.p, "\"type\":\"api_error\"") != NULL);
    dialect_stream_free(s);
    sbuf_free(&m.types);
    sbuf_free(&out);
    sbuf_free(&big);
}

static void test_an_aggregated_stream_is_one_messages_response(void)
{
    static const api_kind ups[] = {API_RESPONSES, API_CHAT};
    static const char *const ins[] = {RSP_FULL, CHAT_FULL};
    for (int i = 0; i < 2; i++) {
        stream_run r;
        CHECK(run_all_cuts(ups[i], &AGG, ins[i], &r));
        CHECK_EQ_INT(r.ended, 1);
        CHECK_EQ_INT(r.failed, 0);
        json_value *a = json_parse(r.out.p, r.out.len, NULL, 0);
        CHECK(a != NULL);
        CHECK_EQ_STR(json_path_str(a, "type"), "message");
        CHECK_EQ_STR(json_path_str(a, "role"), "assistant");
        CHECK(strncmp(json_path_str(a, "id") ? json_path_str(a, "id") : "", "msg_", 4) == 0);
        CHECK_EQ_STR(json_path_str(a, "content.0.type"), "text");
        CHECK_EQ_STR(json_path_str(a, "content.1.type"), "tool_use");
        CHECK_EQ_STR(json_path_str(a, "content.1.id"), "call_A");
        CHECK_EQ_STR(json_path_str(a, "content.1.input.city"), "Paris");
        CHECK_EQ_STR(json_path_str(a, "content.2.input.tz"), "CET");
        CHECK_EQ_INT(json_path(a, "content")->count, 3);
        CHECK_EQ_STR(json_path_str(a, "stop_reason"), "tool_use");
        CHECK(json_path(a, "stop_sequence")->type == JSON_NULL);
        CHECK(json_path_num(a, "usage.cache_read_input_tokens") > 0);
        json_free(a);
        sbuf_free(&r.out);
    }
    /* a failed stream: Anthropic's error object, with the status */
    stream_run r;
    CHECK(run_all_cuts(API_RESPONSES, &AGG,
                       RSP_CREATED EV("response.failed", "{\"type\":\"response.failed\",\"response\":{\"error\":{"
                                                         "\"code\":\"insufficient_quota\",\"message\":\"quota\"}}}"),
                       &r));
    CHECK_EQ_INT(r.failed, 1);
    CHECK_EQ_INT(r.status, 429);
    json_value *e = json_parse(r.out.p, r.out.len, NULL, 0);
    CHECK_EQ_STR(json_path_str(e, "type"), "error");
    CHECK_EQ_STR(json_path_str(e, "error.type"), "rate_limit_error");
    CHECK_EQ_STR(json_path_str(e, "error.message"), "quota");
    json_free(e);
    sbuf_free(&r.out);
}

static void test_plain_answers_become_messages_responses(void)
{
    static const char rsp[] =
        "{\"id\":\"resp_p\",\"object\":\"response\",\"status\":\"completed\",\"model\":\"gpt-5\",\"output\":["
        "{\"id\":\"rs_1\",\"type\":\"reasoning\",\"encrypted_content\":\"gAAA\",\"summary\":[{\"type\":"
        "\"summary_text\",\"text\":\"hmm\"}]},{\"id\":\"msg_1\",\"type\":\"message\",\"content\":[{\"type\":"
        "\"output_text\",\"text\":\"Hello\"}]},{\"id\":\"fc_1\",\"type\":\"function_call\",\"call_id\":\"toolu_x\","
        "\"name\":\"Bash\",\"arguments\":\"{\\\"command\\\":\\\"ls\\\"}\"}],\"usage\":{\"input_tokens\":100,"
        "\"input_tokens_details\":{\"cached_tokens\":60},\"output_tokens\":7}}";
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(dialect_answer(API_RESPONSES, API_MESSAGES, rsp, sizeof rsp - 1, &out), 0);
    CHECK_EQ_STR(out.p, "{\"id\":\"msg_p\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"gpt-5\","
                        "\"content\":[{\"type\":\"text\",\"text\":\"Hello\"},{\"type\":\"tool_use\",\"id\":"
                        "\"toolu_x\",\"name\":\"Bash\",\"input\":{\"command\":\"ls\"}}],\"stop_reason\":\"tool_use\","
                        "\"stop_sequence\":null,\"usage\":{\"input_tokens\":40,\"cache_creation_input_tokens\":0,"
                        "\"cache_read_input_tokens\":60,\"output_tokens\":7}}");
    sbuf_reset(&out);
    static const char chat[] =
        "{\"id\":\"chatcmpl-p\",\"object\":\"chat.completion\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,"
        "\"message\":{\"role\":\"assistant\",\"content\":\"Hi\",\"reasoning_content\":\"hmm\"},\"finish_reason\":"
        "\"length\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}";
    CHECK_EQ_INT(dialect_answer(API_CHAT, API_MESSAGES, chat, sizeof chat - 1, &out), 0);
    json_value *a = json_parse(out.p, out.len, NULL, 0);
    CHECK_EQ_STR(json_path_str(a, "id"), "msg_p");
    CHECK_EQ_STR(json_path_str(a, "content.0.text"), "Hi");
    CHECK_EQ_INT(json_path(a, "content")->count, 1);
    CHECK_EQ_STR(json_path_str(a, "stop_reason"), "max_tokens");
    CHECK_EQ_INT(json_path_num(a, "usage.input_tokens"), 5);
    json_free(a);
    /* arguments that are no object give an empty input, never a broken answer */
    sbuf_reset(&out);
    static const char odd[] = "{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"c\",\"function\":{\"name\":"
                              "\"f\",\"arguments\":\"[1,\"}}]},\"finish_reason\":\"tool_calls\"}]}";
    CHECK_EQ_INT(dialect_answer(API_CHAT, API_MESSAGES, odd, sizeof odd - 1, &out), 0);
    CHECK(strstr(out.p, "\"input\":{}") != NULL && strstr(out.p, "\"id\":\"msg_switchyard\"") != NULL);
    /* a Messages answer is one of its own (made a chat one: test_stream_from_messages.c) */
    sbuf_reset(&out);
    static const char msg[] = "{\"id\":\"msg_1\",\"type\":\"message\",\"content\":[]}";
    CHECK_EQ_INT(dialect_answer(API_MESSAGES, API_MESSAGES, msg, sizeof msg - 1, &out), 0);
    CHECK_EQ_STR(out.p, msg);
    sbuf_reset(&out);
    CHECK_EQ_INT(dialect_answer(API_MESSAGES, API_CHAT, chat, sizeof chat - 1, &out), -1);
    CHECK_EQ_INT(out.len, 0);
    CHECK_EQ_INT(dialect_answer(API_RESPONSES, API_MESSAGES, chat, sizeof chat - 1, &out), -1);
    sbuf_free(&out);
}

/* The Anthropic error a Messages client gets for an upstream's body. */
static void error_for(int status, const char *body, const char *type, const char *message_part)
{
    sbuf out = SBUF_INIT;
    dialect_error_body_for(API_MESSAGES, status, body, body ? strlen(body) : 0, &out);
    json_value *d = json_parse(out.p, out.len, NULL, 0);
    CHECK_EQ_STR(json_path_str(d, "type"), "error");
    CHECK_EQ_STR(json_path_str(d, "error.type"), type);
    const char *msg = json_path_str(d, "error.message");
    CHECK(msg && strstr(msg, message_part) != NULL);
    if (!msg || !strstr(msg, message_part))
        fprintf(stderr, "  got %s\n", out.p);
    json_free(d);
    sbuf_free(&out);
}

static void test_error_bodies_come_in_anthropics_shape(void)
{
    error_for(429, "{\"error\":{\"message\":\"Rate limit reached\",\"type\":\"requests\",\"code\":"
                   "\"rate_limit_exceeded\"}}",
              "rate_limit_error", "Rate limit reached");
    error_for(400, "{\"detail\":\"Unsupported parameter: user\"}", "invalid_request_error", "user");
    error_for(404, "{\"error\":{\"message\":\"The model does not exist\",\"type\":\"invalid_request_error\"}}",
              "not_found_error", "does not exist");
    error_for(401, "{\"detail\":{\"code\":\"token_expired\"}}", "authentication_error", "token_expired");
    error_for(403, "forbidden", "permission_error", "403: forbidden");
    error_for(502, "<html><title>502 Bad Gateway</title></html>", "api_error", "502 Bad Gateway");
    error_for(503, NULL, "overloaded_error", "503");
    error_for(529, "{}", "overloaded_error", "529");
    error_for(413, "too big", "request_too_large", "too big");
    error_for(504, "", "timeout_error", "504");
    error_for(200, "{\"error\":{\"message\":\"quota\",\"code\":\"insufficient_quota\"}}", "rate_limit_error", "quota");
    /* an Anthropic error is copied as it came */
    static const char own[] = "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}";
    sbuf out = SBUF_INIT;
    dialect_error_body_for(API_MESSAGES, 529, own, sizeof own - 1, &out);
    CHECK_EQ_STR(out.p, own);
    sbuf_reset(&out);
    /* an OpenAI client keeps OpenAI's shape, as before */
    dialect_error_body_for(API_CHAT, 400, "{\"detail\":\"x\"}", 14, &out);
    CHECK(strncmp(out.p, "{\"error\":{\"message\":\"x\"", 23) == 0);
    sbuf_reset(&out);
    /* the gateway's own errors */
    dialect_error_own(API_MESSAGES, 401, "invalid_api_key", NULL, "no such key", &out);
    CHECK_EQ_STR(out.p, "{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"no such key\"}}");
    sbuf_reset(&out);
    dialect_error_own(API_MESSAGES, 529, NULL, NULL, "every account is busy", &out);
    CHECK(strstr(out.p, "\"overloaded_error\"") != NULL);
    sbuf_reset(&out);
    dialect_error_own(API_CHAT, 400, "unsupported_parameter", "top_k", "no top_k", &out);
    json_value *d = json_parse(out.p, out.len, NULL, 0);
    CHECK_EQ_STR(json_path_str(d, "error.type"), "invalid_request_error");
    CHECK_EQ_STR(json_path_str(d, "error.code"), "unsupported_parameter");
    CHECK_EQ_STR(json_path_str(d, "error.param"), "top_k");
    json_free(d);
    sbuf_free(&out);
}

int main(void)
{
    RUN(test_a_chatgpt_stream_becomes_anthropic_events_in_order_in_every_cut);
    RUN(test_a_chat_stream_becomes_anthropic_events_in_order_in_every_cut);
    RUN(test_stop_reasons_follow_the_upstreams_ending);
    RUN(test_an_answer_sent_only_whole_reaches_the_client_once);
    RUN(test_text_after_a_call_waits_for_the_call_and_gets_its_own_block);
    RUN(test_upstream_errors_become_anthropic_error_events);
    RUN(test_a_stream_cut_before_its_end_gives_no_message_stop);
    RUN(test_what_cannot_be_kept_in_order_fails_with_an_api_error);
    RUN(test_an_aggregated_stream_is_one_messages_response);
    RUN(test_plain_answers_become_messages_responses);
    RUN(test_error_bodies_come_in_anthropics_shape);
    return check_summary();
}
