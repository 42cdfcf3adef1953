/* messages_request.c: an Anthropic Messages request written as a Responses
 * request or a Chat Completions request (see messages_request.h; the
 * mapping and the refusals are docs/clients.md's "Anthropic Messages").
 *
 * Read as a tree, written with base/sbuf member by member in the client's
 * order, as chat_request.c and responses_request.c do: a member both APIs
 * know by the same name goes as it came, one that maps is rewritten at its
 * place ("system" becomes the Responses "instructions" there; "messages"
 * becomes "input", or "messages" led by the system message for Chat). Unlike
 * those two, a member this file does not know is refused, not passed: a
 * Messages client's unknown field is Anthropic's, and an OpenAI upstream
 * answers it with a 400 the client cannot trace to its request. The few
 * Anthropic fields that ask only for something of Anthropic's own serving
 * are left out (mr_fields says which and why); the rest are a 400 naming
 * them unless the rules' ignore list lets them be left out.
 *
 * Content blocks become parts of one message item (Responses) or one chat
 * message, the message written when it ends; a tool_use or tool_result
 * block ends the Responses message before it (the function call and its
 * output are items of their own, in order), while Chat keeps each
 * assistant turn one message with its tool_calls, and writes the tool
 * messages of a user turn first (a chat API wants them right after the
 * calls), then the rest of the turn as one user message, images a tool
 * returned included (a chat tool message takes text only).
 *
 * Thinking blocks are left out: a signed thinking block is Anthropic's,
 * valid only on Anthropic's API for the conversation that made it, and its
 * text is the model's own earlier reasoning, not input (redacted_thinking
 * the same, encrypted). Cache hints (cache_control) are left out too: both
 * OpenAI APIs cache prompts by themselves and have no field for them.
 *
 * Nothing recurses but emit_depth, bounded by the parser's 128 levels; a
 * schema that moves deeper than it came (a tool's input_schema under
 * Chat's "function") is checked to parse there. */
#include "dialect/messages_request.h"
#include "base/sha256.h"
#include "dialect/emit.h"
#include <stdio.h>
#include <string.h>

/* json_parse's nesting limit: the translated body must parse again. */
#define MR_JSON_DEPTH 128
/* Responses refuses max_output_tokens below 16; a smaller max_tokens (1:
 * a key check) is raised, as chat_request.c does. */
#define MR_MIN_OUTPUT_TOKENS 16

/* OpenAI refuses an id longer than 64 characters ("string_above_max_length":
 * a call_id on the Responses API, a user): Claude Code's user_id is a JSON
 * text of some 150. A longer id goes as its SHA-256 in hex, 64 characters:
 * the same id always gives the same, so a tool_use and its tool_result
 * still match. */
#define MR_ID_MAX 64

/* ---------- the top-level fields ---------- */

typedef enum {
    MR_OWN,    /* rewritten by this file */
    MR_SAME,   /* the same name and meaning in both OpenAI APIs */
    MR_DROP,   /* asks only for something of Anthropic's own serving: left out */
    MR_REFUSE, /* no equivalent: a 400 unless harmless or ignored */
} mr_kind;

enum {
    MR_MESSAGES,
    MR_SYSTEM,
    MR_MAX_TOKENS,
    MR_METADATA,
    MR_STOP_SEQUENCES,
    MR_STREAM,
    MR_TOOLS,
    MR_TOOL_CHOICE,
    MR_THINKING,
    MR_OUTPUT_CONFIG,
    MR_OUTPUT_FORMAT,
};

typedef struct mr_field {
    const char *name;
    mr_kind kind;
    int (*harmless)(const json_value *v); /* MR_REFUSE: the value asks for nothing */
    const char *why;                      /* MR_DROP, MR_REFUSE: the reason */
} mr_field;

static int mr_is_empty(const json_value *v) { return (v->type == JSON_ARRAY || v->type == JSON_OBJECT) && !v->count; }

static const mr_field mr_fields[] = {
    [MR_MESSAGES] = {"messages", MR_OWN, NULL, NULL},
    [MR_SYSTEM] = {"system", MR_OWN, NULL, NULL},
    [MR_MAX_TOKENS] = {"max_tokens", MR_OWN, NULL, NULL},
    [MR_METADATA] = {"metadata", MR_OWN, NULL, NULL},
    [MR_STOP_SEQUENCES] = {"stop_sequences", MR_OWN, NULL, NULL},
    [MR_STREAM] = {"stream", MR_OWN, NULL, NULL},
    [MR_TOOLS] = {"tools", MR_OWN, NULL, NULL},
    [MR_TOOL_CHOICE] = {"tool_choice", MR_OWN, NULL, NULL},
    [MR_THINKING] = {"thinking", MR_OWN, NULL, NULL},
    [MR_OUTPUT_CONFIG] = {"output_config", MR_OWN, NULL, NULL},
    [MR_OUTPUT_FORMAT] = {"output_format", MR_OWN, NULL, NULL},
    {"model", MR_SAME, NULL, NULL},
    {"temperature", MR_SAME, NULL, NULL},
    {"top_p", MR_SAME, NULL, NULL},
    /* left out: each asks only for a way of serving the request that an
     * OpenAI upstream has its own default for; the answer is the same */
    {"anthropic_version", MR_DROP, NULL, "the API version Bedrock and Vertex take in the body; OpenAI's APIs have none"},
    {"anthropic_beta", MR_DROP, NULL, "Bedrock's body form of the anthropic-beta header: Anthropic's own features"},
    {"context_management", MR_DROP, NULL,
     "asks Anthropic to clear old tool results and thinking to save context; the upstream keeps the whole "
     "context, which costs tokens, never the answer"},
    {"cache_control", MR_DROP, NULL, "automatic prompt caching: both OpenAI APIs cache prompts by themselves"},
    {"service_tier", MR_DROP, NULL, "auto and standard_only both ask for the account's default tier"},
    {"top_k", MR_REFUSE, NULL, "it has no top-k sampling"},
    {"container", MR_REFUSE, NULL, "code execution containers run only on Anthropic's API"},
    {"mcp_servers", MR_REFUSE, mr_is_empty, "the MCP connector runs only on Anthropic's API"},
};
#define MR_NFIELDS (sizeof mr_fields / sizeof mr_fields[0])

