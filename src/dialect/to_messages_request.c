/* to_messages_request.c: a Chat Completions request or a Responses request
 * written as an Anthropic Messages request (see to_messages_request.h; the
 * mapping, what is left out and what is refused are docs/clients.md's
 * "Into the Messages API").
 *
 * Read as a tree, written with base/sbuf. Unlike the translators between
 * the two OpenAI dialects this one cannot write member by member in the
 * client's order: Anthropic wants what OpenAI spreads over the
 * conversation gathered (the system prompt out of the messages, a turn's
 * tool results in one user message) and what OpenAI leaves implicit said
 * (max_tokens). So the conversation is walked first into a list of
 * messages kept aside, then the body written in a fixed order.
 *
 * The conversation: system and developer messages (and "instructions")
 * become the system prompt's text, wherever they stand; every other
 * message or item adds blocks to the message being gathered, which is
 * written when a block of the other role comes. So consecutive messages of
 * one role become one (Anthropic wants the roles to alternate): an
 * assistant text and the function calls after it one assistant message,
 * the tool results of a turn and the user text after them one user
 * message, its tool_result blocks first (Anthropic refuses a tool result
 * after other content). Text that says nothing is no block, and a message
 * without blocks is not written (Anthropic refuses empty content). Reasoning
 * items are left out: their encrypted content is OpenAI's, and no thinking
 * block can be made without Anthropic's signature.
 *
 * Cache hints: OpenAI caches every prompt's prefix by itself, Anthropic
 * only up to the blocks marked so. The end of the system prompt and the
 * last block of the conversation are marked ({"type":"ephemeral"}), as
 * Claude Code marks its own: a conversation's next request then reads its
 * history from the cache.
 *
 * Nothing recurses but emit_depth, bounded by the parser's 128 levels; a
 * tool call's arguments, parsed into its input, are checked to fit where
 * they go. A schema never goes deeper than it came. */
#include "dialect/to_messages_request.h"
#include "base/sha256.h"
#include "dialect/emit.h"
#include "dialect/responses_request.h"
#include <stdio.h>
#include <string.h>

/* json_parse's nesting limit: a tool_use's input lies under five
 * containers of the body (the body, messages, a message, its content, the
 * block), and must parse there. */
#define AM_JSON_DEPTH 128
#define AM_INPUT_DEPTH_MAX (AM_JSON_DEPTH - 5)
/* Anthropic takes tool_use ids of [A-Za-z0-9_-] only; OpenAI's call ids
 * are at most 64 characters. Another id goes as its SHA-256 in hex: the
 * same id always gives the same, so a call and its result still match. */
#define AM_ID_MAX 64
/* With thinking, Anthropic takes top_p from 0.95 only, temperature 1 only. */
#define AM_THINKING_TOP_P_MIN 0.95

#define AM_API "an account that speaks the Anthropic Messages API"
#define AM_CACHE ",\"cache_control\":{\"type\":\"ephemeral\"}"

/* ---------- the top-level fields ---------- */

typedef enum {
    AM_OWN,    /* rewritten by this file */
    AM_SAME,   /* the same name and meaning in the Messages API */
    AM_DROP,   /* asks for nothing the Messages API would do otherwise: left out */
    AM_REFUSE, /* no equivalent: a 400 unless harmless or ignored */
} am_kind;

enum { AM_FOR_CHAT = 1, AM_FOR_RSP = 2, AM_FOR_BOTH = 3 };

enum {
    AM_MESSAGES,
    AM_INPUT,
    AM_INSTRUCTIONS,
    AM_MAX_TOKENS,
    AM_MAX_COMPLETION_TOKENS,
    AM_MAX_OUTPUT_TOKENS,
    AM_TEMPERATURE,
    AM_TOP_P,
    AM_STOP,
    AM_STREAM,
    AM_TOOLS,
    AM_TOOL_CHOICE,
    AM_PARALLEL_TOOL_CALLS,
    AM_RESPONSE_FORMAT,
    AM_TEXT,
    AM_VERBOSITY,
    AM_REASONING_EFFORT,
    AM_REASONING,
    AM_USER,
    AM_SAFETY_IDENTIFIER,
    AM_INCLUDE,
    AM_N,
};

typedef struct am_field {
    const char *name;
    int clients; /* AM_FOR_*: the dialects that have it */
    am_kind kind;
    int (*harmless)(const json_value *v); /* AM_REFUSE: the value asks for nothing */
    const char *why;                      /* AM_REFUSE: the reason, in the message */
} am_field;

static int am_is_one(const json_value *v) { return v->type == JSON_NUMBER && v->num == 1; }
static int am_is_zero(const json_value *v) { return v->type == JSON_NUMBER && v->num == 0; }
static int am_is_false(const json_value *v) { return v->type == JSON_FALSE; }
static int am_is_empty(const json_value *v) { return (v->type == JSON_ARRAY || v->type == JSON_OBJECT) && !v->count; }
static int am_is_none_or_auto(const json_value *v) { return emit_is(v, "none") || emit_is(v, "auto"); }
static int am_is_disabled(const json_value *v) { return emit_is(v, "disabled"); }

/* modalities without "audio": text, which is all an answer is */
static int am_is_text_only(const json_value *v)
{
    if (v->type != JSON_ARRAY)
        return 0;
    for (const json_value *e = v->child; e; e = e->next)
        if (e->type != JSON_STRING || emit_is(e, "audio"))
            return 0;
    return 1;
}

