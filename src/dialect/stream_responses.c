/* stream_responses.c: a Chat Completions stream made a Responses stream,
 * one chunk at a time (docs/clients.md, "Answer and stream (chat ->
 * Responses)"). The first chunk opens the response (response.created,
 * response.in_progress); delta.reasoning_content (or delta.reasoning)
 * opens a reasoning item with one summary_text part; delta.content and
 * delta.refusal open a message item with an output_text or refusal part;
 * each tool call index opens a function_call item whose arguments stream
 * as function_call_arguments.delta. Every event carries a sequence_number
 * counting from 0, item ids are made from the chat id (msg_, rs_, fc_:
 * shape.h) and stay the same for the whole stream.
 *
 * Items: at most one text item (message or reasoning) is open at a time;
 * a delta of the other kind, or a tool call, finishes it (its .done
 * events) before the next opens, as Responses items follow each other.
 * Tool call items stay open until the finish_reason (a chat stream may
 * interleave the arguments of parallel calls), and are finished then in
 * the order they opened. The terminal event waits for [DONE] (or the end
 * of the stream) because the usage chunk comes after the finish_reason;
 * it carries the whole output, in output_index order, and the usage.
 * What is kept for those done events and the final output is charged to
 * the stream's budget (track.h). */
#include "dialect/stream_responses.h"
#include <string.h>

/* ---------- events ---------- */

/* event: type / data: {"type":...,"sequence_number":N  (members follow) */
static void tr_open(dialect_stream *s, const char *type)
{
    track_event_open(s->out, type);
    sbuf_puts(s->out, ",\"sequence_number\":");
    sbuf_put_int(s->out, s->seq++);
}

static void tr_close(dialect_stream *s)
{
    sbuf_puts(s->out, "}\n\n");
}

/* ,"item_id":...,"output_index":N */
static void tr_at(dialect_stream *s, const char *item_id, long oi)
{
    sbuf_puts(s->out, ",\"item_id\":");
    shape_put_str(s->out, item_id);
    sbuf_puts(s->out, ",\"output_index\":");
    sbuf_put_int(s->out, oi);
}

/* The response object as it stands: final (output and usage) or not. */
static void tr_response(dialect_stream *s, const char *status, const char *reason, const char *error, size_t elen,
                        int final)
{
    torsp_state *t = &s->tr;
    shape_head h = {t->resp_id, t->created, status, reason, t->model, error, elen};
    sbuf output = SBUF_INIT;
    if (final)
        track_items_write(&t->done, &output);
    shape_response(s->out, &h, output.p, output.len, final ? &t->usage : NULL);
    sbuf_free(&output);
}

static void tr_response_event(dialect_stream *s, const char *type, const char *status, const char *reason,
                              const char *error, size_t elen, int final)
{
    tr_open(s, type);
    sbuf_puts(s->out, ",\"response\":");
    size_t at = s->out->len;
    tr_response(s, status, reason, error, elen, final);
    if (final) { /* kept for dialect_stream_response: the proxy records the turn the client got */
        sbuf_reset(&s->tr.final);
        track_append(s, &s->tr.final, s->out->p + at, s->out->len - at);
    }
    tr_close(s);
}

/* The first chunk: ids and the opening events. doc may be NULL (a stream
 * that ends or fails before any chunk). */
static void tr_begin(dialect_stream *s, const char *id, const char *model, int64_t created)
{
    torsp_state *t = &s->tr;
    if (t->started)
        return;
    t->started = 1;
    shape_copy_id(t->chat_id, id && *id ? id : SHAPE_CHAT_ID_NONE);
    shape_response_id(t->resp_id, t->chat_id);
    shape_copy_id(t->model, model && *model ? model : s->model);
    t->created = created;
    tr_response_event(s, "response.created", "in_progress", NULL, NULL, 0, 0);
    tr_response_event(s, "response.in_progress", "in_progress", NULL, NULL, 0, 0);
}

