/* stream_chat.c: a Responses stream made a Chat Completions stream, one
 * event at a time (docs/clients.md, "Stream (Responses events -> chat
 * chunks)"). Each event gives its chunks at once; nothing waits for the
 * end. What is kept: the chat id, created and model (fixed when the first
 * chunk goes out: every chunk carries the same), and per output item its
 * kind and, for a function call, its tool_calls index (given in order of
 * appearance, so parallel calls keep theirs) and how many argument bytes
 * the client has: arguments an upstream sends only whole (in the .done
 * events) still reach the client, once. No text is kept.
 *
 * Chunks look as the API writes them: id, object, created, model, one
 * choice {index 0, delta, logprobs null, finish_reason}, "usage":null on
 * each when the client asked include_usage (then a last chunk with
 * "choices":[] and the usage), and data: [DONE]. A failed response or an
 * error event becomes data: {"error":{...}} and the stream ends there,
 * without [DONE], as the API ends a stream that fails. */
#include "dialect/stream_chat.h"
#include <string.h>

/* ---------- chunks ---------- */

/* Reads the response's id, model and created_at while no chunk went out. */
static void tc_info(dialect_stream *s, const json_value *resp)
{
    tochat_state *t = &s->tc;
    if (t->id_fixed || !resp || resp->type != JSON_OBJECT)
        return;
    const char *id = json_get_str(resp, "id"), *model = json_get_str(resp, "model");
    if (id && *id)
        shape_copy_id(t->response_id, id);
    if (model && *model)
        shape_copy_id(t->model, model);
    t->created = shape_int(resp, "created_at", t->created);
}

/* data: {"id":...,"choices":[{"index":0,"delta": */
static void tc_open(dialect_stream *s)
{
    tochat_state *t = &s->tc;
    if (!t->id_fixed) {
        t->id_fixed = 1;
        shape_chat_id(t->chat_id, t->response_id);
        if (!t->model[0])
            shape_copy_id(t->model, s->model);
    }
    sbuf *o = s->out;
    sbuf_puts(o, "data: {\"id\":");
    shape_put_str(o, t->chat_id);
    sbuf_puts(o, ",\"object\":\"chat.completion.chunk\",\"created\":");
    sbuf_put_int(o, t->created);
    sbuf_puts(o, ",\"model\":");
    shape_put_str(o, t->model);
    sbuf_puts(o, ",\"choices\":[{\"index\":0,\"delta\":");
}

/* ,"logprobs":null,"finish_reason":...}]...}, the event's end */
static void tc_close(dialect_stream *s, const char *finish)
{
    sbuf *o = s->out;
    sbuf_puts(o, ",\"logprobs\":null,\"finish_reason\":");
    if (finish)
        shape_put_str(o, finish);
    else
        sbuf_puts(o, "null");
    sbuf_puts(o, "}]");
    if (s->include_usage)
        sbuf_puts(o, ",\"usage\":null");
    sbuf_puts(o, "}\n\n");
}

/* The first chunk: the assistant's role. */
static void tc_role(dialect_stream *s)
{
    if (s->tc.role_sent)
        return;
    s->tc.role_sent = 1;
    tc_open(s);
    sbuf_puts(s->out, "{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null}");
    tc_close(s, NULL);
}

/* A chunk whose delta is one string member: content, refusal or
 * reasoning_content. */
static void tc_delta(dialect_stream *s, const char *member, const char *text, size_t n)
{
    if (!n)
        return;
    tc_role(s);
    tc_open(s);
    sbuf_puts(s->out, "{\"");
    sbuf_puts(s->out, member);
    sbuf_puts(s->out, "\":");
    sbuf_json_str(s->out, text, n);
    sbuf_puts(s->out, "}");
    tc_close(s, NULL);
    s->output_sent = 1;
}

/* ---------- output items ---------- */

/* The item an event names: by id when both have one, else by output index. */
static tochat_item *tc_find(tochat_state *t, const char *id, long oi)
{
    char key[SHAPE_ID_MAX];
    shape_copy_id(key, id);
    for (size_t i = 0; i < t->n; i++) {
        tochat_item *it = &t->items[i];
        if (key[0] && it->id[0] ? strcmp(it->id, key) == 0 : oi >= 0 && it->output_index == oi)
            return it;
    }
    return NULL;
}

static tochat_item *tc_add(dialect_stream *s, const char *id, long oi, int kind)
{
    tochat_state *t = &s->tc;
    void *v = t->items;
    if (!track_room(s, &v, t->n, &t->cap, sizeof *t->items))
        return NULL;
    t->items = v;
    tochat_item *it = &t->items[t->n++];
    memset(it, 0, sizeof *it);
    shape_copy_id(it->id, id);
    it->output_index = oi;
    it->kind = kind;
    it->tool_index = -1;
    return it;
}

