/* test_stream_from_messages.c: an Anthropic Messages stream (an anthropic
 * account's) made a Chat Completions stream and a Responses stream
 * (stream_from_messages.c through dialect_stream_*), the aggregated and
 * plain answers an OpenAI client gets of it (aggregate.c, answer.c), and
 * Anthropic's errors in OpenAI's shape (errors.c). Every stream is fed
 * whole, byte by byte, in pieces and split in two (stream_check.h), which
 * must all give the same bytes; every client's events are read as the
 * client reads them. */
#include "stream_check.h"
#include "dialect_check.h"
#include "dialect/errors.h"

static const dialect_stream_opts CHAT_OPTS = {.include_usage = 1, .model = "client-model"};
static const dialect_stream_opts RSP_OPTS = {.model = "client-model"};
static const dialect_stream_opts AGG = {.aggregate = 1, .model = "client-model"};

#define EV(type, json) "event: " type "\ndata: " json "\n\n"

#define A_START                                                                                                      \
    EV("message_start", "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_01XYZ\",\"type\":\"message\","        \
                        "\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null," \
                        "\"stop_sequence\":null,\"usage\":{\"input_tokens\":100,\"cache_creation_input_tokens\":20,"  \
                        "\"cache_read_input_tokens\":1000,\"output_tokens\":1}}}")                                   \
    EV("ping", "{\"type\": \"ping\"}")
#define A_BLOCK_START(i, cb) EV("content_block_start", "{\"type\":\"content_block_start\",\"index\":" #i ",\"content_block\":" cb "}")
#define A_DELTA(i, d) EV("content_block_delta", "{\"type\":\"content_block_delta\",\"index\":" #i ",\"delta\":" d "}")
#define A_STOP(i) EV("content_block_stop", "{\"type\":\"content_block_stop\",\"index\":" #i "}")
#define A_END(stop)                                                                                                  \
    EV("message_delta", "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"" stop "\",\"stop_sequence\":null}," \
                        "\"usage\":{\"output_tokens\":89}}")                                                         \
    EV("message_stop", "{\"type\":\"message_stop\"}")

/* Claude's answer with interleaved thinking: two thinking blocks (one
 * signed), text, two parallel tool calls (the second without input), a
 * redacted thinking block, stop_reason tool_use. */
#define A_FULL                                                                                                       \
    A_START                                                                                                          \
    A_BLOCK_START(0, "{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}")                                \
    A_DELTA(0, "{\"type\":\"thinking_delta\",\"thinking\":\"Plan: \"}")                                              \
    A_DELTA(0, "{\"type\":\"thinking_delta\",\"thinking\":\"check \\u00e9.\"}")                                      \
    A_DELTA(0, "{\"type\":\"signature_delta\",\"signature\":\"EqQBCkgIBx\"}") A_STOP(0)                              \
    A_BLOCK_START(1, "{\"type\":\"thinking\",\"thinking\":\"\"}")                                                    \
    A_DELTA(1, "{\"type\":\"thinking_delta\",\"thinking\":\"More.\"}") A_STOP(1)                                     \
    A_BLOCK_START(2, "{\"type\":\"text\",\"text\":\"\"}")                                                            \
    A_DELTA(2, "{\"type\":\"text_delta\",\"text\":\"Let me \\\"check\\\" \"}")                                       \
    A_DELTA(2, "{\"type\":\"text_delta\",\"text\":\"both.\\n\"}") A_STOP(2)                                          \
    A_BLOCK_START(3, "{\"type\":\"tool_use\",\"id\":\"toolu_A\",\"name\":\"get_weather\",\"input\":{}}")             \
    A_DELTA(3, "{\"type\":\"input_json_delta\",\"partial_json\":\"\"}")                                              \
    A_DELTA(3, "{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": \\\"Pa\"}")                         \
    A_DELTA(3, "{\"type\":\"input_json_delta\",\"partial_json\":\"ris\\\"}\"}") A_STOP(3)                            \
    A_BLOCK_START(4, "{\"type\":\"tool_use\",\"id\":\"toolu_B\",\"name\":\"now\",\"input\":{}}") A_STOP(4)           \
    A_BLOCK_START(5, "{\"type\":\"redacted_thinking\",\"data\":\"EmwKAhgB\"}") A_STOP(5)                             \
    A_END("tool_use")

#define A_ERROR(type, msg) EV("error", "{\"type\":\"error\",\"error\":{\"type\":\"" type "\",\"message\":\"" msg "\"}}")

/* Runs in every cut: 1 when all gave the whole's bytes and verdicts. */
static int run_cuts(api_kind client, const dialect_stream_opts *o, const char *in, stream_run *whole)
{
    return stream_run_cuts(API_MESSAGES, client, o, in, whole);
}

/* ---------- reading a chat client's chunks ---------- */

