/* fuzz_dialect_stream.c: any bytes as an upstream's stream, cut at points
 * the input chooses, through the stream translator in each pair and mode
 * (src/dialect/stream.c): no crash, leak or undefined behaviour, and
 * - streamed, every event the client gets is whole and its data parses
 *   as a JSON object ([DONE] aside); a Responses client's events count
 *   their sequence_number from 0 and are named by their type; nothing
 *   follows a chat [DONE];
 * - aggregated, the client gets nothing until the end, then one JSON
 *   object (an answer, or with dialect_stream_failed an error object), or
 *   nothing at all when the stream did not end;
 * - the same bytes fed whole give the same output and verdicts.
 * The same stream also goes, in the same mode, to a Messages client
 * (stream_messages.c): streamed, Anthropic's events in Anthropic's order
 * (message_start, ping, each content block started at the next index with
 * deltas of its kind and stopped before the next, message_delta,
 * message_stop; an error event ends it anywhere), every data an object
 * named by its type, message_stop exactly when the stream ended without
 * failing and an error event last exactly when it failed; aggregated, one
 * Messages response or Anthropic error object at the end, or nothing.
 * The same bytes also go, in the same mode, as an Anthropic stream (an
 * anthropic account's: stream_from_messages.c) to the chat or Responses
 * client bit 1 picks, on the same terms as the first run (aggregated: the
 * chat.completion or response object, or an error object exactly when it
 * failed). The same bytes also go to dialect_answer (every pair of the three
 * dialects: an answer comes out as JSON or nothing does),
 * dialect_error_body and dialect_error_body_for a Messages client (JSON,
 * at most 16 KiB, the message a string; Anthropic's {"type":"error"} for
 * Messages) and fill_output_sse (a terminal event's empty output filled:
 * only the items are added).
 *
 * Input: byte 0 picks the pair and mode (bit 0 upstream responses, bit 1
 * client responses, bit 2 aggregate, bit 3 include_usage, bit 4 a small
 * budget, bits 5-7 the status for the error body), byte 1 seeds the cuts,
 * the rest is the stream. */
#include "fuzz_common.h"
#include "base/json.h"
#include "base/sse.h"
#include "dialect/dialect.h"
#include "dialect/fill.h"
#include "dialect/stream.h"
#include <string.h>

typedef struct run {
    dialect_stream *s;
    sbuf out;
    int aggregate;
} run;

static void feed(void *ud, const char *p, size_t len)
{
    run *r = ud;
    dialect_stream_feed(r->s, p, len, &r->out);
    if (r->aggregate)
        FUZZ_CHECK(r->out.len == 0); /* nothing before the end */
}

typedef struct seen {
    int responses, done, events, open;
    long seq;
} seen;

static void on_event(void *ud, const char *event, const char *data, size_t len)
{
    seen *c = ud;
    c->events++;
    FUZZ_CHECK(!c->done); /* nothing after [DONE] */
    if (!c->responses && len == 6 && memcmp(data, "[DONE]", 6) == 0) {
        c->done = 1;
        return;
    }
    json_value *doc = json_parse(data, len, NULL, 0);
    FUZZ_CHECK(doc && doc->type == JSON_OBJECT);
    if (c->responses) {
        int64_t n;
        FUZZ_CHECK(json_get_int64(doc, "sequence_number", 0, INT64_MAX / 2, &n) == 0 && n == c->seq);
        c->seq++;
        const char *type = json_get_str(doc, "type");
        FUZZ_CHECK(type && strcmp(type, event) == 0);
    } else {
        FUZZ_CHECK(!*event); /* chat chunks are data: only */
    }
    json_free(doc);
}

/* The client's bytes, read as the client would: a chat stream that ended
 * well ends in [DONE], one that failed or was cut does not. */
static void check_stream(const sbuf *out, int responses, int ended, int failed)
{
    seen c = {.responses = responses};
    sse_parser p;
    sse_init(&p, on_event, &c);
    sse_feed(&p, out->p ? out->p : "", out->len);
    FUZZ_CHECK(sse_open_bytes(&p) == 0); /* every event whole */
    sse_free(&p);
    if (!responses)
        FUZZ_CHECK(c.done == (ended && !failed));
    else if (ended)
        FUZZ_CHECK(c.events >= 3); /* created, in_progress, and its terminal event */
}

/* A Messages client's events, read as it reads them. */
typedef struct anthropic {
    int events, state, blocks, tool, stopped, error;
} anthropic;

