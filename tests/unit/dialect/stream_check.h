/* stream_check.h: what the stream translator tests share: real-shaped
 * upstream streams, a run of a translator over an input fed whole or in
 * any cut, and checks of what a client gets (every event's data parses as
 * JSON, sequence numbers count from 0, the chat stream's chunk shape). */
#ifndef SY_TEST_STREAM_CHECK_H
#define SY_TEST_STREAM_CHECK_H
#include "check.h"
#include "base/json.h"
#include "base/sse.h"
#include "dialect/dialect.h"
#include "dialect/stream.h"

/* A ChatGPT-backend Responses stream: reasoning with a two-part summary, a
 * message, two parallel function calls with streamed arguments (the
 * second's deltas interleaved with the first's done), and a
 * response.completed whose output is [] with usage (cached and reasoning
 * tokens). */
#define RSP_CREATED                                                                                                  \
    "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":"     \
    "\"resp_abc\",\"object\":\"response\",\"created_at\":1700000000,\"status\":\"in_progress\",\"model\":"          \
    "\"gpt-5-codex\",\"output\":[]}}\n\n"                                                                            \
    "event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"sequence_number\":1,\"response\":"   \
    "{\"id\":\"resp_abc\",\"object\":\"response\",\"created_at\":1700000000,\"status\":\"in_progress\","            \
    "\"model\":\"gpt-5-codex\",\"output\":[]}}\n\n"

#define RSP_REASONING                                                                                                \
    "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":2,"     \
    "\"output_index\":0,\"item\":{\"id\":\"rs_1\",\"type\":\"reasoning\",\"encrypted_content\":\"gAAA\","          \
    "\"summary\":[]}}\n\n"                                                                                           \
    "event: response.reasoning_summary_part.added\ndata: {\"type\":\"response.reasoning_summary_part.added\","     \
    "\"sequence_number\":3,\"item_id\":\"rs_1\",\"output_index\":0,\"summary_index\":0,\"part\":{\"type\":"        \
    "\"summary_text\",\"text\":\"\"}}\n\n"                                                                           \
    "event: response.reasoning_summary_text.delta\ndata: {\"type\":\"response.reasoning_summary_text.delta\","     \
    "\"sequence_number\":4,\"item_id\":\"rs_1\",\"output_index\":0,\"summary_index\":0,\"delta\":\"**Plan**\"}\n\n" \
    "event: response.reasoning_summary_text.delta\ndata: {\"type\":\"response.reasoning_summary_text.delta\","     \
    "\"sequence_number\":5,\"item_id\":\"rs_1\",\"output_index\":0,\"summary_index\":1,\"delta\":\"Check "         \
    "weather.\"}\n\n"                                                                                                \
    "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":6,"       \
    "\"output_index\":0,\"item\":{\"id\":\"rs_1\",\"type\":\"reasoning\",\"encrypted_content\":\"gAAA\","          \
    "\"summary\":[{\"type\":\"summary_text\",\"text\":\"**Plan**\"},{\"type\":\"summary_text\",\"text\":"          \
    "\"Check weather.\"}]}}\n\n"

#define RSP_MESSAGE                                                                                                  \
    "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":7,"     \
    "\"output_index\":1,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"in_progress\","               \
    "\"content\":[],\"role\":\"assistant\"}}\n\n"                                                                    \
    "event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"sequence_number\":8,"   \
    "\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"part\":{\"type\":\"output_text\","             \
    "\"annotations\":[],\"text\":\"\"}}\n\n"                                                                         \
    "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":9,"     \
    "\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"delta\":\"Let me \\\"check\\\"\"}\n\n"          \
    "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":10,"    \
    "\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"delta\":\" both \\u00e9\\n\"}\n\n"              \
    "event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"sequence_number\":11,"      \
    "\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"text\":\"Let me \\\"check\\\" both "           \
    "\\u00e9\\n\"}\n\n"                                                                                              \
    "event: response.content_part.done\ndata: {\"type\":\"response.content_part.done\",\"sequence_number\":12,"    \
    "\"item_id\":\"msg_1\",\"output_index\":1,\"content_index\":0,\"part\":{\"type\":\"output_text\","             \
    "\"annotations\":[],\"text\":\"Let me \\\"check\\\" both \\u00e9\\n\"}}\n\n"                                    \
    "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":13,"      \
    "\"output_index\":1,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"completed\",\"content\":"     \
    "[{\"type\":\"output_text\",\"annotations\":[],\"text\":\"Let me \\\"check\\\" both \\u00e9\\n\"}],"           \
    "\"role\":\"assistant\"}}\n\n"