static int mr_field_find(const char *key)
{
    for (size_t i = 0; i < MR_NFIELDS; i++)
        if (strcmp(mr_fields[i].name, key) == 0)
            return (int)i;
    return -1;
}

/* ---------- the translation's state ---------- */

typedef struct mr_ctx {
    const policy_dialect *rules;
    dialect_error *err;
    sbuf *out;
    int chat;                          /* the target: Chat Completions (1), the Responses API (0) */
    const json_value *val[MR_NFIELDS]; /* each field's member (the last of its name), NULL when absent or null */
    sbuf sys;                          /* the system prompt's text */
    size_t tools;                      /* function tools that will be written */
    size_t items;                      /* input items / chat messages written */
    int reasoning_done, format_done;
    /* the message being written */
    sbuf parts;                        /* its content parts, JSON, comma-separated */
    size_t n_parts;
    int media;                         /* Chat: a part that is not text (the content goes as parts) */
    sbuf text;                         /* Chat: the text parts' text, joined */
    sbuf calls;                        /* Chat: the assistant turn's tool_calls, JSON */
    size_t n_calls;
} mr_ctx;

static const char *mr_target(const mr_ctx *c)
{
    return c->chat ? "Chat Completions" : "the Responses API";
}

static const char *mr_param(const mr_ctx *c)
{
    return c->err ? c->err->param : "";
}

/* Refusals, worded as Anthropic words its own ("<path>: ..."); err->param
 * is set to the path first. */
static int mr_unsupported(mr_ctx *c, const char *why)
{
    return refuse_set(c->err, REFUSE_UNSUPPORTED,
                      "%s: cannot be served by an account that speaks %s: %s. Remove it, or send the request where "
                      "an account speaks the Anthropic Messages API.",
                      mr_param(c), mr_target(c), why);
}

static int mr_unsupported_type(mr_ctx *c, const char *why, const char *type)
{
    char q[48];
    return refuse_set(c->err, REFUSE_UNSUPPORTED, "%s: '%s' cannot be served by an account that speaks %s: %s.",
                      mr_param(c), refuse_quote(q, sizeof q, type), mr_target(c), why);
}

static int mr_invalid_type(mr_ctx *c, const char *expected)
{
    return refuse_set(c->err, REFUSE_INVALID_TYPE, "%s: Input should be %s.", mr_param(c), expected);
}

static int mr_invalid_value(mr_ctx *c, const char *got, const char *expected)
{
    char q[48];
    return refuse_set(c->err, REFUSE_INVALID_VALUE, "%s: '%s' is not one of %s.", mr_param(c),
                      refuse_quote(q, sizeof q, got), expected);
}

static int mr_missing(mr_ctx *c)
{
    return refuse_set(c->err, REFUSE_MISSING, "%s: Field required.", mr_param(c));
}

/* A member of obj, NULL when absent or null. */
static const json_value *mr_get(const json_value *obj, const char *key)
{
    const json_value *v = json_get(obj, key);
    return v && v->type != JSON_NULL ? v : NULL;
}

/* Member key of obj (at path `at`) as a string; NULL with err when it is
 * absent or not one. */
static const json_value *mr_need_str(mr_ctx *c, const json_value *obj, const char *at, const char *key)
{
    const json_value *v = mr_get(obj, key);
    if (v && v->type == JSON_STRING)
        return v;
    refuse_param(c->err, "%s%s%s", at, *at ? "." : "", key);
    if (v)
        mr_invalid_type(c, "a valid string");
    else
        mr_missing(c);
    return NULL;
}

/* v (at path at) is an object; else -1 with err. */
static int mr_need_object(mr_ctx *c, const json_value *v, const char *at)
{
    if (v && v->type == JSON_OBJECT)
        return 0;
    refuse_param(c->err, "%s", at);
    return mr_invalid_type(c, "a valid dictionary");
}

/* v (at path at) is an object with a string "type": the type, or NULL
 * with err. */
static const json_value *mr_type_of(mr_ctx *c, const json_value *v, const char *at)
{
    return mr_need_object(c, v, at) == 0 ? mr_need_str(c, v, at, "type") : NULL;
}

/* ... and the type is want (expected: the message's words for the values
 * it may take): 0, or -1 with err. */
static int mr_type_must(mr_ctx *c, const json_value *v, const char *at, const char *want, const char *expected)
{
    const json_value *type = mr_type_of(c, v, at);
    if (!type)
        return -1;
    if (emit_is(type, want))
        return 0;
    refuse_param(c->err, "%s.type", at);
    return mr_invalid_value(c, type->str, expected);
}

/* A string id as a literal, within MR_ID_MAX. */
static void mr_put_id(sbuf *out, const json_value *id)
{
    if (id->str_len <= MR_ID_MAX) {
        emit_str(out, id);
        return;
    }
    char hex[65];
    sha256_hex(id->str, id->str_len, hex);
    sbuf_json_str(out, hex, 64);
}

/* Begins an input item or chat message: the comma before it. */
static void mr_item(mr_ctx *c)
{
    if (c->items++)
        sbuf_append(c->out, ",", 1);
}

/* ---------- parts of the message being written ---------- */

static void mr_part_begin(mr_ctx *c)
{
    if (c->n_parts++)
        sbuf_append(&c->parts, ",", 1);
}

/* A text part: input_text / output_text (Responses), text (Chat, whose
 * all-text content goes as one string: the text kept too). */
static void mr_part_text(mr_ctx *c, int assistant, const char *text, size_t n)
{
    mr_part_begin(c);
    sbuf_puts(&c->parts, c->chat ? "{\"type\":\"text\",\"text\":" : assistant ? "{\"type\":\"output_text\",\"text\":"
                                                                             : "{\"type\":\"input_text\",\"text\":");
    sbuf_json_str(&c->parts, text, n);
    sbuf_append(&c->parts, "}", 1);
    if (!c->chat)
        return;
    /* Anthropic's blocks are apart (a system reminder, then the prompt):
     * as one string they stay paragraphs */
    if (c->text.len && n)
        sbuf_append(&c->text, "\n\n", 2);
    sbuf_append(&c->text, text, n);
}