/* The concatenation of delta.<member> over the chunks. */
static void chat_member(const sbuf *out, int n, const char *member, sbuf *acc)
{
    char path[64];
    snprintf(path, sizeof path, "choices.0.delta.%s", member);
    for (int k = 0; k < n; k++) {
        json_value *d = client_event(out, k);
        const char *t = json_path_str(d, path);
        if (t)
            sbuf_puts(acc, t);
        json_free(d);
    }
    if (!acc->p)
        sbuf_puts(acc, "");
}

/* The tool call of chat index i, put together as the SDKs do. */
typedef struct chat_call {
    char id[64], name[64];
    sbuf args;
    int chunks;
} chat_call;

static void chat_call_of(const sbuf *out, int n, long i, chat_call *c)
{
    memset(c, 0, sizeof *c);
    for (int k = 0; k < n; k++) {
        json_value *d = client_event(out, k);
        const json_value *calls = json_path(d, "choices.0.delta.tool_calls");
        for (const json_value *e = calls && calls->type == JSON_ARRAY ? calls->child : NULL; e; e = e->next) {
            if (json_path_num(e, "index") != i)
                continue;
            c->chunks++;
            if (json_path_str(e, "id"))
                snprintf(c->id, sizeof c->id, "%s", json_path_str(e, "id"));
            if (json_path_str(e, "function.name"))
                snprintf(c->name, sizeof c->name, "%s", json_path_str(e, "function.name"));
            if (json_path_str(e, "function.arguments"))
                sbuf_puts(&c->args, json_path_str(e, "function.arguments"));
        }
        json_free(d);
    }
    if (!c->args.p)
        sbuf_puts(&c->args, "");
}

/* The last chunk that names a finish_reason, and the usage chunk. */
static json_value *chat_chunk_with(const sbuf *out, int n, const char *path)
{
    json_value *found = NULL;
    for (int k = 0; k < n; k++) {
        json_value *d = client_event(out, k);
        const json_value *v = json_path(d, path);
        if (v && v->type != JSON_NULL) {
            json_free(found);
            found = d;
        } else {
            json_free(d);
        }
    }
    return found;
}

/* ---------- streams to a chat client ---------- */

static void test_a_messages_stream_becomes_chat_chunks(void)
{
    stream_run r;
    CHECK(run_cuts(API_CHAT, &CHAT_OPTS, A_FULL, &r));
    CHECK_EQ_INT(r.ended, 1);
    CHECK_EQ_INT(r.failed, 0);
    CHECK_EQ_INT(r.output_sent, 1);
    client_events c;
    client_read(r.out.p, r.out.len, 0, &c);
    CHECK_EQ_INT(c.bad_json, 0);
    CHECK_EQ_INT(c.done, 1);
    CHECK_EQ_INT(c.after_done, 0);
    /* every chunk: the chat id of msg_01XYZ, the upstream's model, usage null but the last */
    json_value *first = client_event(&r.out, 0);
    CHECK_EQ_STR(json_path_str(first, "id"), "chatcmpl-01XYZ");
    CHECK_EQ_STR(json_path_str(first, "object"), "chat.completion.chunk");
    CHECK_EQ_STR(json_path_str(first, "model"), "claude-sonnet-4-5");
    CHECK_EQ_STR(json_path_str(first, "choices.0.delta.role"), "assistant");
    CHECK(json_path_type(first, "usage") == JSON_NULL);
    json_free(first);
    sbuf text = SBUF_INIT, reasoning = SBUF_INIT;
    chat_member(&r.out, c.n, "content", &text);
    chat_member(&r.out, c.n, "reasoning_content", &reasoning);
    CHECK_EQ_STR(text.p, "Let me \"check\" both.\n");
    /* thinking blocks as paragraphs of the reasoning; no signature, no redacted data */
    CHECK_EQ_STR(reasoning.p, "Plan: check \xc3\xa9.\n\nMore.");
    CHECK(strstr(r.out.p, "EqQBCkgIBx") == NULL && strstr(r.out.p, "EmwKAhgB") == NULL);
    chat_call a, b, none;
    chat_call_of(&r.out, c.n, 0, &a);
    chat_call_of(&r.out, c.n, 1, &b);
    chat_call_of(&r.out, c.n, 2, &none);
    CHECK_EQ_STR(a.id, "toolu_A");
    CHECK_EQ_STR(a.name, "get_weather");
    CHECK_EQ_STR(a.args.p, "{\"city\": \"Paris\"}");
    CHECK_EQ_STR(b.id, "toolu_B");
    CHECK_EQ_STR(b.name, "now");
    CHECK_EQ_STR(b.args.p, "{}"); /* no input streamed: "{}", which every client parses */
    CHECK_EQ_INT(none.chunks, 0);
    json_value *fin = chat_chunk_with(&r.out, c.n, "choices.0.finish_reason");
    CHECK_EQ_STR(json_path_str(fin, "choices.0.finish_reason"), "tool_calls");
    json_free(fin);
    /* the usage chunk the client asked for: input with cache reads and writes */
    json_value *u = chat_chunk_with(&r.out, c.n, "usage");
    CHECK_EQ_INT(json_path(u, "choices")->count, 0);
    CHECK_EQ_INT(json_path_num(u, "usage.prompt_tokens"), 1120);
    CHECK_EQ_INT(json_path_num(u, "usage.prompt_tokens_details.cached_tokens"), 1000);
    CHECK_EQ_INT(json_path_num(u, "usage.completion_tokens"), 89);
    CHECK_EQ_INT(json_path_num(u, "usage.total_tokens"), 1209);
    json_free(u);
    sbuf_free(&text);
    sbuf_free(&reasoning);
    sbuf_free(&a.args);
    sbuf_free(&b.args);
    sbuf_free(&none.args);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
    /* without include_usage: no usage member, no usage chunk */
    CHECK(run_cuts(API_CHAT, &RSP_OPTS, A_FULL, &r));
    CHECK(strstr(r.out.p, "\"usage\"") == NULL);
    sbuf_free(&r.out);
}

