/* responses_request.c: a Responses request written as a Chat Completions
 * request (see responses_request.h; the mapping is docs/clients.md's
 * "Translation: Responses client ⇄ Chat Completions upstream").
 *
 * Read as a tree (json_value), written with base/sbuf member by member in
 * the client's order, as chat_request.c does the other way: a member Chat
 * knows by the same name goes as it came, one that maps is rewritten at its
 * place ("messages" where the first of instructions and input stood), one
 * this file does not know passes through, one Chat cannot carry is a 400
 * naming it unless the rules' ignore list lets it be left out. With a name
 * given twice the last one counts (as json_get reads it).
 *
 * The input items become messages with a small state: an assistant message
 * stays open after it is written, so the function calls that follow it (and
 * the reasoning items between them, which are left out) join it as its
 * tool_calls; any other message closes it. Custom tools become function
 * tools taking one string "input", and their calls function calls whose
 * arguments are {"input": ...}.
 *
 * Nothing recurses but emit_depth, bounded by the parser's 128 levels. The
 * output is never deeper than json_parse takes: the one place Chat nests
 * one level deeper (a tool's parameters under "function") is checked. */
#include "dialect/responses_request.h"
#include "dialect/emit.h"
#include <stdio.h>
#include <string.h>

/* json_parse's nesting limit (json.h: "Nesting deeper than 128 levels is
 * rejected"): the translated body must parse again (adapt reads it). */
#define RR_JSON_DEPTH 128
/* A function tool's parameters sit 3 containers deep in a Responses body
 * (the body, tools, the tool) and 4 in a Chat body (then "function"). */
#define RR_PARAMS_DEPTH_MAX (RR_JSON_DEPTH - 4)

/* ---------- the top-level fields ---------- */

typedef enum { RR_OWN, RR_SAME, RR_REFUSE } rr_kind;

enum {
    RR_INPUT,
    RR_INSTRUCTIONS,
    RR_TOOLS,
    RR_TOOL_CHOICE,
    RR_PARALLEL_TOOL_CALLS,
    RR_TEXT,
    RR_REASONING,
    RR_MAX_OUTPUT_TOKENS,
    RR_STREAM,
    RR_STREAM_OPTIONS,
};

typedef struct rr_field {
    const char *name;
    rr_kind kind;
    int (*harmless)(const json_value *v); /* RR_REFUSE: the value asks for nothing (left out) */
    const char *why;
} rr_field;

static int rr_is_false(const json_value *v) { return v->type == JSON_FALSE; }
static int rr_is_zero(const json_value *v) { return v->type == JSON_NUMBER && v->num == 0; }
static int rr_is_empty(const json_value *v) { return v->type == JSON_ARRAY && !v->count; }
/* "disabled" is the default: a request too long fails, as on Chat */
static int rr_is_disabled(const json_value *v) { return emit_is(v, "disabled"); }

static const rr_field rr_fields[] = {
    [RR_INPUT] = {"input", RR_OWN, NULL, NULL},
    [RR_INSTRUCTIONS] = {"instructions", RR_OWN, NULL, NULL},
    [RR_TOOLS] = {"tools", RR_OWN, NULL, NULL},
    [RR_TOOL_CHOICE] = {"tool_choice", RR_OWN, NULL, NULL},
    [RR_PARALLEL_TOOL_CALLS] = {"parallel_tool_calls", RR_OWN, NULL, NULL},
    [RR_TEXT] = {"text", RR_OWN, NULL, NULL},
    [RR_REASONING] = {"reasoning", RR_OWN, NULL, NULL},
    [RR_MAX_OUTPUT_TOKENS] = {"max_output_tokens", RR_OWN, NULL, NULL},
    [RR_STREAM] = {"stream", RR_OWN, NULL, NULL},
    [RR_STREAM_OPTIONS] = {"stream_options", RR_OWN, NULL, NULL},
    {"model", RR_SAME, NULL, NULL},
    {"temperature", RR_SAME, NULL, NULL},
    {"top_p", RR_SAME, NULL, NULL},
    {"store", RR_SAME, NULL, NULL},
    {"metadata", RR_SAME, NULL, NULL},
    {"prompt_cache_key", RR_SAME, NULL, NULL},
    {"prompt_cache_retention", RR_SAME, NULL, NULL},
    {"user", RR_SAME, NULL, NULL},
    {"safety_identifier", RR_SAME, NULL, NULL},
    {"service_tier", RR_SAME, NULL, NULL},
    {"include", RR_REFUSE, rr_is_empty, "it has nothing to include (encrypted reasoning, log probabilities, ...)"},
    {"truncation", RR_REFUSE, rr_is_disabled, "it never truncates the conversation"},
    {"background", RR_REFUSE, rr_is_false, "it has no background responses"},
    {"previous_response_id", RR_REFUSE, NULL,
     "it keeps no responses, and the gateway holds no record of this one to rebuild it from"},
    {"conversation", RR_REFUSE, NULL, "it has no conversation objects"},
    {"prompt", RR_REFUSE, NULL, "it has no stored prompts"},
    {"max_tool_calls", RR_REFUSE, NULL, "it cannot cap tool calls"},
    {"top_logprobs", RR_REFUSE, rr_is_zero, "log probabilities are not translated"},
};
#define RR_NFIELDS (sizeof rr_fields / sizeof rr_fields[0])