static tochat_item *tc_item(dialect_stream *s, const char *id, long oi, int kind)
{
    tochat_item *it = tc_find(&s->tc, id, oi);
    return it ? it : tc_add(s, id, oi, kind);
}

static int tc_kind(const char *type)
{
    if (strcmp(type, "function_call") == 0)
        return TRACK_CALL;
    if (strcmp(type, "message") == 0)
        return TRACK_MESSAGE;
    if (strcmp(type, "reasoning") == 0)
        return TRACK_REASONING;
    return TRACK_OTHER;
}

/* ---------- tool calls ---------- */

static void tc_args_piece(dialect_stream *s, tochat_item *it, const char *text, size_t n)
{
    stream_chat_call_args(s, it->tool_index, text, n);
    it->args_sent += n;
}

/* The whole arguments (a .done event): the part the client does not have. */
static void tc_args_rest(dialect_stream *s, tochat_item *it, const json_value *args)
{
    if (it->tool_index < 0 || !args || args->type != JSON_STRING || it->args_sent >= args->str_len)
        return;
    tc_args_piece(s, it, args->str + it->args_sent, args->str_len - it->args_sent);
}

/* The call's first chunk: its index, id, type and name, arguments "". */
static void tc_call_header(dialect_stream *s, tochat_item *it, const json_value *item)
{
    if (it->tool_index >= 0)
        return;
    tochat_state *t = &s->tc;
    it->tool_index = t->calls++;
    const char *call_id = shape_str(item, "call_id"), *name = shape_str(item, "name");
    if (!*call_id)
        call_id = it->id;
    char cut[SHAPE_ID_MAX];
    shape_copy_id(cut, call_id);
    stream_chat_call_head(s, it->tool_index, cut, name, strlen(name));
    tc_args_rest(s, it, json_get(item, "arguments")); /* an upstream that sends them at once */
}

/* function_call_arguments.delta (a piece) or .done (the whole: what the
 * client lacks) of a call already announced; a call not announced yet
 * gets everything with its output_item.done. */
static void tc_args_event(dialect_stream *s, const json_value *doc, int done)
{
    tochat_item *it = tc_find(&s->tc, shape_str(doc, "item_id"), shape_index(doc, "output_index"));
    if (!it || it->kind != TRACK_CALL || it->tool_index < 0)
        return;
    const json_value *d = json_get(doc, done ? "arguments" : "delta");
    if (done)
        tc_args_rest(s, it, d);
    else if (d && d->type == JSON_STRING)
        tc_args_piece(s, it, d->str, d->str_len);
}

/* ---------- reasoning ---------- */

/* A piece of reasoning text of summary part `part` of item id: a new part
 * (or item) starts after a blank line, as the parts of a summary read. */
static void tc_reasoning_piece(dialect_stream *s, const char *id, int64_t part, const char *text, size_t n)
{
    tochat_state *t = &s->tc;
    if (!n)
        return;
    char key[SHAPE_ID_MAX];
    shape_copy_id(key, id);
    if (t->rs_sent && (strcmp(key, t->rs_item) != 0 || part != t->rs_summary)) {
        sbuf both = SBUF_INIT;
        sbuf_append(&both, "\n\n", 2);
        sbuf_append(&both, text, n);
        tc_delta(s, "reasoning_content", both.p, both.len);
        sbuf_free(&both);
    } else {
        tc_delta(s, "reasoning_content", text, n);
    }
    t->rs_sent = 1;
    memcpy(t->rs_item, key, sizeof key);
    t->rs_summary = part;
}

static void tc_reasoning_delta(dialect_stream *s, const json_value *doc, const char *part_key)
{
    const json_value *d = json_get(doc, "delta");
    const char *id = shape_str(doc, "item_id");
    if (!d || d->type != JSON_STRING || !d->str_len)
        return;
    tochat_item *it = tc_item(s, id, shape_index(doc, "output_index"), TRACK_REASONING);
    if (it)
        it->text_sent = 1;
    /* summary parts and raw reasoning_text parts count apart */
    int64_t part = shape_index(doc, part_key) + (strcmp(part_key, "content_index") == 0 ? ((int64_t)1 << 32) : 0);
    tc_reasoning_piece(s, id, part, d->str, d->str_len);
}

/* ---------- events ---------- */

static void tc_text_delta(dialect_stream *s, const json_value *doc, const char *member)
{
    const json_value *d = json_get(doc, "delta");
    if (!d || d->type != JSON_STRING || !d->str_len)
        return;
    tochat_item *it = tc_item(s, shape_str(doc, "item_id"), shape_index(doc, "output_index"), TRACK_MESSAGE);
    if (it)
        it->text_sent = 1;
    tc_delta(s, member, d->str, d->str_len);
}