/* The message being written, ended: a Responses message item, or a chat
 * message (content a string when it is all text, as every relay takes;
 * an assistant turn with its tool_calls, content null beside them when it
 * said nothing). Nothing when it has nothing. */
static void mr_flush(mr_ctx *c, int assistant)
{
    sbuf *out = c->out;
    if (c->chat && (c->n_parts || c->n_calls)) {
        mr_item(c);
        sbuf_puts(out, assistant ? "{\"role\":\"assistant\",\"content\":" : "{\"role\":\"user\",\"content\":");
        if (c->media) {
            sbuf_append(out, "[", 1);
            sbuf_append(out, c->parts.p, c->parts.len);
            sbuf_append(out, "]", 1);
        } else if (c->n_parts) {
            sbuf_json_str(out, c->text.p ? c->text.p : "", c->text.len);
        } else {
            sbuf_puts(out, "null");
        }
        if (c->n_calls) {
            sbuf_puts(out, ",\"tool_calls\":[");
            sbuf_append(out, c->calls.p, c->calls.len);
            sbuf_append(out, "]", 1);
        }
        sbuf_append(out, "}", 1);
    } else if (!c->chat && c->n_parts) {
        mr_item(c);
        sbuf_puts(out, assistant ? "{\"type\":\"message\",\"role\":\"assistant\",\"content\":["
                                 : "{\"type\":\"message\",\"role\":\"user\",\"content\":[");
        sbuf_append(out, c->parts.p, c->parts.len);
        sbuf_puts(out, "]}");
    }
    sbuf_reset(&c->parts);
    sbuf_reset(&c->text);
    sbuf_reset(&c->calls);
    c->n_parts = c->n_calls = 0;
    c->media = 0;
}

/* ---------- sources: images and documents ---------- */

/* "data:<media_type>;base64,<data>" of a base64 source (at its path). */
static int mr_data_url(mr_ctx *c, const json_value *src, const char *at, sbuf *url)
{
    const json_value *mt = mr_need_str(c, src, at, "media_type");
    const json_value *data = mt ? mr_need_str(c, src, at, "data") : NULL;
    if (!data)
        return -1;
    sbuf_puts(url, "data:");
    sbuf_append(url, mt->str, mt->str_len);
    sbuf_puts(url, ";base64,");
    sbuf_append(url, data->str, data->str_len);
    return 0;
}

/* The source of an image or document block at `at`, its path (into
 * path[96]) and its type: NULL with err when either is missing or of the
 * wrong type. */
static const json_value *mr_source(mr_ctx *c, const json_value *b, const char *at, char path[96],
                                   const json_value **type)
{
    snprintf(path, 96, "%s.source", at);
    const json_value *src = mr_get(b, "source");
    if (!src) {
        refuse_param(c->err, "%s", path);
        mr_missing(c);
        return NULL;
    }
    *type = mr_type_of(c, src, path);
    return *type ? src : NULL;
}

/* The part of an image: by URL (a data URL for base64 sources). */
static void mr_put_image(mr_ctx *c, sbuf *to, const sbuf *url)
{
    if (c->chat) {
        sbuf_puts(to, "{\"type\":\"image_url\",\"image_url\":{\"url\":");
        sbuf_json_str(to, url->p, url->len);
        sbuf_puts(to, "}}");
    } else {
        sbuf_puts(to, "{\"type\":\"input_image\",\"detail\":\"auto\",\"image_url\":");
        sbuf_json_str(to, url->p, url->len);
        sbuf_append(to, "}", 1);
    }
}

/* The part of a file given as data: input_file (Responses), file (Chat). */
static void mr_put_file(mr_ctx *c, sbuf *to, const char *filename, const sbuf *url)
{
    sbuf_puts(to, c->chat ? "{\"type\":\"file\",\"file\":{\"filename\":" : "{\"type\":\"input_file\",\"filename\":");
    sbuf_json_str(to, filename, strlen(filename));
    sbuf_puts(to, ",\"file_data\":");
    sbuf_json_str(to, url->p, url->len);
    sbuf_puts(to, c->chat ? "}}" : "}");
}

/* An image or a document block (at path at) as a part appended to `to`
 * (comma-separated, *n counted): images as data or by URL; a document as a
 * file (as data; by URL on the Responses API only). Returns 0 when written;
 * 1 when left out (its source cannot travel and the rules ignore
 * "content.image" / "content.document"); 2 for a plain-text document,
 * nothing written: its text in *text, for the caller to put with the text;
 * -1 with err. */
static int mr_media(mr_ctx *c, const json_value *b, const char *at, int document, sbuf *to, size_t *n,
                    const json_value **text)
{
    const json_value *type;
    char path[96];
    const json_value *src = mr_source(c, b, at, path, &type);
    if (!src)
        return -1;
    if (document && emit_is(type, "text")) {
        *text = mr_need_str(c, src, path, "data");
        return *text ? 2 : -1;
    }
    sbuf url = SBUF_INIT;
    int rc = 0;
    if (emit_is(type, "base64")) {
        rc = mr_data_url(c, src, path, &url);
    } else if (emit_is(type, "url") && (!document || !c->chat)) {
        const json_value *u = mr_need_str(c, src, path, "url");
        if (u)
            sbuf_append(&url, u->str, u->str_len);
        rc = u ? 0 : -1;
    } else if (refuse_ignores(c->rules, document ? "content.document" : "content.image")) {
        rc = 1;
    } else {
        refuse_param(c->err, "%s.type", path);
        rc = mr_unsupported_type(c,
                                 !document ? "it takes images as data or by URL (a file id is Anthropic's)"
                                 : c->chat ? "it takes documents as data only"
                                           : "it takes documents as data or by URL",
                                 type->str);
    }
    if (rc == 0) {
        if ((*n)++)
            sbuf_append(to, ",", 1);
        if (!document) {
            mr_put_image(c, to, &url);
        } else if (emit_is(type, "url")) {
            sbuf_puts(to, "{\"type\":\"input_file\",\"file_url\":");
            sbuf_json_str(to, url.p, url.len);
            sbuf_append(to, "}", 1);
        } else {
            const json_value *title = mr_get(b, "title");
            const char *mt = json_get_str(src, "media_type");
            const char *filename = title && title->type == JSON_STRING && title->str_len ? title->str
                                   : mt && strcmp(mt, "application/pdf") == 0       ? "document.pdf"
                                                                                  : "document";
            mr_put_file(c, to, filename, &url);
        }
    }
    sbuf_free(&url);
    return rc;
}