static void test_parallel_tool_calls_keep_their_indexes(void)
{
    /* three calls, each one block, text after them, a call whose input came whole at its start */
    const char *in = A_START
        A_BLOCK_START(0, "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read\",\"input\":{}}")
        A_DELTA(0, "{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\":\\\"a\\\"}\"}") A_STOP(0)
        A_BLOCK_START(1, "{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"read\",\"input\":{\"path\":\"b\"}}") A_STOP(1)
        A_BLOCK_START(2, "{\"type\":\"tool_use\",\"id\":\"toolu_3\",\"name\":\"list\",\"input\":{}}")
        A_DELTA(2, "{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}") A_STOP(2)
        A_BLOCK_START(3, "{\"type\":\"text\",\"text\":\"Reading.\"}") A_STOP(3)
        A_END("tool_use");
    stream_run r;
    CHECK(run_cuts(API_CHAT, &CHAT_OPTS, in, &r));
    client_events c;
    client_read(r.out.p, r.out.len, 0, &c);
    static const char *const ids[] = {"toolu_1", "toolu_2", "toolu_3"};
    static const char *const args[] = {"{\"path\":\"a\"}", "{\"path\":\"b\"}", "{}"};
    for (long i = 0; i < 3; i++) {
        chat_call k;
        chat_call_of(&r.out, c.n, i, &k);
        CHECK_EQ_STR(k.id, ids[i]);
        CHECK_EQ_STR(k.args.p, args[i]);
        sbuf_free(&k.args);
    }
    sbuf text = SBUF_INIT;
    chat_member(&r.out, c.n, "content", &text);
    CHECK_EQ_STR(text.p, "Reading."); /* a block's start may bring text */
    sbuf_free(&text);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
    /* the same to a Responses client: one function_call item per block, in
     * order, each finished with its block (before the next begins) */
    CHECK(run_cuts(API_RESPONSES, &RSP_OPTS, in, &r));
    client_read(r.out.p, r.out.len, 1, &c);
    CHECK_EQ_INT(c.bad_seq + c.bad_name + c.bad_json, 0);
    CHECK(strstr(c.types.p, "response.output_item.added\nresponse.function_call_arguments.delta\n"
                            "response.function_call_arguments.done\nresponse.output_item.done\n"
                            "response.output_item.added\n") != NULL);
    json_value *done = client_last(&r.out, "response.completed");
    for (long i = 0; i < 3; i++) {
        char p[64];
        snprintf(p, sizeof p, "response.output.%ld.call_id", i);
        CHECK_EQ_STR(json_path_str(done, p), ids[i]);
        snprintf(p, sizeof p, "response.output.%ld.arguments", i);
        CHECK_EQ_STR(json_path_str(done, p), args[i]);
        snprintf(p, sizeof p, "response.output.%ld.id", i);
        char want[32];
        snprintf(want, sizeof want, "fc_01XYZ_%ld", i);
        CHECK_EQ_STR(json_path_str(done, p), want);
    }
    CHECK_EQ_STR(json_path_str(done, "response.output.3.content.0.text"), "Reading.");
    json_free(done);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
}

/* ---------- streams to a Responses client ---------- */

