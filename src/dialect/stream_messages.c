/* stream_messages.c: a Responses stream or a Chat Completions stream made
 * an Anthropic Messages stream, one upstream event at a time
 * (docs/clients.md, "Anthropic Messages", Stream).
 *
 * The client gets Anthropic's events in Anthropic's order: message_start
 * (its message empty, usage 0: the upstream gives its usage only at the
 * end), ping, then each content block as content_block_start, its deltas
 * (text_delta; input_json_delta with the arguments' pieces) and
 * content_block_stop, then message_delta (stop_reason, stop_sequence null,
 * the usage) and message_stop. Anthropic's blocks never overlap, while an
 * upstream may interleave the arguments of parallel tool calls: the blocks
 * are kept in the order they began (tomsg_state, track.h), the first not
 * stopped streams as its pieces come, and what comes for a later one waits
 * (charged to the stream's budget) until its turn; a block is stopped once
 * the upstream says its item is done (Responses) or the answer is finished
 * (Chat, which never says a call is done before its finish_reason). What
 * could not be kept (the budget spent) fails the stream at its end with an
 * api_error event rather than give a tool its arguments cut.
 *
 * Reasoning (summaries, reasoning_content) is left out: a thinking block
 * needs Anthropic's signature, which no other vendor can make. Claude Code
 * is reported to drop or misshow a thinking block without one, and a
 * made-up one is refused ("Invalid signature in thinking block") once the
 * conversation reaches Anthropic's API (docs/clients.md gives the
 * reports). An upstream error (response.failed, an error event, a chat
 * error chunk) is an `error` event with Anthropic's type for the status
 * it stands for, and nothing follows it. */
#include "dialect/stream_messages.h"
#include <string.h>

/* ---------- events ---------- */

/* event: type / data: {"type":"type"   (members follow) */
static void tm_event(dialect_stream *s, const char *type)
{
    track_event_open(s->out, type);
}

static void tm_event_end(dialect_stream *s)
{
    sbuf_puts(s->out, "}\n\n");
}

/* ,"index":k */
static void tm_index(dialect_stream *s, size_t k)
{
    sbuf_puts(s->out, ",\"index\":");
    sbuf_put_int(s->out, (long long)k);
}

/* message_start and a ping, once: ids from the upstream's (either may be
 * NULL: the first event named none). */
static void tm_start(dialect_stream *s, const char *upstream_id, const char *model)
{
    tomsg_state *t = &s->tm;
    if (t->started)
        return;
    t->started = 1;
    shape_copy_id(t->up_id, upstream_id);
    shape_message_id(t->id, upstream_id);
    shape_copy_id(t->model, model && *model ? model : s->model);
    tm_event(s, "message_start");
    sbuf_puts(s->out, ",\"message\":");
    shape_message_begin(s->out, t->id, t->model);
    shape_message_end(s->out, NULL, NULL);
    tm_event_end(s);
    tm_event(s, "ping");
    tm_event_end(s);
}

/* ---------- blocks ---------- */

static void tm_block_start(dialect_stream *s, size_t k)
{
    tomsg_block *b = &s->tm.v[k];
    b->started = 1;
    tm_event(s, "content_block_start");
    tm_index(s, k);
    if (b->kind == TRACK_CALL) {
        sbuf_puts(s->out, ",\"content_block\":{\"type\":\"tool_use\",\"id\":");
        shape_put_str(s->out, b->call_id);
        sbuf_puts(s->out, ",\"name\":");
        sbuf_json_str(s->out, b->name.p ? b->name.p : "", b->name.len);
        sbuf_puts(s->out, ",\"input\":{}}");
        s->output_sent = 1;
    } else {
        sbuf_puts(s->out, ",\"content_block\":{\"type\":\"text\",\"text\":\"\"}");
    }
    tm_event_end(s);
}

static void tm_block_delta(dialect_stream *s, size_t k, const char *p, size_t n)
{
    if (!n)
        return;
    tm_event(s, "content_block_delta");
    tm_index(s, k);
    int call = s->tm.v[k].kind == TRACK_CALL;
    sbuf_puts(s->out, call ? ",\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":"
                           : ",\"delta\":{\"type\":\"text_delta\",\"text\":");
    sbuf_json_str(s->out, p, n);
    sbuf_puts(s->out, "}");
    tm_event_end(s);
    s->output_sent = 1;
}