/* ---------- tool calls and their results ---------- */

/* A tool_use block of an assistant turn: a function_call item (Responses)
 * or an element of the turn's tool_calls (Chat). Its id passes as the call
 * id (toolu_... ids included), its input as the arguments' JSON text. */
static int mr_tool_use(mr_ctx *c, const json_value *b, const char *at)
{
    const json_value *id = mr_need_str(c, b, at, "id");
    const json_value *name = id ? mr_need_str(c, b, at, "name") : NULL;
    if (!name)
        return -1;
    const json_value *input = mr_get(b, "input");
    sbuf *out = c->out;
    if (c->chat) {
        if (c->n_calls++)
            sbuf_append(&c->calls, ",", 1);
        sbuf_puts(&c->calls, "{\"id\":");
        mr_put_id(&c->calls, id);
        sbuf_puts(&c->calls, ",\"type\":\"function\",\"function\":{\"name\":");
        emit_str(&c->calls, name);
        sbuf_puts(&c->calls, ",\"arguments\":");
        emit_as_text(&c->calls, input, "{}");
        sbuf_puts(&c->calls, "}}");
        return 0;
    }
    mr_flush(c, 1);
    mr_item(c);
    sbuf_puts(out, "{\"type\":\"function_call\",\"call_id\":");
    mr_put_id(out, id);
    sbuf_puts(out, ",\"name\":");
    emit_str(out, name);
    sbuf_puts(out, ",\"arguments\":");
    emit_as_text(out, input, "{}");
    sbuf_append(out, "}", 1);
    return 0;
}

/* The content of a tool_result block (at path at): its text (text blocks
 * and plain-text documents, a line apart) into text, its images and files
 * as parts into media (*n_media counted). */
static int mr_result_content(mr_ctx *c, const json_value *content, const char *at, sbuf *text, sbuf *media,
                             size_t *n_media)
{
    if (content->type == JSON_STRING) {
        sbuf_append(text, content->str, content->str_len);
        return 0;
    }
    if (content->type != JSON_ARRAY) {
        refuse_param(c->err, "%s.content", at);
        return mr_invalid_type(c, "a valid string or a valid list");
    }
    size_t k = 0;
    for (const json_value *p = content->child; p; p = p->next, k++) {
        char path[128];
        snprintf(path, sizeof path, "%s.content.%zu", at, k);
        const json_value *type = mr_type_of(c, p, path), *t = NULL;
        if (!type)
            return -1;
        int rc = 2;
        if (emit_is(type, "text"))
            t = mr_need_str(c, p, path, "text");
        else if (emit_is(type, "image") || emit_is(type, "document"))
            rc = mr_media(c, p, path, emit_is(type, "document"), media, n_media, &t);
        else if (refuse_ignores2(c->rules, "content.", type->str))
            continue;
        else {
            refuse_param(c->err, "%s.type", path);
            return mr_unsupported_type(c, "a tool result takes text, images and documents", type->str);
        }
        if (rc < 0 || (rc == 2 && !t))
            return -1;
        if (rc == 2) {
            if (text->len && t->str_len)
                sbuf_append(text, "\n", 1); /* blocks are paragraphs of the result */
            sbuf_append(text, t->str, t->str_len);
        }
    }
    return 0;
}

/* A tool_result block of a user turn: a function_call_output item
 * (Responses: its output a string, or parts when it holds images or files),
 * or a tool message (Chat: text only; its images and files join the user
 * message that follows the turn's tool messages, after a line naming the
 * call: Claude Code's Read returns an image or a PDF so). OpenAI's
 * tool outputs have no error flag: is_error makes the text begin with
 * "Error: " (the model reads it there). */
static int mr_tool_result(mr_ctx *c, const json_value *b, const char *at)
{
    const json_value *id = mr_need_str(c, b, at, "tool_use_id");
    if (!id)
        return -1;
    const json_value *content = mr_get(b, "content");
    const json_value *is_error = mr_get(b, "is_error");
    sbuf text = SBUF_INIT, images = SBUF_INIT;
    size_t n_images = 0; /* images and files */
    if (is_error && is_error->type == JSON_TRUE)
        sbuf_puts(&text, "Error: ");
    if (content && mr_result_content(c, content, at, &text, &images, &n_images) != 0) {
        sbuf_free(&text);
        sbuf_free(&images);
        return -1;
    }
    sbuf *out = c->out;
    if (!c->chat)
        mr_flush(c, 0);
    mr_item(c);
    if (c->chat) {
        sbuf_puts(out, "{\"role\":\"tool\",\"tool_call_id\":");
        mr_put_id(out, id);
        sbuf_puts(out, ",\"content\":");
        sbuf_json_str(out, text.p ? text.p : "", text.len);
        sbuf_append(out, "}", 1);
        if (n_images) {
            sbuf line = SBUF_INIT;
            sbuf_puts(&line, "Attached to the result of tool call ");
            sbuf_append(&line, id->str, id->str_len);
            sbuf_puts(&line, ":");
            mr_part_text(c, 0, line.p, line.len);
            sbuf_free(&line);
            mr_part_begin(c);
            sbuf_append(&c->parts, images.p, images.len);
            c->n_parts += n_images - 1;
            c->media = 1;
        }
    } else {
        sbuf_puts(out, "{\"type\":\"function_call_output\",\"call_id\":");
        mr_put_id(out, id);
        sbuf_puts(out, ",\"output\":");
        if (n_images) {
            sbuf_puts(out, "[");
            if (text.len) {
                sbuf_puts(out, "{\"type\":\"input_text\",\"text\":");
                sbuf_json_str(out, text.p, text.len);
                sbuf_puts(out, "},");
            }
            sbuf_append(out, images.p, images.len);
            sbuf_puts(out, "]");
        } else {
            sbuf_json_str(out, text.p ? text.p : "", text.len);
        }
        sbuf_append(out, "}", 1);
    }
    sbuf_free(&text);
    sbuf_free(&images);
    return 0;
}

/* ---------- messages ---------- */