static void on_anthropic(void *ud, const char *event, const char *data, size_t len)
{
    anthropic *a = ud;
    a->events++;
    FUZZ_CHECK(a->state != 5); /* nothing after message_stop or an error */
    json_value *doc = json_parse(data, len, NULL, 0);
    const char *type = json_get_str(doc, "type");
    FUZZ_CHECK(doc && doc->type == JSON_OBJECT && type && strcmp(type, event) == 0);
    const json_value *delta = json_get(doc, "delta");
    int64_t index = -1;
    if (json_get(doc, "index"))
        FUZZ_CHECK(json_get_int64(doc, "index", 0, INT32_MAX, &index) == 0);
    if (strcmp(event, "error") == 0) {
        const json_value *e = json_get(doc, "error");
        FUZZ_CHECK(json_get_str(e, "type") && json_get_str(e, "message"));
        a->error = 1;
        a->state = 5;
    } else if (strcmp(event, "message_start") == 0) {
        const json_value *m = json_get(doc, "message"), *c = json_get(m, "content");
        FUZZ_CHECK(a->state == 0 && c && c->type == JSON_ARRAY && !c->count);
        a->state = 1;
    } else if (strcmp(event, "ping") == 0) {
        FUZZ_CHECK(a->state == 1 || a->state == 2);
        a->state = 2;
    } else if (strcmp(event, "content_block_start") == 0) {
        const char *kind = json_get_str(json_get(doc, "content_block"), "type");
        FUZZ_CHECK(a->state == 2 && index == a->blocks && kind);
        a->tool = strcmp(kind, "tool_use") == 0;
        FUZZ_CHECK(a->tool || strcmp(kind, "text") == 0);
        a->blocks++;
        a->state = 3;
    } else if (strcmp(event, "content_block_delta") == 0) {
        const char *kind = json_get_str(delta, "type");
        FUZZ_CHECK(a->state == 3 && index == a->blocks - 1 && kind);
        FUZZ_CHECK(strcmp(kind, a->tool ? "input_json_delta" : "text_delta") == 0);
        FUZZ_CHECK(json_get_str(delta, a->tool ? "partial_json" : "text"));
    } else if (strcmp(event, "content_block_stop") == 0) {
        FUZZ_CHECK(a->state == 3 && index == a->blocks - 1);
        a->state = 2;
    } else if (strcmp(event, "message_delta") == 0) {
        FUZZ_CHECK(a->state == 2 && json_get_str(delta, "stop_reason"));
        a->state = 4;
    } else {
        FUZZ_CHECK(strcmp(event, "message_stop") == 0 && a->state == 4);
        a->stopped = 1;
        a->state = 5;
    }
    json_free(doc);
}

static void check_anthropic(const sbuf *out, int ended, int failed)
{
    anthropic a = {0};
    sse_parser p;
    sse_init(&p, on_anthropic, &a);
    sse_feed(&p, out->p ? out->p : "", out->len);
    FUZZ_CHECK(sse_open_bytes(&p) == 0);
    sse_free(&p);
    FUZZ_CHECK(a.stopped == (ended && !failed));
    FUZZ_CHECK(a.error == failed);
}

static int translate(api_kind up, api_kind client, const dialect_stream_opts *o, int small, const uint8_t *data,
                     size_t n, uint8_t seed, sbuf *out, int *failed, int *status)
{
    run r = {dialect_stream_new(up, client, o), SBUF_INIT, o->aggregate};
    if (!r.s)
        return -1;
    if (small)
        dialect_stream_set_budget(r.s, 1024);
    if (seed)
        fuzz_chunks(data, n, seed, feed, &r);
    else if (n)
        feed(&r, (const char *)data, n);
    int ended = dialect_stream_end(r.s, &r.out);
    FUZZ_CHECK(dialect_stream_end(r.s, &r.out) == ended); /* a second end adds nothing */
    *failed = dialect_stream_failed(r.s, status);
    FUZZ_CHECK(ended == 0 || ended == 1);
    if (*failed)
        FUZZ_CHECK(ended && *status >= 400 && *status <= 599);
    dialect_stream_free(r.s);
    *out = r.out;
    return ended;
}