static void test_a_messages_stream_becomes_responses_events(void)
{
    stream_run r;
    CHECK(run_cuts(API_RESPONSES, &RSP_OPTS, A_FULL, &r));
    CHECK_EQ_INT(r.ended, 1);
    CHECK_EQ_INT(r.failed, 0);
    client_events c;
    client_read(r.out.p, r.out.len, 1, &c);
    CHECK_EQ_INT(c.bad_json, 0);
    CHECK_EQ_INT(c.bad_seq, 0);
    CHECK_EQ_INT(c.bad_name, 0);
    CHECK_EQ_STR(c.types.p, "response.created\nresponse.in_progress\n"
                            "response.output_item.added\nresponse.reasoning_summary_part.added\n"
                            "response.reasoning_summary_text.delta\nresponse.reasoning_summary_text.delta\n"
                            "response.reasoning_summary_text.delta\n"
                            "response.reasoning_summary_text.done\nresponse.reasoning_summary_part.done\n"
                            "response.output_item.done\n"
                            "response.output_item.added\nresponse.content_part.added\n"
                            "response.output_text.delta\nresponse.output_text.delta\n"
                            "response.output_text.done\nresponse.content_part.done\nresponse.output_item.done\n"
                            "response.output_item.added\nresponse.function_call_arguments.delta\n"
                            "response.function_call_arguments.delta\nresponse.function_call_arguments.done\n"
                            "response.output_item.done\n"
                            "response.output_item.added\nresponse.function_call_arguments.delta\n"
                            "response.function_call_arguments.done\nresponse.output_item.done\n"
                            "response.completed\n");
    json_value *created = client_last(&r.out, "response.created");
    CHECK_EQ_STR(json_path_str(created, "response.id"), "resp_chatcmpl-01XYZ");
    CHECK_EQ_STR(json_path_str(created, "response.model"), "claude-sonnet-4-5");
    json_free(created);
    json_value *done = client_last(&r.out, "response.completed");
    CHECK_EQ_STR(json_path_str(done, "response.status"), "completed");
    CHECK_EQ_INT(json_path(done, "response.output")->count, 4);
    CHECK_EQ_STR(json_path_str(done, "response.output.0.type"), "reasoning");
    CHECK_EQ_STR(json_path_str(done, "response.output.0.id"), "rs_01XYZ");
    CHECK_EQ_STR(json_path_str(done, "response.output.0.summary.0.text"), "Plan: check \xc3\xa9.\n\nMore.");
    CHECK(json_path(done, "response.output.0.encrypted_content") == NULL);
    CHECK_EQ_STR(json_path_str(done, "response.output.1.id"), "msg_01XYZ");
    CHECK_EQ_STR(json_path_str(done, "response.output.1.content.0.text"), "Let me \"check\" both.\n");
    CHECK_EQ_STR(json_path_str(done, "response.output.2.call_id"), "toolu_A");
    CHECK_EQ_STR(json_path_str(done, "response.output.2.name"), "get_weather");
    CHECK_EQ_STR(json_path_str(done, "response.output.2.arguments"), "{\"city\": \"Paris\"}");
    CHECK_EQ_STR(json_path_str(done, "response.output.3.arguments"), "{}");
    CHECK_EQ_INT(json_path_num(done, "response.usage.input_tokens"), 1120);
    CHECK_EQ_INT(json_path_num(done, "response.usage.input_tokens_details.cached_tokens"), 1000);
    CHECK_EQ_INT(json_path_num(done, "response.usage.output_tokens"), 89);
    json_free(done);
    sbuf_free(&c.types);
    sbuf_free(&r.out);
    /* the id the proxy names the stream by, and the final response it records */
    dialect_stream *s = dialect_stream_new(API_MESSAGES, API_RESPONSES, &RSP_OPTS);
    sbuf out = SBUF_INIT;
    CHECK_EQ_STR(dialect_stream_response_id(s), "");
    dialect_stream_feed(s, A_FULL, strlen(A_FULL), &out);
    CHECK_EQ_STR(dialect_stream_response_id(s), "resp_chatcmpl-01XYZ");
    CHECK_EQ_INT(dialect_stream_end(s, &out), 1);
    size_t len;
    const char *resp = dialect_stream_response(s, &len);
    CHECK(resp && len && memmem(resp, len, "\"status\":\"completed\"", 20));
    dialect_stream_free(s);
    sbuf_free(&out);
}

/* ---------- endings ---------- */