/* Block j of message i (assistant or user). */
static int mr_block(mr_ctx *c, const json_value *b, size_t i, size_t j, int assistant)
{
    char at[64];
    snprintf(at, sizeof at, "messages.%zu.content.%zu", i, j);
    const json_value *tv = mr_type_of(c, b, at);
    if (!tv)
        return -1;
    const char *type = tv->str;
    /* a signed thinking block is valid only on Anthropic's API, for the
     * conversation that made it, and its text is not input; a redacted one
     * is encrypted: both are left out (docs/clients.md) */
    if (strcmp(type, "thinking") == 0 || strcmp(type, "redacted_thinking") == 0)
        return 0;
    if (strcmp(type, "text") == 0) {
        const json_value *t = mr_need_str(c, b, at, "text");
        if (!t)
            return -1;
        mr_part_text(c, assistant, t->str, t->str_len);
        return 0;
    }
    int user_only = strcmp(type, "image") == 0 || strcmp(type, "document") == 0 || strcmp(type, "tool_result") == 0;
    if ((user_only && assistant) || (strcmp(type, "tool_use") == 0 && !assistant)) {
        refuse_param(c->err, "%s.type", at);
        return refuse_set(c->err, REFUSE_INVALID_VALUE, "%s: '%s' blocks belong in %s messages.", mr_param(c), type,
                          assistant ? "user" : "assistant");
    }
    if (strcmp(type, "image") == 0 || strcmp(type, "document") == 0) {
        const json_value *text = NULL;
        int rc = mr_media(c, b, at, strcmp(type, "document") == 0, &c->parts, &c->n_parts, &text);
        if (rc == 2) /* a plain-text document: its text */
            mr_part_text(c, 0, text->str, text->str_len);
        c->media |= rc == 0;
        return rc < 0 ? -1 : 0;
    }
    if (strcmp(type, "tool_use") == 0)
        return mr_tool_use(c, b, at);
    if (strcmp(type, "tool_result") == 0)
        return mr_tool_result(c, b, at);
    /* server tools' blocks (server_tool_use, web_search_tool_result, ...),
     * search results, container uploads: Anthropic's alone */
    if (refuse_ignores2(c->rules, "content.", type))
        return 0;
    refuse_param(c->err, "%s.type", at);
    return mr_unsupported_type(c, "it takes text, image, document, tool_use and tool_result blocks", type);
}

/* A system message inside the conversation (Claude Code sends one after
 * a turn: its environment, per-turn control): text only, written where it
 * stands, as a developer message (Responses: what Codex sends for its own
 * mid-conversation instructions) or a chat system message. */
static int mr_system_message(mr_ctx *c, const json_value *content, const char *at)
{
    sbuf text = SBUF_INIT;
    if (content->type == JSON_STRING) {
        sbuf_append(&text, content->str, content->str_len);
    } else {
        size_t j = 0;
        for (const json_value *b = content->child; b; b = b->next, j++) {
            char bat[80];
            snprintf(bat, sizeof bat, "%s.content.%zu", at, j);
            const json_value *t = NULL;
            if (mr_type_must(c, b, bat, "text", "'text'") != 0 || !(t = mr_need_str(c, b, bat, "text"))) {
                sbuf_free(&text);
                return -1;
            }
            if (text.len && t->str_len)
                sbuf_append(&text, "\n\n", 2);
            sbuf_append(&text, t->str, t->str_len);
        }
    }
    if (text.len) {
        mr_item(c);
        if (c->chat) {
            sbuf_puts(c->out, "{\"role\":\"system\",\"content\":");
            sbuf_json_str(c->out, text.p, text.len);
            sbuf_append(c->out, "}", 1);
        } else {
            sbuf_puts(c->out, "{\"type\":\"message\",\"role\":\"developer\",\"content\":[{\"type\":\"input_text\",\"text\":");
            sbuf_json_str(c->out, text.p, text.len);
            sbuf_puts(c->out, "}]}");
        }
    }
    sbuf_free(&text);
    return 0;
}

static int mr_message(mr_ctx *c, const json_value *m, size_t i)
{
    char at[32];
    snprintf(at, sizeof at, "messages.%zu", i);
    if (mr_need_object(c, m, at) != 0)
        return -1;
    const json_value *role = mr_need_str(c, m, at, "role");
    if (!role)
        return -1;
    int assistant = emit_is(role, "assistant"), system = emit_is(role, "system");
    if (!assistant && !system && !emit_is(role, "user")) {
        refuse_param(c->err, "%s.role", at);
        return mr_invalid_value(c, role->str, "'user', 'assistant' or 'system'");
    }
    const json_value *content = mr_get(m, "content");
    if (!content || (content->type != JSON_STRING && content->type != JSON_ARRAY)) {
        refuse_param(c->err, "%s.content", at);
        return content ? mr_invalid_type(c, "a valid string or a valid list") : mr_missing(c);
    }
    if (system)
        return mr_system_message(c, content, at);
    if (content->type == JSON_STRING) {
        mr_part_text(c, assistant, content->str, content->str_len);
    } else {
        size_t j = 0;
        for (const json_value *b = content->child; b; b = b->next, j++)
            if (mr_block(c, b, i, j, assistant) != 0)
                return -1;
    }
    mr_flush(c, assistant);
    return 0;
}

/* "input" (Responses) or "messages" led by the system message (Chat). */
static int mr_messages(mr_ctx *c, const json_value *msgs, size_t *n)
{
    sbuf *out = c->out;
    emit_key(out, n, c->chat ? "messages" : "input");
    sbuf_append(out, "[", 1);
    if (c->chat && c->sys.len) {
        mr_item(c);
        sbuf_puts(out, "{\"role\":\"system\",\"content\":");
        sbuf_json_str(out, c->sys.p, c->sys.len);
        sbuf_append(out, "}", 1);
    }
    size_t i = 0;
    for (const json_value *m = msgs->child; m; m = m->next, i++)
        if (mr_message(c, m, i) != 0)
            return -1;
    sbuf_append(out, "]", 1);
    return 0;
}

/* The system prompt's text: a string, or text blocks joined with a blank
 * line (Claude Code sends several, with cache hints, which are left out). */