/* Starts the head and those after it whose turn comes: each gets its
 * start and what waited for it; a done one its stop, and the next is the
 * head. */
static void tm_pump(dialect_stream *s)
{
    tomsg_state *t = &s->tm;
    while (t->head < t->n) {
        size_t k = t->head;
        tomsg_block *b = &t->v[k];
        if (!b->started) {
            tm_block_start(s, k);
            tm_block_delta(s, k, b->pending.p, b->pending.len);
            sbuf_free(&b->pending);
        }
        if (!b->done)
            return;
        tm_event(s, "content_block_stop");
        tm_index(s, k);
        tm_event_end(s);
        t->head++;
    }
}

/* A new block of kind (a call's id and name given), begun at once when it
 * is the head. Its number, or -1 when no more can be kept (overflow). */
static long tm_block_add(dialect_stream *s, int kind, const char *call_id, const char *name, size_t name_len)
{
    tomsg_state *t = &s->tm;
    void *v = t->v;
    if (!track_room(s, &v, t->n, &t->cap, sizeof *t->v))
        return -1;
    t->v = v;
    size_t k = t->n++;
    tomsg_block *b = &t->v[k];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    b->output_index = -1;
    if (kind == TRACK_CALL) {
        if (call_id && *call_id)
            shape_copy_id(b->call_id, call_id);
        else /* an upstream that gave no id: one of ours, unique in the answer */
            shape_item_id(b->call_id, "call_", t->up_id, t->calls_seen);
        t->calls_seen++;
        track_append(s, &b->name, name, name_len);
    }
    tm_pump(s);
    return (long)k;
}

/* A piece of block k's text or arguments: to the client when k is the
 * head, else kept for its turn. */
static void tm_block_data(dialect_stream *s, long k, const char *p, size_t n)
{
    tomsg_state *t = &s->tm;
    if (k < 0 || !n || t->v[k].done)
        return;
    tomsg_block *b = &t->v[k];
    b->got += n;
    if ((size_t)k == t->head)
        tm_block_delta(s, (size_t)k, p, n);
    else
        track_append(s, &b->pending, p, n);
}

static void tm_block_done(dialect_stream *s, long k)
{
    if (k < 0 || s->tm.v[k].done)
        return;
    s->tm.v[k].done = 1;
    tm_pump(s);
}

/* ---------- the end ---------- */

/* Every block stopped, then message_delta and message_stop; or, when
 * something could not be kept, an api_error event instead (a 502: the
 * gateway's failure, not the upstream's). */
static void tm_finish(dialect_stream *s, const char *status, const char *reason)
{
    tomsg_state *t = &s->tm;
    tm_start(s, NULL, NULL);
    for (size_t k = t->head; k < t->n; k++)
        t->v[k].done = 1;
    tm_pump(s);
    s->terminal = s->finished = 1;
    if (s->overflow) {
        static const char msg[] = "the upstream's answer could not be put in Anthropic's order within the "
                                  "gateway's memory budget (64 MiB)";
        errors_info e = {.message = msg, .message_len = sizeof msg - 1};
        s->failed = 1;
        s->fail_status = 502;
        sbuf_puts(s->out, "event: error\ndata: ");
        errors_write_messages(s->out, 502, &e);
        sbuf_puts(s->out, "\n\n");
        return;
    }
    int calls = 0;
    for (size_t k = 0; k < t->n && !calls; k++)
        calls = t->v[k].kind == TRACK_CALL;
    tm_event(s, "message_delta");
    sbuf_puts(s->out, ",\"delta\":{\"stop_reason\":");
    shape_put_str(s->out, shape_stop_reason(status, reason, calls, t->refused));
    sbuf_puts(s->out, ",\"stop_sequence\":null},\"usage\":");
    shape_usage_messages(s->out, &t->usage);
    tm_event_end(s);
    tm_event(s, "message_stop");
    tm_event_end(s);
}