static void tr_start(dialect_stream *s, const json_value *doc)
{
    if (!s->tr.started)
        tr_begin(s, json_get_str(doc, "id"), json_get_str(doc, "model"), shape_int(doc, "created", 0));
}

/* output_item.done with the finished item, which is kept for the end. */
static void tr_item_done(dialect_stream *s, long oi, const sbuf *item)
{
    tr_open(s, "response.output_item.done");
    sbuf_puts(s->out, ",\"output_index\":");
    sbuf_put_int(s->out, oi);
    sbuf_puts(s->out, ",\"item\":");
    sbuf_append(s->out, item->p, item->len);
    tr_close(s);
    track_items_put(s, &s->tr.done, oi, item->p, item->len);
}

/* ---------- text items ---------- */

/* The message's open part: its .done events; the part is kept for the item. */
static void tr_close_part(dialect_stream *s)
{
    torsp_state *t = &s->tr;
    if (t->part < 0)
        return;
    int refusal = t->part == 1;
    const char *text = t->text.p ? t->text.p : "";
    tr_open(s, refusal ? "response.refusal.done" : "response.output_text.done");
    tr_at(s, t->open_id, t->open_index);
    sbuf_puts(s->out, ",\"content_index\":");
    sbuf_put_int(s->out, t->part_index);
    sbuf_puts(s->out, refusal ? ",\"refusal\":" : ",\"text\":");
    sbuf_json_str(s->out, text, t->text.len);
    if (!refusal)
        sbuf_puts(s->out, ",\"logprobs\":[]");
    tr_close(s);
    sbuf part = SBUF_INIT;
    shape_part(&part, refusal, text, t->text.len);
    tr_open(s, "response.content_part.done");
    tr_at(s, t->open_id, t->open_index);
    sbuf_puts(s->out, ",\"content_index\":");
    sbuf_put_int(s->out, t->part_index);
    sbuf_puts(s->out, ",\"part\":");
    sbuf_append(s->out, part.p, part.len);
    tr_close(s);
    if (track_keep(s, part.len + 1)) { /* whole or not at all: the list stays JSON */
        if (t->parts.len)
            sbuf_puts(&t->parts, ",");
        sbuf_append(&t->parts, part.p, part.len);
    }
    sbuf_free(&part);
    sbuf_reset(&t->text);
    t->part = -1;
}

/* Finishes the open message or reasoning item. */
static void tr_close_open(dialect_stream *s)
{
    torsp_state *t = &s->tr;
    sbuf item = SBUF_INIT;
    if (t->open == TRACK_MESSAGE) {
        tr_close_part(s);
        shape_item_message_begin(&item, t->open_id, "completed");
        sbuf_append(&item, t->parts.p ? t->parts.p : "", t->parts.len);
        shape_item_message_end(&item);
        sbuf_reset(&t->parts);
        tr_item_done(s, t->open_index, &item);
    } else if (t->open == TRACK_REASONING) {
        const char *text = t->text.p ? t->text.p : "";
        tr_open(s, "response.reasoning_summary_text.done");
        tr_at(s, t->open_id, t->open_index);
        sbuf_puts(s->out, ",\"summary_index\":0,\"text\":");
        sbuf_json_str(s->out, text, t->text.len);
        tr_close(s);
        tr_open(s, "response.reasoning_summary_part.done");
        tr_at(s, t->open_id, t->open_index);
        sbuf_puts(s->out, ",\"summary_index\":0,\"part\":{\"type\":\"summary_text\",\"text\":");
        sbuf_json_str(s->out, text, t->text.len);
        sbuf_puts(s->out, "}");
        tr_close(s);
        shape_item_reasoning(&item, t->open_id, text, t->text.len);
        sbuf_reset(&t->text);
        tr_item_done(s, t->open_index, &item);
    }
    sbuf_free(&item);
    t->open = TRACK_OTHER;
}