static int mr_system(mr_ctx *c, const json_value *sys)
{
    if (sys->type == JSON_STRING) {
        sbuf_append(&c->sys, sys->str, sys->str_len);
        return 0;
    }
    if (sys->type != JSON_ARRAY) {
        refuse_param(c->err, "system");
        return mr_invalid_type(c, "a valid string or a valid list");
    }
    size_t j = 0;
    for (const json_value *b = sys->child; b; b = b->next, j++) {
        char at[32];
        snprintf(at, sizeof at, "system.%zu", j);
        if (mr_type_must(c, b, at, "text", "'text'") != 0)
            return -1;
        const json_value *t = mr_need_str(c, b, at, "text");
        if (!t)
            return -1;
        if (c->sys.len && t->str_len)
            sbuf_append(&c->sys, "\n\n", 2);
        sbuf_append(&c->sys, t->str, t->str_len);
    }
    return 0;
}

/* ---------- tools, tool_choice ---------- */

/* A schema (at its path, err->param) that passes unchanged with `above`
 * containers over it where it is written (a tool's parameters: 3 in a
 * Responses body, 4 in a Chat body, under "function"; a format's schema:
 * 3) must leave the body within the parser's depth: else a 400. */
static int mr_schema_fits(mr_ctx *c, const json_value *schema, int above)
{
    int max = MR_JSON_DEPTH - above;
    if (emit_depth(schema, max) <= max)
        return 0;
    return refuse_set(c->err, REFUSE_INVALID_VALUE, "%s: the schema nests too deeply to be sent to %s.", mr_param(c),
                      mr_target(c));
}

/* A tool the client defines itself (no type, or "custom"); the others are
 * Anthropic's server tools (web_search_20250305, bash_20250124, ...). */
static int mr_is_custom_tool(const json_value *t)
{
    const json_value *type = mr_get(t, "type");
    return !type || emit_is(type, "custom");
}

static size_t mr_count_tools(const json_value *tools)
{
    size_t n = 0;
    for (const json_value *t = tools && tools->type == JSON_ARRAY ? tools->child : NULL; t; t = t->next)
        n += t->type == JSON_OBJECT && mr_is_custom_tool(t);
    return n;
}

/* tools: the client's own tools as function tools (name, description,
 * input_schema as parameters, strict). Their cache_control, defer_loading
 * and input_examples are hints to Anthropic's serving, left out; a server
 * tool is a 400 unless "tools.<type>" is ignored. No tools written: no
 * member (OpenAI refuses an empty list). */
static int mr_tools(mr_ctx *c, const json_value *tools, size_t *n)
{
    sbuf *out = c->out;
    if (tools->type != JSON_ARRAY) {
        refuse_param(c->err, "tools");
        return mr_invalid_type(c, "a valid list");
    }
    size_t mark = out->len, n_before = *n, j = 0, written = 0;
    emit_key(out, n, "tools");
    sbuf_append(out, "[", 1);
    for (const json_value *t = tools->child; t; t = t->next, j++) {
        char at[32];
        snprintf(at, sizeof at, "tools.%zu", j);
        if (mr_need_object(c, t, at) != 0)
            return -1;
        if (!mr_is_custom_tool(t)) {
            const json_value *type = mr_get(t, "type");
            if (type->type == JSON_STRING && refuse_ignores2(c->rules, "tools.", type->str))
                continue;
            refuse_param(c->err, "%s.type", at);
            if (type->type != JSON_STRING)
                return mr_invalid_type(c, "a valid string");
            return mr_unsupported_type(c, "Anthropic's server tools run only on its API", type->str);
        }
        const json_value *name = mr_need_str(c, t, at, "name");
        if (!name)
            return -1;
        const json_value *desc = mr_get(t, "description"), *schema = mr_get(t, "input_schema");
        const json_value *strict = mr_get(t, "strict");
        if (desc && desc->type != JSON_STRING) {
            refuse_param(c->err, "%s.description", at);
            return mr_invalid_type(c, "a valid string");
        }
        if (strict && strict->type != JSON_TRUE && strict->type != JSON_FALSE) {
            refuse_param(c->err, "%s.strict", at);
            return mr_invalid_type(c, "a valid boolean");
        }
        if (!schema || schema->type != JSON_OBJECT) {
            refuse_param(c->err, "%s.input_schema", at);
            return schema ? mr_invalid_type(c, "a valid dictionary") : mr_missing(c);
        }
        refuse_param(c->err, "%s.input_schema", at);
        if (mr_schema_fits(c, schema, c->chat ? 4 : 3) != 0)
            return -1;
        if (written++)
            sbuf_append(out, ",", 1);
        sbuf_puts(out, c->chat ? "{\"type\":\"function\",\"function\":{\"name\":" : "{\"type\":\"function\",\"name\":");
        emit_str(out, name);
        if (desc) {
            sbuf_puts(out, ",\"description\":");
            emit_str(out, desc);
        }
        sbuf_puts(out, ",\"parameters\":");
        json_write(out, schema);
        /* the Responses API is strict unless told not to, and a schema
         * written for Anthropic need not meet its strict rules */
        if (strict || !c->chat) {
            sbuf_puts(out, ",\"strict\":");
            sbuf_puts(out, strict && strict->type == JSON_TRUE ? "true" : "false");
        }
        sbuf_puts(out, c->chat ? "}}" : "}");
    }
    sbuf_append(out, "]", 1);
    if (!written) {
        out->len = mark;
        out->p[mark] = '\0';
        *n = n_before;
    }
    return 0;
}

/* tool_choice {type: auto | any | tool {name} | none} as "auto",
 * "required", the named function, "none"; disable_parallel_tool_use as
 * parallel_tool_calls false. Both only beside tools (OpenAI refuses them
 * without). */