static int rr_field_find(const char *key)
{
    for (size_t i = 0; i < RR_NFIELDS; i++)
        if (strcmp(rr_fields[i].name, key) == 0)
            return (int)i;
    return -1;
}

/* The history items of hosted tools, and the tool types that make them:
 * an item is left out when its tool (or the item type) is ignored. */
static const struct rr_hosted {
    const char *item;
    const char *tools[3];
} rr_hosted[] = {
    {"web_search_call", {"web_search", "web_search_preview", NULL}},
    {"file_search_call", {"file_search", NULL, NULL}},
    {"computer_call", {"computer_use_preview", "computer_use", NULL}},
    {"computer_call_output", {"computer_use_preview", "computer_use", NULL}},
    {"image_generation_call", {"image_generation", NULL, NULL}},
    {"code_interpreter_call", {"code_interpreter", NULL, NULL}},
    {"local_shell_call", {"local_shell", NULL, NULL}},
    {"local_shell_call_output", {"local_shell", NULL, NULL}},
    {"shell_call", {"shell", NULL, NULL}},
    {"shell_call_output", {"shell", NULL, NULL}},
    {"apply_patch_call", {"apply_patch", NULL, NULL}},
    {"apply_patch_call_output", {"apply_patch", NULL, NULL}},
    {"mcp_list_tools", {"mcp", NULL, NULL}},
    {"mcp_approval_request", {"mcp", NULL, NULL}},
    {"mcp_approval_response", {"mcp", NULL, NULL}},
    {"mcp_call", {"mcp", NULL, NULL}},
};

/* ---------- the translation's state ---------- */

typedef struct rr_ctx {
    const policy_dialect *rules;
    dialect_error *err;
    sbuf *out;
    const json_value *val[RR_NFIELDS]; /* each field's member (the last of its name), NULL when absent or null */
    size_t tools;                      /* tools that will be written (function and custom) */
    size_t msgs;                       /* messages written */
    int open;                          /* the last message written is an assistant message, still open */
    size_t calls;                      /* tool calls written into it */
} rr_ctx;

#define RR_API "an account that speaks only Chat Completions"

static int rr_unsupported(rr_ctx *c, const char *why)
{
    return refuse_set(c->err, REFUSE_UNSUPPORTED,
                      "Unsupported parameter: '%s' cannot be served by " RR_API ": %s. Remove it, or send the "
                      "request where an account speaks the Responses API.",
                      c->err ? c->err->param : "", why);
}

static int rr_unsupported_type(rr_ctx *c, const char *why, const char *type)
{
    char q[48];
    return refuse_set(c->err, REFUSE_UNSUPPORTED,
                      "Unsupported parameter: '%s' is '%s', which cannot be served by " RR_API ": %s.",
                      c->err ? c->err->param : "", refuse_quote(q, sizeof q, type), why);
}

static int rr_invalid_type(rr_ctx *c, const char *expected)
{
    return refuse_set(c->err, REFUSE_INVALID_TYPE, "Invalid type for '%s': expected %s.", c->err ? c->err->param : "",
                      expected);
}

static int rr_missing(rr_ctx *c)
{
    return refuse_set(c->err, REFUSE_MISSING, "Missing required parameter: '%s'.", c->err ? c->err->param : "");
}

static const json_value *rr_get(const json_value *obj, const char *key)
{
    const json_value *v = json_get(obj, key);
    return v && v->type != JSON_NULL ? v : NULL;
}

/* A required string member (err->param set to its path by the caller);
 * NULL with err when it is absent or not a string. */
static const json_value *rr_need_str(rr_ctx *c, const json_value *obj, const char *key)
{
    const json_value *v = json_get(obj, key);
    if (v && v->type == JSON_STRING)
        return v;
    if (v && v->type != JSON_NULL)
        rr_invalid_type(c, "a string");
    else
        rr_missing(c);
    return NULL;
}

/* ---------- messages ---------- */

/* Closes the open assistant message, if any. */
static void rr_close(rr_ctx *c)
{
    if (!c->open)
        return;
    sbuf_puts(c->out, c->calls ? "]}" : "}");
    c->open = 0;
    c->calls = 0;
}

/* Begins a message: the open one closed, the comma before it. */
static void rr_next(rr_ctx *c)
{
    rr_close(c);
    if (c->msgs++)
        sbuf_append(c->out, ",", 1);
}

/* Begins a tool call: in the open assistant message, or a new one. */
static void rr_call_begin(rr_ctx *c)
{
    if (!c->open) {
        rr_next(c);
        sbuf_puts(c->out, "{\"role\":\"assistant\",\"content\":null");
        c->open = 1;
    }
    sbuf_puts(c->out, c->calls++ ? "," : ",\"tool_calls\":[");
}

static int rr_is_text_type(const char *t)
{
    return strcmp(t, "input_text") == 0 || strcmp(t, "output_text") == 0 || strcmp(t, "text") == 0;
}

/* The type of part j at path (an item's content or output); NULL with err. */
static const char *rr_part_type(rr_ctx *c, const json_value *p, const char *path, size_t j)
{
    if (p->type != JSON_OBJECT) {
        refuse_param(c->err, "%s[%zu]", path, j);
        rr_invalid_type(c, "an object");
        return NULL;
    }
    refuse_param(c->err, "%s[%zu].type", path, j);
    const json_value *t = json_get(p, "type");
    if (!t || t->type != JSON_STRING) {
        if (t && t->type != JSON_NULL)
            rr_invalid_type(c, "a string");
        else
            rr_missing(c);
        return NULL;
    }
    return t->str;
}

