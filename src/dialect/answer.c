/* answer.c: a plain answer made another dialect's (docs/clients.md,
 * "Answer"): a Responses response object into a chat.completion (message
 * text, refusal, function calls as tool_calls, the reasoning summary as
 * reasoning_content, status as finish_reason, usage) and a chat.completion
 * into a response object (the same, back; item ids made from the chat
 * id); either into an Anthropic Messages response (text and refusals as
 * text blocks, calls as tool_use blocks, stop_reason, usage with cache
 * reads; reasoning left out, as the Messages stream leaves it out). An
 * answer is one body, whole: it is read as a tree, and written with
 * shape.h's writers, so an aggregated stream and a translated stream's
 * final response are the same bytes for the same content. The same
 * dialect on both sides is copied as it came, once it is known to be an
 * answer. Encrypted reasoning never reaches a chat or Messages client. A
 * Messages answer (an anthropic account's) is made a chat.completion
 * (text, thinking as reasoning_content, tool_use blocks as tool_calls,
 * stop_reason, usage with cache reads and writes), and a response object
 * through that. The pairs are a table (answer_pairs), as the request's
 * and the stream's are. */
#include "dialect/answer.h"
#include "dialect/shape.h"
#include <stdio.h>
#include <string.h>

int answer_is(api_kind api, const json_value *doc)
{
    if (!doc || doc->type != JSON_OBJECT)
        return 0;
    const char *object = json_get_str(doc, "object");
    if (api == API_MESSAGES) {
        const char *type = json_get_str(doc, "type");
        const json_value *content = json_get(doc, "content");
        return type && strcmp(type, "message") == 0 && content && content->type == JSON_ARRAY;
    }
    if (api == API_RESPONSES) {
        const json_value *output = json_get(doc, "output");
        const char *status = json_get_str(doc, "status");
        return output && output->type == JSON_ARRAY && (!object || strcmp(object, "response") == 0) &&
               !(status && strcmp(status, "failed") == 0);
    }
    const json_value *err = json_get(doc, "error"), *choices = json_get(doc, "choices");
    if ((err && err->type != JSON_NULL) || !choices || choices->type != JSON_ARRAY || !choices->child)
        return 0;
    const json_value *msg = json_get(choices->child, "message");
    return msg && msg->type == JSON_OBJECT && (!object || strcmp(object, "chat.completion") == 0);
}

/* Appends a piece of text to b, after sep when b has some already. */
static void answer_join(sbuf *b, const char *sep, const json_value *text)
{
    if (!text || text->type != JSON_STRING || !text->str_len)
        return;
    if (b->len)
        sbuf_puts(b, sep);
    sbuf_append(b, text->str, text->str_len);
}

/* ---------- Responses -> Chat ---------- */

static void answer_reasoning_texts(const json_value *item, sbuf *reasoning)
{
    const char *lists[] = {"summary", "content"}; /* summary_text parts, then raw reasoning_text */
    for (int k = 0; k < 2; k++) {
        const json_value *list = json_get(item, lists[k]);
        for (const json_value *p = list && list->type == JSON_ARRAY ? list->child : NULL; p; p = p->next)
            answer_join(reasoning, "\n\n", json_get(p, "text"));
    }
}

/* A message item's output_text parts joined into text, its refusal
 * parts into refusal. */
static void answer_message_texts(const json_value *item, sbuf *text, sbuf *refusal)
{
    const json_value *parts = json_get(item, "content");
    for (const json_value *p = parts && parts->type == JSON_ARRAY ? parts->child : NULL; p; p = p->next) {
        const char *pt = shape_str(p, "type");
        if (strcmp(pt, "output_text") == 0)
            answer_join(text, "", json_get(p, "text"));
        else if (strcmp(pt, "refusal") == 0)
            answer_join(refusal, "", json_get(p, "refusal"));
    }
}

/* The id of call n (a function_call item, a chat tool call): its call_id,
 * else its id, else one of ours. */
static void answer_call_id(char cid[SHAPE_ID_MAX], const json_value *call, long n)
{
    if (*shape_str(call, "call_id"))
        shape_copy_id(cid, shape_str(call, "call_id"));
    else if (*shape_str(call, "id"))
        shape_copy_id(cid, shape_str(call, "id"));
    else
        snprintf(cid, SHAPE_ID_MAX, "call_%ld", n);
}

