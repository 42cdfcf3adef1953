/* stream.c: the stream translator object (dialect_stream_* of dialect.h)
 * and its table of pairs: which state machine turns the upstream's events
 * into the client's bytes for an upstream dialect, a client dialect and a
 * mode (streamed or aggregated). Adding a pair is adding a row. The SSE
 * framing (an event cut anywhere waits in the parser for its rest), the
 * [DONE] marker and the JSON of each event are read here, once; a pair
 * sees one parsed event at a time and writes what it makes at once.
 * Once a terminal or failure event is seen, later events are ignored. */
#include "dialect/stream.h"
#include "dialect/aggregate.h"
#include "dialect/stream_chat.h"
#include "dialect/stream_from_messages.h"
#include "dialect/stream_messages.h"
#include "dialect/stream_responses.h"
#include "dialect/track.h"
#include <stdlib.h>
#include <string.h>

static const track_pair stream_pairs[] = {
    {API_RESPONSES, API_CHAT, 0, stream_chat_event, stream_chat_end},
    {API_CHAT, API_RESPONSES, 0, stream_responses_event, stream_responses_end},
    {API_RESPONSES, API_RESPONSES, 1, aggregate_responses_event, aggregate_responses_end},
    {API_RESPONSES, API_CHAT, 1, aggregate_responses_event, aggregate_responses_end_chat},
    {API_CHAT, API_CHAT, 1, aggregate_chat_event, aggregate_chat_end},
    {API_CHAT, API_RESPONSES, 1, aggregate_chat_event, aggregate_chat_end_responses},
    {API_RESPONSES, API_MESSAGES, 0, stream_messages_from_responses, stream_messages_end},
    {API_CHAT, API_MESSAGES, 0, stream_messages_from_chat, stream_messages_end},
    {API_RESPONSES, API_MESSAGES, 1, aggregate_responses_event, aggregate_responses_end_messages},
    {API_CHAT, API_MESSAGES, 1, aggregate_chat_event, aggregate_chat_end_messages},
    {API_MESSAGES, API_CHAT, 0, stream_from_messages_event, stream_from_messages_end},
    {API_MESSAGES, API_RESPONSES, 0, stream_from_messages_event, stream_from_messages_end},
    {API_MESSAGES, API_CHAT, 1, aggregate_messages_event, aggregate_messages_end_chat},
    {API_MESSAGES, API_RESPONSES, 1, aggregate_messages_event, aggregate_messages_end_responses},
};

static int stream_is_done(const char *data, size_t len)
{
    while (len && (*data == ' ' || *data == '\t')) {
        data++;
        len--;
    }
    while (len && (data[len - 1] == ' ' || data[len - 1] == '\t'))
        len--;
    return len == 6 && memcmp(data, "[DONE]", 6) == 0;
}

static void stream_on_event(void *ud, const char *event, const char *data, size_t len)
{
    dialect_stream *s = ud;
    if (s->finished || !s->out)
        return;
    if (stream_is_done(data, len)) {
        s->pair->event(s, "[DONE]", NULL);
        return;
    }
    json_value *doc = json_parse(data, len, NULL, 0);
    if (doc && doc->type == JSON_OBJECT) {
        const char *type = json_get_str(doc, "type");
        s->pair->event(s, type ? type : event, doc);
    }
    json_free(doc);
}

dialect_stream *dialect_stream_new(api_kind upstream, api_kind client, const dialect_stream_opts *o)
{
    int aggregate = o && o->aggregate;
    const track_pair *pair = NULL;
    for (size_t i = 0; i < sizeof stream_pairs / sizeof stream_pairs[0] && !pair; i++)
        if (stream_pairs[i].upstream == upstream && stream_pairs[i].client == client &&
            stream_pairs[i].aggregate == aggregate)
            pair = &stream_pairs[i];
    if (!pair)
        return NULL;
    dialect_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->pair = pair;
    s->include_usage = o && o->include_usage;
    shape_copy_id(s->model, o ? o->model : NULL);
    s->keep_max = TRACK_KEEP_MAX;
    s->tr.part = -1;
    shape_usage_init(&s->tr.usage);
    s->tm.text = -1;
    shape_usage_init(&s->tm.usage);
    shape_msg_usage_init(&s->fm.usage);
    shape_msg_usage_init(&s->ma.usage);
    sse_init(&s->sse, stream_on_event, s);
    return s;
}

void dialect_stream_set_budget(dialect_stream *s, size_t max)
{
    s->keep_max = max;
}

void dialect_stream_feed(dialect_stream *s, const char *buf, size_t n, sbuf *out)
{
    if (!s || s->ended || !n)
        return;
    s->out = out;
    sse_feed(&s->sse, buf, n);
    s->out = NULL;
}

int dialect_stream_end(dialect_stream *s, sbuf *out)
{
    if (!s)
        return 0;
    if (s->ended)
        return s->end_result;
    s->out = out;
    /* an event whose blank line never came (the connection closed after
     * it) still counts: its data is whole or it does not parse */
    if (sse_open_bytes(&s->sse))
        sse_feed(&s->sse, "\n\n", 2);
    s->end_result = s->pair->end(s);
    s->ended = 1;
    s->out = NULL;
    return s->end_result;
}

const char *dialect_stream_response_id(const dialect_stream *s)
{
    /* made by the chat -> Responses writers (a chat or a Messages upstream) */
    return s && s->pair->client == API_RESPONSES && s->pair->upstream != API_RESPONSES && !s->pair->aggregate &&
                   s->tr.started
               ? s->tr.resp_id
               : "";
}

const char *dialect_stream_response(const dialect_stream *s, size_t *len)
{
    *len = s && s->tr.final.len ? s->tr.final.len : 0;
    return *len ? s->tr.final.p : NULL;
}

int dialect_stream_output_sent(const dialect_stream *s)
{
    return s && s->output_sent;
}

int dialect_stream_failed(const dialect_stream *s, int *status)
{
    if (!s || !s->failed)
        return 0;
    if (status)
        *status = s->fail_status;
    return 1;
}

void dialect_stream_free(dialect_stream *s)
{
    if (!s)
        return;
    sse_free(&s->sse);
    track_free(s);
    free(s);
}