#define RSP_CALLS                                                                                                    \
    "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":14,"    \
    "\"output_index\":2,\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"status\":\"in_progress\","           \
    "\"arguments\":\"\",\"call_id\":\"call_A\",\"name\":\"get_weather\"}}\n\n"                                      \
    "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\","   \
    "\"sequence_number\":15,\"item_id\":\"fc_1\",\"output_index\":2,\"delta\":\"{\\\"city\\\":\"}\n\n"              \
    "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":16,"    \
    "\"output_index\":3,\"item\":{\"id\":\"fc_2\",\"type\":\"function_call\",\"status\":\"in_progress\","           \
    "\"arguments\":\"\",\"call_id\":\"call_B\",\"name\":\"get_time\"}}\n\n"                                         \
    "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\","   \
    "\"sequence_number\":17,\"item_id\":\"fc_2\",\"output_index\":3,\"delta\":\"{\\\"tz\\\":\"}\n\n"                \
    "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\","   \
    "\"sequence_number\":18,\"item_id\":\"fc_1\",\"output_index\":2,\"delta\":\"\\\"Paris\\\"}\"}\n\n"              \
    "event: response.function_call_arguments.done\ndata: {\"type\":\"response.function_call_arguments.done\","     \
    "\"sequence_number\":19,\"item_id\":\"fc_1\",\"output_index\":2,\"arguments\":\"{\\\"city\\\":"                \
    "\\\"Paris\\\"}\"}\n\n"                                                                                          \
    "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":20,"      \
    "\"output_index\":2,\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"status\":\"completed\","             \
    "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\",\"call_id\":\"call_A\",\"name\":\"get_weather\"}}\n\n"          \
    "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\","   \
    "\"sequence_number\":21,\"item_id\":\"fc_2\",\"output_index\":3,\"delta\":\"\\\"CET\\\"}\"}\n\n"                \
    "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":22,"      \
    "\"output_index\":3,\"item\":{\"id\":\"fc_2\",\"type\":\"function_call\",\"status\":\"completed\","             \
    "\"arguments\":\"{\\\"tz\\\":\\\"CET\\\"}\",\"call_id\":\"call_B\",\"name\":\"get_time\"}}\n\n"

#define RSP_USAGE                                                                                                    \
    "\"usage\":{\"input_tokens\":1200,\"input_tokens_details\":{\"cached_tokens\":1024},\"output_tokens\":300,"    \
    "\"output_tokens_details\":{\"reasoning_tokens\":128},\"total_tokens\":1500}"

#define RSP_COMPLETED_EMPTY                                                                                          \
    "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":23,\"response\":"       \
    "{\"id\":\"resp_abc\",\"object\":\"response\",\"created_at\":1700000000,\"status\":\"completed\","              \
    "\"error\":null,\"incomplete_details\":null,\"model\":\"gpt-5-codex\",\"output\":[]," RSP_USAGE "}}\n\n"

#define RSP_FULL RSP_CREATED RSP_REASONING RSP_MESSAGE RSP_CALLS RSP_COMPLETED_EMPTY

/* A chat stream (OpenAI's shape): role chunk, reasoning_content, text, two
 * parallel tool calls with arguments in pieces, finish tool_calls, the
 * usage chunk, [DONE]. */