/* A text part's text (err->param at the part). */
static const json_value *rr_part_text(rr_ctx *c, const json_value *p, const char *path, size_t j)
{
    refuse_param(c->err, "%s[%zu].text", path, j);
    return rr_need_str(c, p, "text");
}

/* Appends parts' text (text types joined as they are) to acc; other types
 * are a 400 (what: the message's words for where they cannot go) unless
 * ignored ("content.<type>"). *media, when not NULL, instead counts parts
 * that are not text and lets them by (the caller writes them). */
static int rr_parts_text(rr_ctx *c, const json_value *parts, const char *path, const char *what, sbuf *acc,
                         size_t *media)
{
    size_t j = 0;
    for (const json_value *p = parts->child; p; p = p->next, j++) {
        const char *type = rr_part_type(c, p, path, j);
        if (!type)
            return -1;
        if (rr_is_text_type(type)) {
            const json_value *t = rr_part_text(c, p, path, j);
            if (!t)
                return -1;
            sbuf_append(acc, t->str, t->str_len);
        } else if (media) {
            (*media)++;
        } else if (!refuse_ignores2(c->rules, "content.", type)) {
            return rr_unsupported_type(c, what, type);
        }
    }
    return 0;
}

/* A user part that is not text, as Chat's part (input_image → image_url,
 * input_file → file, input_audio as it is). Returns 1 when written, 0
 * when ignored, -1 with err. */
static int rr_media_part(rr_ctx *c, const json_value *p, const char *type, const char *path, size_t j)
{
    sbuf *out = c->out;
    if (strcmp(type, "input_image") == 0) {
        const json_value *url = rr_get(p, "image_url"), *detail = rr_get(p, "detail");
        if (!url) {
            /* an image by file id: Chat takes images by URL only */
            refuse_param(c->err, "%s[%zu].%s", path, j, rr_get(p, "file_id") ? "file_id" : "image_url");
            if (rr_get(p, "file_id"))
                return rr_unsupported(c, "it takes images by URL (or data URL) only");
            return rr_missing(c);
        }
        if (url->type != JSON_STRING || (detail && detail->type != JSON_STRING)) {
            refuse_param(c->err, "%s[%zu].%s", path, j, url->type != JSON_STRING ? "image_url" : "detail");
            return rr_invalid_type(c, "a string");
        }
        sbuf_puts(out, "{\"type\":\"image_url\",\"image_url\":{\"url\":");
        emit_str(out, url);
        if (detail) {
            sbuf_puts(out, ",\"detail\":");
            emit_str(out, detail);
        }
        sbuf_puts(out, "}}");
        return 1;
    }
    if (strcmp(type, "input_file") == 0) {
        if (rr_get(p, "file_url")) {
            refuse_param(c->err, "%s[%zu].file_url", path, j);
            return rr_unsupported(c, "it takes files as data or by file id only");
        }
        sbuf_puts(out, "{\"type\":\"file\",\"file\":{");
        static const char *const keys[] = {"file_data", "file_id", "filename"};
        size_t n = 0;
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            const json_value *v = rr_get(p, keys[k]);
            if (!v)
                continue;
            if (v->type != JSON_STRING) { /* strings only: a container would sit one level deeper here */
                refuse_param(c->err, "%s[%zu].%s", path, j, keys[k]);
                return rr_invalid_type(c, "a string");
            }
            emit_key(out, &n, keys[k]);
            emit_str(out, v);
        }
        sbuf_puts(out, "}}");
        return 1;
    }
    if (strcmp(type, "input_audio") == 0) { /* the same part in both */
        json_write(out, p);
        return 1;
    }
    if (refuse_ignores2(c->rules, "content.", type))
        return 0;
    return rr_unsupported_type(c, "it takes text, image, file and audio parts", type);
}

/* A user, system or developer message item (index i) as a chat message:
 * all-text content as one string (every relay takes that), else parts. */
static int rr_input_message(rr_ctx *c, const json_value *content, const char *role, int media_ok, size_t i)
{
    sbuf *out = c->out;
    char path[48];
    snprintf(path, sizeof path, "input[%zu].content", i);
    sbuf text = SBUF_INIT;
    size_t media = 0;
    int rc = 0;
    if (content->type == JSON_ARRAY)
        rc = rr_parts_text(c, content, path, "a system message takes text only", &text,
                           media_ok ? &media : NULL);
    if (rc) {
        sbuf_free(&text);
        return rc;
    }
    rr_next(c);
    sbuf_puts(out, "{\"role\":\"");
    sbuf_puts(out, role);
    sbuf_puts(out, "\",\"content\":");
    if (content->type == JSON_STRING)
        emit_str(out, content);
    else if (!media)
        sbuf_json_str(out, text.p ? text.p : "", text.len);
    sbuf_free(&text);
    if (content->type == JSON_ARRAY && media) {
        sbuf_append(out, "[", 1);
        size_t j = 0, n = 0;
        for (const json_value *p = content->child; p; p = p->next, j++) {
            const char *type = rr_part_type(c, p, path, j); /* checked above: not NULL */
            size_t mark = out->len;
            if (n)
                sbuf_append(out, ",", 1);
            if (rr_is_text_type(type)) {
                sbuf_puts(out, "{\"type\":\"text\",\"text\":");
                emit_str(out, json_get(p, "text"));
                sbuf_append(out, "}", 1);
                n++;
                continue;
            }
            int w = rr_media_part(c, p, type, path, j);
            if (w < 0)
                return -1;
            if (w) {
                n++;
            } else { /* ignored: its comma goes too */
                out->len = mark;
                out->p[mark] = '\0';
            }
        }
        sbuf_append(out, "]", 1);
    }
    sbuf_append(out, "}", 1);
    return 0;
}