static void check_answers(const uint8_t *data, size_t n, int status)
{
    for (int up = 0; up < 3; up++)
        for (int client = 0; client < 3; client++) {
            sbuf out = SBUF_INIT;
            if (dialect_answer((api_kind)up, (api_kind)client, (const char *)data, n, &out) == 0) {
                json_value *doc = json_parse(out.p, out.len, NULL, 0);
                FUZZ_CHECK(doc && doc->type == JSON_OBJECT);
                json_free(doc);
            } else {
                FUZZ_CHECK(out.len == 0);
            }
            sbuf_free(&out);
        }
    sbuf out = SBUF_INIT;
    dialect_error_body(status, (const char *)data, n, &out);
    FUZZ_CHECK(out.len <= (16u << 10));
    json_value *doc = json_parse(out.p, out.len, NULL, 0);
    FUZZ_CHECK(doc && doc->type == JSON_OBJECT);
    const json_value *msg = json_get(json_get(doc, "error"), "message");
    FUZZ_CHECK(msg && msg->type == JSON_STRING);
    json_free(doc);
    sbuf_reset(&out);
    /* for a Messages client: Anthropic's shape, on the same terms */
    dialect_error_body_for(API_MESSAGES, status, (const char *)data, n, &out);
    FUZZ_CHECK(out.len <= (16u << 10));
    doc = json_parse(out.p, out.len, NULL, 0);
    const json_value *err = json_get(doc, "error");
    FUZZ_CHECK(json_get_str(doc, "type") && strcmp(json_get_str(doc, "type"), "error") == 0);
    FUZZ_CHECK(json_get_str(err, "type") && json_get_str(err, "message"));
    json_free(doc);
    sbuf_free(&out);
    /* the same bytes as a passthrough stream whose terminal output is filled (fill.h): when it
     * changes them, it adds the items and nothing else is lost */
    static const char items[] = "[{\"type\":\"message\"}]";
    if (fill_output_sse((const char *)data, n, items, sizeof items - 1, &out)) {
        FUZZ_CHECK(out.len > n && out.len - n <= (sizeof items - 1) * (n / 8 + 1));
        FUZZ_CHECK(memmem(out.p, out.len, items, sizeof items - 1) != NULL);
    }
    sbuf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint8_t mode = data[0], seed = data[1];
    const uint8_t *in = data + 2;
    size_t n = size - 2;
    api_kind up = mode & 1 ? API_RESPONSES : API_CHAT, client = mode & 2 ? API_RESPONSES : API_CHAT;
    dialect_stream_opts o = {.aggregate = (mode >> 2) & 1, .include_usage = (mode >> 3) & 1, .model = "m"};
    int small = (mode >> 4) & 1;
    static const int statuses[8] = {200, 400, 401, 403, 404, 429, 500, 503};

    sbuf cut = SBUF_INIT, whole = SBUF_INIT;
    int f1 = 0, s1 = 0, f2 = 0, s2 = 0;
    int e1 = translate(up, client, &o, small, in, n, seed | 1, &cut, &f1, &s1);
    if (e1 < 0) {
        FUZZ_CHECK(up == client && !o.aggregate); /* only passthrough has no translator */
    } else {
        int e2 = translate(up, client, &o, small, in, n, 0, &whole, &f2, &s2);
        FUZZ_CHECK(e1 == e2 && f1 == f2 && s1 == s2);
        FUZZ_CHECK(cut.len == whole.len && (!cut.len || memcmp(cut.p, whole.p, cut.len) == 0));
        if (o.aggregate) {
            if (!e1) {
                FUZZ_CHECK(cut.len == 0);
            } else {
                json_value *doc = json_parse(cut.p, cut.len, NULL, 0);
                FUZZ_CHECK(doc && doc->type == JSON_OBJECT);
                FUZZ_CHECK(!f1 || json_get(doc, "error"));
                json_free(doc);
            }
        } else {
            check_stream(&cut, client == API_RESPONSES, e1, f1);
        }
    }
    sbuf_free(&cut);
    sbuf_free(&whole);
    /* the same stream to a Messages client, in the same mode */
    e1 = translate(up, API_MESSAGES, &o, small, in, n, seed | 1, &cut, &f1, &s1);
    int e2 = translate(up, API_MESSAGES, &o, small, in, n, 0, &whole, &f2, &s2);
    FUZZ_CHECK(e1 >= 0 && e1 == e2 && f1 == f2 && s1 == s2);
    FUZZ_CHECK(cut.len == whole.len && (!cut.len || memcmp(cut.p, whole.p, cut.len) == 0));
    if (!o.aggregate) {
        check_anthropic(&cut, e1, f1);
    } else if (!e1) {
        FUZZ_CHECK(cut.len == 0);
    } else {
        json_value *doc = json_parse(cut.p, cut.len, NULL, 0);
        const char *type = json_get_str(doc, "type");
        FUZZ_CHECK(type && strcmp(type, f1 ? "error" : "message") == 0);
        FUZZ_CHECK(f1 ? json_get_str(json_get(doc, "error"), "type") != NULL
                      : json_get(doc, "content") && json_get(doc, "content")->type == JSON_ARRAY);
        json_free(doc);
    }
    sbuf_free(&cut);
    sbuf_free(&whole);
    /* the same bytes as an Anthropic stream (an anthropic account's) to the
     * chat or Responses client of bit 1, in the same mode */
    e1 = translate(API_MESSAGES, client, &o, small, in, n, seed | 1, &cut, &f1, &s1);
    e2 = translate(API_MESSAGES, client, &o, small, in, n, 0, &whole, &f2, &s2);
    FUZZ_CHECK(e1 >= 0 && e1 == e2 && f1 == f2 && s1 == s2);
    FUZZ_CHECK(cut.len == whole.len && (!cut.len || memcmp(cut.p, whole.p, cut.len) == 0));
    if (!o.aggregate) {
        check_stream(&cut, client == API_RESPONSES, e1, f1);
    } else if (!e1) {
        FUZZ_CHECK(cut.len == 0);
    } else {
        json_value *doc = json_parse(cut.p, cut.len, NULL, 0);
        FUZZ_CHECK(doc && doc->type == JSON_OBJECT);
        const json_value *err = json_get(doc, "error"); /* a response object has "error": null */
        FUZZ_CHECK(!f1 == !(err && err->type == JSON_OBJECT));
        FUZZ_CHECK(f1 || json_get(doc, client == API_RESPONSES ? "output" : "choices"));
        json_free(doc);
    }
    sbuf_free(&cut);
    sbuf_free(&whole);
    check_answers(in, n, statuses[mode >> 5]);
    return 0;
}
