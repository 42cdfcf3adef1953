/* aggregate.c: an upstream's stream gathered into one plain answer, for a
 * client that asked no stream from an upstream that always streams
 * (docs/clients.md: `stream = "always"`). Nothing goes out before the end.
 *
 * A Responses stream: the ChatGPT backend's response.completed carries
 * "output": [] (the items came only as response.output_item.done
 * events), so the answer's output is assembled from those, in
 * output_index order; the terminal event's own output is used when it
 * has items. Everything else (id, model, status, usage, created_at,
 * incomplete_details, error, what the upstream echoes of the request) is
 * the terminal event's response (response.completed or .incomplete) as it
 * came. A chat stream: its deltas put together as the SDKs do (strings
 * appended, tool calls by index), its finish_reason, its usage chunk. A
 * Messages stream (an anthropic account's): its blocks put together by
 * index (text, thinking, a tool_use's input from its JSON pieces), its
 * stop_reason and usage, into a Messages response that dialect_answer
 * makes the client's.
 *
 * A stream that ends in response.failed, an error event or a chat error
 * chunk gives an error object instead (OpenAI's, or Anthropic's for a
 * Messages client), and dialect_stream_failed
 * tells the caller with the status it stands for; so does an answer that
 * outgrew the stream's budget (502, track.h): a cut answer must not pass
 * for a whole one. */
#include "dialect/aggregate.h"
#include "dialect/answer.h"
#include <string.h>

/* The stream failed: the error object the client gets instead. */
static void agg_fail(dialect_stream *s, const json_value *doc)
{
    errors_info e;
    int status = track_fail(s, doc, &e);
    sbuf_reset(&s->fail_body);
    errors_write_for(&s->fail_body, s->pair->client, status, &e);
}

/* A failure of ours at the end (too large, not an answer): a 502. */
static void agg_fail_here(dialect_stream *s, const char *code, const char *message)
{
    errors_info e = {.message = message, .message_len = strlen(message), .type = "server_error", .code = code};
    s->failed = 1;
    s->fail_status = 502;
    errors_write_for(s->out, s->pair->client, 502, &e);
}

/* What every end does first: 1 when it wrote the failure (or there is
 * nothing to write: *r says which), 0 when the answer is to be written. */
static int agg_settled(dialect_stream *s, int *r)
{
    *r = 1;
    if (s->failed) {
        sbuf_append(s->out, s->fail_body.p, s->fail_body.len);
        return 1;
    }
    if (!s->terminal) {
        *r = 0;
        return 1;
    }
    if (s->overflow) {
        agg_fail_here(s, "answer_too_large",
                      "the upstream's answer is larger than the gateway gathers into one answer (64 MiB)");
        return 1;
    }
    return 0;
}

/* body (in from's dialect) made the client's (to) and written out. */
static int agg_translate(dialect_stream *s, api_kind from, api_kind to, const sbuf *body)
{
    if (dialect_answer(from, to, body->p ? body->p : "", body->len, s->out) != 0)
        agg_fail_here(s, "invalid_upstream_answer", "the upstream's stream did not end in an answer");
    else
        s->output_sent = 1;
    return 1;
}

static int agg_event_is_error(const char *type, const json_value *doc)
{
    const json_value *err = json_get(doc, "error");
    return strcmp(type, "error") == 0 || strcmp(type, "response.failed") == 0 ||
           (!*type && err && (err->type == JSON_OBJECT || err->type == JSON_STRING));
}

/* ---------- Responses ---------- */

/* The output array: the items kept from output_item.done. */
static void ragg_output(const ragg_state *a, sbuf *o)
{
    sbuf_puts(o, "[");
    track_items_write(&a->items, o);
    sbuf_puts(o, "]");
}

/* The answer: the terminal event's response with its output filled in. */
static void ragg_answer(dialect_stream *s, const json_value *doc, const char *type)
{
    ragg_state *a = &s->ra;
    const json_value *resp = json_get(doc, "response");
    sbuf *o = &a->terminal;
    sbuf_reset(o);
    if (!resp || resp->type != JSON_OBJECT) { /* a terminal event without its response: ours */
        sbuf items = SBUF_INIT;
        track_items_write(&a->items, &items);
        shape_head h = {"", 0, strcmp(type, "response.incomplete") == 0 ? "incomplete" : "completed", NULL,
                        s->model, NULL, 0};
        shape_response(o, &h, items.p, items.len, NULL);
        sbuf_free(&items);
    } else {
        int has_output = 0, has_model = 0;
        sbuf_puts(o, "{");
        for (const json_value *m = resp->child; m; m = m->next) {
            if (m != resp->child)
                sbuf_puts(o, ",");
            sbuf_json_str(o, m->key, strlen(m->key));
            sbuf_puts(o, ":");
            if (strcmp(m->key, "output") == 0) {
                has_output = 1;
                if (m->type == JSON_ARRAY && m->count)
                    json_write(o, m);
                else
                    ragg_output(a, o);
            } else if (strcmp(m->key, "model") == 0) {
                has_model = 1;
                if (!(m->type == JSON_STRING && m->str_len) && s->model[0])
                    shape_put_str(o, s->model);
                else
                    json_write(o, m);
            } else {
                json_write(o, m);
            }
        }
        if (!has_output) {
            sbuf_puts(o, resp->child ? ",\"output\":" : "\"output\":");
            ragg_output(a, o);
        }
        if (!has_model && s->model[0]) {
            sbuf_puts(o, ",\"model\":");
            shape_put_str(o, s->model);
        }
        sbuf_puts(o, "}");
    }
    track_keep(s, o->len);
}