/* output_item.added for a new text item of kind. */
static void tr_open_item(dialect_stream *s, int kind)
{
    torsp_state *t = &s->tr;
    tr_close_open(s);
    t->open = kind;
    t->open_index = t->next_index++;
    sbuf item = SBUF_INIT;
    if (kind == TRACK_MESSAGE) {
        shape_item_id(t->open_id, "msg_", t->chat_id, t->messages ? t->messages : -1);
        t->messages++;
        shape_item_message_begin(&item, t->open_id, "in_progress");
        shape_item_message_end(&item);
        t->part = -1;
        t->parts_n = 0;
    } else {
        shape_item_id(t->open_id, "rs_", t->chat_id, t->reasonings ? t->reasonings : -1);
        t->reasonings++;
        shape_item_reasoning(&item, t->open_id, "", 0);
    }
    tr_open(s, "response.output_item.added");
    sbuf_puts(s->out, ",\"output_index\":");
    sbuf_put_int(s->out, t->open_index);
    sbuf_puts(s->out, ",\"item\":");
    sbuf_append(s->out, item.p, item.len);
    tr_close(s);
    sbuf_free(&item);
    if (kind == TRACK_REASONING) {
        tr_open(s, "response.reasoning_summary_part.added");
        tr_at(s, t->open_id, t->open_index);
        sbuf_puts(s->out, ",\"summary_index\":0,\"part\":{\"type\":\"summary_text\",\"text\":\"\"}");
        tr_close(s);
    }
}

static void tr_reasoning(dialect_stream *s, const char *text, size_t n)
{
    torsp_state *t = &s->tr;
    if (t->open != TRACK_REASONING)
        tr_open_item(s, TRACK_REASONING);
    tr_open(s, "response.reasoning_summary_text.delta");
    tr_at(s, t->open_id, t->open_index);
    sbuf_puts(s->out, ",\"summary_index\":0,\"delta\":");
    sbuf_json_str(s->out, text, n);
    tr_close(s);
    track_append(s, &t->text, text, n);
    s->output_sent = 1;
}

/* A piece of the answer's text (refusal 0) or of its refusal (1). */
static void tr_text(dialect_stream *s, int refusal, const char *text, size_t n)
{
    torsp_state *t = &s->tr;
    if (t->open != TRACK_MESSAGE)
        tr_open_item(s, TRACK_MESSAGE);
    if (t->part != refusal) {
        tr_close_part(s);
        t->part = refusal;
        t->part_index = t->parts_n++;
        tr_open(s, "response.content_part.added");
        tr_at(s, t->open_id, t->open_index);
        sbuf_puts(s->out, ",\"content_index\":");
        sbuf_put_int(s->out, t->part_index);
        sbuf_puts(s->out, ",\"part\":");
        shape_part(s->out, refusal, "", 0);
        tr_close(s);
    }
    tr_open(s, refusal ? "response.refusal.delta" : "response.output_text.delta");
    tr_at(s, t->open_id, t->open_index);
    sbuf_puts(s->out, ",\"content_index\":");
    sbuf_put_int(s->out, t->part_index);
    sbuf_puts(s->out, ",\"delta\":");
    sbuf_json_str(s->out, text, n);
    if (!refusal)
        sbuf_puts(s->out, ",\"logprobs\":[]");
    tr_close(s);
    track_append(s, &t->text, text, n);
    s->output_sent = 1;
}

/* ---------- tool calls ---------- */