#define CHAT_HEAD "data: {\"id\":\"chatcmpl-xyz\",\"object\":\"chat.completion.chunk\",\"created\":1700000001,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":"
#define CHAT_TAIL ",\"logprobs\":null,\"finish_reason\":null}]}\n\n"
#define CHAT_FULL                                                                                                    \
    CHAT_HEAD "{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null}" CHAT_TAIL                                \
    CHAT_HEAD "{\"reasoning_content\":\"Think \"}" CHAT_TAIL                                                        \
    CHAT_HEAD "{\"reasoning_content\":\"hard.\"}" CHAT_TAIL                                                         \
    CHAT_HEAD "{\"content\":\"Hi \\\"there\\\"\"}" CHAT_TAIL                                                        \
    CHAT_HEAD "{\"content\":\" \\u00e9\"}" CHAT_TAIL                                                                \
    CHAT_HEAD "{\"tool_calls\":[{\"index\":0,\"id\":\"call_A\",\"type\":\"function\",\"function\":{\"name\":"       \
    "\"get_weather\",\"arguments\":\"\"}}]}" CHAT_TAIL                                                              \
    CHAT_HEAD "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\":\"}}]}" CHAT_TAIL          \
    CHAT_HEAD "{\"tool_calls\":[{\"index\":1,\"id\":\"call_B\",\"type\":\"function\",\"function\":{\"name\":"       \
    "\"get_time\",\"arguments\":\"{\\\"tz\\\"\"}}]}" CHAT_TAIL                                                      \
    CHAT_HEAD "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"Paris\\\"}\"}}]}" CHAT_TAIL          \
    CHAT_HEAD "{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\":\\\"CET\\\"}\"}}]}" CHAT_TAIL           \
    "data: {\"id\":\"chatcmpl-xyz\",\"object\":\"chat.completion.chunk\",\"created\":1700000001,\"model\":"       \
    "\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"tool_calls\"}]}\n\n"  \
    "data: {\"id\":\"chatcmpl-xyz\",\"object\":\"chat.completion.chunk\",\"created\":1700000001,\"model\":"       \
    "\"gpt-4o\",\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":20,\"total_tokens\":70,"      \
    "\"prompt_tokens_details\":{\"cached_tokens\":32},\"completion_tokens_details\":{\"reasoning_tokens\":8}}}\n\n" \
    "data: [DONE]\n\n"

typedef struct stream_run {
    sbuf out;
    int ended;       /* dialect_stream_end's result */
    int failed, status;
    int output_sent;
} stream_run;

/* Runs a translator over in, fed in pieces of `piece` bytes (0: whole),
 * or, with split > 0, in two pieces cut at split. */
static inline void stream_run_go(api_kind up, api_kind client, const dialect_stream_opts *o, const char *in,
                                 size_t len, size_t piece, size_t split, stream_run *r)
{
    memset(r, 0, sizeof *r);
    dialect_stream *s = dialect_stream_new(up, client, o);
    if (!s) {
        r->ended = -1;
        return;
    }
    if (split) {
        dialect_stream_feed(s, in, split, &r->out);
        dialect_stream_feed(s, in + split, len - split, &r->out);
    } else if (!piece) {
        dialect_stream_feed(s, in, len, &r->out);
    } else {
        for (size_t i = 0; i < len; i += piece)
            dialect_stream_feed(s, in + i, len - i < piece ? len - i : piece, &r->out);
    }
    r->ended = dialect_stream_end(s, &r->out);
    r->failed = dialect_stream_failed(s, &r->status);
    r->output_sent = dialect_stream_output_sent(s);
    dialect_stream_free(s);
    if (!r->out.p)
        sbuf_puts(&r->out, "");
}

/* Is a split of in at i worth a run? Byte by byte already cuts at every
 * byte; of the splits into two pieces, a long input runs those near a line
 * end (where SSE framing is decided) and every step-th of the rest, so
 * the sanitizer builds stay within the test timeout. */