/* A finished text (output_text.done, refusal.done, content_part.done) of a
 * message none of whose text reached the client: the whole of it now. */
static void tc_text_done(dialect_stream *s, const json_value *doc, const char *member, const json_value *text)
{
    if (!text || text->type != JSON_STRING || !text->str_len)
        return;
    tochat_item *it = tc_item(s, shape_str(doc, "item_id"), shape_index(doc, "output_index"), TRACK_MESSAGE);
    if (!it || it->text_sent)
        return;
    it->text_sent = 1;
    tc_delta(s, member, text->str, text->str_len);
}

static void tc_part_done(dialect_stream *s, const json_value *doc)
{
    const json_value *part = json_get(doc, "part");
    const char *type = shape_str(part, "type");
    if (strcmp(type, "output_text") == 0)
        tc_text_done(s, doc, "content", json_get(part, "text"));
    else if (strcmp(type, "refusal") == 0)
        tc_text_done(s, doc, "refusal", json_get(part, "refusal"));
}

static void tc_added(dialect_stream *s, const json_value *doc)
{
    const json_value *item = json_get(doc, "item");
    if (!item || item->type != JSON_OBJECT)
        return;
    int kind = tc_kind(shape_str(item, "type"));
    tochat_item *it = tc_item(s, shape_str(item, "id"), shape_index(doc, "output_index"), kind);
    if (it && kind == TRACK_CALL && it->kind == TRACK_CALL)
        tc_call_header(s, it, item);
}

/* A finished item (at output index oi): whatever of it the client does
 * not have yet. */
static void tc_item_finish(dialect_stream *s, const json_value *item, long oi)
{
    if (!item || item->type != JSON_OBJECT)
        return;
    int kind = tc_kind(shape_str(item, "type"));
    const char *id = shape_str(item, "id");
    tochat_item *it = tc_item(s, id, oi, kind);
    if (!it || it->kind != kind)
        return;
    if (kind == TRACK_CALL) {
        tc_call_header(s, it, item);
        tc_args_rest(s, it, json_get(item, "arguments"));
        return;
    }
    if (it->text_sent || (kind != TRACK_MESSAGE && kind != TRACK_REASONING))
        return;
    it->text_sent = 1;
    const json_value *list = json_get(item, kind == TRACK_MESSAGE ? "content" : "summary");
    int64_t j = 0;
    for (const json_value *p = list && list->type == JSON_ARRAY ? list->child : NULL; p; p = p->next, j++) {
        const char *type = shape_str(p, "type");
        const json_value *text = json_get(p, strcmp(type, "refusal") == 0 ? "refusal" : "text");
        if (!text || text->type != JSON_STRING)
            continue;
        if (kind == TRACK_REASONING)
            tc_reasoning_piece(s, id, j, text->str, text->str_len);
        else if (strcmp(type, "output_text") == 0)
            tc_delta(s, "content", text->str, text->str_len);
        else if (strcmp(type, "refusal") == 0)
            tc_delta(s, "refusal", text->str, text->str_len);
    }
}

/* response.completed / .incomplete: what of its output the client does
 * not have yet (an upstream may send the whole answer only here), the
 * finish chunk, the usage chunk when asked, [DONE]. */
static void tc_finish(dialect_stream *s, const json_value *doc, const char *type)
{
    const json_value *resp = json_get(doc, "response"), *output = json_get(resp, "output");
    long oi = 0;
    for (const json_value *it = output && output->type == JSON_ARRAY ? output->child : NULL; it; it = it->next)
        tc_item_finish(s, it, oi++);
    const char *status = shape_str(resp, "status");
    if (!*status)
        status = strcmp(type, "response.incomplete") == 0 ? "incomplete" : "completed";
    const char *reason = shape_str(json_get(resp, "incomplete_details"), "reason");
    shape_usage u;
    shape_usage_init(&u);
    shape_usage_read(json_get(resp, "usage"), &u);
    stream_chat_finish(s, shape_finish_reason(status, reason, s->tc.calls > 0), &u);
}

/* ---------- the writers, for another upstream's translator too ---------- */

void stream_chat_ids(dialect_stream *s, const char *chat_id, const char *model, int64_t created)
{
    tochat_state *t = &s->tc;
    if (t->id_fixed)
        return;
    t->id_fixed = 1;
    shape_copy_id(t->chat_id, chat_id && *chat_id ? chat_id : SHAPE_CHAT_ID_NONE);
    shape_copy_id(t->model, model && *model ? model : s->model);
    t->created = created;
}

void stream_chat_role(dialect_stream *s)
{
    tc_role(s);
}

void stream_chat_text(dialect_stream *s, const char *member, const char *text, size_t n)
{
    tc_delta(s, member, text, n);
}