/* A piece of call c (its name's, its arguments'; fresh: the first). */
static void tr_call_piece(dialect_stream *s, track_call *c, int fresh, const char *name, size_t name_len,
                          const char *args, size_t args_len)
{
    torsp_state *t = &s->tr;
    if (name) /* pieces add up, as the SDKs put them together */
        track_append(s, &c->name, name, name_len);
    if (fresh) {
        tr_close_open(s); /* the text before the call is finished */
        c->output_index = t->next_index++;
        shape_item_id(c->item_id, "fc_", t->chat_id, t->calls_seen);
        if (!c->call_id[0])
            shape_item_id(c->call_id, "call_", t->chat_id, t->calls_seen);
        t->calls_seen++;
        sbuf item = SBUF_INIT;
        shape_item_call(&item, c->item_id, "in_progress", c->call_id, c->name.p ? c->name.p : "", c->name.len,
                        "", 0);
        tr_open(s, "response.output_item.added");
        sbuf_puts(s->out, ",\"output_index\":");
        sbuf_put_int(s->out, c->output_index);
        sbuf_puts(s->out, ",\"item\":");
        sbuf_append(s->out, item.p, item.len);
        tr_close(s);
        sbuf_free(&item);
        s->output_sent = 1;
    }
    if (args_len) {
        tr_open(s, "response.function_call_arguments.delta");
        tr_at(s, c->item_id, c->output_index);
        sbuf_puts(s->out, ",\"delta\":");
        sbuf_json_str(s->out, args, args_len);
        tr_close(s);
        track_append(s, &c->args, args, args_len);
    }
}

static void tr_call(dialect_stream *s, const json_value *elem)
{
    if (!elem || elem->type != JSON_OBJECT)
        return;
    int fresh;
    track_call *c = track_calls_for(s, &s->tr.calls, elem, &fresh);
    if (!c || c->closed)
        return;
    const json_value *fn = json_get(elem, "function");
    const json_value *name = json_get(fn, "name"), *args = json_get(fn, "arguments");
    int ns = name && name->type == JSON_STRING, as = args && args->type == JSON_STRING;
    tr_call_piece(s, c, fresh, ns ? name->str : NULL, ns ? name->str_len : 0, as ? args->str : NULL,
                  as ? args->str_len : 0);
}

/* A call finished: its arguments' .done and its item's. */
static void tr_call_close(dialect_stream *s, track_call *c)
{
    if (c->closed)
        return;
    c->closed = 1;
    const char *args = c->args.p ? c->args.p : "";
    tr_open(s, "response.function_call_arguments.done");
    tr_at(s, c->item_id, c->output_index);
    sbuf_puts(s->out, ",\"arguments\":");
    sbuf_json_str(s->out, args, c->args.len);
    tr_close(s);
    sbuf item = SBUF_INIT;
    shape_item_call(&item, c->item_id, "completed", c->call_id, c->name.p ? c->name.p : "", c->name.len, args,
                    c->args.len);
    tr_item_done(s, c->output_index, &item);
    sbuf_free(&item);
}

/* finish_reason: every item finished (the text item, then the calls in
 * the order they opened); later deltas are ignored. */
static void tr_close_all(dialect_stream *s, const char *finish)
{
    torsp_state *t = &s->tr;
    if (t->closed)
        return;
    t->closed = 1;
    if (finish && !t->finish[0])
        sbuf_copy_cstr(t->finish, sizeof t->finish, finish);
    tr_close_open(s);
    for (size_t k = 0; k < t->calls.n; k++)
        tr_call_close(s, &t->calls.v[k]);
}

/* [DONE] (or the end after a finish_reason): the terminal event. */
static void tr_complete(dialect_stream *s)
{
    torsp_state *t = &s->tr;
    tr_start(s, NULL);
    tr_close_all(s, NULL);
    const char *reason;
    const char *status = shape_status(t->finish, &reason);
    tr_response_event(s, reason ? "response.incomplete" : "response.completed", status, reason, NULL, 0, 1);
    s->terminal = s->finished = 1;
}

/* A chat error chunk: response.failed with what is finished so far. */
static void tr_fail(dialect_stream *s, const json_value *doc)
{
    tr_start(s, NULL);
    errors_info e;
    int status = track_fail(s, doc, &e);
    sbuf err = SBUF_INIT;
    errors_write_responses(&err, status, &e);
    tr_response_event(s, "response.failed", "failed", NULL, err.p, err.len, 1);
    sbuf_free(&err);
}