static inline int stream_split_worth(const char *in, size_t len, size_t i)
{
    size_t step = len / 512 + 1;
    return len <= 1024 || i % step == 0 || in[i - 1] == '\n' || in[i] == '\n' || (i >= 2 && in[i - 2] == '\n');
}

/* The output of a whole feed; every cut (byte by byte, pieces of 2..7,
 * and splits into two, stream_split_worth) must give exactly the same
 * bytes and verdicts. Returns 1 when they all did. */
static inline int stream_run_cuts(api_kind up, api_kind client, const dialect_stream_opts *o, const char *in,
                                  stream_run *whole)
{
    size_t len = strlen(in);
    int same = 1;
    stream_run_go(up, client, o, in, len, 0, 0, whole);
    for (size_t k = 0; k < len + 6 && same; k++) {
        stream_run r;
        if (k < 7)
            stream_run_go(up, client, o, in, len, k + 1, 0, &r);
        else if (stream_split_worth(in, len, k - 6))
            stream_run_go(up, client, o, in, len, 0, k - 6, &r);
        else
            continue;
        if (r.out.len != whole->out.len || memcmp(r.out.p, whole->out.p, r.out.len) != 0 || r.ended != whole->ended ||
            r.failed != whole->failed || r.status != whole->status || r.output_sent != whole->output_sent) {
            fprintf(stderr, "  a cut (%zu) gave other output:\n%s\n--- whole:\n%s\n", k, r.out.p, whole->out.p);
            same = 0;
        }
        sbuf_free(&r.out);
    }
    return same;
}

/* ---------- reading what a client got ---------- */

typedef struct client_events {
    int n;           /* events */
    int bad_json;    /* data that is neither JSON nor [DONE] */
    int done;        /* [DONE] seen */
    int after_done;  /* events after [DONE] */
    long next_seq;   /* Responses: the sequence_number expected next */
    int bad_seq;     /* a sequence_number missing or out of order */
    int bad_name;    /* Responses: event: name and data type differ */
    int responses;   /* check the Responses rules */
    sbuf types;      /* each event's type (Responses) or "chunk"/"[DONE]"/"error", one per line */
} client_events;

static inline void client_on_event(void *ud, const char *event, const char *data, size_t len)
{
    client_events *c = ud;
    c->n++;
    if (c->done)
        c->after_done++;
    if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
        c->done = 1;
        sbuf_puts(&c->types, "[DONE]\n");
        return;
    }
    json_value *doc = json_parse(data, len, NULL, 0);
    if (!doc || doc->type != JSON_OBJECT) {
        c->bad_json++;
        json_free(doc);
        return;
    }
    const char *type = json_get_str(doc, "type");
    if (c->responses) {
        int64_t seq;
        if (json_get_int64(doc, "sequence_number", 0, INT64_MAX / 2, &seq) != 0 || seq != c->next_seq)
            c->bad_seq++;
        c->next_seq++;
        if (!type || strcmp(type, event) != 0)
            c->bad_name++;
    }
    sbuf_puts(&c->types, type ? type : json_get(doc, "error") ? "error" : "chunk");
    sbuf_puts(&c->types, "\n");
    json_free(doc);
}

/* Parses a client's SSE bytes: counts, and whether each event is sound. */
static inline void client_read(const char *out, size_t len, int responses, client_events *c)
{
    memset(c, 0, sizeof *c);
    c->responses = responses;
    sse_parser p;
    sse_init(&p, client_on_event, c);
    sse_feed(&p, out, len);
    if (sse_open_bytes(&p))
        c->bad_json++; /* an unfinished event */
    sse_free(&p);
    if (!c->types.p)
        sbuf_puts(&c->types, "");
}

/* The data of the n-th event (0-based) of a client's SSE bytes, parsed. */
typedef struct nth_event {
    int want, at;
    json_value *doc;
} nth_event;

static inline void nth_on_event(void *ud, const char *event, const char *data, size_t len)
{
    nth_event *x = ud;
    if (x->at++ == x->want)
        x->doc = json_parse(data, len, NULL, 0);
}