static const am_field am_fields[] = {
    [AM_MESSAGES] = {"messages", AM_FOR_CHAT, AM_OWN, NULL, NULL},
    [AM_INPUT] = {"input", AM_FOR_RSP, AM_OWN, NULL, NULL},
    [AM_INSTRUCTIONS] = {"instructions", AM_FOR_RSP, AM_OWN, NULL, NULL},
    [AM_MAX_TOKENS] = {"max_tokens", AM_FOR_CHAT, AM_OWN, NULL, NULL},
    [AM_MAX_COMPLETION_TOKENS] = {"max_completion_tokens", AM_FOR_CHAT, AM_OWN, NULL, NULL},
    [AM_MAX_OUTPUT_TOKENS] = {"max_output_tokens", AM_FOR_RSP, AM_OWN, NULL, NULL},
    [AM_TEMPERATURE] = {"temperature", AM_FOR_BOTH, AM_OWN, NULL, NULL},
    [AM_TOP_P] = {"top_p", AM_FOR_BOTH, AM_OWN, NULL, NULL},
    [AM_STOP] = {"stop", AM_FOR_CHAT, AM_OWN, NULL, NULL},
    [AM_STREAM] = {"stream", AM_FOR_BOTH, AM_OWN, NULL, NULL},
    [AM_TOOLS] = {"tools", AM_FOR_BOTH, AM_OWN, NULL, NULL},
    [AM_TOOL_CHOICE] = {"tool_choice", AM_FOR_BOTH, AM_OWN, NULL, NULL},
    [AM_PARALLEL_TOOL_CALLS] = {"parallel_tool_calls", AM_FOR_BOTH, AM_OWN, NULL, NULL},
    [AM_RESPONSE_FORMAT] = {"response_format", AM_FOR_CHAT, AM_OWN, NULL, NULL},
    [AM_TEXT] = {"text", AM_FOR_RSP, AM_OWN, NULL, NULL},
    [AM_VERBOSITY] = {"verbosity", AM_FOR_CHAT, AM_OWN, NULL, NULL},
    [AM_REASONING_EFFORT] = {"reasoning_effort", AM_FOR_CHAT, AM_OWN, NULL, NULL},
    [AM_REASONING] = {"reasoning", AM_FOR_RSP, AM_OWN, NULL, NULL},
    [AM_USER] = {"user", AM_FOR_BOTH, AM_OWN, NULL, NULL},
    [AM_SAFETY_IDENTIFIER] = {"safety_identifier", AM_FOR_BOTH, AM_OWN, NULL, NULL},
    [AM_INCLUDE] = {"include", AM_FOR_RSP, AM_OWN, NULL, NULL},
    [AM_N] = {"n", AM_FOR_CHAT, AM_OWN, NULL, NULL},
    {"model", AM_FOR_BOTH, AM_SAME, NULL, NULL},
    /* left out: each asks for nothing the Messages API does otherwise */
    {"store", AM_FOR_BOTH, AM_DROP, NULL, NULL},                  /* Anthropic stores nothing */
    {"stream_options", AM_FOR_BOTH, AM_DROP, NULL, NULL},         /* its streams always end with their usage */
    {"metadata", AM_FOR_BOTH, AM_DROP, NULL, NULL},               /* OpenAI's tags of a stored answer */
    {"prompt_cache_key", AM_FOR_BOTH, AM_DROP, NULL, NULL},       /* cache hints are written (above) */
    {"prompt_cache_retention", AM_FOR_BOTH, AM_DROP, NULL, NULL}, /* the same */
    {"service_tier", AM_FOR_BOTH, AM_DROP, NULL, NULL},           /* the account's own tier serves it */
    /* no equivalent */
    {"logprobs", AM_FOR_CHAT, AM_REFUSE, am_is_false, "it gives no log probabilities"},
    {"top_logprobs", AM_FOR_BOTH, AM_REFUSE, am_is_zero, "it gives no log probabilities"},
    {"audio", AM_FOR_CHAT, AM_REFUSE, NULL, "it gives no audio output"},
    {"modalities", AM_FOR_CHAT, AM_REFUSE, am_is_text_only, "it gives no audio output"},
    {"prediction", AM_FOR_CHAT, AM_REFUSE, NULL, "it has no predicted outputs"},
    {"seed", AM_FOR_CHAT, AM_REFUSE, NULL, "it has no seed"},
    {"frequency_penalty", AM_FOR_CHAT, AM_REFUSE, am_is_zero, "it has no frequency penalty"},
    {"presence_penalty", AM_FOR_CHAT, AM_REFUSE, am_is_zero, "it has no presence penalty"},
    {"logit_bias", AM_FOR_CHAT, AM_REFUSE, am_is_empty, "it has no logit bias"},
    {"functions", AM_FOR_CHAT, AM_REFUSE, am_is_empty, "legacy functions are not translated (use tools)"},
    {"function_call", AM_FOR_CHAT, AM_REFUSE, am_is_none_or_auto, "legacy functions are not translated (use tool_choice)"},
    {"web_search_options", AM_FOR_CHAT, AM_REFUSE, NULL, "Chat's web search options are not translated"},
    {"previous_response_id", AM_FOR_RSP, AM_REFUSE, NULL,
     "it keeps no responses, and the gateway holds no record of this one to rebuild it from"},
    {"truncation", AM_FOR_RSP, AM_REFUSE, am_is_disabled, "it never truncates the conversation"},
    {"background", AM_FOR_RSP, AM_REFUSE, am_is_false, "it has no background responses"},
    {"conversation", AM_FOR_RSP, AM_REFUSE, NULL, "it has no conversation objects"},
    {"prompt", AM_FOR_RSP, AM_REFUSE, NULL, "it has no stored prompts"},
    {"max_tool_calls", AM_FOR_RSP, AM_REFUSE, NULL, "it cannot cap tool calls"},
};
#define AM_NFIELDS (sizeof am_fields / sizeof am_fields[0])

/* The field key names for a client of dialect `rsp`, or -1. */
static int am_field_find(const char *key, int rsp)
{
    int want = rsp ? AM_FOR_RSP : AM_FOR_CHAT;
    for (size_t i = 0; i < AM_NFIELDS; i++)
        if ((am_fields[i].clients & want) && strcmp(am_fields[i].name, key) == 0)
            return (int)i;
    return -1;
}

/* ---------- the translation's state ---------- */

enum { AM_ROLE_NONE, AM_ROLE_USER, AM_ROLE_ASSISTANT };

typedef struct am_ctx {
    const policy_dialect *rules;
    dialect_error *err;
    int rsp;                           /* the client speaks the Responses API (else Chat Completions) */
    const json_value *val[AM_NFIELDS]; /* each field's member (the last of its name), NULL when absent or null */
    sbuf sys;                          /* the system prompt's text */
    sbuf msgs;                         /* the messages written, JSON, comma-separated */
    size_t n_msgs;
    /* the message being gathered */
    int role;                          /* AM_ROLE_*: its role */
    int want;                          /* the role of the blocks that come next */
    sbuf results, blocks;              /* its tool_result blocks, its other blocks (written after them) */
    size_t n_results, n_blocks;
    int has_calls;                     /* it holds a tool_use block */
    char open_at[48];                  /* the path of what gave its first block */
    int first_role;                    /* the first message's role */
    char first_at[48];
    int last_calls;                    /* the last assistant message written holds a tool_use block */
    size_t n_tools;                    /* tools written */
} am_ctx;

static const char *am_param(const am_ctx *c)
{
    return c->err ? c->err->param : "";
}

/* The client's own dialect, for "send it where an account speaks ...". */
static const char *am_own(const am_ctx *c)
{
    return c->rsp ? "the Responses API" : "Chat Completions";
}

/* Refusals in OpenAI's words; err->param is set to the path first. */
static int am_unsupported(am_ctx *c, const char *why)
{
    return refuse_set(c->err, REFUSE_UNSUPPORTED,
                      "Unsupported parameter: '%s' cannot be served by " AM_API ": %s. Remove it, or send the "
                      "request where an account speaks %s.",
                      am_param(c), why, am_own(c));
}

static int am_unsupported_type(am_ctx *c, const char *why, const char *type)
{
    char q[48];
    return refuse_set(c->err, REFUSE_UNSUPPORTED,
                      "Unsupported parameter: '%s' is '%s', which cannot be served by " AM_API ": %s.", am_param(c),
                      refuse_quote(q, sizeof q, type), why);
}

static int am_invalid_type(am_ctx *c, const char *expected)
{
    return refuse_set(c->err, REFUSE_INVALID_TYPE, "Invalid type for '%s': expected %s.", am_param(c), expected);
}

static int am_invalid_value(am_ctx *c, const char *what)
{
    return refuse_set(c->err, REFUSE_INVALID_VALUE, "Invalid value for '%s': %s.", am_param(c), what);
}

static int am_missing(am_ctx *c)
{
    return refuse_set(c->err, REFUSE_MISSING, "Missing required parameter: '%s'.", am_param(c));
}

/* A member of obj, NULL when absent or null. */
static const json_value *am_get(const json_value *obj, const char *key)
{
    const json_value *v = json_get(obj, key);
    return v && v->type != JSON_NULL ? v : NULL;
}

/* Member key of obj (at path at) as a string: NULL with err when it is
 * absent or no string. */
static const json_value *am_need_str(am_ctx *c, const json_value *obj, const char *at, const char *key)
{
    const json_value *v = am_get(obj, key);
    if (v && v->type == JSON_STRING)
        return v;
    refuse_param(c->err, "%s.%s", at, key);
    if (v)
        am_invalid_type(c, "a string");
    else
        am_missing(c);
    return NULL;
}

/* v (at path at) is an object: 0, else -1 with err. */
static int am_need_object(am_ctx *c, const json_value *v, const char *at)
{
    if (v && v->type == JSON_OBJECT)
        return 0;
    refuse_param(c->err, "%s", at);
    return v ? am_invalid_type(c, "an object") : am_missing(c);
}

/* A part's or item's "type", a string; NULL with err (param at.type). */
static const json_value *am_type_of(am_ctx *c, const json_value *v, const char *at)
{
    if (am_need_object(c, v, at) != 0)
        return NULL;
    return am_need_str(c, v, at, "type");
}