static int mr_tool_choice(mr_ctx *c, const json_value *tc, size_t *n)
{
    sbuf *out = c->out;
    const json_value *type = mr_type_of(c, tc, "tool_choice");
    if (!type)
        return -1;
    const char *choice = emit_is(type, "auto") ? "\"auto\"" : emit_is(type, "any") ? "\"required\""
                                                          : emit_is(type, "none") ? "\"none\""
                                                                                  : NULL;
    const json_value *name = NULL;
    if (!choice && !emit_is(type, "tool")) {
        refuse_param(c->err, "tool_choice.type");
        return mr_invalid_value(c, type->str, "'auto', 'any', 'tool' or 'none'");
    }
    if (!choice && !(name = mr_need_str(c, tc, "tool_choice", "name")))
        return -1;
    const json_value *dp = mr_get(tc, "disable_parallel_tool_use");
    if (dp && dp->type != JSON_TRUE && dp->type != JSON_FALSE) {
        refuse_param(c->err, "tool_choice.disable_parallel_tool_use");
        return mr_invalid_type(c, "a valid boolean");
    }
    if (!c->tools)
        return 0;
    emit_key(out, n, "tool_choice");
    if (choice) {
        sbuf_puts(out, choice);
    } else {
        sbuf_puts(out, c->chat ? "{\"type\":\"function\",\"function\":{\"name\":" : "{\"type\":\"function\",\"name\":");
        emit_str(out, name);
        sbuf_puts(out, c->chat ? "}}" : "}");
    }
    if (dp && dp->type == JSON_TRUE) {
        emit_key(out, n, "parallel_tool_calls");
        sbuf_puts(out, "false");
    }
    return 0;
}

/* ---------- thinking, output_config ---------- */

/* The effort thinking and output_config ask for (NULL: none, the
 * upstream's default): output_config.effort when given ("max" as "high",
 * the most both OpenAI APIs take on every reasoning model), else an
 * enabled thinking's budget_tokens (MESSAGES_BUDGET_*). Adaptive or
 * disabled thinking says nothing OpenAI's reasoning models can do. */
static int mr_effort(mr_ctx *c, const char **effort)
{
    *effort = NULL;
    const json_value *th = c->val[MR_THINKING], *oc = c->val[MR_OUTPUT_CONFIG];
    if (th) {
        const json_value *type = mr_type_of(c, th, "thinking");
        if (!type)
            return -1;
        if (emit_is(type, "enabled")) {
            const json_value *budget = mr_get(th, "budget_tokens");
            if (budget && budget->type != JSON_NUMBER) {
                refuse_param(c->err, "thinking.budget_tokens");
                return mr_invalid_type(c, "a valid integer");
            }
            if (budget)
                *effort = budget->num < MESSAGES_BUDGET_LOW      ? "low"
                          : budget->num < MESSAGES_BUDGET_MEDIUM ? "medium"
                                                                 : "high";
        } else if (!emit_is(type, "adaptive") && !emit_is(type, "disabled")) {
            refuse_param(c->err, "thinking.type");
            return mr_invalid_value(c, type->str, "'enabled', 'adaptive' or 'disabled'");
        }
    }
    const json_value *e = oc && oc->type == JSON_OBJECT ? mr_get(oc, "effort") : NULL;
    if (e) {
        static const char *const levels[] = {"low", "medium", "high"};
        const char *got = NULL;
        for (size_t k = 0; k < 3 && !got; k++)
            if (emit_is(e, levels[k]))
                got = levels[k];
        if (emit_is(e, "max"))
            got = "high";
        if (!got) {
            refuse_param(c->err, "output_config.effort");
            return e->type == JSON_STRING ? mr_invalid_value(c, e->str, "'low', 'medium', 'high' or 'max'")
                                          : mr_invalid_type(c, "a valid string");
        }
        *effort = got;
    }
    return 0;
}

/* "reasoning" {effort} / "reasoning_effort", once, at the place of the
 * first of thinking and output_config. */
static int mr_reasoning(mr_ctx *c, size_t *n)
{
    if (c->reasoning_done)
        return 0;
    c->reasoning_done = 1;
    const char *effort;
    if (mr_effort(c, &effort) != 0)
        return -1;
    if (!effort)
        return 0;
    emit_key(c->out, n, c->chat ? "reasoning_effort" : "reasoning");
    sbuf_puts(c->out, c->chat ? "\"" : "{\"effort\":\"");
    sbuf_puts(c->out, effort);
    sbuf_puts(c->out, c->chat ? "\"" : "\"}");
    return 0;
}

/* A structured output format {type: json_schema, schema} (at path at) as
 * the target's: text.format (Responses), response_format (Chat), named
 * "output" (Anthropic's has no name; OpenAI's wants one). */
static int mr_format(mr_ctx *c, const json_value *f, const char *at, size_t *n)
{
    if (c->format_done)
        return 0;
    c->format_done = 1;
    if (mr_type_must(c, f, at, "json_schema", "'json_schema'") != 0)
        return -1;
    const json_value *schema = mr_get(f, "schema");
    if (!schema || schema->type != JSON_OBJECT) {
        refuse_param(c->err, "%s.schema", at);
        return schema ? mr_invalid_type(c, "a valid dictionary") : mr_missing(c);
    }
    refuse_param(c->err, "%s.schema", at);
    if (mr_schema_fits(c, schema, 3) != 0)
        return -1;
    sbuf *out = c->out;
    emit_key(out, n, c->chat ? "response_format" : "text");
    sbuf_puts(out, c->chat ? "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"output\",\"strict\":true,\"schema\":"
                           : "{\"format\":{\"type\":\"json_schema\",\"name\":\"output\",\"strict\":true,\"schema\":");
    json_write(out, schema);
    sbuf_puts(out, "}}");
    return 0;
}

/* output_config: effort (with thinking: mr_reasoning) and format; another
 * member is a 400 unless "output_config.<member>" is ignored. */
static int mr_output_config(mr_ctx *c, const json_value *oc, size_t *n)
{
    if (mr_need_object(c, oc, "output_config") != 0)
        return -1;
    for (const json_value *m = oc->child; m; m = m->next) {
        if (strcmp(m->key, "effort") == 0 || strcmp(m->key, "format") == 0 || m->type == JSON_NULL ||
            refuse_ignores2(c->rules, "output_config.", m->key))
            continue;
        refuse_param(c->err, "output_config.%s", m->key);
        return mr_unsupported(c, "it has no such output setting");
    }
    if (mr_reasoning(c, n) != 0)
        return -1;
    const json_value *f = mr_get(oc, "format");
    return f ? mr_format(c, f, "output_config.format", n) : 0;
}

/* ---------- the body ---------- */