/* The upstream failed: the error event, and nothing after it. */
static void tm_fail(dialect_stream *s, const json_value *doc)
{
    errors_info e;
    int status = track_fail(s, doc, &e);
    sbuf_puts(s->out, "event: error\ndata: ");
    errors_write_messages(s->out, status, &e);
    sbuf_puts(s->out, "\n\n");
}

/* ---------- Responses events ---------- */

/* The block of kind an event names: by the item's id when both have one,
 * else by output index; the latest first. -1 when none. */
static long tm_find(const tomsg_state *t, int kind, const char *item_id, long oi)
{
    char key[SHAPE_ID_MAX];
    shape_copy_id(key, item_id);
    for (size_t k = t->n; k-- > 0;) {
        const tomsg_block *b = &t->v[k];
        if (b->kind != kind)
            continue;
        if (key[0] && b->item_id[0] ? strcmp(key, b->item_id) == 0 : oi >= 0 && oi == b->output_index)
            return (long)k;
    }
    return -1;
}

/* The block of an item (its id and output index), a new one when none. */
static long tm_item_block(dialect_stream *s, int kind, const char *item_id, long oi, const json_value *item)
{
    long k = tm_find(&s->tm, kind, item_id, oi);
    if (k >= 0)
        return k;
    const json_value *name = kind == TRACK_CALL ? json_get(item, "name") : NULL;
    int named = name && name->type == JSON_STRING;
    k = tm_block_add(s, kind, shape_str(item, "call_id"), named ? name->str : "", named ? name->str_len : 0);
    if (k >= 0) {
        shape_copy_id(s->tm.v[k].item_id, item_id);
        s->tm.v[k].output_index = oi;
    }
    return k;
}

/* A text delta (output_text or refusal) of a message item. */
static void tm_text_delta(dialect_stream *s, const json_value *doc, int refusal)
{
    const json_value *d = json_get(doc, "delta");
    if (!d || d->type != JSON_STRING || !d->str_len)
        return;
    s->tm.refused |= refusal;
    long k = tm_item_block(s, TRACK_MESSAGE, shape_str(doc, "item_id"), shape_index(doc, "output_index"), NULL);
    tm_block_data(s, k, d->str, d->str_len);
}

/* A whole text (a .done event, or the finished item's parts) of a message
 * none of whose text came yet: all of it now. */
static void tm_text_whole(dialect_stream *s, long k, const json_value *text, int refusal)
{
    if (k < 0 || !text || text->type != JSON_STRING || !text->str_len || s->tm.v[k].got)
        return;
    s->tm.refused |= refusal;
    tm_block_data(s, k, text->str, text->str_len);
}

/* The whole arguments (a .done event, the finished item): the part of
 * them that has not come yet. */
static void tm_args_rest(dialect_stream *s, long k, const json_value *args)
{
    if (k < 0 || !args || args->type != JSON_STRING || s->tm.v[k].got >= args->str_len)
        return;
    size_t got = s->tm.v[k].got;
    tm_block_data(s, k, args->str + got, args->str_len - got);
}

static void tm_args_event(dialect_stream *s, const json_value *doc, int done)
{
    long k = tm_find(&s->tm, TRACK_CALL, shape_str(doc, "item_id"), shape_index(doc, "output_index"));
    const json_value *d = json_get(doc, done ? "arguments" : "delta");
    if (done)
        tm_args_rest(s, k, d);
    else if (d && d->type == JSON_STRING)
        tm_block_data(s, k, d->str, d->str_len);
}

static int tm_kind(const json_value *item)
{
    const char *type = shape_str(item, "type");
    return strcmp(type, "message") == 0 ? TRACK_MESSAGE : strcmp(type, "function_call") == 0 ? TRACK_CALL : -1;
}

static void tm_item_added(dialect_stream *s, const json_value *doc)
{
    const json_value *item = json_get(doc, "item");
    int kind = tm_kind(item);
    if (kind < 0) /* reasoning and the others: left out */
        return;
    long k = tm_item_block(s, kind, shape_str(item, "id"), shape_index(doc, "output_index"), item);
    if (kind == TRACK_CALL) /* an upstream that sends the arguments at once */
        tm_args_rest(s, k, json_get(item, "arguments"));
}