static void ragg_item_done(dialect_stream *s, const json_value *doc)
{
    ragg_state *a = &s->ra;
    const json_value *item = json_get(doc, "item");
    if (!item || item->type != JSON_OBJECT)
        return;
    long oi = shape_index(doc, "output_index");
    if (oi < 0) { /* none given: after the last one kept */
        long last = a->items.n ? a->items.v[a->items.n - 1].output_index : -1;
        if (last >= INT32_MAX)
            return;
        oi = last + 1;
    }
    sbuf json = SBUF_INIT;
    json_write(&json, item);
    track_items_put(s, &a->items, oi, json.p, json.len);
    sbuf_free(&json);
}

void aggregate_responses_event(dialect_stream *s, const char *type, const json_value *doc)
{
    if (!doc)
        return; /* [DONE] is no Responses event */
    if (strcmp(type, "response.output_item.done") == 0) {
        ragg_item_done(s, doc);
    } else if (strcmp(type, "response.completed") == 0 || strcmp(type, "response.incomplete") == 0) {
        ragg_answer(s, doc, type);
        s->terminal = s->finished = 1;
    } else if (agg_event_is_error(type, doc)) {
        agg_fail(s, doc);
    }
}

int aggregate_responses_end(dialect_stream *s)
{
    int r;
    if (agg_settled(s, &r))
        return r;
    sbuf_append(s->out, s->ra.terminal.p, s->ra.terminal.len);
    s->output_sent = 1;
    return 1;
}

/* The terminal event's response made the client's dialect. */
static int ragg_end_as(dialect_stream *s, api_kind client)
{
    int r;
    if (agg_settled(s, &r))
        return r;
    return agg_translate(s, API_RESPONSES, client, &s->ra.terminal);
}

int aggregate_responses_end_chat(dialect_stream *s)
{
    return ragg_end_as(s, API_CHAT);
}

int aggregate_responses_end_messages(dialect_stream *s)
{
    return ragg_end_as(s, API_MESSAGES);
}

/* ---------- Chat ---------- */

static void cagg_text(dialect_stream *s, sbuf *b, const json_value *delta, const char *key)
{
    const json_value *v = json_get(delta, key);
    if (v && v->type == JSON_STRING)
        track_append(s, b, v->str, v->str_len);
}

static void cagg_call(dialect_stream *s, const json_value *elem)
{
    int fresh;
    if (!elem || elem->type != JSON_OBJECT)
        return;
    track_call *c = track_calls_for(s, &s->ca.calls, elem, &fresh);
    if (!c)
        return;
    const char *id = json_get_str(elem, "id");
    if (id && *id && !c->call_id[0])
        shape_copy_id(c->call_id, id);
    const json_value *fn = json_get(elem, "function");
    cagg_text(s, &c->name, fn, "name");
    cagg_text(s, &c->args, fn, "arguments");
}

/* The first non-empty string of a member, kept. */
static void cagg_first(char dst[SHAPE_ID_MAX], const json_value *doc, const char *key)
{
    const char *v = json_get_str(doc, key);
    if (!dst[0] && v && *v)
        shape_copy_id(dst, v);
}

