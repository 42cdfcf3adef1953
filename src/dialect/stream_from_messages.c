/* stream_from_messages.c: an Anthropic Messages stream (an anthropic
 * account's) made a Chat Completions stream or a Responses stream, one
 * upstream event at a time (docs/clients.md, "Into the Messages API",
 * Stream).
 *
 * Anthropic's events say what a chat stream's chunks say, in blocks:
 * message_start (the id, the model, the input's usage), per content block
 * content_block_start, its deltas and content_block_stop, one block at a
 * time, then message_delta (stop_reason, the output's usage) and
 * message_stop. So the chat client's chunks and the Responses client's
 * events are written by the writers of the chat stream (stream_chat.c)
 * and of the chat -> Responses stream (stream_responses.c), fed as a chat
 * stream would feed them: a text_delta is a content delta, a thinking_delta
 * a reasoning_content delta (a reasoning summary for a Responses client,
 * as the other pairs give OpenAI's reasoning summaries), a tool_use block
 * a tool call with the next tool_calls index (parallel calls come one
 * block after the other), its input_json_delta pieces the arguments' (a
 * call whose input came empty gets "{}": OpenAI's clients parse the
 * arguments), message_delta the finish_reason and the usage (input with
 * the cache reads and writes, cached the cache reads), message_stop the
 * end ([DONE], response.completed). A Responses client's function_call
 * item is finished with its block, so a client may run a call while the
 * next streams. Signatures, redacted thinking and server tools' blocks are
 * left out; an `error` event (overloaded_error, rate_limit_error, ...) is
 * the chat stream's error chunk or response.failed, the stream failed
 * with the status it stands for (errors.c: 503, 429, ...), and nothing
 * follows it.
 *
 * What is kept: the chat id (chatcmpl-X of Anthropic's msg_X), and per
 * block its kind, its tool index and how much of it went out; the usage
 * and the stop_reason. No text is kept here (the Responses writers keep
 * theirs for their .done events, within the stream's budget). */
#include "dialect/stream_from_messages.h"
#include "dialect/stream_chat.h"
#include "dialect/stream_responses.h"
#include <string.h>

static int fm_rsp(const dialect_stream *s)
{
    return s->pair->client == API_RESPONSES;
}

/* message_start (or the first event that stands for it): the client's
 * opening chunk or events. msg: the message object, NULL when none came. */
static void fm_start(dialect_stream *s, const json_value *msg)
{
    frommsg_state *t = &s->fm;
    if (t->started)
        return;
    t->started = 1;
    char chat_id[SHAPE_ID_MAX];
    shape_chat_id_of_message(chat_id, json_get_str(msg, "id"));
    const char *model = json_get_str(msg, "model"); /* NULL or "": the client's */
    /* Anthropic says no time: created 0 (a translator reads no clock) */
    if (fm_rsp(s)) {
        stream_responses_begin(s, chat_id, model, 0);
    } else {
        stream_chat_ids(s, chat_id, model, 0);
        stream_chat_role(s);
    }
}

/* The block of Anthropic's index i, or NULL. */
static frommsg_block *fm_find(frommsg_state *t, long i)
{
    for (size_t k = 0; k < t->n; k++)
        if (t->v[k].index == i)
            return &t->v[k];
    return NULL;
}

/* A new block of kind at index i, or NULL when no more can be kept. */
static frommsg_block *fm_add(dialect_stream *s, long i, int kind)
{
    frommsg_state *t = &s->fm;
    void *v = t->v;
    if (!track_room(s, &v, t->n, &t->cap, sizeof *t->v))
        return NULL;
    t->v = v;
    frommsg_block *b = &t->v[t->n++];
    memset(b, 0, sizeof *b);
    b->index = i;
    b->kind = kind;
    b->tool_index = kind == TRACK_CALL ? t->calls++ : -1;
    return b;
}