/* An assistant message item: its text as content, refusal parts as
 * "refusal"; left open for the tool calls that may follow. */
static int rr_assistant(rr_ctx *c, const json_value *content, size_t i)
{
    sbuf *out = c->out;
    sbuf text = SBUF_INIT, refusal = SBUF_INIT;
    int has_text = content->type == JSON_STRING, has_refusal = 0;
    if (content->type == JSON_ARRAY) {
        char path[48];
        snprintf(path, sizeof path, "input[%zu].content", i);
        size_t j = 0;
        for (const json_value *p = content->child; p; p = p->next, j++) {
            const char *type = rr_part_type(c, p, path, j);
            const json_value *t = NULL;
            if (type && rr_is_text_type(type)) {
                if ((t = rr_part_text(c, p, path, j))) {
                    sbuf_append(&text, t->str, t->str_len);
                    has_text = 1;
                }
            } else if (type && strcmp(type, "refusal") == 0) {
                refuse_param(c->err, "%s[%zu].refusal", path, j);
                if ((t = rr_need_str(c, p, "refusal"))) {
                    sbuf_append(&refusal, t->str, t->str_len);
                    has_refusal = 1;
                }
            } else if (type && refuse_ignores2(c->rules, "content.", type)) {
                continue;
            } else if (type) {
                rr_unsupported_type(c, "an assistant message takes text and refusals only", type);
            }
            if (!t) {
                sbuf_free(&text);
                sbuf_free(&refusal);
                return -1;
            }
        }
    }
    rr_next(c);
    sbuf_puts(out, "{\"role\":\"assistant\",\"content\":");
    /* nothing said and no refusal: "" rather than null, which Chat takes
     * only beside tool calls (and none may follow) */
    if (content->type == JSON_STRING)
        emit_str(out, content);
    else if (has_text || !has_refusal)
        sbuf_json_str(out, text.p ? text.p : "", text.len);
    else
        sbuf_puts(out, "null");
    if (has_refusal) {
        sbuf_puts(out, ",\"refusal\":");
        sbuf_json_str(out, refusal.p, refusal.len);
    }
    c->open = 1;
    c->calls = 0;
    sbuf_free(&text);
    sbuf_free(&refusal);
    return 0;
}

/* A function_call or custom_tool_call item as a tool call of the open
 * assistant message (a custom tool's input as the arguments
 * {"input": ...} of the function tool it became). */
static int rr_call(rr_ctx *c, const json_value *it, size_t i, int custom)
{
    sbuf *out = c->out;
    refuse_param(c->err, "input[%zu].call_id", i);
    const json_value *id = rr_need_str(c, it, "call_id");
    if (!id)
        return -1;
    refuse_param(c->err, "input[%zu].name", i);
    const json_value *name = rr_need_str(c, it, "name");
    if (!name)
        return -1;
    rr_call_begin(c);
    sbuf_puts(out, "{\"id\":");
    emit_str(out, id);
    sbuf_puts(out, ",\"type\":\"function\",\"function\":{\"name\":");
    emit_str(out, name);
    sbuf_puts(out, ",\"arguments\":");
    if (custom) {
        const json_value *in = rr_get(it, "input");
        sbuf args = SBUF_INIT;
        sbuf_puts(&args, "{\"input\":");
        if (in && in->type == JSON_STRING) {
            emit_str(&args, in);
        } else { /* not a string: its JSON text is the input */
            sbuf text = SBUF_INIT;
            if (in)
                json_write(&text, in);
            sbuf_json_str(&args, text.p ? text.p : "", text.len);
            sbuf_free(&text);
        }
        sbuf_append(&args, "}", 1);
        sbuf_json_str(out, args.p, args.len);
        sbuf_free(&args);
    } else {
        emit_as_text(out, rr_get(it, "arguments"), "{}");
    }
    sbuf_puts(out, "}}");
    return 0;
}

/* A function_call_output or custom_tool_call_output item as a tool message. */
static int rr_call_output(rr_ctx *c, const json_value *it, size_t i)
{
    sbuf *out = c->out;
    refuse_param(c->err, "input[%zu].call_id", i);
    const json_value *id = rr_need_str(c, it, "call_id");
    if (!id)
        return -1;
    const json_value *output = rr_get(it, "output");
    sbuf text = SBUF_INIT;
    if (output && output->type == JSON_ARRAY) {
        char path[48];
        snprintf(path, sizeof path, "input[%zu].output", i);
        if (rr_parts_text(c, output, path, "a tool message takes text only", &text, NULL) != 0) {
            sbuf_free(&text);
            return -1;
        }
    } else if (output && output->type != JSON_STRING) {
        refuse_param(c->err, "input[%zu].output", i);
        return rr_invalid_type(c, "a string or an array of content parts");
    }
    rr_next(c);
    sbuf_puts(out, "{\"role\":\"tool\",\"tool_call_id\":");
    emit_str(out, id);
    sbuf_puts(out, ",\"content\":");
    if (output && output->type == JSON_STRING)
        emit_str(out, output);
    else
        sbuf_json_str(out, text.p ? text.p : "", text.len);
    sbuf_append(out, "}", 1);
    sbuf_free(&text);
    return 0;
}

