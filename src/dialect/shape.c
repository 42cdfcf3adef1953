/* shape.c: the shapes the dialects share (shape.h): ids made across
 * dialects, usage in each naming, finish_reason <-> status <-> stop_reason,
 * and the one writer of each answer shape. Writes only; reads nothing but
 * the members it is pointed at (and a tool call's arguments, parsed to be
 * a Messages tool_use's input). */
#include "dialect/shape.h"
#include "dialect/emit.h"
#include "upstream/usage.h"
#include <stdio.h>
#include <string.h>

/* ---------- ids ---------- */

#define SHAPE_ID_KEEP 127

/* s cut to SHAPE_ID_KEEP bytes (whole characters) at dst, which has room
 * for them and a NUL. A plain pointer, not an array parameter: a prefixed
 * id writes past the prefix, into fewer than SHAPE_ID_MAX bytes (and gcc
 * -Os checks the declared size). */
static void shape_copy_cut(char *dst, const char *s)
{
    if (!s)
        s = "";
    size_t n = strlen(s);
    n = sbuf_utf8_cut(s, n, SHAPE_ID_KEEP);
    memcpy(dst, s, n);
    dst[n] = '\0';
}

void shape_copy_id(char dst[SHAPE_ID_MAX], const char *s)
{
    shape_copy_cut(dst, s);
}

/* prefix + s (cut) into dst. */
static void shape_prefixed(char dst[SHAPE_ID_MAX], const char *prefix, const char *s)
{
    size_t p = strlen(prefix); /* ours: at most 9 bytes */
    memcpy(dst, prefix, p);
    shape_copy_cut(dst + p, s); /* p + 127 + 1 < SHAPE_ID_MAX */
}

void shape_chat_id(char dst[SHAPE_ID_MAX], const char *response_id)
{
    const char *x = response_id ? response_id : "";
    if (strncmp(x, "resp_", 5) == 0 && x[5])
        x += 5;
    if (!*x)
        x = SHAPE_CHAT_ID_NONE;
    if (strncmp(x, "chatcmpl-", 9) == 0)
        shape_copy_id(dst, x);
    else
        shape_prefixed(dst, "chatcmpl-", x);
}

void shape_response_id(char dst[SHAPE_ID_MAX], const char *chat_id)
{
    shape_prefixed(dst, "resp_", chat_id && *chat_id ? chat_id : "switchyard");
}

const char *shape_id_suffix(const char *chat_id)
{
    if (!chat_id || !*chat_id)
        return "switchyard";
    if (strncmp(chat_id, "chatcmpl-", 9) == 0 && chat_id[9])
        return chat_id + 9;
    return chat_id;
}

void shape_item_id(char dst[SHAPE_ID_MAX], const char *prefix, const char *chat_id, long n)
{
    char suffix[SHAPE_ID_MAX], num[24] = "";
    shape_copy_id(suffix, shape_id_suffix(chat_id)); /* 127 bytes at most */
    size_t p = strlen(prefix), x = strlen(suffix);
    if (p > 8) /* ours: "msg_", "call_", ... */
        p = 8;
    int k = n >= 0 ? snprintf(num, sizeof num, "_%ld", n) : 0;
    memcpy(dst, prefix, p);
    memcpy(dst + p, suffix, x);
    memcpy(dst + p + x, num, (size_t)k);
    dst[p + x + (size_t)k] = '\0'; /* 8 + 127 + 21 < SHAPE_ID_MAX */
}

int64_t shape_int(const json_value *obj, const char *key, int64_t dflt)
{
    int64_t v;
    const int64_t lim = (int64_t)1 << 53;
    return json_get_int64(obj, key, -lim, lim, &v) == 0 ? v : dflt;
}

long shape_index(const json_value *obj, const char *key)
{
    int64_t v;
    return json_get_int64(obj, key, 0, INT32_MAX, &v) == 0 ? (long)v : -1;
}