static void answer_to_chat(const json_value *doc, sbuf *out)
{
    char id[SHAPE_ID_MAX];
    shape_chat_id(id, json_get_str(doc, "id"));
    sbuf content = SBUF_INIT, refusal = SBUF_INIT, reasoning = SBUF_INIT, calls = SBUF_INIT, usage = SBUF_INIT;
    long ncalls = 0;
    const json_value *output = json_get(doc, "output");
    for (const json_value *it = output->child; it; it = it->next) {
        const char *type = shape_str(it, "type");
        if (strcmp(type, "message") == 0) {
            answer_message_texts(it, &content, &refusal);
        } else if (strcmp(type, "function_call") == 0) {
            char cid[SHAPE_ID_MAX];
            answer_call_id(cid, it, ncalls);
            const json_value *name = json_get(it, "name"), *args = json_get(it, "arguments");
            int ns = name && name->type == JSON_STRING, as = args && args->type == JSON_STRING;
            if (ncalls++)
                sbuf_puts(&calls, ",");
            shape_chat_call(&calls, cid, ns ? name->str : "", ns ? name->str_len : 0, as ? args->str : "",
                            as ? args->str_len : 0);
        } else if (strcmp(type, "reasoning") == 0) {
            answer_reasoning_texts(it, &reasoning);
        }
    }
    const char *status = shape_str(doc, "status");
    const char *reason = shape_str(json_get(doc, "incomplete_details"), "reason");
    shape_usage u;
    shape_usage_init(&u);
    shape_usage_read(json_get(doc, "usage"), &u);
    if (u.known)
        shape_usage_chat(&usage, &u);
    shape_chat c = {.id = id,
                    .created = shape_int(doc, "created_at", 0),
                    .model = shape_str(doc, "model"),
                    .content = &content,
                    .refusal = &refusal,
                    .reasoning = &reasoning,
                    .tool_calls = &calls,
                    .finish = shape_finish_reason(*status ? status : "completed", reason, ncalls > 0),
                    .usage = u.known ? usage.p : NULL,
                    .usage_len = usage.len};
    shape_chat_completion(out, &c);
    sbuf_free(&content);
    sbuf_free(&refusal);
    sbuf_free(&reasoning);
    sbuf_free(&calls);
    sbuf_free(&usage);
}

/* ---------- Chat -> Responses ---------- */

static const json_value *answer_text_member(const json_value *obj, const char *key)
{
    const json_value *v = json_get(obj, key);
    return v && v->type == JSON_STRING && v->str_len ? v : NULL;
}

/* The message content: a string, or text parts (some relays answer with
 * a list), joined. */
static void answer_content(const json_value *msg, sbuf *text)
{
    const json_value *c = json_get(msg, "content");
    if (c && c->type == JSON_STRING) {
        sbuf_append(text, c->str, c->str_len);
        return;
    }
    for (const json_value *p = c && c->type == JSON_ARRAY ? c->child : NULL; p; p = p->next) {
        const char *pt = shape_str(p, "type");
        if (strcmp(pt, "text") == 0 || strcmp(pt, "output_text") == 0)
            answer_join(text, "", json_get(p, "text"));
    }
}

/* The choice of index 0 of a chat answer (answer_is made sure it has
 * one), else its first. */
static const json_value *answer_choice(const json_value *doc)
{
    const json_value *choices = json_get(doc, "choices"), *choice = choices->child;
    for (const json_value *c = choices->child; c; c = c->next)
        if (c->type == JSON_OBJECT && shape_index(c, "index") == 0) {
            choice = c;
            break;
        }
    return choice;
}