/* An item Chat has no place for: left out when ignored (by its type, or
 * for a hosted tool's item by the tool), else a 400. */
int responses_request_hosted_item(const policy_dialect *rules, const char *type)
{
    for (size_t k = 0; k < sizeof rr_hosted / sizeof rr_hosted[0]; k++) {
        if (strcmp(rr_hosted[k].item, type) != 0)
            continue;
        for (size_t t = 0; t < 3 && rr_hosted[k].tools[t]; t++)
            if (refuse_ignores2(rules, "tools.", rr_hosted[k].tools[t]))
                return 1;
        return 0;
    }
    return -1;
}

static int rr_other_item(rr_ctx *c, const char *type, size_t i)
{
    if (refuse_ignores2(c->rules, "input.", type))
        return 0;
    int hosted = responses_request_hosted_item(c->rules, type);
    if (hosted == 1)
        return 0;
    refuse_param(c->err, "input[%zu].type", i);
    if (hosted == 0)
        return rr_unsupported_type(c, "hosted tools run only on the Responses API", type);
    if (strcmp(type, "item_reference") == 0)
        return rr_unsupported_type(c, "it keeps no items to refer to", type);
    return rr_unsupported_type(c, "it has no such item", type);
}

static int rr_item(rr_ctx *c, const json_value *it, size_t i)
{
    if (it->type != JSON_OBJECT) {
        refuse_param(c->err, "input[%zu]", i);
        return rr_invalid_type(c, "an object");
    }
    const json_value *type = rr_get(it, "type"), *role = rr_get(it, "role");
    if (type && type->type != JSON_STRING) {
        refuse_param(c->err, "input[%zu].type", i);
        return rr_invalid_type(c, "a string");
    }
    if (!type && !role) {
        refuse_param(c->err, "input[%zu].type", i);
        return rr_missing(c);
    }
    if (!type || emit_is(type, "message")) {
        refuse_param(c->err, "input[%zu].role", i);
        if (!role)
            return rr_missing(c);
        if (role->type != JSON_STRING)
            return rr_invalid_type(c, "a string");
        const json_value *content = json_get(it, "content");
        if (!content || (content->type != JSON_STRING && content->type != JSON_ARRAY)) {
            refuse_param(c->err, "input[%zu].content", i);
            return content && content->type != JSON_NULL ? rr_invalid_type(c, "a string or an array") : rr_missing(c);
        }
        if (emit_is(role, "assistant"))
            return rr_assistant(c, content, i);
        if (emit_is(role, "user"))
            return rr_input_message(c, content, "user", 1, i);
        /* developer and system as system: the role every chat API knows */
        if (emit_is(role, "system") || emit_is(role, "developer"))
            return rr_input_message(c, content, "system", 0, i);
        char q[48];
        return refuse_set(c->err, REFUSE_INVALID_VALUE,
                          "Invalid value '%s' for 'input[%zu].role': expected user, assistant, system or developer.",
                          refuse_quote(q, sizeof q, role->str), i);
    }
    const char *t = type->str;
    if (strcmp(t, "function_call") == 0)
        return rr_call(c, it, i, 0);
    if (strcmp(t, "custom_tool_call") == 0)
        return rr_call(c, it, i, 1);
    if (strcmp(t, "function_call_output") == 0 || strcmp(t, "custom_tool_call_output") == 0)
        return rr_call_output(c, it, i);
    /* encrypted reasoning cannot travel to another API, and summaries are
     * not input: left out, and they do not part an assistant message from
     * the calls that follow it */
    if (strcmp(t, "reasoning") == 0 || strcmp(t, "compaction") == 0 || strcmp(t, "compaction_summary") == 0)
        return 0;
    return rr_other_item(c, t, i);
}

/* "messages" where the first of instructions and input stood. */
static int rr_messages(rr_ctx *c, size_t *n)
{
    sbuf *out = c->out;
    const json_value *ins = c->val[RR_INSTRUCTIONS], *input = c->val[RR_INPUT];
    if (ins && ins->type != JSON_STRING) {
        refuse_param(c->err, "instructions");
        return rr_invalid_type(c, "a string");
    }
    if (input && input->type != JSON_STRING && input->type != JSON_ARRAY) {
        refuse_param(c->err, "input");
        return rr_invalid_type(c, "a string or an array of input items");
    }
    emit_key(out, n, "messages");
    sbuf_append(out, "[", 1);
    if (ins && ins->str_len) {
        rr_next(c);
        sbuf_puts(out, "{\"role\":\"system\",\"content\":");
        emit_str(out, ins);
        sbuf_append(out, "}", 1);
    }
    if (input && input->type == JSON_STRING) {
        rr_next(c);
        sbuf_puts(out, "{\"role\":\"user\",\"content\":");
        emit_str(out, input);
        sbuf_append(out, "}", 1);
    }
    size_t i = 0;
    for (const json_value *it = input && input->type == JSON_ARRAY ? input->child : NULL; it; it = it->next, i++)
        if (rr_item(c, it, i) != 0)
            return -1;
    rr_close(c);
    sbuf_append(out, "]", 1);
    return 0;
}