void aggregate_chat_event(dialect_stream *s, const char *type, const json_value *doc)
{
    cagg_state *a = &s->ca;
    if (!doc) {
        s->terminal = s->finished = 1;
        return;
    }
    if (agg_event_is_error(type, doc) || json_get_str(doc, "error")) {
        agg_fail(s, doc);
        return;
    }
    cagg_first(a->id, doc, "id");
    cagg_first(a->model, doc, "model");
    if (!a->started && shape_int(doc, "created", 0) > 0) { /* Azure's first chunk says 0 */
        a->started = 1;
        a->created = shape_int(doc, "created", 0);
    }
    const char *fp = json_get_str(doc, "system_fingerprint");
    if (fp)
        shape_copy_id(a->fingerprint, fp);
    const json_value *usage = json_get(doc, "usage");
    if (usage && usage->type == JSON_OBJECT) {
        sbuf u = SBUF_INIT;
        json_write(&u, usage);
        sbuf_reset(&a->usage);
        track_append(s, &a->usage, u.p, u.len);
        sbuf_free(&u);
    }
    const json_value *choice = track_chat_choice(doc);
    const json_value *delta = json_get(choice, "delta");
    if (delta && delta->type == JSON_OBJECT) {
        cagg_text(s, &a->content, delta, "content");
        cagg_text(s, &a->refusal, delta, "refusal");
        const json_value *r = json_get(delta, "reasoning_content");
        cagg_text(s, &a->reasoning, delta, r && r->type == JSON_STRING ? "reasoning_content" : "reasoning");
        const json_value *calls = json_get(delta, "tool_calls");
        for (const json_value *e = calls && calls->type == JSON_ARRAY ? calls->child : NULL; e; e = e->next)
            cagg_call(s, e);
    }
    const char *finish = json_get_str(choice, "finish_reason");
    if (finish) {
        sbuf_copy_cstr(a->finish, sizeof a->finish, finish);
        s->terminal = 1; /* the answer is whole; the usage chunk and [DONE] may follow */
    }
}

/* The chat.completion the chunks make. */
static void cagg_completion(dialect_stream *s, sbuf *out)
{
    cagg_state *a = &s->ca;
    const char *id = a->id[0] ? a->id : SHAPE_CHAT_ID_NONE;
    sbuf calls = SBUF_INIT;
    for (size_t k = 0; k < a->calls.n; k++) {
        track_call *c = &a->calls.v[k];
        char cid[SHAPE_ID_MAX];
        if (c->call_id[0])
            memcpy(cid, c->call_id, sizeof cid);
        else
            shape_item_id(cid, "call_", id, (long)k);
        if (k)
            sbuf_puts(&calls, ",");
        shape_chat_call(&calls, cid, c->name.p ? c->name.p : "", c->name.len, c->args.p ? c->args.p : "",
                        c->args.len);
    }
    shape_chat c = {.id = id,
                    .created = a->created,
                    .model = a->model[0] ? a->model : s->model,
                    .content = &a->content,
                    .refusal = &a->refusal,
                    .reasoning = &a->reasoning,
                    .tool_calls = &calls,
                    .finish = a->finish[0] ? a->finish : a->calls.n ? "tool_calls" : "stop",
                    .usage = a->usage.len ? a->usage.p : NULL,
                    .usage_len = a->usage.len,
                    .fingerprint = a->fingerprint[0] ? a->fingerprint : NULL};
    shape_chat_completion(out, &c);
    sbuf_free(&calls);
}

int aggregate_chat_end(dialect_stream *s)
{
    int r;
    if (agg_settled(s, &r))
        return r;
    cagg_completion(s, s->out);
    s->output_sent = 1;
    return 1;
}

/* The chat.completion the chunks make, made the client's dialect. */
static int cagg_end_as(dialect_stream *s, api_kind client)
{
    int r;
    if (agg_settled(s, &r))
        return r;
    sbuf body = SBUF_INIT;
    cagg_completion(s, &body);
    r = agg_translate(s, API_CHAT, client, &body);
    sbuf_free(&body);
    return r;
}

int aggregate_chat_end_responses(dialect_stream *s)
{
    return cagg_end_as(s, API_RESPONSES);
}

int aggregate_chat_end_messages(dialect_stream *s)
{
    return cagg_end_as(s, API_MESSAGES);
}

/* ---------- Messages ---------- */

static magg_block *magg_find(magg_state *a, long i)
{
    for (size_t k = 0; k < a->n; k++)
        if (a->v[k].index == i)
            return &a->v[k];
    return NULL;
}

static magg_block *magg_add(dialect_stream *s, long i, int kind)
{
    magg_state *a = &s->ma;
    void *v = a->v;
    if (!track_room(s, &v, a->n, &a->cap, sizeof *a->v))
        return NULL;
    a->v = v;
    magg_block *b = &a->v[a->n++];
    memset(b, 0, sizeof *b);
    b->index = i;
    b->kind = kind;
    return b;
}

static int magg_kind(const char *type)
{
    return strcmp(type, "text") == 0       ? TRACK_MESSAGE
           : strcmp(type, "thinking") == 0 ? TRACK_REASONING
           : strcmp(type, "tool_use") == 0 ? TRACK_CALL
                                           : TRACK_OTHER;
}