/* A tool call id as Anthropic takes it (AM_ID_MAX). */
static void am_put_id(sbuf *out, const json_value *id)
{
    int ok = id->str_len > 0 && id->str_len <= AM_ID_MAX;
    for (size_t i = 0; ok && i < id->str_len; i++) {
        char ch = id->str[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
    }
    if (ok) {
        emit_str(out, id);
        return;
    }
    char hex[65];
    sha256_hex(id->str, id->str_len, hex);
    sbuf_json_str(out, hex, 64);
}

/* ---------- the conversation ---------- */

/* Writes the message being gathered (its tool results first), if it has
 * any block. */
static void am_flush(am_ctx *c)
{
    if (!c->n_results && !c->n_blocks)
        return;
    sbuf *m = &c->msgs;
    if (c->n_msgs++)
        sbuf_append(m, ",", 1);
    else {
        c->first_role = c->role;
        memcpy(c->first_at, c->open_at, sizeof c->first_at);
    }
    sbuf_puts(m, c->role == AM_ROLE_ASSISTANT ? "{\"role\":\"assistant\",\"content\":["
                                              : "{\"role\":\"user\",\"content\":[");
    sbuf_append(m, c->results.p ? c->results.p : "", c->results.len);
    if (c->n_results && c->n_blocks)
        sbuf_append(m, ",", 1);
    sbuf_append(m, c->blocks.p ? c->blocks.p : "", c->blocks.len);
    sbuf_puts(m, "]}");
    if (c->role == AM_ROLE_ASSISTANT)
        c->last_calls = c->has_calls;
    sbuf_reset(&c->results);
    sbuf_reset(&c->blocks);
    c->n_results = c->n_blocks = 0;
    c->has_calls = 0;
}

/* The blocks that follow belong to role. The message of the other role is
 * written when the first of them comes (am_sep), not before: a message
 * that adds no block (empty text) changes nothing, and the roles written
 * alternate. */
static void am_role(am_ctx *c, int role)
{
    c->want = role;
}

/* The comma before a block appended to `to` (*n counted); at: the path of
 * what gives it, kept when it opens the message. A block of the message
 * (not a part of a tool result's content) of the other role than the
 * gathered one's writes that one first. */
static void am_sep(am_ctx *c, sbuf *to, size_t *n, const char *at)
{
    if (to == &c->blocks || to == &c->results) {
        if (c->role != c->want) {
            am_flush(c);
            c->role = c->want;
        }
        if (!c->n_blocks && !c->n_results)
            sbuf_copy_cstr(c->open_at, sizeof c->open_at, at);
    }
    if ((*n)++)
        sbuf_append(to, ",", 1);
}

/* A text block (nothing for empty text: Anthropic refuses those). */
static void am_text(am_ctx *c, sbuf *to, size_t *n, const char *at, const char *text, size_t len)
{
    if (!len)
        return;
    am_sep(c, to, n, at);
    sbuf_puts(to, "{\"type\":\"text\",\"text\":");
    sbuf_json_str(to, text, len);
    sbuf_append(to, "}", 1);
}

/* A data URL "data:<media type>[;...];base64,<data>": 1 with its media
 * type and data, 0 when url is none. */
static int am_data_url(const char *url, size_t n, const char **mt, size_t *mt_len, const char **data,
                       size_t *data_len)
{
    if (n < 5 || memcmp(url, "data:", 5) != 0)
        return 0;
    const char *head = url + 5, *comma = memchr(head, ',', n - 5);
    if (!comma || (size_t)(comma - head) < 7 || memcmp(comma - 7, ";base64", 7) != 0)
        return 0;
    const char *semi = memchr(head, ';', (size_t)(comma - head));
    *mt = head;
    *mt_len = (size_t)(semi - head);
    *data = comma + 1;
    *data_len = n - (size_t)(*data - url);
    return 1;
}

static int am_is_http(const json_value *u)
{
    return (u->str_len > 7 && strncmp(u->str, "http://", 7) == 0) ||
           (u->str_len > 8 && strncmp(u->str, "https://", 8) == 0);
}

/* "source" of an image or a document from a URL: a data URL as base64,
 * an http(s) URL by URL. -1 (nothing written, err filled: its param set
 * by the caller) for any other URL. */
static int am_source(am_ctx *c, sbuf *to, const json_value *url)
{
    const char *mt, *data;
    size_t mt_len, data_len;
    if (am_data_url(url->str, url->str_len, &mt, &mt_len, &data, &data_len)) {
        sbuf_puts(to, "\"source\":{\"type\":\"base64\",\"media_type\":");
        sbuf_json_str(to, mt, mt_len);
        sbuf_puts(to, ",\"data\":");
        sbuf_json_str(to, data, data_len);
        sbuf_append(to, "}", 1);
        return 0;
    }
    if (am_is_http(url)) {
        sbuf_puts(to, "\"source\":{\"type\":\"url\",\"url\":");
        emit_str(to, url);
        sbuf_append(to, "}", 1);
        return 0;
    }
    return am_invalid_value(c, "the Anthropic Messages API takes a base64 data: URL or an http(s) URL");
}

/* 1 when url is a URL am_source takes. */
static int am_url_ok(const json_value *url)
{
    const char *mt, *data;
    size_t mt_len, data_len;
    return am_data_url(url->str, url->str_len, &mt, &mt_len, &data, &data_len) || am_is_http(url);
}

/* An image part (its URL at path url_at) as an image block. */
static int am_image(am_ctx *c, sbuf *to, size_t *n, const char *at, const json_value *url, const char *url_at)
{
    refuse_param(c->err, "%s", url_at);
    if (!url)
        return am_missing(c);
    if (url->type != JSON_STRING)
        return am_invalid_type(c, "a string");
    if (!am_url_ok(url))
        return am_source(c, to, url);
    am_sep(c, to, n, at);
    sbuf_puts(to, "{\"type\":\"image\",");
    am_source(c, to, url);
    sbuf_append(to, "}", 1);
    return 0;
}

/* A file part (file_data, file_url, filename of f; at path at) as a
 * document block; a file by id is OpenAI's Files API's: left out when the
 * rules ignore the part type, else refused. */
static int am_document(am_ctx *c, sbuf *to, size_t *n, const char *at, const json_value *f, const char *type)
{
    const json_value *data = am_get(f, "file_data"), *url = c->rsp ? am_get(f, "file_url") : NULL;
    const json_value *name = am_get(f, "filename");
    const json_value *src = data ? data : url;
    if (!src) {
        if (refuse_ignores2(c->rules, "content.", type))
            return 0;
        refuse_param(c->err, "%s.%s", at, am_get(f, "file_id") ? "file_id" : "file_data");
        return am_get(f, "file_id") ? am_unsupported(c, "it takes files as data or by URL (a file id is OpenAI's)")
                                    : am_missing(c);
    }
    refuse_param(c->err, "%s.%s", at, data ? "file_data" : "file_url");
    if (src->type != JSON_STRING)
        return am_invalid_type(c, "a string");
    if (!am_url_ok(src))
        return am_source(c, to, src);
    if (name && name->type != JSON_STRING) {
        refuse_param(c->err, "%s.filename", at);
        return am_invalid_type(c, "a string");
    }
    am_sep(c, to, n, at);
    sbuf_puts(to, "{\"type\":\"document\",");
    am_source(c, to, src);
    if (name && name->str_len) {
        sbuf_puts(to, ",\"title\":");
        emit_str(to, name);
    }
    sbuf_append(to, "}", 1);
    return 0;
}

static int am_is_text_type(const json_value *t)
{
    return emit_is(t, "text") || emit_is(t, "input_text") || emit_is(t, "output_text");
}

/* Content part p (at path at) of a user message or of a tool's output as
 * a block appended to `to`: text, an image (Chat's image_url, Responses'
 * input_image), a file (file / input_file); another type is left out when
 * the rules ignore it ("content.<type>"), else refused. */
static int am_part(am_ctx *c, const json_value *p, const char *at, sbuf *to, size_t *n)
{
    const json_value *type = am_type_of(c, p, at);
    if (!type)
        return -1;
    if (am_is_text_type(type)) {
        const json_value *t = am_need_str(c, p, at, "text");
        if (!t)
            return -1;
        am_text(c, to, n, at, t->str, t->str_len);
        return 0;
    }
    char sub[96];
    if (emit_is(type, "image_url") || emit_is(type, "input_image")) {
        const json_value *u = am_get(p, "image_url");
        if (!c->rsp && u && u->type == JSON_OBJECT) { /* Chat: {"url", "detail"} */
            snprintf(sub, sizeof sub, "%s.image_url.url", at);
            return am_image(c, to, n, at, am_get(u, "url"), sub);
        }
        if (c->rsp && !u && am_get(p, "file_id")) {
            if (refuse_ignores2(c->rules, "content.", type->str))
                return 0;
            refuse_param(c->err, "%s.file_id", at);
            return am_unsupported(c, "it takes images as data or by URL (a file id is OpenAI's)");
        }
        snprintf(sub, sizeof sub, "%s.image_url", at);
        return am_image(c, to, n, at, u, sub);
    }
    if (emit_is(type, "file") || emit_is(type, "input_file")) {
        const json_value *f = c->rsp ? p : am_get(p, "file");
        if (!c->rsp) {
            snprintf(sub, sizeof sub, "%s.file", at);
            if (am_need_object(c, f, sub) != 0)
                return -1;
        }
        return am_document(c, to, n, c->rsp ? at : sub, f, type->str);
    }
    if (refuse_ignores2(c->rules, "content.", type->str))
        return 0;
    refuse_param(c->err, "%s.type", at);
    if (emit_is(type, "input_audio"))
        return am_unsupported_type(c, "it takes no audio", type->str);
    return am_unsupported_type(c, "it takes text, image and file parts", type->str);
}

/* A user message's content (a string, or parts) at path at. */
static int am_user(am_ctx *c, const json_value *content, const char *at)
{
    am_role(c, AM_ROLE_USER);
    if (content->type == JSON_STRING) {
        am_text(c, &c->blocks, &c->n_blocks, at, content->str, content->str_len);
        return 0;
    }
    size_t j = 0;
    for (const json_value *p = content->child; p; p = p->next, j++) {
        char pat[64];
        snprintf(pat, sizeof pat, "%s.content[%zu]", at, j);
        if (am_part(c, p, pat, &c->blocks, &c->n_blocks) != 0)
            return -1;
    }
    return 0;
}

/* An assistant message's content (a string, or text and refusal parts:
 * a refusal is what the model said) at path at. */
static int am_assistant_text(am_ctx *c, const json_value *content, const char *at)
{
    am_role(c, AM_ROLE_ASSISTANT);
    if (content->type == JSON_STRING) {
        am_text(c, &c->blocks, &c->n_blocks, at, content->str, content->str_len);
        return 0;
    }
    size_t j = 0;
    for (const json_value *p = content->child; p; p = p->next, j++) {
        char pat[64];
        snprintf(pat, sizeof pat, "%s.content[%zu]", at, j);
        const json_value *type = am_type_of(c, p, pat), *t = NULL;
        if (!type)
            return -1;
        if (am_is_text_type(type))
            t = am_need_str(c, p, pat, "text");
        else if (emit_is(type, "refusal"))
            t = am_need_str(c, p, pat, "refusal");
        else if (refuse_ignores2(c->rules, "content.", type->str))
            continue;
        else {
            refuse_param(c->err, "%s.type", pat);
            return am_unsupported_type(c, "an assistant message takes text and refusals", type->str);
        }
        if (!t)
            return -1;
        am_text(c, &c->blocks, &c->n_blocks, pat, t->str, t->str_len);
    }
    return 0;
}

/* The text of a system or developer message (a string, or its text parts
 * joined as they are) added to the system prompt, a blank line after what
 * it holds. */
static int am_system(am_ctx *c, const json_value *content, const char *at)
{
    size_t mark = c->sys.len;
    if (mark)
        sbuf_append(&c->sys, "\n\n", 2);
    size_t start = c->sys.len;
    if (content->type == JSON_STRING) {
        sbuf_append(&c->sys, content->str, content->str_len);
    } else {
        size_t j = 0;
        for (const json_value *p = content->child; p; p = p->next, j++) {
            char pat[64];
            snprintf(pat, sizeof pat, "%s.content[%zu]", at, j);
            const json_value *type = am_type_of(c, p, pat), *t;
            if (!type)
                return -1;
            if (!am_is_text_type(type)) {
                if (refuse_ignores2(c->rules, "content.", type->str))
                    continue;
                refuse_param(c->err, "%s.type", pat);
                return am_unsupported_type(c, "its system prompt is text only", type->str);
            }
            if (!(t = am_need_str(c, p, pat, "text")))
                return -1;
            sbuf_append(&c->sys, t->str, t->str_len);
        }
    }
    if (c->sys.len == start) { /* an empty message adds no blank line */
        c->sys.len = mark;
        if (c->sys.p)
            c->sys.p[mark] = '\0';
    }
    return 0;
}

/* A tool call (id, name, arguments: a string of JSON, an object, or none;
 * args_at their path) as a tool_use block of the assistant message, its
 * arguments parsed into the input object Anthropic takes. */
static int am_tool_use(am_ctx *c, const json_value *id, const json_value *name, const json_value *args,
                       const char *at, const char *args_at)
{
    json_value *parsed = NULL;
    const json_value *input = NULL;
    refuse_param(c->err, "%s", args_at);
    if (args && args->type == JSON_STRING) {
        size_t k = json_scan_ws(args->str, args->str_len, 0);
        if (k < args->str_len) { /* "" and blanks: a call without arguments */
            parsed = json_parse(args->str, args->str_len, NULL, 0);
            if (!parsed)
                return am_invalid_value(c, "the arguments are not valid JSON, and the Anthropic Messages API takes "
                                           "a tool call's input as a JSON object");
            input = parsed;
        }
    } else if (args && args->type != JSON_NULL) {
        input = args;
    }
    if (input && input->type != JSON_OBJECT) {
        json_free(parsed);
        return am_invalid_value(c, "the arguments are no JSON object, and the Anthropic Messages API takes a tool "
                                   "call's input as one");
    }
    if (input && emit_depth(input, AM_INPUT_DEPTH_MAX) > AM_INPUT_DEPTH_MAX) {
        json_free(parsed);
        return am_invalid_value(c, "the arguments nest too deeply to be sent to " AM_API);
    }
    am_role(c, AM_ROLE_ASSISTANT);
    am_sep(c, &c->blocks, &c->n_blocks, at);
    sbuf_puts(&c->blocks, "{\"type\":\"tool_use\",\"id\":");
    am_put_id(&c->blocks, id);
    sbuf_puts(&c->blocks, ",\"name\":");
    emit_str(&c->blocks, name);
    sbuf_puts(&c->blocks, ",\"input\":");
    if (input)
        json_write(&c->blocks, input);
    else
        sbuf_puts(&c->blocks, "{}");
    sbuf_append(&c->blocks, "}", 1);
    c->has_calls = 1;
    json_free(parsed);
    return 0;
}

/* A tool's output as a tool_result block of the user message: its text
 * (none: no content), or its text and the blocks of its parts. */
static void am_tool_result(am_ctx *c, const json_value *id, const char *at, const sbuf *text, const sbuf *parts,
                           size_t n_parts)
{
    am_role(c, AM_ROLE_USER);
    am_sep(c, &c->results, &c->n_results, at);
    sbuf *r = &c->results;
    sbuf_puts(r, "{\"type\":\"tool_result\",\"tool_use_id\":");
    am_put_id(r, id);
    if (n_parts) {
        sbuf_puts(r, ",\"content\":[");
        if (text->len) {
            sbuf_puts(r, "{\"type\":\"text\",\"text\":");
            sbuf_json_str(r, text->p, text->len);
            sbuf_puts(r, "},");
        }
        sbuf_append(r, parts->p, parts->len);
        sbuf_append(r, "]", 1);
    } else if (text->len) {
        sbuf_puts(r, ",\"content\":");
        sbuf_json_str(r, text->p, text->len);
    }
    sbuf_append(r, "}", 1);
}

/* ---------- Chat Completions messages ---------- */

/* Tool call j of assistant message i (at path at). */
static int am_chat_call(am_ctx *c, const json_value *tc, const char *at)
{
    if (am_need_object(c, tc, at) != 0)
        return -1;
    const json_value *type = am_get(tc, "type");
    if (type && !emit_is(type, "function")) {
        refuse_param(c->err, "%s.type", at);
        return am_unsupported_type(c, "only function tool calls are translated",
                                   type->type == JSON_STRING ? type->str : "?");
    }
    const json_value *id = am_need_str(c, tc, at, "id"), *fn = NULL, *name = NULL;
    char fat[96];
    snprintf(fat, sizeof fat, "%s.function", at);
    if (!id || am_need_object(c, (fn = am_get(tc, "function")), fat) != 0 || !(name = am_need_str(c, fn, fat, "name")))
        return -1;
    char aat[112];
    snprintf(aat, sizeof aat, "%s.arguments", fat);
    return am_tool_use(c, id, name, am_get(fn, "arguments"), at, aat);
}

static int am_chat_assistant(am_ctx *c, const json_value *m, const char *at)
{
    static const char *const legacy[] = {"audio", "function_call"};
    for (size_t k = 0; k < 2; k++)
        if (am_get(m, legacy[k]) && !refuse_ignores(c->rules, legacy[k])) {
            refuse_param(c->err, "%s.%s", at, legacy[k]);
            return am_unsupported(c, k ? "legacy function calls are not translated (use tool_calls)"
                                       : "it gives no audio output to refer to");
        }
    const json_value *content = am_get(m, "content"), *refusal = am_get(m, "refusal");
    const json_value *calls = am_get(m, "tool_calls");
    if (content && content->type != JSON_STRING && content->type != JSON_ARRAY) {
        refuse_param(c->err, "%s.content", at);
        return am_invalid_type(c, "a string or an array of content parts");
    }
    if (refusal && refusal->type != JSON_STRING) {
        refuse_param(c->err, "%s.refusal", at);
        return am_invalid_type(c, "a string");
    }
    if (calls && calls->type != JSON_ARRAY) {
        refuse_param(c->err, "%s.tool_calls", at);
        return am_invalid_type(c, "an array");
    }
    am_role(c, AM_ROLE_ASSISTANT);
    if (content && am_assistant_text(c, content, at) != 0)
        return -1;
    if (refusal)
        am_text(c, &c->blocks, &c->n_blocks, at, refusal->str, refusal->str_len);
    size_t j = 0;
    for (const json_value *tc = calls ? calls->child : NULL; tc; tc = tc->next, j++) {
        char cat[64];
        snprintf(cat, sizeof cat, "%s.tool_calls[%zu]", at, j);
        if (am_chat_call(c, tc, cat) != 0)
            return -1;
    }
    return 0;
}

/* A tool message: its text (a string or text parts) as a tool result. */
static int am_chat_tool(am_ctx *c, const json_value *m, const char *at)
{
    const json_value *id = am_need_str(c, m, at, "tool_call_id");
    if (!id)
        return -1;
    const json_value *content = am_get(m, "content");
    sbuf text = SBUF_INIT;
    if (content && content->type == JSON_STRING) {
        sbuf_append(&text, content->str, content->str_len);
    } else if (content && content->type == JSON_ARRAY) {
        size_t j = 0;
        for (const json_value *p = content->child; p; p = p->next, j++) {
            char pat[64];
            snprintf(pat, sizeof pat, "%s.content[%zu]", at, j);
            const json_value *type = am_type_of(c, p, pat), *t = NULL;
            if (type && am_is_text_type(type)) {
                t = am_need_str(c, p, pat, "text");
            } else if (type && refuse_ignores2(c->rules, "content.", type->str)) {
                continue;
            } else if (type) {
                refuse_param(c->err, "%s.type", pat);
                am_unsupported_type(c, "a tool message takes text parts", type->str);
            }
            if (!t) {
                sbuf_free(&text);
                return -1;
            }
            sbuf_append(&text, t->str, t->str_len);
        }
    } else if (content) {
        sbuf_free(&text);
        refuse_param(c->err, "%s.content", at);
        return am_invalid_type(c, "a string or an array of content parts");
    }
    sbuf none = SBUF_INIT;
    am_tool_result(c, id, at, &text, &none, 0);
    sbuf_free(&text);
    return 0;
}

static int am_chat_messages(am_ctx *c, const json_value *msgs)
{
    size_t i = 0;
    for (const json_value *m = msgs->child; m; m = m->next, i++) {
        char at[32];
        snprintf(at, sizeof at, "messages[%zu]", i);
        if (am_need_object(c, m, at) != 0)
            return -1;
        const json_value *role = am_need_str(c, m, at, "role");
        if (!role)
            return -1;
        const json_value *content = am_get(m, "content");
        int rc;
        if (emit_is(role, "assistant")) {
            rc = am_chat_assistant(c, m, at);
        } else if (emit_is(role, "tool")) {
            rc = am_chat_tool(c, m, at);
        } else if (emit_is(role, "function")) {
            if (refuse_ignores(c->rules, "role.function"))
                continue;
            refuse_param(c->err, "%s.role", at);
            rc = am_unsupported(c, "the legacy 'function' role is not translated (use tool_calls and the 'tool' role)");
        } else if (emit_is(role, "system") || emit_is(role, "developer") || emit_is(role, "user")) {
            if (!content || (content->type != JSON_STRING && content->type != JSON_ARRAY)) {
                refuse_param(c->err, "%s.content", at);
                return content ? am_invalid_type(c, "a string or an array of content parts") : am_missing(c);
            }
            rc = emit_is(role, "user") ? am_user(c, content, at) : am_system(c, content, at);
        } else {
            refuse_param(c->err, "%s.role", at);
            rc = am_invalid_value(c, "expected system, developer, user, assistant or tool");
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* ---------- Responses input ---------- */

/* function_call_output: its output (a string, or parts: text, images,
 * files) as a tool result. */
static int am_rsp_output(am_ctx *c, const json_value *it, const char *at)
{
    const json_value *id = am_need_str(c, it, at, "call_id");
    if (!id)
        return -1;
    const json_value *output = am_get(it, "output");
    sbuf text = SBUF_INIT, parts = SBUF_INIT;
    size_t n_parts = 0;
    int rc = 0;
    if (output && output->type == JSON_STRING) {
        sbuf_append(&text, output->str, output->str_len);
    } else if (output && output->type == JSON_ARRAY) {
        size_t j = 0;
        for (const json_value *p = output->child; p && !rc; p = p->next, j++) {
            char pat[64];
            snprintf(pat, sizeof pat, "%s.output[%zu]", at, j);
            rc = am_part(c, p, pat, &parts, &n_parts);
        }
    } else if (output) {
        refuse_param(c->err, "%s.output", at);
        rc = am_invalid_type(c, "a string or an array of content parts");
    }
    if (!rc)
        am_tool_result(c, id, at, &text, &parts, n_parts);
    sbuf_free(&text);
    sbuf_free(&parts);
    return rc;
}

/* An item with no place in a Messages conversation: left out when the
 * rules ignore it (by its type, or for a hosted tool's item by the tool),
 * else refused. */
static int am_rsp_other(am_ctx *c, const char *type, const char *at)
{
    if (refuse_ignores2(c->rules, "input.", type) || responses_request_hosted_item(c->rules, type) == 1)
        return 0;
    refuse_param(c->err, "%s.type", at);
    if (responses_request_hosted_item(c->rules, type) == 0)
        return am_unsupported_type(c, "hosted tools run only on the Responses API", type);
    if (strcmp(type, "item_reference") == 0)
        return am_unsupported_type(c, "it keeps no items to refer to", type);
    return am_unsupported_type(c, "it has no such item", type);
}

static int am_rsp_item(am_ctx *c, const json_value *it, size_t i)
{
    char at[32];
    snprintf(at, sizeof at, "input[%zu]", i);
    if (am_need_object(c, it, at) != 0)
        return -1;
    const json_value *type = am_get(it, "type"), *role = am_get(it, "role");
    if (type && type->type != JSON_STRING) {
        refuse_param(c->err, "%s.type", at);
        return am_invalid_type(c, "a string");
    }
    if (!type && !role) {
        refuse_param(c->err, "%s.type", at);
        return am_missing(c);
    }
    if (!type || emit_is(type, "message")) {
        if (!(role = am_need_str(c, it, at, "role")))
            return -1;
        const json_value *content = am_get(it, "content");
        if (!content || (content->type != JSON_STRING && content->type != JSON_ARRAY)) {
            refuse_param(c->err, "%s.content", at);
            return content ? am_invalid_type(c, "a string or an array") : am_missing(c);
        }
        if (emit_is(role, "assistant"))
            return am_assistant_text(c, content, at);
        if (emit_is(role, "user"))
            return am_user(c, content, at);
        if (emit_is(role, "system") || emit_is(role, "developer"))
            return am_system(c, content, at);
        refuse_param(c->err, "%s.role", at);
        return am_invalid_value(c, "expected user, assistant, system or developer");
    }
    const char *t = type->str;
    if (strcmp(t, "function_call") == 0) {
        const json_value *id = am_need_str(c, it, at, "call_id");
        const json_value *name = id ? am_need_str(c, it, at, "name") : NULL;
        char aat[48];
        snprintf(aat, sizeof aat, "%s.arguments", at);
        return name ? am_tool_use(c, id, name, am_get(it, "arguments"), at, aat) : -1;
    }
    if (strcmp(t, "function_call_output") == 0)
        return am_rsp_output(c, it, at);
    /* custom tools are not translated (tools.custom): their history goes
     * with them when the rules let them be left out */
    if (strcmp(t, "custom_tool_call") == 0 || strcmp(t, "custom_tool_call_output") == 0) {
        if (refuse_ignores(c->rules, "tools.custom"))
            return 0;
        refuse_param(c->err, "%s.type", at);
        return am_unsupported_type(c, "custom (free-form) tools are not translated", t);
    }
    /* reasoning: its encrypted content is OpenAI's, and a thinking block
     * needs Anthropic's signature; left out, as compactions (OpenAI's
     * encrypted history) are */
    if (strcmp(t, "reasoning") == 0 || strcmp(t, "compaction") == 0 || strcmp(t, "compaction_summary") == 0)
        return 0;
    return am_rsp_other(c, t, at);
}

static int am_rsp_input(am_ctx *c)
{
    const json_value *ins = c->val[AM_INSTRUCTIONS], *input = c->val[AM_INPUT];
    if (ins && ins->type != JSON_STRING) {
        refuse_param(c->err, "instructions");
        return am_invalid_type(c, "a string");
    }
    if (ins && am_system(c, ins, "instructions") != 0)
        return -1;
    if (!input)
        return 0;
    if (input->type == JSON_STRING) {
        am_role(c, AM_ROLE_USER);
        am_text(c, &c->blocks, &c->n_blocks, "input", input->str, input->str_len);
        return 0;
    }
    if (input->type != JSON_ARRAY) {
        refuse_param(c->err, "input");
        return am_invalid_type(c, "a string or an array of input items");
    }
    size_t i = 0;
    for (const json_value *it = input->child; it; it = it->next, i++)
        if (am_rsp_item(c, it, i) != 0)
            return -1;
    return 0;
}

/* ---------- tools, tool_choice ---------- */

/* A function tool (its name, description and parameters at path at) as
 * Anthropic's: input_schema the parameters, an object type said when the
 * schema leaves it out ({} takes no arguments); strict is left out
 * (Anthropic's strict tool use has rules of its own, and tools that met
 * OpenAI's loose default would be refused). */
static int am_tool(am_ctx *c, sbuf *out, const json_value *holder, const char *at)
{
    const json_value *name = am_need_str(c, holder, at, "name");
    if (!name)
        return -1;
    const json_value *desc = am_get(holder, "description"), *params = am_get(holder, "parameters");
    if (desc && desc->type != JSON_STRING) {
        refuse_param(c->err, "%s.description", at);
        return am_invalid_type(c, "a string");
    }
    if (params && params->type != JSON_OBJECT) {
        refuse_param(c->err, "%s.parameters", at);
        return am_invalid_type(c, "an object");
    }
    if (c->n_tools++)
        sbuf_append(out, ",", 1);
    sbuf_puts(out, "{\"name\":");
    emit_str(out, name);
    if (desc) {
        sbuf_puts(out, ",\"description\":");
        emit_str(out, desc);
    }
    sbuf_puts(out, ",\"input_schema\":");
    if (!params) {
        sbuf_puts(out, "{\"type\":\"object\",\"properties\":{}}");
    } else if (json_get(params, "type")) {
        json_write(out, params);
    } else {
        sbuf_puts(out, "{\"type\":\"object\"");
        for (const json_value *m = params->child; m; m = m->next) {
            sbuf_append(out, ",", 1);
            sbuf_json_str(out, m->key, strlen(m->key));
            sbuf_append(out, ":", 1);
            json_write(out, m);
        }
        sbuf_append(out, "}", 1);
    }
    sbuf_append(out, "}", 1);
    return 0;
}

/* "tools": function tools; another type is left out when the rules ignore
 * it ("tools.<type>"), else refused. No member when none is written. */
static int am_tools(am_ctx *c, const json_value *tools, sbuf *out, size_t *n)
{
    if (tools->type != JSON_ARRAY) {
        refuse_param(c->err, "tools");
        return am_invalid_type(c, "an array");
    }
    size_t mark = out->len, n_before = *n, j = 0;
    emit_key(out, n, "tools");
    sbuf_append(out, "[", 1);
    for (const json_value *t = tools->child; t; t = t->next, j++) {
        char at[32];
        snprintf(at, sizeof at, "tools[%zu]", j);
        const json_value *type = am_type_of(c, t, at);
        if (!type)
            return -1;
        if (!emit_is(type, "function")) {
            if (refuse_ignores2(c->rules, "tools.", type->str))
                continue;
            refuse_param(c->err, "%s.type", at);
            return am_unsupported_type(c, emit_is(type, "custom") ? "custom (free-form) tools are not translated"
                                                                  : "only function tools are translated",
                                       type->str);
        }
        if (c->rsp) {
            if (am_tool(c, out, t, at) != 0)
                return -1;
            continue;
        }
        char fat[48];
        snprintf(fat, sizeof fat, "%s.function", at);
        const json_value *fn = am_get(t, "function");
        if (am_need_object(c, fn, fat) != 0 || am_tool(c, out, fn, fat) != 0)
            return -1;
    }
    sbuf_append(out, "]", 1);
    if (!c->n_tools) { /* Anthropic takes no empty list: the member is taken back */
        out->len = mark;
        out->p[mark] = '\0';
        *n = n_before;
    }
    return 0;
}

/* The choice Anthropic is given: its type ("auto", "any", "none", "tool",
 * or NULL: none said) and the tool's name. */
typedef struct am_choice {
    const char *type;
    const json_value *name;
} am_choice;

static int am_tool_choice(am_ctx *c, am_choice *ch)
{
    const json_value *tc = c->val[AM_TOOL_CHOICE];
    ch->type = NULL;
    ch->name = NULL;
    if (!tc)
        return 0;
    refuse_param(c->err, "tool_choice");
    if (tc->type == JSON_STRING) {
        ch->type = emit_is(tc, "auto") ? "auto" : emit_is(tc, "required") ? "any" : emit_is(tc, "none") ? "none" : NULL;
        return ch->type ? 0 : am_invalid_value(c, "expected auto, none, required or an object");
    }
    const json_value *type = am_type_of(c, tc, "tool_choice");
    if (!type)
        return -1;
    if (emit_is(type, "function")) {
        const json_value *holder = c->rsp ? tc : am_get(tc, "function");
        if (!c->rsp && am_need_object(c, holder, "tool_choice.function") != 0)
            return -1;
        ch->name = am_need_str(c, holder, c->rsp ? "tool_choice" : "tool_choice.function", "name");
        ch->type = "tool";
        return ch->name ? 0 : -1;
    }
    /* a hosted tool chosen, or allowed_tools: left out when ignored */
    if (refuse_ignores2(c->rules, "tools.", type->str) || refuse_ignores2(c->rules, "tool_choice.", type->str))
        return 0;
    refuse_param(c->err, "tool_choice.type");
    return am_unsupported_type(c,
                               emit_is(type, "allowed_tools") ? "it cannot narrow the tools a request offers"
                                                              : "only function tools are translated",
                               type->str);
}

/* ---------- the rest of the body ---------- */

/* A positive integer member (at path key) into *n: 0, or -1 with err. */
static int am_tokens(am_ctx *c, const json_value *v, const char *key, int64_t *n)
{
    refuse_param(c->err, "%s", key);
    if (v->type != JSON_NUMBER || json_num_to_int64(v->num, INT64_MIN / 2, INT64_MAX / 2, n) != 0 ||
        (double)*n != v->num)
        return am_invalid_type(c, "an integer");
    if (*n < 1)
        return am_invalid_value(c, "the Anthropic Messages API takes 1 or more");
    if (*n > INT32_MAX)
        *n = INT32_MAX;
    return 0;
}

/* The thinking budget the reasoning effort asks for (0: none). */
static int am_budget(am_ctx *c, int64_t *budget)
{
    *budget = 0;
    const json_value *e = NULL;
    if (c->rsp && c->val[AM_REASONING]) {
        const json_value *r = c->val[AM_REASONING];
        if (r->type != JSON_OBJECT) {
            refuse_param(c->err, "reasoning");
            return am_invalid_type(c, "an object");
        }
        e = am_get(r, "effort");
        refuse_param(c->err, "reasoning.effort");
    } else if (!c->rsp && c->val[AM_REASONING_EFFORT]) {
        e = c->val[AM_REASONING_EFFORT];
        refuse_param(c->err, "reasoning_effort");
    }
    if (!e || emit_is(e, "none"))
        return 0;
    static const struct {
        const char *name;
        int64_t budget;
    } levels[] = {{"minimal", TO_MESSAGES_BUDGET_MINIMAL}, {"low", TO_MESSAGES_BUDGET_LOW},
                  {"medium", TO_MESSAGES_BUDGET_MEDIUM},   {"high", TO_MESSAGES_BUDGET_HIGH},
                  {"xhigh", TO_MESSAGES_BUDGET_HIGH}};
    for (size_t k = 0; k < sizeof levels / sizeof levels[0]; k++)
        if (emit_is(e, levels[k].name)) {
            *budget = levels[k].budget;
            return 0;
        }
    if (e->type != JSON_STRING)
        return am_invalid_type(c, "a string");
    return am_invalid_value(c, "expected none, minimal, low, medium, high or xhigh");
}

/* temperature and top_p: numbers the Messages API takes (temperature 0
 * to 1; with thinking, temperature 1 and top_p from 0.95 only). */
static int am_sampling(am_ctx *c, int thinking)
{
    const json_value *t = c->val[AM_TEMPERATURE], *p = c->val[AM_TOP_P];
    if (t) {
        refuse_param(c->err, "temperature");
        if (t->type != JSON_NUMBER)
            return am_invalid_type(c, "a number");
        if (t->num > 1)
            return am_invalid_value(c, "the Anthropic Messages API takes a temperature from 0 to 1");
        if (thinking && t->num != 1)
            return am_unsupported(c, "with a reasoning effort (thinking) it takes temperature 1 only");
    }
    if (p) {
        refuse_param(c->err, "top_p");
        if (p->type != JSON_NUMBER)
            return am_invalid_type(c, "a number");
        if (thinking && p->num < AM_THINKING_TOP_P_MIN)
            return am_unsupported(c, "with a reasoning effort (thinking) it takes top_p from 0.95 only");
    }
    return 0;
}

/* stop (Chat): a string or strings, as stop_sequences. */
static int am_stop(am_ctx *c, sbuf *out, size_t *n)
{
    const json_value *s = c->val[AM_STOP];
    if (!s)
        return 0;
    refuse_param(c->err, "stop");
    if (s->type == JSON_STRING) {
        emit_key(out, n, "stop_sequences");
        sbuf_append(out, "[", 1);
        emit_str(out, s);
        sbuf_append(out, "]", 1);
        return 0;
    }
    if (s->type != JSON_ARRAY)
        return am_invalid_type(c, "a string or an array of strings");
    for (const json_value *e = s->child; e; e = e->next)
        if (e->type != JSON_STRING)
            return am_invalid_type(c, "a string or an array of strings");
    if (s->count) {
        emit_key(out, n, "stop_sequences");
        json_write(out, s);
    }
    return 0;
}

/* response_format (Chat) / text.format (Responses): a JSON schema as
 * output_config.format {type: json_schema, schema} (Anthropic's has no
 * name and is always strict); json_object has no equivalent (Anthropic
 * gives JSON by a schema only): refused unless ignored ("response_format"
 * / "text.format"); text is the default. */
static int am_format(am_ctx *c, sbuf *out, size_t *n)
{
    const json_value *f;
    const char *at;
    if (c->rsp) {
        const json_value *text = c->val[AM_TEXT];
        if (!text)
            return 0;
        if (am_need_object(c, text, "text") != 0)
            return -1;
        f = am_get(text, "format");
        at = "text.format";
    } else {
        f = c->val[AM_RESPONSE_FORMAT];
        at = "response_format";
    }
    if (!f)
        return 0;
    const json_value *type = am_type_of(c, f, at);
    if (!type)
        return -1;
    if (emit_is(type, "text"))
        return 0;
    if (emit_is(type, "json_object")) {
        if (refuse_ignores(c->rules, at))
            return 0;
        refuse_param(c->err, "%s.type", at);
        return am_unsupported_type(c, "it gives JSON output by a schema only (json_schema)", type->str);
    }
    if (!emit_is(type, "json_schema")) {
        refuse_param(c->err, "%s.type", at);
        return am_invalid_value(c, "expected text, json_object or json_schema");
    }
    const json_value *holder = f;
    char sat[48];
    if (!c->rsp) {
        holder = am_get(f, "json_schema");
        if (am_need_object(c, holder, "response_format.json_schema") != 0)
            return -1;
        at = "response_format.json_schema";
    }
    snprintf(sat, sizeof sat, "%s.schema", at);
    const json_value *schema = am_get(holder, "schema");
    if (am_need_object(c, schema, sat) != 0)
        return -1;
    emit_key(out, n, "output_config");
    sbuf_puts(out, "{\"format\":{\"type\":\"json_schema\",\"schema\":");
    json_write(out, schema);
    sbuf_puts(out, "}}");
    return 0;
}

/* verbosity (Chat) / text.verbosity: Anthropic has none; "medium" is
 * OpenAI's default and asks for nothing. */
static int am_verbosity(am_ctx *c)
{
    const json_value *v = c->rsp ? (c->val[AM_TEXT] ? am_get(c->val[AM_TEXT], "verbosity") : NULL)
                                 : c->val[AM_VERBOSITY];
    const char *name = c->rsp ? "text.verbosity" : "verbosity";
    if (!v || emit_is(v, "medium") || refuse_ignores(c->rules, name))
        return 0;
    refuse_param(c->err, "%s", name);
    return am_unsupported(c, "it has no verbosity setting");
}

/* include (Responses): what it asks for is encrypted reasoning or hosted
 * tools' results, which the answer does not have: left out, but for log
 * probabilities, which the client would miss (refused unless ignored). */
static int am_include(am_ctx *c)
{
    const json_value *inc = c->val[AM_INCLUDE];
    for (const json_value *e = inc && inc->type == JSON_ARRAY ? inc->child : NULL; e; e = e->next)
        if (emit_is(e, "message.output_text.logprobs") && !refuse_ignores(c->rules, "include")) {
            refuse_param(c->err, "include");
            return am_unsupported(c, "it gives no log probabilities");
        }
    return 0;
}

/* user / safety_identifier (which wins): the end user's id, what
 * Anthropic's metadata.user_id is. */
static int am_metadata(am_ctx *c, sbuf *out, size_t *n)
{
    const json_value *u = c->val[AM_SAFETY_IDENTIFIER] ? c->val[AM_SAFETY_IDENTIFIER] : c->val[AM_USER];
    if (!u)
        return 0;
    if (u->type != JSON_STRING) {
        refuse_param(c->err, "%s", c->val[AM_SAFETY_IDENTIFIER] ? "safety_identifier" : "user");
        return am_invalid_type(c, "a string");
    }
    if (!u->str_len)
        return 0;
    emit_key(out, n, "metadata");
    sbuf_puts(out, "{\"user_id\":");
    emit_str(out, u);
    sbuf_append(out, "}", 1);
    return 0;
}

/* The top-level members: each known one's last copy kept; an unknown one,
 * or one of no equivalent, refused unless harmless or ignored. */
static int am_scan(am_ctx *c, const json_value *doc)
{
    for (const json_value *m = doc->child; m; m = m->next) {
        int k = am_field_find(m->key, c->rsp);
        if (k >= 0)
            c->val[k] = m->type == JSON_NULL ? NULL : m;
    }
    for (const json_value *m = doc->child; m; m = m->next) {
        int k = am_field_find(m->key, c->rsp);
        if (k < 0) {
            if (refuse_ignores(c->rules, m->key))
                continue;
            refuse_param(c->err, "%s", m->key);
            return am_unsupported(c, "it is no field the gateway translates, and Anthropic refuses fields it does "
                                     "not know");
        }
        if (c->val[k] != m) /* null, or an earlier copy */
            continue;
        const am_field *f = &am_fields[k];
        if (f->kind == AM_REFUSE && !(f->harmless && f->harmless(m)) && !refuse_ignores(c->rules, f->name)) {
            refuse_param(c->err, "%s", f->name);
            return am_unsupported(c, f->why);
        }
        if (k == AM_N && !am_is_one(m) && !refuse_ignores(c->rules, "n")) {
            refuse_param(c->err, "n");
            return refuse_set(c->err, REFUSE_UNSUPPORTED,
                              "'n' > 1 cannot be served by " AM_API ": it gives one answer per request. Ask for "
                              "one choice, or send the request where an account speaks Chat Completions.");
        }
    }
    return 0;
}

/* The messages, the cache hint in their last block. */
static void am_write_messages(am_ctx *c, sbuf *out, size_t *n)
{
    emit_key(out, n, "messages");
    sbuf_append(out, "[", 1);
    /* the conversation ends "...}]}": its last block's brace, the
     * content's bracket, the message's brace */
    sbuf_append(out, c->msgs.p, c->msgs.len - 3);
    sbuf_puts(out, AM_CACHE "}]}]");
}

static int am_body(am_ctx *c, const json_value *doc, sbuf *out)
{
    if (am_scan(c, doc) != 0)
        return -1;
    /* the conversation first: the system prompt and the messages */
    if (c->rsp) {
        if (am_rsp_input(c) != 0)
            return -1;
    } else {
        const json_value *msgs = c->val[AM_MESSAGES];
        refuse_param(c->err, "messages");
        if (!msgs)
            return am_missing(c);
        if (msgs->type != JSON_ARRAY)
            return am_invalid_type(c, "an array");
        if (am_chat_messages(c, msgs) != 0)
            return -1;
    }
    am_flush(c);
    const char *list = c->rsp ? "input" : "messages";
    if (!c->n_msgs) {
        refuse_param(c->err, "%s", list);
        return am_invalid_value(c, "the Anthropic Messages API needs a user message to answer, and there is none");
    }
    if (c->first_role != AM_ROLE_USER) {
        refuse_param(c->err, "%s", c->first_at);
        return am_invalid_value(c, "the Anthropic Messages API needs the conversation to open with a user message");
    }
    int64_t max = TO_MESSAGES_MAX_TOKENS, budget;
    const json_value *mv = c->rsp ? c->val[AM_MAX_OUTPUT_TOKENS]
                           : c->val[AM_MAX_COMPLETION_TOKENS] ? c->val[AM_MAX_COMPLETION_TOKENS] /* it replaced max_tokens */
                                                              : c->val[AM_MAX_TOKENS];
    if (mv && am_tokens(c, mv, c->rsp ? "max_output_tokens" : c->val[AM_MAX_COMPLETION_TOKENS]
                                                                  ? "max_completion_tokens" : "max_tokens", &max) != 0)
        return -1;
    am_choice choice;
    if (am_budget(c, &budget) != 0 || am_sampling(c, budget > 0) != 0 || am_tool_choice(c, &choice) != 0 ||
        am_verbosity(c) != 0 || am_include(c) != 0)
        return -1;
    /* the tools, written aside: whether any is decides the choice's fate */
    sbuf tools = SBUF_INIT;
    size_t tn = 1; /* the member follows others: its comma */
    int rc = c->val[AM_TOOLS] ? am_tools(c, c->val[AM_TOOLS], &tools, &tn) : 0;
    if (rc != 0) {
        sbuf_free(&tools);
        return -1;
    }
    /* Anthropic thinks only when no tool is forced, and in a tool loop only
     * when its last assistant message begins with its own signed thinking
     * block, which an OpenAI history never holds: there this request goes
     * without (docs/clients.md) */
    int forced = c->n_tools && choice.type && (strcmp(choice.type, "any") == 0 || strcmp(choice.type, "tool") == 0);
    if (forced || c->last_calls)
        budget = 0;
    if (budget && max <= budget)
        max += budget; /* the answer keeps the room asked for beside the thinking */

    sbuf_append(out, "{", 1);
    size_t n = 0;
    const json_value *model = am_get(doc, "model");
    if (model) {
        emit_key(out, &n, "model");
        json_write(out, model);
    }
    emit_key(out, &n, "max_tokens");
    sbuf_put_int(out, max);
    if (c->sys.len) {
        emit_key(out, &n, "system");
        sbuf_puts(out, "[{\"type\":\"text\",\"text\":");
        sbuf_json_str(out, c->sys.p, c->sys.len);
        sbuf_puts(out, AM_CACHE "}]");
    }
    am_write_messages(c, out, &n);
    sbuf_append(out, tools.p ? tools.p : "", tools.len);
    sbuf_free(&tools);
    const json_value *par = c->val[AM_PARALLEL_TOOL_CALLS];
    int one_call = par && par->type == JSON_FALSE;
    if (c->n_tools && (choice.type || one_call)) {
        const char *type = choice.type ? choice.type : "auto";
        emit_key(out, &n, "tool_choice");
        sbuf_puts(out, "{\"type\":");
        sbuf_json_str(out, type, strlen(type));
        if (choice.name) {
            sbuf_puts(out, ",\"name\":");
            emit_str(out, choice.name);
        }
        if (one_call && strcmp(type, "none") != 0)
            sbuf_puts(out, ",\"disable_parallel_tool_use\":true");
        sbuf_append(out, "}", 1);
    }
    if (budget) {
        emit_key(out, &n, "thinking");
        sbuf_puts(out, "{\"type\":\"enabled\",\"budget_tokens\":");
        sbuf_put_int(out, budget);
        sbuf_append(out, "}", 1);
    }
    static const int same[] = {AM_TEMPERATURE, AM_TOP_P};
    for (size_t k = 0; k < 2; k++)
        if (c->val[same[k]]) {
            emit_key(out, &n, am_fields[same[k]].name);
            json_write(out, c->val[same[k]]);
        }
    if (am_stop(c, out, &n) != 0 || am_format(c, out, &n) != 0 || am_metadata(c, out, &n) != 0)
        return -1;
    if (c->val[AM_STREAM]) {
        emit_key(out, &n, "stream");
        json_write(out, c->val[AM_STREAM]);
    }
    sbuf_append(out, "}", 1);
    return 0;
}

static int am_translate(const json_value *doc, const policy_dialect *rules, sbuf *out, dialect_error *err, int rsp)
{
    if (!doc || doc->type != JSON_OBJECT) {
        refuse_param(err, "%s", "");
        return refuse_set(err, REFUSE_INVALID_TYPE, "The request body must be a JSON object.");
    }
    am_ctx c;
    memset(&c, 0, sizeof c);
    c.rules = rules;
    c.err = err;
    c.rsp = rsp;
    int rc = am_body(&c, doc, out);
    sbuf_free(&c.sys);
    sbuf_free(&c.msgs);
    sbuf_free(&c.results);
    sbuf_free(&c.blocks);
    return rc;
}

int to_messages_request_chat(const json_value *doc, const policy_dialect *rules, sbuf *out, dialect_error *err)
{
    return am_translate(doc, rules, out, err, 0);
}

int to_messages_request_responses(const json_value *doc, const policy_dialect *rules, sbuf *out, dialect_error *err)
{
    return am_translate(doc, rules, out, err, 1);
}