static inline json_value *client_event(const sbuf *out, int n)
{
    nth_event x = {n, 0, NULL};
    sse_parser p;
    sse_init(&p, nth_on_event, &x);
    sse_feed(&p, out->p, out->len);
    sse_free(&p);
    return x.doc;
}

/* The last event of type `type` of a Responses client's bytes, parsed. */
typedef struct last_event {
    const char *type;
    json_value *doc;
} last_event;

static inline void last_on_event(void *ud, const char *event, const char *data, size_t len)
{
    last_event *x = ud;
    if (strcmp(event, x->type) == 0) {
        json_free(x->doc);
        x->doc = json_parse(data, len, NULL, 0);
    }
}

static inline json_value *client_last(const sbuf *out, const char *type)
{
    last_event x = {type, NULL};
    sse_parser p;
    sse_init(&p, last_on_event, &x);
    sse_feed(&p, out->p, out->len);
    sse_free(&p);
    return x.doc;
}

/* The member at a path of keys and indexes, e.g. "response.output.2.name". */
static inline const json_value *json_path(const json_value *v, const char *path)
{
    char key[64];
    while (v && *path) {
        size_t n = strcspn(path, ".");
        if (n >= sizeof key)
            return NULL;
        memcpy(key, path, n);
        key[n] = '\0';
        path += n + (path[n] == '.');
        if (v->type == JSON_ARRAY)
            v = json_at(v, (size_t)strtoul(key, NULL, 10));
        else
            v = json_get(v, key);
    }
    return v;
}

static inline const char *json_path_str(const json_value *v, const char *path)
{
    v = json_path(v, path);
    return v && v->type == JSON_STRING ? v->str : NULL;
}

static inline long json_path_num(const json_value *v, const char *path)
{
    v = json_path(v, path);
    return v && v->type == JSON_NUMBER ? (long)v->num : -999;
}

/* ---------- a Messages client's events ---------- */

/* The JSON type of the member at path, -1 when there is none. */
static inline int json_path_type(const json_value *v, const char *path)
{
    v = json_path(v, path);
    return v ? (int)v->type : -1;
}

/* What a Messages client got, read against Anthropic's stream grammar:
 * message_start, ping, then (content_block_start with the next index,
 * its deltas of the block's kind, content_block_stop)*, message_delta,
 * message_stop; an error event may come anywhere and ends the stream.
 * Every event's data is an object whose "type" is the event's name. */
typedef struct messages_events {
    int n;           /* events */
    int bad;         /* breaches (each said on stderr) */
    int blocks;      /* content blocks begun */
    int stopped;     /* message_stop seen */
    int error;       /* an error event seen */
    sbuf types;      /* each event's name, one per line */
    int state;       /* 0 nothing yet, 1 message_start (ping next), 2 between blocks, 3 in a block, 4 after
                      * message_delta, 5 ended */
    int tool;        /* the open block is a tool_use */
} messages_events;

static inline void messages_bad(messages_events *m, const char *what, const char *event)
{
    m->bad++;
    fprintf(stderr, "  event %d (%s): %s\n", m->n, event, what);
}