/* ---------- tools, tool_choice, text, reasoning ---------- */

/* A custom tool's input parameter: a string, described by its format (a
 * grammar the model must follow is said in the description, the one
 * place a function tool can carry it). */
static void rr_custom_params(sbuf *out, const json_value *format)
{
    sbuf_puts(out, "{\"type\":\"object\",\"properties\":{\"input\":{\"type\":\"string\"");
    const json_value *syntax = format ? rr_get(format, "syntax") : NULL;
    const json_value *def = format ? rr_get(format, "definition") : NULL;
    if (emit_is(format ? json_get(format, "type") : NULL, "grammar") && def && def->type == JSON_STRING) {
        sbuf d = SBUF_INIT;
        sbuf_puts(&d, "The input, which must match this ");
        if (syntax && syntax->type == JSON_STRING)
            sbuf_append(&d, syntax->str, syntax->str_len);
        sbuf_puts(&d, " grammar:\n");
        sbuf_append(&d, def->str, def->str_len);
        sbuf_puts(out, ",\"description\":");
        sbuf_json_str(out, d.p, d.len);
        sbuf_free(&d);
    }
    sbuf_puts(out, "}},\"required\":[\"input\"],\"additionalProperties\":false}");
}

/* The tools that will be written: function and custom ones (the others are
 * refused or left out), so tool_choice and parallel_tool_calls, which Chat
 * refuses without tools, can be left out when there are none. */
static size_t rr_count_tools(const json_value *tools)
{
    size_t n = 0;
    for (const json_value *t = tools && tools->type == JSON_ARRAY ? tools->child : NULL; t; t = t->next) {
        const json_value *type = json_get(t, "type");
        n += emit_is(type, "function") || emit_is(type, "custom");
    }
    return n;
}

static int rr_tools(rr_ctx *c, const json_value *tools, size_t *n)
{
    sbuf *out = c->out;
    if (tools->type != JSON_ARRAY) {
        refuse_param(c->err, "tools");
        return rr_invalid_type(c, "an array");
    }
    /* Chat refuses an empty tools list: with none to write (all ignored,
     * or none sent) the member is taken back */
    size_t mark = out->len, n_before = *n;
    emit_key(out, n, "tools");
    sbuf_append(out, "[", 1);
    size_t j = 0, written = 0;
    for (const json_value *t = tools->child; t; t = t->next, j++) {
        const char *type = rr_part_type(c, t, "tools", j);
        if (!type)
            return -1;
        int custom = strcmp(type, "custom") == 0;
        if (!custom && strcmp(type, "function") != 0) {
            if (refuse_ignores2(c->rules, "tools.", type))
                continue;
            return rr_unsupported_type(c, "hosted tools run only on the Responses API", type);
        }
        refuse_param(c->err, "tools[%zu].name", j);
        const json_value *name = rr_need_str(c, t, "name");
        if (!name)
            return -1;
        const json_value *desc = rr_get(t, "description"), *params = rr_get(t, "parameters");
        const json_value *strict = rr_get(t, "strict");
        if (desc && desc->type != JSON_STRING) {
            refuse_param(c->err, "tools[%zu].description", j);
            return rr_invalid_type(c, "a string");
        }
        if (strict && strict->type != JSON_TRUE && strict->type != JSON_FALSE) {
            refuse_param(c->err, "tools[%zu].strict", j);
            return rr_invalid_type(c, "a boolean");
        }
        if (!custom && params && emit_depth(params, RR_PARAMS_DEPTH_MAX) > RR_PARAMS_DEPTH_MAX) {
            refuse_param(c->err, "tools[%zu].parameters", j);
            return refuse_set(c->err, REFUSE_INVALID_VALUE,
                              "Invalid value for '%s': the schema nests too deeply to be sent to " RR_API ".",
                              c->err ? c->err->param : "");
        }
        if (written++)
            sbuf_append(out, ",", 1);
        sbuf_puts(out, "{\"type\":\"function\",\"function\":{\"name\":");
        emit_str(out, name);
        if (desc) {
            sbuf_puts(out, ",\"description\":");
            emit_str(out, desc);
        }
        if (custom) {
            sbuf_puts(out, ",\"parameters\":");
            const json_value *format = rr_get(t, "format");
            rr_custom_params(out, format && format->type == JSON_OBJECT ? format : NULL);
        } else {
            if (params) {
                sbuf_puts(out, ",\"parameters\":");
                json_write(out, params);
            }
            if (strict) {
                sbuf_puts(out, ",\"strict\":");
                json_write(out, strict);
            }
        }
        sbuf_puts(out, "}}");
    }
    sbuf_append(out, "]", 1);
    if (!written) {
        out->len = mark;
        out->p[mark] = '\0';
        *n = n_before;
    }
    return 0;
}

/* A choice of one tool by name (function or custom) at path, as Chat's. */
static int rr_named_choice(rr_ctx *c, const json_value *o, const char *path)
{
    refuse_param(c->err, "%s.name", path);
    const json_value *name = rr_need_str(c, o, "name");
    if (!name)
        return -1;
    sbuf_puts(c->out, "{\"type\":\"function\",\"function\":{\"name\":");
    emit_str(c->out, name);
    sbuf_puts(c->out, "}}");
    return 0;
}