static void answer_to_responses(const json_value *doc, sbuf *out)
{
    const json_value *choice = answer_choice(doc);
    const json_value *msg = json_get(choice, "message");
    char chat_id[SHAPE_ID_MAX], resp_id[SHAPE_ID_MAX], item_id[SHAPE_ID_MAX], call_id[SHAPE_ID_MAX];
    shape_copy_id(chat_id, json_get_str(doc, "id"));
    shape_response_id(resp_id, chat_id);
    sbuf items = SBUF_INIT, text = SBUF_INIT;
    const json_value *r = answer_text_member(msg, "reasoning_content");
    if (!r)
        r = answer_text_member(msg, "reasoning");
    if (r) {
        shape_item_id(item_id, "rs_", chat_id, -1);
        shape_item_reasoning(&items, item_id, r->str, r->str_len);
    }
    answer_content(msg, &text);
    const json_value *refusal = answer_text_member(msg, "refusal");
    if (text.len || refusal) {
        if (items.len)
            sbuf_puts(&items, ",");
        shape_item_id(item_id, "msg_", chat_id, -1);
        shape_item_message_begin(&items, item_id, "completed");
        if (text.len)
            shape_part(&items, 0, text.p, text.len);
        if (text.len && refusal)
            sbuf_puts(&items, ",");
        if (refusal)
            shape_part(&items, 1, refusal->str, refusal->str_len);
        shape_item_message_end(&items);
    }
    const json_value *calls = json_get(msg, "tool_calls");
    long k = 0;
    for (const json_value *tc = calls && calls->type == JSON_ARRAY ? calls->child : NULL; tc; tc = tc->next, k++) {
        const json_value *fn = json_get(tc, "function");
        const json_value *name = json_get(fn, "name"), *args = json_get(fn, "arguments");
        sbuf a = SBUF_INIT;
        if (args && args->type == JSON_STRING)
            sbuf_append(&a, args->str, args->str_len);
        else if (args && args->type != JSON_NULL) /* an object where a string belongs: its JSON text */
            json_write(&a, args);
        const char *cid = shape_str(tc, "id");
        if (*cid)
            shape_copy_id(call_id, cid);
        else
            shape_item_id(call_id, "call_", chat_id, k);
        shape_item_id(item_id, "fc_", chat_id, k);
        int ns = name && name->type == JSON_STRING;
        if (items.len)
            sbuf_puts(&items, ",");
        shape_item_call(&items, item_id, "completed", call_id, ns ? name->str : "", ns ? name->str_len : 0,
                        a.p ? a.p : "", a.len);
        sbuf_free(&a);
    }
    const char *reason;
    const char *status = shape_status(json_get_str(choice, "finish_reason"), &reason);
    shape_usage u;
    shape_usage_init(&u);
    shape_usage_read(json_get(doc, "usage"), &u);
    shape_head h = {resp_id, shape_int(doc, "created", 0), status, reason, shape_str(doc, "model"), NULL, 0};
    shape_response(out, &h, items.p, items.len, &u);
    sbuf_free(&items);
    sbuf_free(&text);
}

/* ---------- either -> Messages ---------- */

/* The blocks of an answer: its text (refusals included: the client reads
 * them, and the stop_reason says refusal) as one text block, then its tool
 * calls as tool_use blocks. */
typedef struct answer_msg {
    sbuf text, blocks;
    int refused;
    long calls;
} answer_msg;

static void answer_msg_call(answer_msg *a, const json_value *call, const json_value *name, const char *args,
                            size_t args_len)
{
    char id[SHAPE_ID_MAX];
    answer_call_id(id, call, a->calls);
    int ns = name && name->type == JSON_STRING;
    if (a->blocks.len)
        sbuf_puts(&a->blocks, ",");
    shape_block_tool_use(&a->blocks, id, ns ? name->str : "", ns ? name->str_len : 0, args, args_len);
    a->calls++;
}

static void answer_msg_write(answer_msg *a, sbuf *out, const char *upstream_id, const char *model, const char *stop,
                             const shape_usage *u)
{
    char id[SHAPE_ID_MAX];
    shape_message_id(id, upstream_id);
    shape_message_begin(out, id, model);
    if (a->text.len) {
        shape_block_text(out, a->text.p, a->text.len);
        if (a->blocks.len)
            sbuf_puts(out, ",");
    }
    sbuf_append(out, a->blocks.p ? a->blocks.p : "", a->blocks.len);
    shape_message_end(out, stop, u);
    sbuf_free(&a->text);
    sbuf_free(&a->blocks);
}