/* A finished item (at output index oi): what of it has not come, then its
 * block done. */
static void tm_item_done(dialect_stream *s, const json_value *item, long oi)
{
    int kind = tm_kind(item);
    if (kind < 0)
        return;
    long k = tm_item_block(s, kind, shape_str(item, "id"), oi, item);
    if (kind == TRACK_CALL) {
        tm_args_rest(s, k, json_get(item, "arguments"));
    } else if (k >= 0 && !s->tm.v[k].got) {
        const json_value *parts = json_get(item, "content");
        for (const json_value *p = parts && parts->type == JSON_ARRAY ? parts->child : NULL; p; p = p->next) {
            int refusal = strcmp(shape_str(p, "type"), "refusal") == 0;
            const json_value *text = json_get(p, refusal ? "refusal" : "text");
            if (text && text->type == JSON_STRING && text->str_len) {
                s->tm.refused |= refusal;
                tm_block_data(s, k, text->str, text->str_len);
            }
        }
    }
    tm_block_done(s, k);
}

/* A finished text or refusal (output_text.done, refusal.done: the text
 * under member; content_part.done: under the part's) of a message item. */
static void tm_text_done(dialect_stream *s, const json_value *doc, const json_value *holder, const char *member,
                         int refusal)
{
    long k = tm_item_block(s, TRACK_MESSAGE, shape_str(doc, "item_id"), shape_index(doc, "output_index"), NULL);
    tm_text_whole(s, k, json_get(holder, member), refusal);
}

static void tm_part_done(dialect_stream *s, const json_value *doc)
{
    const json_value *part = json_get(doc, "part");
    const char *type = shape_str(part, "type");
    if (strcmp(type, "output_text") == 0)
        tm_text_done(s, doc, part, "text", 0);
    else if (strcmp(type, "refusal") == 0)
        tm_text_done(s, doc, part, "refusal", 1);
}

/* response.completed / .incomplete: what of its output has not come (an
 * upstream may send the whole answer only here), then the end. */
static void tm_completed(dialect_stream *s, const json_value *doc, const char *type)
{
    const json_value *resp = json_get(doc, "response"), *output = json_get(resp, "output");
    long oi = 0;
    for (const json_value *it = output && output->type == JSON_ARRAY ? output->child : NULL; it; it = it->next)
        tm_item_done(s, it, oi++);
    shape_usage_read(json_get(resp, "usage"), &s->tm.usage);
    const char *status = shape_str(resp, "status");
    if (!*status)
        status = strcmp(type, "response.incomplete") == 0 ? "incomplete" : "completed";
    tm_finish(s, status, shape_str(json_get(resp, "incomplete_details"), "reason"));
}

void stream_messages_from_responses(dialect_stream *s, const char *type, const json_value *doc)
{
    if (!doc)
        return; /* [DONE] is no Responses event */
    const json_value *err = json_get(doc, "error"), *resp = json_get(doc, "response");
    if (strcmp(type, "response.failed") == 0 || strcmp(type, "error") == 0 ||
        (!*type && err && (err->type == JSON_OBJECT || err->type == JSON_STRING))) {
        tm_fail(s, doc);
        return;
    }
    tm_start(s, json_get_str(resp, "id"), json_get_str(resp, "model"));
    if (strcmp(type, "response.output_item.added") == 0)
        tm_item_added(s, doc);
    else if (strcmp(type, "response.output_text.delta") == 0)
        tm_text_delta(s, doc, 0);
    else if (strcmp(type, "response.refusal.delta") == 0)
        tm_text_delta(s, doc, 1);
    else if (strcmp(type, "response.function_call_arguments.delta") == 0)
        tm_args_event(s, doc, 0);
    else if (strcmp(type, "response.function_call_arguments.done") == 0)
        tm_args_event(s, doc, 1);
    else if (strcmp(type, "response.output_text.done") == 0)
        tm_text_done(s, doc, doc, "text", 0);
    else if (strcmp(type, "response.refusal.done") == 0)
        tm_text_done(s, doc, doc, "refusal", 1);
    else if (strcmp(type, "response.content_part.done") == 0)
        tm_part_done(s, doc);
    else if (strcmp(type, "response.output_item.done") == 0)
        tm_item_done(s, json_get(doc, "item"), shape_index(doc, "output_index"));
    else if (strcmp(type, "response.completed") == 0 || strcmp(type, "response.incomplete") == 0)
        tm_completed(s, doc, type);
}