void stream_chat_call_head(dialect_stream *s, long index, const char *call_id, const char *name, size_t name_len)
{
    tc_role(s);
    tc_open(s);
    sbuf_puts(s->out, "{\"tool_calls\":[{\"index\":");
    sbuf_put_int(s->out, index);
    sbuf_puts(s->out, ",\"id\":");
    if (call_id && *call_id)
        shape_put_str(s->out, call_id);
    else
        sbuf_printf(s->out, "\"call_%ld\"", index);
    sbuf_puts(s->out, ",\"type\":\"function\",\"function\":{\"name\":");
    sbuf_json_str(s->out, name ? name : "", name ? name_len : 0);
    sbuf_puts(s->out, ",\"arguments\":\"\"}}]}");
    tc_close(s, NULL);
    s->output_sent = 1;
}

void stream_chat_call_args(dialect_stream *s, long index, const char *text, size_t n)
{
    if (!n)
        return;
    tc_open(s);
    sbuf_puts(s->out, "{\"tool_calls\":[{\"index\":");
    sbuf_put_int(s->out, index);
    sbuf_puts(s->out, ",\"function\":{\"arguments\":");
    sbuf_json_str(s->out, text, n);
    sbuf_puts(s->out, "}}]}");
    tc_close(s, NULL);
}

void stream_chat_finish(dialect_stream *s, const char *finish, const shape_usage *u)
{
    tc_role(s);
    tc_open(s);
    sbuf_puts(s->out, "{}");
    tc_close(s, finish);
    if (s->include_usage && u && u->known) {
        tochat_state *t = &s->tc;
        sbuf *o = s->out;
        sbuf_puts(o, "data: {\"id\":");
        shape_put_str(o, t->chat_id);
        sbuf_puts(o, ",\"object\":\"chat.completion.chunk\",\"created\":");
        sbuf_put_int(o, t->created);
        sbuf_puts(o, ",\"model\":");
        shape_put_str(o, t->model);
        sbuf_puts(o, ",\"choices\":[],\"usage\":");
        shape_usage_chat(o, u);
        sbuf_puts(o, "}\n\n");
    }
    sbuf_puts(s->out, "data: [DONE]\n\n");
    s->terminal = s->finished = 1;
}

void stream_chat_fail(dialect_stream *s, const json_value *doc)
{
    errors_info e;
    int status = track_fail(s, doc, &e);
    sbuf_puts(s->out, "data: ");
    errors_write(s->out, status, &e);
    sbuf_puts(s->out, "\n\n");
}

/* ---------- the row ---------- */

void stream_chat_event(dialect_stream *s, const char *type, const json_value *doc)
{
    if (!doc)
        return; /* [DONE] is no Responses event */
    tc_info(s, json_get(doc, "response"));
    const json_value *err = json_get(doc, "error");
    if (strcmp(type, "response.created") == 0 || strcmp(type, "response.in_progress") == 0)
        tc_role(s);
    else if (strcmp(type, "response.output_text.delta") == 0)
        tc_text_delta(s, doc, "content");
    else if (strcmp(type, "response.refusal.delta") == 0)
        tc_text_delta(s, doc, "refusal");
    else if (strcmp(type, "response.reasoning_summary_text.delta") == 0)
        tc_reasoning_delta(s, doc, "summary_index");
    else if (strcmp(type, "response.reasoning_text.delta") == 0)
        tc_reasoning_delta(s, doc, "content_index");
    else if (strcmp(type, "response.output_item.added") == 0)
        tc_added(s, doc);
    else if (strcmp(type, "response.function_call_arguments.delta") == 0)
        tc_args_event(s, doc, 0);
    else if (strcmp(type, "response.function_call_arguments.done") == 0)
        tc_args_event(s, doc, 1);
    else if (strcmp(type, "response.output_text.done") == 0)
        tc_text_done(s, doc, "content", json_get(doc, "text"));
    else if (strcmp(type, "response.refusal.done") == 0)
        tc_text_done(s, doc, "refusal", json_get(doc, "refusal"));
    else if (strcmp(type, "response.content_part.done") == 0)
        tc_part_done(s, doc);
    else if (strcmp(type, "response.output_item.done") == 0)
        tc_item_finish(s, json_get(doc, "item"), shape_index(doc, "output_index"));
    else if (strcmp(type, "response.completed") == 0 || strcmp(type, "response.incomplete") == 0)
        tc_finish(s, doc, type);
    else if (strcmp(type, "response.failed") == 0 || strcmp(type, "error") == 0 ||
             (!*type && err && (err->type == JSON_OBJECT || err->type == JSON_STRING)))
        stream_chat_fail(s, doc);
}

int stream_chat_end(dialect_stream *s)
{
    return s->terminal;
}