const char *shape_str(const json_value *obj, const char *key)
{
    const char *s = json_get_str(obj, key);
    return s ? s : "";
}

/* ---------- usage ---------- */

void shape_usage_init(shape_usage *u)
{
    u->known = 0;
    u->in = u->out = u->total = u->cached = u->reasoning = -1;
}

/* The count of the first of two members present as a number, else -1. */
static long shape_count2(const json_value *v, const char *a, const char *b)
{
    const json_value *x = json_get(v, a);
    if (!x || x->type != JSON_NUMBER)
        x = b ? json_get(v, b) : NULL;
    return x && x->type == JSON_NUMBER ? usage_count(x->num) : -1;
}

void shape_usage_read(const json_value *v, shape_usage *u)
{
    if (!v || v->type != JSON_OBJECT)
        return;
    u->known = 1;
    long in = shape_count2(v, "input_tokens", "prompt_tokens");
    long out = shape_count2(v, "output_tokens", "completion_tokens");
    long total = shape_count2(v, "total_tokens", NULL);
    const json_value *d = json_get(v, "input_tokens_details");
    if (!d || d->type != JSON_OBJECT)
        d = json_get(v, "prompt_tokens_details");
    long cached = shape_count2(d, "cached_tokens", NULL);
    d = json_get(v, "output_tokens_details");
    if (!d || d->type != JSON_OBJECT)
        d = json_get(v, "completion_tokens_details");
    long reasoning = shape_count2(d, "reasoning_tokens", NULL);
    if (in >= 0)
        u->in = in;
    if (out >= 0)
        u->out = out;
    if (total >= 0)
        u->total = total;
    else if (u->in >= 0 && u->out >= 0)
        u->total = u->in > USAGE_TOKENS_MAX - u->out ? USAGE_TOKENS_MAX : u->in + u->out;
    if (cached >= 0)
        u->cached = cached;
    if (reasoning >= 0)
        u->reasoning = reasoning;
}

static void shape_count(sbuf *out, const char *member, long v)
{
    sbuf_puts(out, member);
    sbuf_put_int(out, v >= 0 ? v : 0);
}

void shape_usage_chat(sbuf *out, const shape_usage *u)
{
    if (!u || !u->known) {
        sbuf_puts(out, "null");
        return;
    }
    shape_count(out, "{\"prompt_tokens\":", u->in);
    shape_count(out, ",\"completion_tokens\":", u->out);
    shape_count(out, ",\"total_tokens\":", u->total);
    shape_count(out, ",\"prompt_tokens_details\":{\"cached_tokens\":", u->cached);
    shape_count(out, "},\"completion_tokens_details\":{\"reasoning_tokens\":", u->reasoning);
    sbuf_puts(out, "}}");
}

void shape_usage_responses(sbuf *out, const shape_usage *u)
{
    if (!u || !u->known) {
        sbuf_puts(out, "null");
        return;
    }
    shape_count(out, "{\"input_tokens\":", u->in);
    shape_count(out, ",\"input_tokens_details\":{\"cached_tokens\":", u->cached);
    shape_count(out, "},\"output_tokens\":", u->out);
    shape_count(out, ",\"output_tokens_details\":{\"reasoning_tokens\":", u->reasoning);
    shape_count(out, "},\"total_tokens\":", u->total);
    sbuf_puts(out, "}");
}

/* ---------- finish ---------- */

const char *shape_finish_reason(const char *status, const char *incomplete_reason, int has_calls)
{
    if (status && strcmp(status, "incomplete") == 0)
        return incomplete_reason && strcmp(incomplete_reason, "content_filter") == 0 ? "content_filter" : "length";
    return has_calls ? "tool_calls" : "stop";
}

const char *shape_status(const char *finish, const char **reason)
{
    *reason = NULL;
    if (finish && strcmp(finish, "length") == 0) {
        *reason = "max_output_tokens";
        return "incomplete";
    }
    if (finish && strcmp(finish, "content_filter") == 0) {
        *reason = "content_filter";
        return "incomplete";
    }
    return "completed";
}