static void magg_start(dialect_stream *s, const json_value *doc)
{
    const json_value *cb = json_get(doc, "content_block");
    long i = shape_index(doc, "index");
    if (i < 0 || !cb || cb->type != JSON_OBJECT || magg_find(&s->ma, i))
        return;
    magg_block *b = magg_add(s, i, magg_kind(shape_str(cb, "type")));
    if (!b)
        return;
    if (b->kind == TRACK_CALL) {
        shape_copy_id(b->id, shape_str(cb, "id"));
        cagg_text(s, &b->name, cb, "name");
        const json_value *input = json_get(cb, "input");
        if (input && input->type == JSON_OBJECT && input->count) { /* given whole */
            sbuf text = SBUF_INIT;
            json_write(&text, input);
            track_append(s, &b->text, text.p, text.len);
            sbuf_free(&text);
        }
    } else if (b->kind != TRACK_OTHER) {
        cagg_text(s, &b->text, cb, b->kind == TRACK_MESSAGE ? "text" : "thinking");
    }
}

static void magg_delta(dialect_stream *s, const json_value *doc)
{
    const json_value *d = json_get(doc, "delta");
    const char *dt = shape_str(d, "type");
    int kind = strcmp(dt, "text_delta") == 0       ? TRACK_MESSAGE
               : strcmp(dt, "thinking_delta") == 0 ? TRACK_REASONING
               : strcmp(dt, "input_json_delta") == 0 ? TRACK_CALL
                                                     : TRACK_OTHER;
    long i = shape_index(doc, "index");
    magg_block *b = i >= 0 ? magg_find(&s->ma, i) : NULL;
    if (!b && i >= 0 && (kind == TRACK_MESSAGE || kind == TRACK_REASONING))
        b = magg_add(s, i, kind);
    if (b && b->kind == kind)
        cagg_text(s, &b->text, d, kind == TRACK_MESSAGE ? "text" : kind == TRACK_REASONING ? "thinking" : "partial_json");
}

void aggregate_messages_event(dialect_stream *s, const char *type, const json_value *doc)
{
    magg_state *a = &s->ma;
    if (!doc)
        return; /* [DONE] is no Anthropic event */
    if (strcmp(type, "error") == 0) {
        agg_fail(s, doc);
    } else if (strcmp(type, "message_start") == 0) {
        const json_value *msg = json_get(doc, "message");
        cagg_first(a->id, msg, "id");
        cagg_first(a->model, msg, "model");
        shape_msg_usage_read(json_get(msg, "usage"), &a->usage);
    } else if (strcmp(type, "content_block_start") == 0) {
        magg_start(s, doc);
    } else if (strcmp(type, "content_block_delta") == 0) {
        magg_delta(s, doc);
    } else if (strcmp(type, "message_delta") == 0) {
        const char *stop = json_get_str(json_get(doc, "delta"), "stop_reason");
        if (stop)
            sbuf_copy_cstr(a->stop, sizeof a->stop, stop);
        shape_msg_usage_read(json_get(doc, "usage"), &a->usage);
        s->terminal = 1; /* the answer is whole: message_stop may follow */
    } else if (strcmp(type, "message_stop") == 0) {
        s->terminal = s->finished = 1;
    }
}

/* The Messages response the events make (its thinking unsigned: only its
 * text is read of it, by dialect_answer). */
static void magg_answer(dialect_stream *s, sbuf *out)
{
    magg_state *a = &s->ma;
    shape_message_begin(out, a->id[0] ? a->id : "msg_switchyard", a->model[0] ? a->model : s->model);
    size_t n = 0;
    for (size_t k = 0; k < a->n; k++) {
        magg_block *b = &a->v[k];
        if (b->kind == TRACK_OTHER)
            continue;
        if (n++)
            sbuf_puts(out, ",");
        const char *text = b->text.p ? b->text.p : "";
        if (b->kind == TRACK_MESSAGE) {
            shape_block_text(out, text, b->text.len);
        } else if (b->kind == TRACK_REASONING) {
            sbuf_puts(out, "{\"type\":\"thinking\",\"thinking\":");
            sbuf_json_str(out, text, b->text.len);
            sbuf_puts(out, "}");
        } else {
            shape_block_tool_use(out, b->id, b->name.p ? b->name.p : "", b->name.len, text, b->text.len);
        }
    }
    shape_usage u;
    shape_msg_usage_get(&a->usage, &u);
    shape_message_end(out, a->stop[0] ? a->stop : NULL, &u);
}

/* The Messages response the events make, made the client's dialect. */
static int magg_end_as(dialect_stream *s, api_kind client)
{
    int r;
    if (agg_settled(s, &r))
        return r;
    sbuf body = SBUF_INIT;
    magg_answer(s, &body);
    r = agg_translate(s, API_MESSAGES, client, &body);
    sbuf_free(&body);
    return r;
}

int aggregate_messages_end_chat(dialect_stream *s)
{
    return magg_end_as(s, API_CHAT);
}

int aggregate_messages_end_responses(dialect_stream *s)
{
    return magg_end_as(s, API_RESPONSES);
}