static int rr_tool_choice(rr_ctx *c, const json_value *tc, size_t *n)
{
    sbuf *out = c->out;
    if (tc->type == JSON_STRING) {
        if (!emit_is(tc, "auto") && !emit_is(tc, "none") && !emit_is(tc, "required")) {
            char q[48];
            refuse_param(c->err, "tool_choice");
            return refuse_set(c->err, REFUSE_INVALID_VALUE,
                              "Invalid value '%s' for 'tool_choice': expected auto, none, required or an object.",
                              refuse_quote(q, sizeof q, tc->str));
        }
        if (c->tools) {
            emit_key(out, n, "tool_choice");
            json_write(out, tc);
        }
        return 0;
    }
    if (tc->type != JSON_OBJECT) {
        refuse_param(c->err, "tool_choice");
        return rr_invalid_type(c, "a string or an object");
    }
    refuse_param(c->err, "tool_choice.type");
    const json_value *tv = rr_need_str(c, tc, "type");
    if (!tv)
        return -1;
    const char *type = tv->str;
    if (strcmp(type, "function") == 0 || strcmp(type, "custom") == 0) {
        if (!c->tools)
            return 0;
        emit_key(out, n, "tool_choice");
        return rr_named_choice(c, tc, "tool_choice");
    }
    if (strcmp(type, "allowed_tools") == 0) {
        const json_value *tools = json_get(tc, "tools");
        if (!tools || tools->type != JSON_ARRAY) {
            refuse_param(c->err, "tool_choice.tools");
            return tools && tools->type != JSON_NULL ? rr_invalid_type(c, "an array") : rr_missing(c);
        }
        if (!c->tools)
            return 0;
        emit_key(out, n, "tool_choice");
        sbuf_puts(out, "{\"type\":\"allowed_tools\",\"allowed_tools\":{");
        size_t members = 0;
        const json_value *mode = rr_get(tc, "mode");
        if (mode && mode->type != JSON_STRING) { /* a string only: it moves one level down */
            refuse_param(c->err, "tool_choice.mode");
            return rr_invalid_type(c, "a string");
        }
        if (mode) {
            emit_key(out, &members, "mode");
            json_write(out, mode);
        }
        emit_key(out, &members, "tools");
        sbuf_append(out, "[", 1);
        size_t k = 0, written = 0;
        for (const json_value *t = tools->child; t; t = t->next, k++) {
            char path[48];
            snprintf(path, sizeof path, "tool_choice.tools[%zu]", k);
            const char *tt = rr_part_type(c, t, "tool_choice.tools", k);
            if (!tt)
                return -1;
            if (strcmp(tt, "function") != 0 && strcmp(tt, "custom") != 0) {
                if (refuse_ignores2(c->rules, "tools.", tt))
                    continue;
                return rr_unsupported_type(c, "hosted tools run only on the Responses API", tt);
            }
            if (written++)
                sbuf_append(out, ",", 1);
            if (rr_named_choice(c, t, path) != 0)
                return -1;
        }
        sbuf_puts(out, "]}}");
        return 0;
    }
    /* a hosted tool (or mcp) chosen: left out with the tool when ignored */
    if (refuse_ignores2(c->rules, "tools.", type))
        return 0;
    return rr_unsupported_type(c, "hosted tools run only on the Responses API", type);
}

/* text.format → response_format, text.verbosity → verbosity. */
static int rr_text(rr_ctx *c, const json_value *text, size_t *n)
{
    sbuf *out = c->out;
    if (text->type != JSON_OBJECT) {
        refuse_param(c->err, "text");
        return rr_invalid_type(c, "an object");
    }
    const json_value *format = rr_get(text, "format"), *verbosity = rr_get(text, "verbosity");
    if (format) {
        if (format->type != JSON_OBJECT) {
            refuse_param(c->err, "text.format");
            return rr_invalid_type(c, "an object");
        }
        refuse_param(c->err, "text.format.type");
        const json_value *tv = rr_need_str(c, format, "type");
        if (!tv)
            return -1;
        if (emit_is(tv, "json_object")) {
            emit_key(out, n, "response_format");
            sbuf_puts(out, "{\"type\":\"json_object\"}");
        } else if (emit_is(tv, "json_schema")) {
            /* name, schema, strict, description: beside the type in
             * text.format, under json_schema in response_format */
            emit_key(out, n, "response_format");
            sbuf_puts(out, "{\"type\":\"json_schema\",\"json_schema\":{");
            size_t members = 0;
            for (const json_value *m = format->child; m; m = m->next) {
                if (strcmp(m->key, "type") == 0)
                    continue;
                emit_key(out, &members, m->key);
                json_write(out, m);
            }
            sbuf_puts(out, "}}");
        } else if (!emit_is(tv, "text")) { /* text is Chat's default: nothing to say */
            char q[48];
            return refuse_set(c->err, REFUSE_INVALID_VALUE,
                              "Invalid value '%s' for 'text.format.type': expected text, json_object or json_schema.",
                              refuse_quote(q, sizeof q, tv->str));
        }
    }
    if (verbosity) {
        emit_key(out, n, "verbosity");
        json_write(out, verbosity);
    }
    return 0;
}