static void answer_rsp_to_messages(const json_value *doc, sbuf *out)
{
    answer_msg a = {SBUF_INIT, SBUF_INIT, 0, 0};
    const json_value *output = json_get(doc, "output");
    for (const json_value *it = output->child; it; it = it->next) {
        const char *type = shape_str(it, "type");
        if (strcmp(type, "message") == 0) {
            sbuf refusal = SBUF_INIT;
            answer_message_texts(it, &a.text, &refusal);
            if (refusal.len) { /* the client reads it; the stop_reason says refusal */
                a.refused = 1;
                if (a.text.len)
                    sbuf_puts(&a.text, "\n\n");
                sbuf_append(&a.text, refusal.p, refusal.len);
            }
            sbuf_free(&refusal);
        } else if (strcmp(type, "function_call") == 0) {
            const json_value *args = json_get(it, "arguments");
            int as = args && args->type == JSON_STRING;
            answer_msg_call(&a, it, json_get(it, "name"), as ? args->str : "", as ? args->str_len : 0);
        }
    }
    const char *status = shape_str(doc, "status");
    const char *reason = shape_str(json_get(doc, "incomplete_details"), "reason");
    shape_usage u;
    shape_usage_init(&u);
    shape_usage_read(json_get(doc, "usage"), &u);
    answer_msg_write(&a, out, json_get_str(doc, "id"), shape_str(doc, "model"),
                     shape_stop_reason(status, reason, a.calls > 0, a.refused), &u);
}

static void answer_chat_to_messages(const json_value *doc, sbuf *out)
{
    answer_msg a = {SBUF_INIT, SBUF_INIT, 0, 0};
    const json_value *choice = answer_choice(doc), *msg = json_get(choice, "message");
    answer_content(msg, &a.text);
    const json_value *refusal = answer_text_member(msg, "refusal");
    if (refusal) {
        a.refused = 1;
        answer_join(&a.text, "\n\n", refusal);
    }
    const json_value *calls = json_get(msg, "tool_calls");
    for (const json_value *tc = calls && calls->type == JSON_ARRAY ? calls->child : NULL; tc; tc = tc->next) {
        const json_value *fn = json_get(tc, "function"), *args = json_get(fn, "arguments");
        sbuf text = SBUF_INIT;
        if (args && args->type == JSON_STRING)
            sbuf_append(&text, args->str, args->str_len);
        else if (args && args->type != JSON_NULL) /* an object where a string belongs */
            json_write(&text, args);
        answer_msg_call(&a, tc, json_get(fn, "name"), text.p ? text.p : "", text.len);
        sbuf_free(&text);
    }
    const char *reason;
    const char *status = shape_status(json_get_str(choice, "finish_reason"), &reason);
    shape_usage u;
    shape_usage_init(&u);
    shape_usage_read(json_get(doc, "usage"), &u);
    answer_msg_write(&a, out, json_get_str(doc, "id"), shape_str(doc, "model"),
                     shape_stop_reason(status, reason, a.calls > 0, a.refused), &u);
}

/* ---------- Messages -> Chat, Responses ---------- */

/* A Messages answer as a chat.completion: its text blocks joined as the
 * content, its thinking (summarized by Anthropic, unsigned here: the
 * signature cannot travel) as reasoning_content, as the Responses -> Chat
 * answer gives a reasoning summary; tool_use blocks as tool_calls, input
 * re-serialized as the arguments; stop_reason as finish_reason; usage
 * with cache reads and writes in the input. No created time: Anthropic
 * gives none (0). */