/* A piece of text or thinking of block b. */
static void fm_text(dialect_stream *s, frommsg_block *b, const char *text, size_t n)
{
    frommsg_state *t = &s->fm;
    if (!n || b->stopped)
        return;
    if (b->kind == TRACK_MESSAGE) {
        if (fm_rsp(s))
            stream_responses_text(s, 0, text, n);
        else
            stream_chat_text(s, "content", text, n);
    } else {
        /* the blocks of thinking read as paragraphs of one reasoning (a
         * Responses client's next reasoning item, after other output,
         * starts afresh) */
        int sep = !b->got && t->thought && (!fm_rsp(s) || s->tr.open == TRACK_REASONING);
        sbuf both = SBUF_INIT;
        if (sep) {
            sbuf_append(&both, "\n\n", 2);
            sbuf_append(&both, text, n);
            text = both.p;
            n = both.len;
        }
        if (fm_rsp(s))
            stream_responses_reasoning(s, text, n);
        else
            stream_chat_text(s, "reasoning_content", text, n);
        sbuf_free(&both);
        t->thought = 1;
    }
    b->got += n;
}

/* A piece of tool block b's arguments. */
static void fm_args(dialect_stream *s, frommsg_block *b, const char *p, size_t n)
{
    if (!n || b->stopped)
        return;
    if (fm_rsp(s))
        stream_responses_call(s, b->tool_index, NULL, NULL, 0, p, n);
    else
        stream_chat_call_args(s, b->tool_index, p, n);
    b->got += n;
}

static int fm_kind(const char *type)
{
    return strcmp(type, "text") == 0       ? TRACK_MESSAGE
           : strcmp(type, "thinking") == 0 ? TRACK_REASONING
           : strcmp(type, "tool_use") == 0 ? TRACK_CALL
                                           : TRACK_OTHER;
}

/* content_block_start: the block; a tool_use's call announced (id, name);
 * what the block already holds (a start with text, an input given whole)
 * goes out as its first piece. */
static void fm_block_start(dialect_stream *s, const json_value *doc)
{
    const json_value *cb = json_get(doc, "content_block");
    long i = shape_index(doc, "index");
    if (i < 0 || !cb || cb->type != JSON_OBJECT || fm_find(&s->fm, i))
        return;
    frommsg_block *b = fm_add(s, i, fm_kind(shape_str(cb, "type")));
    if (!b)
        return;
    if (b->kind == TRACK_CALL) {
        char id[SHAPE_ID_MAX];
        shape_copy_id(id, shape_str(cb, "id"));
        const json_value *name = json_get(cb, "name"), *input = json_get(cb, "input");
        int ns = name && name->type == JSON_STRING;
        if (fm_rsp(s))
            stream_responses_call(s, b->tool_index, id, ns ? name->str : "", ns ? name->str_len : 0, NULL, 0);
        else
            stream_chat_call_head(s, b->tool_index, id, ns ? name->str : "", ns ? name->str_len : 0);
        if (input && input->type == JSON_OBJECT && input->count) {
            sbuf text = SBUF_INIT;
            json_write(&text, input);
            fm_args(s, b, text.p, text.len);
            sbuf_free(&text);
        }
    } else if (b->kind != TRACK_OTHER) {
        const json_value *text = json_get(cb, b->kind == TRACK_MESSAGE ? "text" : "thinking");
        if (text && text->type == JSON_STRING)
            fm_text(s, b, text->str, text->str_len);
    }
}

/* content_block_delta: a piece of its block (one whose start never came:
 * of the kind its delta says, a tool call's arguments aside, which have
 * no call to go to). */