/* ---------- chat chunks ---------- */

/* A tool_calls element: its call's block (a new call ends the text before
 * it), and its arguments' piece. */
static void tm_chat_call(dialect_stream *s, const json_value *elem)
{
    tomsg_state *t = &s->tm;
    int fresh;
    track_call *c = elem && elem->type == JSON_OBJECT ? track_calls_for(s, &t->calls, elem, &fresh) : NULL;
    if (!c)
        return;
    const json_value *fn = json_get(elem, "function");
    const json_value *name = json_get(fn, "name"), *args = json_get(fn, "arguments");
    if (fresh) {
        int named = name && name->type == JSON_STRING;
        if (t->text >= 0)
            tm_block_done(s, t->text);
        t->text = -1;
        c->block = tm_block_add(s, TRACK_CALL, c->call_id, named ? name->str : "", named ? name->str_len : 0);
    }
    if (args && args->type == JSON_STRING)
        tm_block_data(s, c->block, args->str, args->str_len);
}

static void tm_chat_text(dialect_stream *s, const json_value *v, int refusal)
{
    tomsg_state *t = &s->tm;
    if (!v || v->type != JSON_STRING || !v->str_len)
        return;
    t->refused |= refusal;
    if (t->text < 0)
        t->text = tm_block_add(s, TRACK_MESSAGE, NULL, NULL, 0);
    tm_block_data(s, t->text, v->str, v->str_len);
}

/* [DONE], or the end after a finish_reason: the message's end. */
static void tm_chat_complete(dialect_stream *s)
{
    const char *reason;
    const char *status = shape_status(s->tm.finish, &reason);
    tm_finish(s, status, reason);
}

void stream_messages_from_chat(dialect_stream *s, const char *type, const json_value *doc)
{
    tomsg_state *t = &s->tm;
    if (!doc) {
        tm_chat_complete(s);
        return;
    }
    const json_value *err = json_get(doc, "error");
    if ((err && (err->type == JSON_OBJECT || err->type == JSON_STRING)) || strcmp(type, "error") == 0) {
        tm_fail(s, doc);
        return;
    }
    const json_value *choices = json_get(doc, "choices");
    /* Azure's first chunk names no completion and carries no choice (its
     * prompt filter results): the message opens with the next */
    if (*shape_str(doc, "id") || (choices && choices->type == JSON_ARRAY && choices->count))
        tm_start(s, json_get_str(doc, "id"), json_get_str(doc, "model"));
    shape_usage_read(json_get(doc, "usage"), &t->usage);
    const json_value *choice = track_chat_choice(doc), *delta = json_get(choice, "delta");
    if (delta && delta->type == JSON_OBJECT && !t->closed) {
        tm_start(s, NULL, NULL);
        tm_chat_text(s, json_get(delta, "content"), 0);
        tm_chat_text(s, json_get(delta, "refusal"), 1);
        const json_value *calls = json_get(delta, "tool_calls");
        for (const json_value *e = calls && calls->type == JSON_ARRAY ? calls->child : NULL; e; e = e->next)
            tm_chat_call(s, e);
    }
    const char *finish = json_get_str(choice, "finish_reason");
    if (finish && !t->closed) {
        t->closed = 1;
        sbuf_copy_cstr(t->finish, sizeof t->finish, finish);
        tm_start(s, NULL, NULL);
        for (size_t k = t->head; k < t->n; k++)
            t->v[k].done = 1;
        tm_pump(s);
    }
}

int stream_messages_end(dialect_stream *s)
{
    if (!s->terminal && s->tm.closed)
        tm_chat_complete(s);
    return s->terminal;
}