static int mr_member(mr_ctx *c, int k, const json_value *v, size_t *n)
{
    sbuf *out = c->out;
    switch (k) {
    case MR_MESSAGES: return mr_messages(c, v, n);
    case MR_SYSTEM:
        if (!c->chat && c->sys.len) { /* Chat: the first message (mr_messages) */
            emit_key(out, n, "instructions");
            sbuf_json_str(out, c->sys.p, c->sys.len);
        }
        return 0;
    case MR_MAX_TOKENS:
        if (v->type != JSON_NUMBER) {
            refuse_param(c->err, "max_tokens");
            return mr_invalid_type(c, "a valid integer");
        }
        emit_key(out, n, c->chat ? "max_tokens" : "max_output_tokens");
        if (!c->chat && v->num < MR_MIN_OUTPUT_TOKENS)
            sbuf_put_int(out, MR_MIN_OUTPUT_TOKENS);
        else
            json_write(out, v);
        return 0;
    case MR_METADATA: {
        if (mr_need_object(c, v, "metadata") != 0)
            return -1;
        /* user_id is the end user's id: what OpenAI calls "user" (a
         * long one hashed: MR_ID_MAX) */
        const json_value *uid = mr_get(v, "user_id");
        if (uid && uid->type != JSON_STRING) {
            refuse_param(c->err, "metadata.user_id");
            return mr_invalid_type(c, "a valid string");
        }
        if (uid && uid->str_len) {
            emit_key(out, n, "user");
            mr_put_id(out, uid);
        }
        return 0;
    }
    case MR_STOP_SEQUENCES:
        if (v->type != JSON_ARRAY) {
            refuse_param(c->err, "stop_sequences");
            return mr_invalid_type(c, "a valid list");
        }
        if (c->chat) {
            if (v->count) {
                emit_key(out, n, "stop");
                json_write(out, v);
            }
            return 0;
        }
        if (!v->count || refuse_ignores(c->rules, "stop_sequences"))
            return 0;
        refuse_param(c->err, "stop_sequences");
        return mr_unsupported(c, "it has no stop sequences");
    case MR_STREAM:
        emit_key(out, n, "stream");
        json_write(out, v);
        /* a chat stream carries its usage only when asked, and the gateway
         * needs it (accounting, the answer's usage) */
        if (c->chat && v->type == JSON_TRUE) {
            emit_key(out, n, "stream_options");
            sbuf_puts(out, "{\"include_usage\":true}");
        }
        return 0;
    case MR_TOOLS: return mr_tools(c, v, n);
    case MR_TOOL_CHOICE: return mr_tool_choice(c, v, n);
    case MR_THINKING: return mr_reasoning(c, n);
    case MR_OUTPUT_CONFIG: return mr_output_config(c, v, n);
    case MR_OUTPUT_FORMAT: /* the beta's older name of output_config.format, which wins */
        if (c->val[MR_OUTPUT_CONFIG] && mr_get(c->val[MR_OUTPUT_CONFIG], "format"))
            return 0;
        return mr_format(c, v, "output_format", n);
    default: return 0;
    }
}

static int mr_body(mr_ctx *c, const json_value *doc)
{
    sbuf *out = c->out;
    for (const json_value *m = doc->child; m; m = m->next) {
        int k = mr_field_find(m->key);
        if (k >= 0)
            c->val[k] = m->type == JSON_NULL ? NULL : m;
    }
    const json_value *msgs = c->val[MR_MESSAGES];
    if (!msgs || msgs->type != JSON_ARRAY) {
        refuse_param(c->err, "messages");
        return msgs ? mr_invalid_type(c, "a valid list") : mr_missing(c);
    }
    /* the system text first: Chat writes it at the head of messages,
     * wherever "system" stands */
    if (c->val[MR_SYSTEM] && mr_system(c, c->val[MR_SYSTEM]) != 0)
        return -1;
    c->tools = mr_count_tools(c->val[MR_TOOLS]);
    sbuf_append(out, "{", 1);
    size_t n = 0;
    for (const json_value *m = doc->child; m; m = m->next) {
        int k = mr_field_find(m->key);
        if (k < 0) {
            if (refuse_ignores(c->rules, m->key))
                continue;
            refuse_param(c->err, "%s", m->key);
            return mr_unsupported(c, "it is no field the gateway translates, and an OpenAI upstream refuses "
                                     "Anthropic's own fields");
        }
        if (c->val[k] != m) /* null, or an earlier copy of the name */
            continue;
        const mr_field *f = &mr_fields[k];
        if (f->kind == MR_DROP)
            continue;
        if (f->kind == MR_SAME) {
            if (!refuse_ignores(c->rules, f->name)) {
                emit_key(out, &n, f->name);
                json_write(out, m);
            }
            continue;
        }
        if (f->kind == MR_REFUSE) {
            if ((f->harmless && f->harmless(m)) || refuse_ignores(c->rules, f->name))
                continue;
            refuse_param(c->err, "%s", f->name);
            return mr_unsupported(c, f->why);
        }
        if (mr_member(c, k, m, &n) != 0)
            return -1;
    }
    /* Anthropic stores nothing; the Responses API stores unless told not to */
    if (!c->chat && !refuse_ignores(c->rules, "store")) {
        emit_key(out, &n, "store");
        sbuf_puts(out, "false");
    }
    sbuf_append(out, "}", 1);
    return 0;
}

static int mr_translate(const json_value *doc, const policy_dialect *rules, sbuf *out, dialect_error *err, int chat)
{
    if (!doc || doc->type != JSON_OBJECT) {
        refuse_param(err, "%s", "");
        return refuse_set(err, REFUSE_INVALID_TYPE, "The request body must be a JSON object.");
    }
    mr_ctx c = {.rules = rules, .err = err, .out = out, .chat = chat};
    int rc = mr_body(&c, doc);
    sbuf_free(&c.sys);
    sbuf_free(&c.parts);
    sbuf_free(&c.text);
    sbuf_free(&c.calls);
    return rc;
}

int messages_request_to_responses(const json_value *doc, const policy_dialect *rules, sbuf *out, dialect_error *err)
{
    return mr_translate(doc, rules, out, err, 0);
}

int messages_request_to_chat(const json_value *doc, const policy_dialect *rules, sbuf *out, dialect_error *err)
{
    return mr_translate(doc, rules, out, err, 1);
}