static const json_value *tr_text_member(const json_value *delta, const char *key)
{
    const json_value *v = json_get(delta, key);
    return v && v->type == JSON_STRING && v->str_len ? v : NULL;
}

/* Does the chunk name the completion or carry a choice? Azure's first
 * chunk does neither ("id":"", "choices":[], its prompt filter results):
 * the response opens with the next, which has the real id. */
static int tr_chunk_opens(const json_value *doc)
{
    const json_value *choices = json_get(doc, "choices");
    return *shape_str(doc, "id") || (choices && choices->type == JSON_ARRAY && choices->count);
}

static void tr_chunk(dialect_stream *s, const json_value *doc)
{
    torsp_state *t = &s->tr;
    if (tr_chunk_opens(doc))
        tr_start(s, doc);
    shape_usage_read(json_get(doc, "usage"), &t->usage);
    const json_value *choice = track_chat_choice(doc);
    const json_value *delta = json_get(choice, "delta");
    if (delta && delta->type == JSON_OBJECT && !t->closed) {
        const json_value *r = tr_text_member(delta, "reasoning_content");
        if (!r) /* relays that name it "reasoning"; when both come they are the same text */
            r = tr_text_member(delta, "reasoning");
        const json_value *c = tr_text_member(delta, "content"), *f = tr_text_member(delta, "refusal");
        const json_value *calls = json_get(delta, "tool_calls");
        if (r)
            tr_reasoning(s, r->str, r->str_len);
        if (c)
            tr_text(s, 0, c->str, c->str_len);
        if (f)
            tr_text(s, 1, f->str, f->str_len);
        for (const json_value *e = calls && calls->type == JSON_ARRAY ? calls->child : NULL; e; e = e->next)
            tr_call(s, e);
    }
    const char *finish = json_get_str(choice, "finish_reason");
    if (finish)
        tr_close_all(s, finish);
}

void stream_responses_event(dialect_stream *s, const char *type, const json_value *doc)
{
    if (!doc) {
        tr_complete(s);
        return;
    }
    const json_value *err = json_get(doc, "error");
    if ((err && (err->type == JSON_OBJECT || err->type == JSON_STRING)) || strcmp(type, "error") == 0)
        tr_fail(s, doc);
    else
        tr_chunk(s, doc);
}

int stream_responses_end(dialect_stream *s)
{
    if (!s->terminal && s->tr.closed)
        tr_complete(s);
    return s->terminal;
}

/* ---------- the writers, for another upstream's translator too ---------- */

void stream_responses_begin(dialect_stream *s, const char *chat_id, const char *model, int64_t created)
{
    tr_begin(s, chat_id, model, created);
}

void stream_responses_text(dialect_stream *s, int refusal, const char *text, size_t n)
{
    if (n && !s->tr.closed)
        tr_text(s, refusal, text, n);
}

void stream_responses_reasoning(dialect_stream *s, const char *text, size_t n)
{
    if (n && !s->tr.closed)
        tr_reasoning(s, text, n);
}

void stream_responses_call(dialect_stream *s, long index, const char *call_id, const char *name, size_t name_len,
                           const char *args, size_t args_len)
{
    torsp_state *t = &s->tr;
    if (t->closed)
        return;
    track_call *c = track_calls_find(&t->calls, index);
    int fresh = !c;
    if (fresh && (c = track_calls_add(s, &t->calls, index)))
        shape_copy_id(c->call_id, call_id);
    if (c && !c->closed)
        tr_call_piece(s, c, fresh, fresh ? name : NULL, name_len, args, args_len);
}

void stream_responses_call_done(dialect_stream *s, long index)
{
    track_call *c = track_calls_find(&s->tr.calls, index);
    if (c)
        tr_call_close(s, c);
}

void stream_responses_close(dialect_stream *s, const char *finish)
{
    tr_close_all(s, finish);
}

void stream_responses_complete(dialect_stream *s)
{
    tr_complete(s);
}

void stream_responses_fail(dialect_stream *s, const json_value *doc)
{
    tr_fail(s, doc);
}