static void test_stop_reasons_become_finish_reasons_and_statuses(void)
{
    static const struct {
        const char *stop, *finish, *status, *reason;
    } cases[] = {
        {"end_turn", "stop", "completed", NULL},
        {"stop_sequence", "stop", "completed", NULL},
        {"max_tokens", "length", "incomplete", "max_output_tokens"},
        {"model_context_window_exceeded", "length", "incomplete", "max_output_tokens"},
        {"refusal", "content_filter", "incomplete", "content_filter"},
        {"pause_turn", "stop", "completed", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sbuf in = SBUF_INIT;
        sbuf_puts(&in, A_START A_BLOCK_START(0, "{\"type\":\"text\",\"text\":\"\"}")
                           A_DELTA(0, "{\"type\":\"text_delta\",\"text\":\"Hi\"}") A_STOP(0));
        sbuf_printf(&in, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"%s\"},"
                         "\"usage\":{\"output_tokens\":3}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
                    cases[i].stop);
        stream_run r;
        client_events c;
        CHECK(run_cuts(API_CHAT, &CHAT_OPTS, in.p, &r));
        client_read(r.out.p, r.out.len, 0, &c);
        json_value *fin = chat_chunk_with(&r.out, c.n, "choices.0.finish_reason");
        CHECK_EQ_STR(json_path_str(fin, "choices.0.finish_reason"), cases[i].finish);
        json_free(fin);
        sbuf_free(&c.types);
        sbuf_free(&r.out);
        CHECK(run_cuts(API_RESPONSES, &RSP_OPTS, in.p, &r));
        json_value *done = client_last(&r.out, cases[i].reason ? "response.incomplete" : "response.completed");
        CHECK_EQ_STR(json_path_str(done, "response.status"), cases[i].status);
        if (cases[i].reason)
            CHECK_EQ_STR(json_path_str(done, "response.incomplete_details.reason"), cases[i].reason);
        json_free(done);
        sbuf_free(&r.out);
        sbuf_free(&in);
    }
}

static void test_a_stream_cut_before_its_end_is_not_whole(void)
{
    /* cut after a delta: nothing closes it, the caller ends it as interrupted */
    const char *cut = A_START A_BLOCK_START(0, "{\"type\":\"text\",\"text\":\"\"}")
        A_DELTA(0, "{\"type\":\"text_delta\",\"text\":\"Hal\"}");
    stream_run r;
    CHECK(run_cuts(API_CHAT, &CHAT_OPTS, cut, &r));
    CHECK_EQ_INT(r.ended, 0);
    CHECK_EQ_INT(r.failed, 0);
    CHECK_EQ_INT(r.output_sent, 1);
    CHECK(strstr(r.out.p, "[DONE]") == NULL && strstr(r.out.p, "finish_reason\":\"") == NULL);
    sbuf_free(&r.out);
    CHECK(run_cuts(API_RESPONSES, &RSP_OPTS, cut, &r));
    CHECK_EQ_INT(r.ended, 0);
    CHECK(strstr(r.out.p, "response.completed") == NULL);
    sbuf_free(&r.out);
    /* message_delta came, message_stop did not: the answer is whole */
    const char *nostop = A_START A_BLOCK_START(0, "{\"type\":\"text\",\"text\":\"Hi\"}") A_STOP(0)
        EV("message_delta", "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":"
                            "{\"output_tokens\":1}}");
    CHECK(run_cuts(API_CHAT, &CHAT_OPTS, nostop, &r));
    CHECK_EQ_INT(r.ended, 1);
    CHECK(strstr(r.out.p, "data: [DONE]\n\n") != NULL);
    sbuf_free(&r.out);
    CHECK(run_cuts(API_RESPONSES, &RSP_OPTS, nostop, &r));
    CHECK_EQ_INT(r.ended, 1);
    CHECK(strstr(r.out.p, "event: response.completed") != NULL);
    sbuf_free(&r.out);
    /* nothing at all */
    CHECK(run_cuts(API_CHAT, &CHAT_OPTS, "", &r));
    CHECK_EQ_INT(r.ended, 0);
    CHECK_EQ_INT(r.out.len, 0);
    sbuf_free(&r.out);
}

/* ---------- errors ---------- */

static void test_error_events_fail_the_stream_with_their_status(void)
{
    static const struct {
        const char *type, *message, *code;
        int status;
    } cases[] = {
        {"overloaded_error", "Overloaded", "overloaded_error", 503},
        {"rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", "rate_limit_error", 429},
        {"invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum", "context_length_exceeded", 400},
        {"api_error", "Internal server error", "api_error", 500},
        {"authentication_error", "invalid x-api-key", "authentication_error", 401},
        {"permission_error", "no access", "permission_error", 403},
        {"not_found_error", "model: claude-x", "not_found_error", 404},
        {"request_too_large", "too big", "request_too_large", 413},
        {"billing_error", "credit balance too low", "billing_error", 402},
        {"timeout_error", "timed out", "timeout_error", 504},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sbuf in = SBUF_INIT;
        sbuf_puts(&in, A_START A_BLOCK_START(0, "{\"type\":\"text\",\"text\":\"\"}")
                           A_DELTA(0, "{\"type\":\"text_delta\",\"text\":\"Hel\"}"));
        sbuf_printf(&in, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":\"%s\"}}\n\n",
                    cases[i].type, cases[i].message);
        sbuf_puts(&in, A_DELTA(0, "{\"type\":\"text_delta\",\"text\":\"lo\"}") A_END("end_turn")); /* ignored */
        stream_run r;
        CHECK(run_cuts(API_CHAT, &CHAT_OPTS, in.p, &r));
        CHECK_EQ_INT(r.ended, 1);
        CHECK_EQ_INT(r.failed, 1);
        CHECK_EQ_INT(r.status, cases[i].status);
        client_events c;
        client_read(r.out.p, r.out.len, 0, &c);
        CHECK_EQ_INT(c.done, 0); /* a failed chat stream ends without [DONE] */
        json_value *err = chat_chunk_with(&r.out, c.n, "error");
        CHECK_EQ_STR(json_path_str(err, "error.message"), cases[i].message);
        CHECK_EQ_STR(json_path_str(err, "error.code"), cases[i].code);
        CHECK_EQ_STR(json_path_str(err, "error.type"), errors_type_for(cases[i].status, cases[i].code));
        json_free(err);
        CHECK(strstr(r.out.p, "\"lo\"") == NULL);
        sbuf_free(&c.types);
        sbuf_free(&r.out);
        CHECK(run_cuts(API_RESPONSES, &RSP_OPTS, in.p, &r));
        CHECK_EQ_INT(r.failed, 1);
        CHECK_EQ_INT(r.status, cases[i].status);
        json_value *failed = client_last(&r.out, "response.failed");
        CHECK_EQ_STR(json_path_str(failed, "response.status"), "failed");
        CHECK_EQ_STR(json_path_str(failed, "response.error.code"), cases[i].code);
        CHECK_EQ_STR(json_path_str(failed, "response.error.message"), cases[i].message);
        json_free(failed);
        CHECK(strstr(r.out.p, "response.completed") == NULL);
        sbuf_free(&r.out);
        sbuf_free(&in);
    }
    /* an error before anything: nothing was sent, the attempt may move unseen */
    stream_run r;
    CHECK(run_cuts(API_CHAT, &CHAT_OPTS, A_ERROR("overloaded_error", "Overloaded"), &r));
    CHECK_EQ_INT(r.failed, 1);
    CHECK_EQ_INT(r.output_sent, 0);
    CHECK_EQ_INT(r.status, 503);
    sbuf_free(&r.out);
    CHECK(run_cuts(API_RESPONSES, &RSP_OPTS, A_ERROR("overloaded_error", "Overloaded"), &r));
    CHECK_EQ_INT(r.output_sent, 0);
    client_events c;
    client_read(r.out.p, r.out.len, 1, &c);
    CHECK_EQ_STR(c.types.p, "response.created\nresponse.in_progress\nresponse.failed\n");
    sbuf_free(&c.types);
    sbuf_free(&r.out);
}

static void test_anthropic_error_bodies_become_openai_errors(void)
{
    sbuf out = SBUF_INIT;
    static const char over[] = "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}";
    dialect_error_body(529, over, sizeof over - 1, &out);
    CHECK_EQ_STR(out.p, "{\"error\":{\"message\":\"Overloaded\",\"type\":\"server_error\",\"code\":\"overloaded_error\","
                        "\"param\":null}}");
    sbuf_reset(&out);
    static const char rate[] = "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"slow down\"}}";
    dialect_error_body_for(API_RESPONSES, 429, rate, sizeof rate - 1, &out);
    CHECK_EQ_STR(out.p, "{\"error\":{\"message\":\"slow down\",\"type\":\"rate_limit_error\",\"code\":\"rate_limit_error\","
                        "\"param\":null}}");
    sbuf_reset(&out);
    static const char big[] = "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":"
                              "\"prompt is too long: 210000 tokens > 200000 maximum\"}}";
    dialect_error_body(400, big, sizeof big - 1, &out);
    json_value *d = json_parse(out.p, out.len, NULL, 0);
    CHECK_EQ_STR(json_path_str(d, "error.code"), "context_length_exceeded");
    CHECK_EQ_STR(json_path_str(d, "error.type"), "invalid_request_error");
    json_free(d);
    sbuf_reset(&out);
    /* an error in a 2xx gets the status it stands for */
    dialect_error_body(200, over, sizeof over - 1, &out);
    CHECK(strstr(out.p, "\"type\":\"server_error\"") != NULL);
    sbuf_reset(&out);
    /* a Messages client still gets Anthropic's own as it came */
    dialect_error_body_for(API_MESSAGES, 529, over, sizeof over - 1, &out);
    CHECK_EQ_STR(out.p, over);
    sbuf_reset(&out);
    /* the ChatGPT backend's error in the same frame, with a code: not Anthropic's, as it came */
    static const char codex[] = "{\"type\":\"error\",\"error\":{\"type\":\"usage_limit_reached\",\"code\":"
                                "\"usage_limit_reached\",\"message\":\"limit\"}}";
    dialect_error_body(429, codex, sizeof codex - 1, &out);
    CHECK_EQ_STR(out.p, codex);
    sbuf_free(&out);
}

/* ---------- one answer: aggregated, plain ---------- */

/* The plain answer of A_FULL's content. */
static const char A_PLAIN[] =
    "{\"id\":\"msg_01XYZ\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":["
    "{\"type\":\"thinking\",\"thinking\":\"Plan: check \\u00e9.\",\"signature\":\"EqQBCkgIBx\"},"
    "{\"type\":\"thinking\",\"thinking\":\"More.\",\"signature\":\"x\"},"
    "{\"type\":\"text\",\"text\":\"Let me \\\"check\\\" both.\\n\"},"
    "{\"type\":\"tool_use\",\"id\":\"toolu_A\",\"name\":\"get_weather\",\"input\":{\"city\":\"Paris\"}},"
    "{\"type\":\"tool_use\",\"id\":\"toolu_B\",\"name\":\"now\",\"input\":{}},"
    "{\"type\":\"redacted_thinking\",\"data\":\"EmwKAhgB\"}],"
    "\"stop_reason\":\"tool_use\",\"stop_sequence\":null,\"usage\":{\"input_tokens\":100,"
    "\"cache_creation_input_tokens\":20,\"cache_read_input_tokens\":1000,\"output_tokens\":89}}";

static void test_a_plain_messages_answer_becomes_a_chat_completion(void)
{
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(dialect_answer(API_MESSAGES, API_CHAT, A_PLAIN, sizeof A_PLAIN - 1, &out), 0);
    json_value *a = json_parse(out.p, out.len, NULL, 0);
    CHECK(a != NULL);
    CHECK_EQ_STR(json_path_str(a, "id"), "chatcmpl-01XYZ");
    CHECK_EQ_STR(json_path_str(a, "object"), "chat.completion");
    CHECK_EQ_STR(json_path_str(a, "model"), "claude-sonnet-4-5");
    CHECK_EQ_STR(json_path_str(a, "choices.0.message.content"), "Let me \"check\" both.\n");
    CHECK_EQ_STR(json_path_str(a, "choices.0.message.reasoning_content"), "Plan: check \xc3\xa9.\n\nMore.");
    CHECK_EQ_STR(json_path_str(a, "choices.0.message.tool_calls.0.id"), "toolu_A");
    CHECK_EQ_STR(json_path_str(a, "choices.0.message.tool_calls.0.function.arguments"), "{\"city\":\"Paris\"}");
    CHECK_EQ_STR(json_path_str(a, "choices.0.message.tool_calls.1.function.arguments"), "{}");
    CHECK(json_path(a, "choices.0.message.tool_calls.2") == NULL);
    CHECK_EQ_STR(json_path_str(a, "choices.0.finish_reason"), "tool_calls");
    CHECK_EQ_INT(json_path_num(a, "usage.prompt_tokens"), 1120);
    CHECK_EQ_INT(json_path_num(a, "usage.prompt_tokens_details.cached_tokens"), 1000);
    CHECK_EQ_INT(json_path_num(a, "usage.completion_tokens"), 89);
    CHECK(strstr(out.p, "EqQBCkgIBx") == NULL && strstr(out.p, "EmwKAhgB") == NULL);
    json_free(a);
    /* the aggregated stream of the same content is the same answer, byte for byte */
    stream_run r;
    CHECK(run_cuts(API_CHAT, &AGG, A_FULL, &r));
    CHECK_EQ_INT(r.ended, 1);
    CHECK_EQ_INT(r.failed, 0);
    CHECK_EQ_STR(r.out.p, out.p);
    sbuf_free(&r.out);
    /* max_tokens: length; no usage: none */
    sbuf_reset(&out);
    static const char cut[] = "{\"id\":\"msg_2\",\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":\"cut\"}],"
                              "\"stop_reason\":\"max_tokens\"}";
    CHECK_EQ_INT(dialect_answer(API_MESSAGES, API_CHAT, cut, sizeof cut - 1, &out), 0);
    a = json_parse(out.p, out.len, NULL, 0);
    CHECK_EQ_STR(json_path_str(a, "choices.0.finish_reason"), "length");
    CHECK(json_path(a, "usage") == NULL);
    json_free(a);
    /* what is no Messages answer is not translated */
    sbuf_reset(&out);
    static const char no[] = "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"x\"}}";
    CHECK_EQ_INT(dialect_answer(API_MESSAGES, API_CHAT, no, sizeof no - 1, &out), -1);
    CHECK_EQ_INT(out.len, 0);
    sbuf_free(&out);
}

static void test_a_plain_messages_answer_becomes_a_response(void)
{
    sbuf out = SBUF_INIT;
    CHECK_EQ_INT(dialect_answer(API_MESSAGES, API_RESPONSES, A_PLAIN, sizeof A_PLAIN - 1, &out), 0);
    json_value *a = json_parse(out.p, out.len, NULL, 0);
    CHECK(a != NULL);
    CHECK_EQ_STR(json_path_str(a, "id"), "resp_chatcmpl-01XYZ");
    CHECK_EQ_STR(json_path_str(a, "object"), "response");
    CHECK_EQ_STR(json_path_str(a, "status"), "completed");
    CHECK_EQ_STR(json_path_str(a, "output.0.type"), "reasoning");
    CHECK_EQ_STR(json_path_str(a, "output.0.summary.0.text"), "Plan: check \xc3\xa9.\n\nMore.");
    CHECK_EQ_STR(json_path_str(a, "output.1.content.0.text"), "Let me \"check\" both.\n");
    CHECK_EQ_STR(json_path_str(a, "output.2.call_id"), "toolu_A");
    CHECK_EQ_STR(json_path_str(a, "output.2.arguments"), "{\"city\":\"Paris\"}");
    CHECK_EQ_STR(json_path_str(a, "output.3.name"), "now");
    CHECK_EQ_INT(json_path_num(a, "usage.input_tokens"), 1120);
    CHECK_EQ_INT(json_path_num(a, "usage.input_tokens_details.cached_tokens"), 1000);
    json_free(a);
    stream_run r;
    CHECK(run_cuts(API_RESPONSES, &AGG, A_FULL, &r));
    CHECK_EQ_STR(r.out.p, out.p);
    sbuf_free(&r.out);
    /* a refusal: incomplete, content_filter */
    sbuf_reset(&out);
    static const char no[] = "{\"id\":\"msg_3\",\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":\"I can't.\"}],"
                             "\"stop_reason\":\"refusal\"}";
    CHECK_EQ_INT(dialect_answer(API_MESSAGES, API_RESPONSES, no, sizeof no - 1, &out), 0);
    a = json_parse(out.p, out.len, NULL, 0);
    CHECK_EQ_STR(json_path_str(a, "status"), "incomplete");
    CHECK_EQ_STR(json_path_str(a, "incomplete_details.reason"), "content_filter");
    json_free(a);
    sbuf_free(&out);
}

static void test_an_aggregated_stream_that_fails_or_is_cut(void)
{
    stream_run r;
    const char *in = A_START A_BLOCK_START(0, "{\"type\":\"text\",\"text\":\"\"}")
        A_DELTA(0, "{\"type\":\"text_delta\",\"text\":\"Hel\"}") A_ERROR("overloaded_error", "Overloaded");
    CHECK(run_cuts(API_CHAT, &AGG, in, &r));
    CHECK_EQ_INT(r.ended, 1);
    CHECK_EQ_INT(r.failed, 1);
    CHECK_EQ_INT(r.status, 503);
    CHECK_EQ_INT(r.output_sent, 0);
    CHECK_EQ_STR(r.out.p, "{\"error\":{\"message\":\"Overloaded\",\"type\":\"server_error\",\"code\":"
                          "\"overloaded_error\",\"param\":null}}");
    sbuf_free(&r.out);
    CHECK(run_cuts(API_RESPONSES, &AGG, A_START A_BLOCK_START(0, "{\"type\":\"text\",\"text\":\"x\"}"), &r));
    CHECK_EQ_INT(r.ended, 0);
    CHECK_EQ_INT(r.out.len, 0);
    sbuf_free(&r.out);
    /* an answer larger than the budget: a 502, never a cut answer */
    dialect_stream *s = dialect_stream_new(API_MESSAGES, API_CHAT, &AGG);
    dialect_stream_set_budget(s, 64);
    sbuf out = SBUF_INIT;
    dialect_stream_feed(s, A_FULL, strlen(A_FULL), &out);
    CHECK_EQ_INT(out.len, 0);
    CHECK_EQ_INT(dialect_stream_end(s, &out), 1);
    int status = 0;
    CHECK_EQ_INT(dialect_stream_failed(s, &status), 1);
    CHECK_EQ_INT(status, 502);
    CHECK(strstr(out.p, "answer_too_large") != NULL);
    dialect_stream_free(s);
    sbuf_free(&out);
}

int main(void)
{
    RUN(test_a_messages_stream_becomes_chat_chunks);
    RUN(test_parallel_tool_calls_keep_their_indexes);
    RUN(test_a_messages_stream_becomes_responses_events);
    RUN(test_stop_reasons_become_finish_reasons_and_statuses);
    RUN(test_a_stream_cut_before_its_end_is_not_whole);
    RUN(test_error_events_fail_the_stream_with_their_status);
    RUN(test_anthropic_error_bodies_become_openai_errors);
    RUN(test_a_plain_messages_answer_becomes_a_chat_completion);
    RUN(test_a_plain_messages_answer_becomes_a_response);
    RUN(test_an_aggregated_stream_that_fails_or_is_cut);
    return check_summary();
}