/* ---------- writers ---------- */

void shape_put_str(sbuf *out, const char *s)
{
    sbuf_json_str(out, s ? s : "", s ? strlen(s) : 0);
}

void shape_item_reasoning(sbuf *out, const char *id, const char *text, size_t n)
{
    sbuf_puts(out, "{\"id\":");
    shape_put_str(out, id);
    sbuf_puts(out, ",\"type\":\"reasoning\",\"summary\":[");
    if (n) {
        sbuf_puts(out, "{\"type\":\"summary_text\",\"text\":");
        sbuf_json_str(out, text, n);
        sbuf_puts(out, "}");
    }
    sbuf_puts(out, "]}");
}

void shape_item_message_begin(sbuf *out, const char *id, const char *status)
{
    sbuf_puts(out, "{\"id\":");
    shape_put_str(out, id);
    sbuf_puts(out, ",\"type\":\"message\",\"status\":");
    shape_put_str(out, status);
    sbuf_puts(out, ",\"role\":\"assistant\",\"content\":[");
}

void shape_part(sbuf *out, int refusal, const char *text, size_t n)
{
    if (refusal) {
        sbuf_puts(out, "{\"type\":\"refusal\",\"refusal\":");
        sbuf_json_str(out, text, n);
    } else {
        sbuf_puts(out, "{\"type\":\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":");
        sbuf_json_str(out, text, n);
    }
    sbuf_puts(out, "}");
}

void shape_item_message_end(sbuf *out)
{
    sbuf_puts(out, "]}");
}

void shape_item_call(sbuf *out, const char *id, const char *status, const char *call_id, const char *name,
                     size_t name_len, const char *args, size_t args_len)
{
    sbuf_puts(out, "{\"id\":");
    shape_put_str(out, id);
    sbuf_puts(out, ",\"type\":\"function_call\",\"status\":");
    shape_put_str(out, status);
    sbuf_puts(out, ",\"arguments\":");
    sbuf_json_str(out, args, args_len);
    sbuf_puts(out, ",\"call_id\":");
    shape_put_str(out, call_id);
    sbuf_puts(out, ",\"name\":");
    sbuf_json_str(out, name, name_len);
    sbuf_puts(out, "}");
}

void shape_response(sbuf *out, const shape_head *h, const char *output, size_t output_len, const shape_usage *u)
{
    sbuf_puts(out, "{\"id\":");
    shape_put_str(out, h->id);
    sbuf_puts(out, ",\"object\":\"response\",\"created_at\":");
    sbuf_put_int(out, h->created);
    sbuf_puts(out, ",\"status\":");
    shape_put_str(out, h->status);
    sbuf_puts(out, ",\"error\":");
    if (h->error)
        sbuf_append(out, h->error, h->error_len);
    else
        sbuf_puts(out, "null");
    sbuf_puts(out, ",\"incomplete_details\":");
    if (h->incomplete_reason) {
        sbuf_puts(out, "{\"reason\":");
        shape_put_str(out, h->incomplete_reason);
        sbuf_puts(out, "}");
    } else {
        sbuf_puts(out, "null");
    }
    sbuf_puts(out, ",\"model\":");
    shape_put_str(out, h->model);
    sbuf_puts(out, ",\"output\":[");
    if (output)
        sbuf_append(out, output, output_len);
    sbuf_puts(out, "],\"usage\":");
    shape_usage_responses(out, u);
    sbuf_puts(out, "}");
}

static int shape_has(const sbuf *b)
{
    return b && b->len > 0;
}

void shape_chat_completion(sbuf *out, const shape_chat *c)
{
    sbuf_puts(out, "{\"id\":");
    shape_put_str(out, c->id);
    sbuf_puts(out, ",\"object\":\"chat.completion\",\"created\":");
    sbuf_put_int(out, c->created);
    sbuf_puts(out, ",\"model\":");
    shape_put_str(out, c->model);
    sbuf_puts(out, ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":");
    /* as the API: content null when the answer is tool calls or a refusal */
    if (shape_has(c->content))
        sbuf_json_str(out, c->content->p, c->content->len);
    else if (shape_has(c->tool_calls) || shape_has(c->refusal))
        sbuf_puts(out, "null");
    else
        sbuf_puts(out, "\"\"");
    sbuf_puts(out, ",\"refusal\":");
    if (shape_has(c->refusal))
        sbuf_json_str(out, c->refusal->p, c->refusal->len);
    else
        sbuf_puts(out, "null");
    if (shape_has(c->reasoning)) {
        sbuf_puts(out, ",\"reasoning_content\":");
        sbuf_json_str(out, c->reasoning->p, c->reasoning->len);
    }
    if (shape_has(c->tool_calls)) {
        sbuf_puts(out, ",\"tool_calls\":[");
        sbuf_append(out, c->tool_calls->p, c->tool_calls->len);
        sbuf_puts(out, "]");
    }
    sbuf_puts(out, ",\"annotations\":[]},\"logprobs\":null,\"finish_reason\":");
    shape_put_str(out, c->finish ? c->finish : "stop");
    sbuf_puts(out, "}]");
    if (c->usage) {
        sbuf_puts(out, ",\"usage\":");
        sbuf_append(out, c->usage, c->usage_len);
    }
    if (c->fingerprint) {
        sbuf_puts(out, ",\"system_fingerprint\":");
        shape_put_str(out, c->fingerprint);
    }
    sbuf_puts(out, "}");
}

void shape_chat_call(sbuf *out, const char *call_id, const char *name, size_t name_len, const char *args,
                     size_t args_len)
{
    sbuf_puts(out, "{\"id\":");
    shape_put_str(out, call_id);
    sbuf_puts(out, ",\"type\":\"function\",\"function\":{\"name\":");
    sbuf_json_str(out, name, name_len);
    sbuf_puts(out, ",\"arguments\":");
    sbuf_json_str(out, args, args_len);
    sbuf_puts(out, "}}");
}

/* ---------- Anthropic Messages ---------- */

/* A tool_use's input has 3 containers above it in a response object (the
 * object, content, the block): json_parse's 128 levels less those. */
#define SHAPE_INPUT_DEPTH_MAX (128 - 3)

void shape_message_id(char dst[SHAPE_ID_MAX], const char *upstream_id)
{
    const char *x = upstream_id ? upstream_id : "";
    if (strncmp(x, "resp_", 5) == 0)
        x += 5;
    else if (strncmp(x, "chatcmpl-", 9) == 0)
        x += 9;
    shape_prefixed(dst, "msg_", *x ? x : "switchyard");
}

const char *shape_stop_reason(const char *status, const char *incomplete_reason, int has_calls, int refused)
{
    if (status && strcmp(status, "incomplete") == 0)
        return incomplete_reason && strcmp(incomplete_reason, "content_filter") == 0 ? "refusal" : "max_tokens";
    return refused ? "refusal" : has_calls ? "tool_use" : "end_turn";
}

void shape_usage_messages(sbuf *out, const shape_usage *u)
{
    int known = u && u->known;
    long in = known && u->in > 0 ? u->in : 0, cached = known && u->cached > 0 ? u->cached : 0;
    if (cached > in)
        cached = in;
    shape_count(out, "{\"input_tokens\":", in - cached);
    shape_count(out, ",\"cache_creation_input_tokens\":", 0);
    shape_count(out, ",\"cache_read_input_tokens\":", cached);
    shape_count(out, ",\"output_tokens\":", known ? u->out : 0);
    sbuf_puts(out, "}");
}

void shape_message_begin(sbuf *out, const char *id, const char *model)
{
    sbuf_puts(out, "{\"id\":");
    shape_put_str(out, id);
    sbuf_puts(out, ",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
    shape_put_str(out, model);
    sbuf_puts(out, ",\"content\":[");
}

void shape_message_end(sbuf *out, const char *stop_reason, const shape_usage *u)
{
    sbuf_puts(out, "],\"stop_reason\":");
    if (stop_reason)
        shape_put_str(out, stop_reason);
    else
        sbuf_puts(out, "null");
    sbuf_puts(out, ",\"stop_sequence\":null,\"usage\":");
    shape_usage_messages(out, u);
    sbuf_puts(out, "}");
}

void shape_block_text(sbuf *out, const char *text, size_t n)
{
    sbuf_puts(out, "{\"type\":\"text\",\"text\":");
    sbuf_json_str(out, text, n);
    sbuf_puts(out, "}");
}

void shape_block_tool_use(sbuf *out, const char *id, const char *name, size_t name_len, const char *args,
                          size_t args_len)
{
    sbuf_puts(out, "{\"type\":\"tool_use\",\"id\":");
    shape_put_str(out, id);
    sbuf_puts(out, ",\"name\":");
    sbuf_json_str(out, name, name_len);
    sbuf_puts(out, ",\"input\":");
    json_value *input = args_len ? json_parse(args, args_len, NULL, 0) : NULL;
    if (input && input->type == JSON_OBJECT && emit_depth(input, SHAPE_INPUT_DEPTH_MAX) <= SHAPE_INPUT_DEPTH_MAX)
        json_write(out, input);
    else
        sbuf_puts(out, "{}");
    json_free(input);
    sbuf_puts(out, "}");
}

/* ---------- from Anthropic Messages ---------- */

void shape_msg_usage_init(shape_msg_usage *m)
{
    m->known = 0;
    m->in = m->cache_read = m->cache_write = m->out = -1;
}

void shape_msg_usage_read(const json_value *v, shape_msg_usage *m)
{
    if (!v || v->type != JSON_OBJECT)
        return;
    m->known = 1;
    static const char *const keys[] = {"input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
                                       "output_tokens"};
    long *dst[] = {&m->in, &m->cache_read, &m->cache_write, &m->out};
    for (size_t k = 0; k < 4; k++) {
        long n = shape_count2(v, keys[k], NULL);
        if (n >= 0)
            *dst[k] = n;
    }
}

/* a + b, clamped as usage counts are */
static long shape_add(long a, long b)
{
    a = a > 0 ? a : 0;
    b = b > 0 ? b : 0;
    return a > USAGE_TOKENS_MAX - b ? USAGE_TOKENS_MAX : a + b;
}

void shape_msg_usage_get(const shape_msg_usage *m, shape_usage *u)
{
    shape_usage_init(u);
    if (!m->known)
        return;
    u->known = 1;
    u->in = shape_add(shape_add(m->in, m->cache_read), m->cache_write);
    u->cached = m->cache_read > 0 ? m->cache_read : 0;
    u->out = m->out > 0 ? m->out : 0;
    u->total = shape_add(u->in, u->out);
}

void shape_chat_id_of_message(char dst[SHAPE_ID_MAX], const char *message_id)
{
    const char *x = message_id ? message_id : "";
    if (strncmp(x, "msg_", 4) == 0 && x[4])
        x += 4;
    if (!*x) {
        shape_copy_id(dst, SHAPE_CHAT_ID_NONE);
        return;
    }
    shape_prefixed(dst, "chatcmpl-", x);
}

const char *shape_finish_of_stop(const char *stop_reason, int has_calls)
{
    const char *s = stop_reason ? stop_reason : "";
    if (strcmp(s, "max_tokens") == 0 || strcmp(s, "model_context_window_exceeded") == 0)
        return "length";
    if (strcmp(s, "refusal") == 0)
        return "content_filter";
    return has_calls || strcmp(s, "tool_use") == 0 ? "tool_calls" : "stop";
}