static void answer_msg_to_chat(const json_value *doc, sbuf *out)
{
    char id[SHAPE_ID_MAX];
    shape_chat_id_of_message(id, json_get_str(doc, "id"));
    sbuf content = SBUF_INIT, reasoning = SBUF_INIT, calls = SBUF_INIT, usage = SBUF_INIT;
    long ncalls = 0;
    const json_value *blocks = json_get(doc, "content");
    for (const json_value *b = blocks->child; b; b = b->next) {
        const char *type = shape_str(b, "type");
        if (strcmp(type, "text") == 0) {
            answer_join(&content, "", json_get(b, "text"));
        } else if (strcmp(type, "thinking") == 0) {
            answer_join(&reasoning, "\n\n", json_get(b, "thinking"));
        } else if (strcmp(type, "tool_use") == 0) {
            char cid[SHAPE_ID_MAX];
            answer_call_id(cid, b, ncalls);
            const json_value *name = json_get(b, "name"), *input = json_get(b, "input");
            sbuf args = SBUF_INIT;
            if (input && input->type == JSON_OBJECT)
                json_write(&args, input);
            else
                sbuf_puts(&args, "{}");
            int ns = name && name->type == JSON_STRING;
            if (ncalls++)
                sbuf_puts(&calls, ",");
            shape_chat_call(&calls, cid, ns ? name->str : "", ns ? name->str_len : 0, args.p, args.len);
            sbuf_free(&args);
        }
    }
    shape_msg_usage m;
    shape_msg_usage_init(&m);
    shape_msg_usage_read(json_get(doc, "usage"), &m);
    shape_usage u;
    shape_msg_usage_get(&m, &u);
    if (u.known)
        shape_usage_chat(&usage, &u);
    shape_chat c = {.id = id,
                    .model = shape_str(doc, "model"),
                    .content = &content,
                    .reasoning = &reasoning,
                    .tool_calls = &calls,
                    .finish = shape_finish_of_stop(json_get_str(doc, "stop_reason"), ncalls > 0),
                    .usage = u.known ? usage.p : NULL,
                    .usage_len = usage.len};
    shape_chat_completion(out, &c);
    sbuf_free(&content);
    sbuf_free(&reasoning);
    sbuf_free(&calls);
    sbuf_free(&usage);
}

/* A Messages answer as a response object: made a chat.completion first,
 * then that made a response (ids resp_chatcmpl-X, msg_X, rs_X, fc_X_n;
 * the thinking as a reasoning item's summary), so that a plain answer, an
 * aggregated one and a translated stream (stream_from_messages.c, through
 * the chat -> Responses stream's writers) are the same response. */
static void answer_msg_to_responses(const json_value *doc, sbuf *out)
{
    sbuf chat = SBUF_INIT;
    answer_msg_to_chat(doc, &chat);
    json_value *c = json_parse(chat.p, chat.len, NULL, 0); /* ours: it parses (a tool's input within the depth) */
    if (c)
        answer_to_responses(c, out);
    json_free(c);
    sbuf_free(&chat);
}

/* ---------- the table of pairs ---------- */

/* A translator of a plain answer: doc (answer_is made sure it is an
 * answer of the upstream's dialect) appended to out in the client's. */
typedef void (*answer_fn)(const json_value *doc, sbuf *out);

static const struct answer_pair {
    api_kind upstream, client;
    answer_fn fn;
} answer_pairs[] = {
    {API_RESPONSES, API_CHAT, answer_to_chat},
    {API_CHAT, API_RESPONSES, answer_to_responses},
    {API_RESPONSES, API_MESSAGES, answer_rsp_to_messages},
    {API_CHAT, API_MESSAGES, answer_chat_to_messages},
    {API_MESSAGES, API_CHAT, answer_msg_to_chat},
    {API_MESSAGES, API_RESPONSES, answer_msg_to_responses},
};

int dialect_answer(api_kind upstream, api_kind client, const char *body, size_t len, sbuf *out)
{
    size_t start = out->len;
    json_value *doc = body ? json_parse(body, len, NULL, 0) : NULL;
    answer_fn fn = NULL;
    for (size_t i = 0; i < sizeof answer_pairs / sizeof answer_pairs[0] && !fn; i++)
        if (answer_pairs[i].upstream == upstream && answer_pairs[i].client == client)
            fn = answer_pairs[i].fn;
    int ok = answer_is(upstream, doc) && (upstream == client || fn);
    if (ok && upstream == client)
        sbuf_append(out, body, len);
    else if (ok)
        fn(doc, out);
    json_free(doc);
    if (ok && out->len == start) /* a translation that gave nothing (cannot happen: each writes an object) */
        ok = 0;
    if (!ok && out->cap) { /* as it was before the call */
        out->len = start;
        out->p[start] = '\0';
    }
    return ok ? 0 : -1;
}