static inline void messages_on_event(void *ud, const char *event, const char *data, size_t len)
{
    messages_events *m = ud;
    m->n++;
    sbuf_puts(&m->types, event);
    sbuf_puts(&m->types, "\n");
    json_value *d = json_parse(data, len, NULL, 0);
    const char *type = json_get_str(d, "type");
    if (!d || d->type != JSON_OBJECT || !type || strcmp(type, event) != 0)
        messages_bad(m, "data is no object of its event's type", event);
    long index = json_path_num(d, "index");
    if (strcmp(event, "error") == 0) {
        if (m->state == 5 || !json_path_str(d, "error.type") || !json_path_str(d, "error.message"))
            messages_bad(m, "an error after the end, or without type and message", event);
        m->error = 1;
        m->state = 5;
    } else if (strcmp(event, "message_start") == 0) {
        const char *id = json_path_str(d, "message.id");
        if (m->state != 0 || !id || strncmp(id, "msg_", 4) != 0 ||
            strcmp(json_path_str(d, "message.type") ? json_path_str(d, "message.type") : "", "message") != 0 ||
            strcmp(json_path_str(d, "message.role") ? json_path_str(d, "message.role") : "", "assistant") != 0 ||
            json_path_type(d, "message.content") != JSON_ARRAY || json_path(d, "message.content")->count ||
            json_path_type(d, "message.stop_reason") != JSON_NULL ||
            json_path_num(d, "message.usage.output_tokens") < 0)
            messages_bad(m, "not the first event, or not an empty message", event);
        m->state = 1;
    } else if (strcmp(event, "ping") == 0) {
        if (m->state != 1 && m->state != 2)
            messages_bad(m, "a ping out of place", event);
        if (m->state == 1)
            m->state = 2;
    } else if (strcmp(event, "content_block_start") == 0) {
        const char *kind = json_path_str(d, "content_block.type");
        if (m->state != 2 || index != m->blocks || !kind ||
            (strcmp(kind, "text") != 0 && strcmp(kind, "tool_use") != 0))
            messages_bad(m, "a block begun out of place, out of order, or of no known kind", event);
        m->tool = kind && strcmp(kind, "tool_use") == 0;
        if (m->tool && (!json_path_str(d, "content_block.id") || !json_path_str(d, "content_block.name") ||
                        json_path_type(d, "content_block.input") != JSON_OBJECT))
            messages_bad(m, "a tool_use block without id, name or input", event);
        m->blocks++;
        m->state = 3;
    } else if (strcmp(event, "content_block_delta") == 0) {
        const char *dt = json_path_str(d, "delta.type");
        const char *want = m->tool ? "input_json_delta" : "text_delta";
        const char *member = m->tool ? "delta.partial_json" : "delta.text";
        if (m->state != 3 || index != m->blocks - 1 || !dt || strcmp(dt, want) != 0 || !json_path_str(d, member))
            messages_bad(m, "a delta out of its block, or not of its kind", event);
    } else if (strcmp(event, "content_block_stop") == 0) {
        if (m->state != 3 || index != m->blocks - 1)
            messages_bad(m, "a stop out of its block", event);
        m->state = 2;
    } else if (strcmp(event, "message_delta") == 0) {
        const char *stop = json_path_str(d, "delta.stop_reason");
        static const char *const reasons[] = {"end_turn", "max_tokens", "tool_use", "stop_sequence", "refusal"};
        int known = 0;
        for (size_t i = 0; stop && i < sizeof reasons / sizeof reasons[0]; i++)
            known |= strcmp(stop, reasons[i]) == 0;
        if (m->state != 2 || !known || json_path_type(d, "delta.stop_sequence") != JSON_NULL ||
            json_path_num(d, "usage.output_tokens") < 0 || json_path_num(d, "usage.input_tokens") < 0 ||
            json_path_num(d, "usage.cache_read_input_tokens") < 0)
            messages_bad(m, "out of place, or without a stop_reason and usage", event);
        m->state = 4;
    } else if (strcmp(event, "message_stop") == 0) {
        if (m->state != 4)
            messages_bad(m, "a stop before message_delta", event);
        m->stopped = 1;
        m->state = 5;
    } else {
        messages_bad(m, "no event of Anthropic's", event);
    }
    json_free(d);
}

/* Reads a Messages client's SSE bytes (an unfinished event is a breach). */
static inline void messages_read(const char *out, size_t len, messages_events *m)
{
    memset(m, 0, sizeof *m);
    sse_parser p;
    sse_init(&p, messages_on_event, m);
    sse_feed(&p, out, len);
    if (sse_open_bytes(&p))
        messages_bad(m, "an unfinished event at the end", "-");
    sse_free(&p);
    if (!m->types.p)
        sbuf_puts(&m->types, "");
}

#endif