static void fm_block_delta(dialect_stream *s, const json_value *doc)
{
    const json_value *d = json_get(doc, "delta");
    const char *dt = shape_str(d, "type");
    long i = shape_index(doc, "index");
    int kind = strcmp(dt, "text_delta") == 0       ? TRACK_MESSAGE
               : strcmp(dt, "thinking_delta") == 0 ? TRACK_REASONING
               : strcmp(dt, "input_json_delta") == 0 ? TRACK_CALL
                                                     : TRACK_OTHER; /* signature_delta, citations_delta */
    if (i < 0 || kind == TRACK_OTHER)
        return;
    frommsg_block *b = fm_find(&s->fm, i);
    if (!b && kind != TRACK_CALL)
        b = fm_add(s, i, kind);
    if (!b || b->kind != kind)
        return;
    const json_value *v = json_get(d, kind == TRACK_MESSAGE ? "text" : kind == TRACK_REASONING ? "thinking" : "partial_json");
    if (!v || v->type != JSON_STRING)
        return;
    if (kind == TRACK_CALL)
        fm_args(s, b, v->str, v->str_len);
    else
        fm_text(s, b, v->str, v->str_len);
}

/* content_block_stop: a call that got no arguments gets "{}" (a call
 * without input streams none), and a Responses client's call item is
 * finished. */
static void fm_block_stop(dialect_stream *s, const json_value *doc)
{
    frommsg_block *b = fm_find(&s->fm, shape_index(doc, "index"));
    if (!b || b->stopped)
        return;
    if (b->kind == TRACK_CALL) {
        if (!b->got)
            fm_args(s, b, "{}", 2);
        if (fm_rsp(s))
            stream_responses_call_done(s, b->tool_index);
    }
    b->stopped = 1;
}

/* message_stop (or the end after message_delta): the client's end. */
static void fm_complete(dialect_stream *s)
{
    frommsg_state *t = &s->fm;
    fm_start(s, NULL);
    for (size_t k = 0; k < t->n; k++) { /* blocks the upstream did not stop */
        frommsg_block *b = &t->v[k];
        if (b->kind == TRACK_CALL && !b->stopped && !b->got)
            fm_args(s, b, "{}", 2);
        b->stopped = 1;
    }
    shape_usage u;
    shape_msg_usage_get(&t->usage, &u);
    const char *finish = shape_finish_of_stop(t->stop[0] ? t->stop : NULL, t->calls > 0);
    if (fm_rsp(s)) {
        s->tr.usage = u;
        stream_responses_close(s, finish);
        stream_responses_complete(s);
    } else {
        stream_chat_finish(s, finish, &u);
    }
}

void stream_from_messages_event(dialect_stream *s, const char *type, const json_value *doc)
{
    frommsg_state *t = &s->fm;
    if (!doc)
        return; /* [DONE] is no Anthropic event */
    if (strcmp(type, "error") == 0) {
        if (fm_rsp(s))
            stream_responses_fail(s, doc);
        else
            stream_chat_fail(s, doc);
        return;
    }
    if (strcmp(type, "message_start") == 0) {
        const json_value *msg = json_get(doc, "message");
        fm_start(s, msg);
        shape_msg_usage_read(json_get(msg, "usage"), &t->usage);
        return;
    }
    if (t->closed) /* after message_delta only message_stop counts */
        type = strcmp(type, "message_stop") == 0 ? type : "";
    if (strcmp(type, "content_block_start") == 0) {
        fm_start(s, NULL);
        fm_block_start(s, doc);
    } else if (strcmp(type, "content_block_delta") == 0) {
        fm_start(s, NULL);
        fm_block_delta(s, doc);
    } else if (strcmp(type, "content_block_stop") == 0) {
        fm_block_stop(s, doc);
    } else if (strcmp(type, "message_delta") == 0) {
        const char *stop = json_get_str(json_get(doc, "delta"), "stop_reason");
        if (stop)
            sbuf_copy_cstr(t->stop, sizeof t->stop, stop);
        shape_msg_usage_read(json_get(doc, "usage"), &t->usage);
        t->closed = 1;
    } else if (strcmp(type, "message_stop") == 0) {
        fm_complete(s);
    }
}

int stream_from_messages_end(dialect_stream *s)
{
    if (!s->terminal && s->fm.closed)
        fm_complete(s);
    return s->terminal;
}