static int rr_reasoning(rr_ctx *c, const json_value *r, size_t *n)
{
    if (r->type != JSON_OBJECT) {
        refuse_param(c->err, "reasoning");
        return rr_invalid_type(c, "an object");
    }
    /* generate_summary is summary's older name: one rule name for both */
    static const char *const summaries[] = {"summary", "generate_summary"};
    for (size_t k = 0; k < 2; k++)
        if (rr_get(r, summaries[k]) && !refuse_ignores(c->rules, "reasoning.summary")) {
            refuse_param(c->err, "reasoning.%s", summaries[k]);
            return rr_unsupported(c, "it gives no reasoning summaries");
        }
    const json_value *effort = rr_get(r, "effort");
    if (effort) {
        emit_key(c->out, n, "reasoning_effort");
        json_write(c->out, effort);
    }
    return 0;
}

/* ---------- the body ---------- */

/* Names the translation writes that are no Responses field: an unknown
 * member of the client's by such a name is left out when the translation
 * writes it too, and passes otherwise. */
static int rr_collides(const rr_ctx *c, const char *key)
{
    const json_value *text = c->val[RR_TEXT], *r = c->val[RR_REASONING];
    if (strcmp(key, "messages") == 0)
        return 1;
    if (strcmp(key, "response_format") == 0)
        return text && text->type == JSON_OBJECT && rr_get(text, "format");
    if (strcmp(key, "verbosity") == 0)
        return text && text->type == JSON_OBJECT && rr_get(text, "verbosity");
    if (strcmp(key, "reasoning_effort") == 0)
        return r && r->type == JSON_OBJECT && rr_get(r, "effort");
    if (strcmp(key, "max_tokens") == 0)
        return c->val[RR_MAX_OUTPUT_TOKENS] != NULL;
    return 0;
}

static int rr_member(rr_ctx *c, int k, const json_value *v, size_t *n, int *msgs_done)
{
    sbuf *out = c->out;
    switch (k) {
    case RR_INPUT:
    case RR_INSTRUCTIONS:
        if (*msgs_done)
            return 0;
        *msgs_done = 1;
        return rr_messages(c, n);
    case RR_TOOLS: return rr_tools(c, v, n);
    case RR_TOOL_CHOICE: return rr_tool_choice(c, v, n);
    case RR_PARALLEL_TOOL_CALLS:
        if (c->tools) {
            emit_key(out, n, "parallel_tool_calls");
            json_write(out, v);
        }
        return 0;
    case RR_TEXT: return rr_text(c, v, n);
    case RR_REASONING: return rr_reasoning(c, v, n);
    case RR_MAX_OUTPUT_TOKENS:
        emit_key(out, n, "max_tokens");
        json_write(out, v);
        return 0;
    case RR_STREAM:
        emit_key(out, n, "stream");
        json_write(out, v);
        /* the usage comes in a Chat stream only when asked, and the
         * gateway needs it (accounting, and the Responses answer's usage) */
        if (v->type == JSON_TRUE) {
            emit_key(out, n, "stream_options");
            sbuf_puts(out, "{\"include_usage\":true}");
        }
        return 0;
    case RR_STREAM_OPTIONS: /* include_obfuscation: the translated stream has none to strip */
    default: return 0;
    }
}

static int rr_body(rr_ctx *c, const json_value *doc)
{
    sbuf *out = c->out;
    for (const json_value *m = doc->child; m; m = m->next) {
        int k = rr_field_find(m->key);
        if (k >= 0)
            c->val[k] = m->type == JSON_NULL ? NULL : m;
    }
    c->tools = rr_count_tools(c->val[RR_TOOLS]);
    sbuf_append(out, "{", 1);
    size_t n = 0;
    int msgs_done = 0;
    for (const json_value *m = doc->child; m; m = m->next) {
        int k = rr_field_find(m->key);
        if (k < 0) {
            if (!rr_collides(c, m->key)) {
                emit_key(out, &n, m->key);
                json_write(out, m);
            }
            continue;
        }
        if (c->val[k] != m) /* null, or an earlier copy of the name */
            continue;
        const rr_field *f = &rr_fields[k];
        if (f->kind == RR_SAME) {
            if (!refuse_ignores(c->rules, f->name)) {
                emit_key(out, &n, f->name);
                json_write(out, m);
            }
            continue;
        }
        if (f->kind == RR_REFUSE) {
            if ((f->harmless && f->harmless(m)) || refuse_ignores(c->rules, f->name))
                continue;
            refuse_param(c->err, "%s", f->name);
            return rr_unsupported(c, f->why);
        }
        if (rr_member(c, k, m, &n, &msgs_done) != 0)
            return -1;
    }
    if (!msgs_done && rr_messages(c, &n) != 0) /* neither instructions nor input: the upstream judges */
        return -1;
    sbuf_append(out, "}", 1);
    return 0;
}

int responses_request_to_chat(const json_value *doc, const policy_dialect *rules, sbuf *out, dialect_error *err)
{
    if (!doc || doc->type != JSON_OBJECT) {
        refuse_param(err, "%s", "");
        return refuse_set(err, REFUSE_INVALID_TYPE, "The request body must be a JSON object.");
    }
    rr_ctx c = {.rules = rules, .err = err, .out = out};
    return rr_body(&c, doc);
}

int responses_request_is_custom_tool(const json_value *doc, const char *name)
{
    const json_value *tools = json_get(doc, "tools");
    if (!name || !tools || tools->type != JSON_ARRAY)
        return 0;
    for (const json_value *t = tools->child; t; t = t->next)
        if (emit_is(json_get(t, "type"), "custom") && json_get_str(t, "name") &&
            strcmp(json_get_str(t, "name"), name) == 0)
            return 1;
    return 0;
}
