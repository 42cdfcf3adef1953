/* chat_request.c: a Chat Completions request written as a Responses
 * request (see chat_request.h; the mapping is docs/clients.md's Request
 * table of "Chat Completions client ⇄ Responses upstream").
 *
 * The client's body is read as a tree (json_value) and the Responses body
 * written with base/sbuf, member by member in the client's order: a member
 * the Responses API knows by the same name goes as it came (json_write),
 * a member that maps (messages, tools, tool_choice, response_format, ...)
 * is rewritten at its place, a member this file does not know passes
 * through, and a member the Responses API cannot carry is a 400 naming it
 * (unless the rules' ignore list lets it be left out). With a name given
 * twice the last one counts, as json_get (and most upstream parsers) read
 * it; earlier copies of a known name are not written.
 *
 * The tree is at most 128 levels deep (json_parse's bound) and nothing
 * here recurses: each level of the Chat shape has its own function, and
 * the subtrees that pass unchanged go through json_write. Work is linear in
 * the body but for a scan of the field table per top-level member. */
#include "dialect/chat_request.h"
#include "dialect/emit.h"
#include <stdio.h>
#include <string.h>

/* Responses refuses max_output_tokens below 16 ("integer_below_min_value");
 * Chat takes any positive limit. A smaller limit (max_tokens: 1, a common
 * "is the key alive" probe) is raised to 16: a cap a little above the one
 * asked is better than a refusal the client cannot understand. */
#define CR_MIN_OUTPUT_TOKENS 16

/* ---------- the top-level fields ---------- */

typedef enum {
    CR_OWN,    /* rewritten by this file */
    CR_SAME,   /* the same name and meaning in the Responses API */
    CR_REFUSE, /* no equivalent: a 400 unless harmless or ignored */
} cr_kind;

enum {
    CR_MESSAGES,
    CR_STREAM,
    CR_STREAM_OPTIONS,
    CR_TOOLS,
    CR_TOOL_CHOICE,
    CR_RESPONSE_FORMAT,
    CR_VERBOSITY,
    CR_REASONING_EFFORT,
    CR_MAX_COMPLETION_TOKENS,
    CR_MAX_TOKENS,
    CR_STORE,
};

typedef struct cr_field {
    const char *name;
    cr_kind kind;
    /* CR_REFUSE: 1 when the value asks for nothing (the API's own default,
     * an empty list), so it is left out without a word: many chat tools
     * send frequency_penalty: 0 or n: 1 with every request */
    int (*harmless)(const json_value *v);
    const char *why; /* CR_REFUSE: the reason, in the message */
} cr_field;

static int cr_is_one(const json_value *v) { return v->type == JSON_NUMBER && v->num == 1; }
static int cr_is_zero(const json_value *v) { return v->type == JSON_NUMBER && v->num == 0; }
static int cr_is_false(const json_value *v) { return v->type == JSON_FALSE; }
static int cr_is_empty(const json_value *v) { return (v->type == JSON_ARRAY || v->type == JSON_OBJECT) && !v->count; }
static int cr_is_none_or_auto(const json_value *v) { return emit_is(v, "none") || emit_is(v, "auto"); }

/* modalities without "audio": the text the Responses API gives anyway */
static int cr_is_text_only(const json_value *v)
{
    if (v->type != JSON_ARRAY)
        return 0;
    for (const json_value *e = v->child; e; e = e->next)
        if (e->type != JSON_STRING || emit_is(e, "audio"))
            return 0;
    return 1;
}

static const cr_field cr_fields[] = {
    [CR_MESSAGES] = {"messages", CR_OWN, NULL, NULL},
    [CR_STREAM] = {"stream", CR_OWN, NULL, NULL},
    [CR_STREAM_OPTIONS] = {"stream_options", CR_OWN, NULL, NULL},
    [CR_TOOLS] = {"tools", CR_OWN, NULL, NULL},
    [CR_TOOL_CHOICE] = {"tool_choice", CR_OWN, NULL, NULL},
    [CR_RESPONSE_FORMAT] = {"response_format", CR_OWN, NULL, NULL},
    [CR_VERBOSITY] = {"verbosity", CR_OWN, NULL, NULL},
    [CR_REASONING_EFFORT] = {"reasoning_effort", CR_OWN, NULL, NULL},
    [CR_MAX_COMPLETION_TOKENS] = {"max_completion_tokens", CR_OWN, NULL, NULL},
    [CR_MAX_TOKENS] = {"max_tokens", CR_OWN, NULL, NULL},
    [CR_STORE] = {"store", CR_OWN, NULL, NULL},
    {"model", CR_SAME, NULL, NULL},
    {"temperature", CR_SAME, NULL, NULL},
    {"top_p", CR_SAME, NULL, NULL},
    {"user", CR_SAME, NULL, NULL},
    {"metadata", CR_SAME, NULL, NULL},
    {"service_tier", CR_SAME, NULL, NULL},
    {"prompt_cache_key", CR_SAME, NULL, NULL},
    {"prompt_cache_retention", CR_SAME, NULL, NULL},
    {"safety_identifier", CR_SAME, NULL, NULL},
    {"parallel_tool_calls", CR_SAME, NULL, NULL},
    {"n", CR_REFUSE, cr_is_one, "it gives one answer per request"},
    {"logprobs", CR_REFUSE, cr_is_false, "log probabilities are not translated"},
    {"top_logprobs", CR_REFUSE, cr_is_zero, "log probabilities are not translated"},
    {"audio", CR_REFUSE, NULL, "it gives no audio output"},
    {"modalities", CR_REFUSE, cr_is_text_only, "it gives no audio output"},
    {"prediction", CR_REFUSE, NULL, "it has no predicted outputs"},
    {"seed", CR_REFUSE, NULL, "it has no seed"},
    {"stop", CR_REFUSE, cr_is_empty, "it has no stop sequences"},
    {"frequency_penalty", CR_REFUSE, cr_is_zero, "it has no frequency penalty"},
    {"presence_penalty", CR_REFUSE, cr_is_zero, "it has no presence penalty"},
    {"logit_bias", CR_REFUSE, cr_is_empty, "it has no logit bias"},
    {"functions", CR_REFUSE, cr_is_empty, "legacy functions are not translated (use tools)"},
    {"function_call", CR_REFUSE, cr_is_none_or_auto, "legacy functions are not translated (use tool_choice)"},
    {"web_search_options", CR_REFUSE, NULL, "Chat's web search options are not translated"},
};
#define CR_NFIELDS (sizeof cr_fields / sizeof cr_fields[0])

static int cr_field_find(const char *key)
{
    for (size_t i = 0; i < CR_NFIELDS; i++)
        if (strcmp(cr_fields[i].name, key) == 0)
            return (int)i;
    return -1;
}

/* ---------- the translation's state ---------- */

typedef struct cr_ctx {
    const policy_dialect *rules;
    dialect_error *err;
    sbuf *out;
    const json_value *val[CR_NFIELDS]; /* each field's member (the last of its name), NULL when absent or null */
    sbuf ins;                          /* the instructions: the leading system/developer messages' text */
    const json_value *rest;            /* the first message after them */
    size_t rest_index;
} cr_ctx;

#define CR_API "an account that speaks the Responses API"

/* A field the Responses API cannot carry: err->param is already set. */
static int cr_unsupported(cr_ctx *c, const char *why)
{
    return refuse_set(c->err, REFUSE_UNSUPPORTED,
                      "Unsupported parameter: '%s' cannot be served by " CR_API ": %s. Remove it, or send the "
                      "request where an account speaks Chat Completions.",
                      c->err ? c->err->param : "", why);
}

/* A part, tool or tool call whose type the Responses side cannot take. */
static int cr_unsupported_type(cr_ctx *c, const char *why, const char *type)
{
    char q[48];
    return refuse_set(c->err, REFUSE_UNSUPPORTED,
                      "Unsupported parameter: '%s' is '%s', which cannot be served by " CR_API ": %s.",
                      c->err ? c->err->param : "", refuse_quote(q, sizeof q, type), why);
}

static int cr_invalid_type(cr_ctx *c, const char *expected)
{
    return refuse_set(c->err, REFUSE_INVALID_TYPE, "Invalid type for '%s': expected %s.", c->err ? c->err->param : "",
                      expected);
}

static int cr_missing(cr_ctx *c)
{
    return refuse_set(c->err, REFUSE_MISSING, "Missing required parameter: '%s'.", c->err ? c->err->param : "");
}

/* A member of obj, NULL when absent or null (optional fields sent as null
 * are the same as absent). */
static const json_value *cr_get(const json_value *obj, const char *key)
{
    const json_value *v = json_get(obj, key);
    return v && v->type != JSON_NULL ? v : NULL;
}

/* The part's or tool's "type", a string; NULL with err when it has none. */
static const char *cr_type_of(cr_ctx *c, const json_value *v)
{
    const json_value *t = json_get(v, "type");
    if (!t || t->type == JSON_NULL) {
        cr_missing(c);
        return NULL;
    }
    if (t->type != JSON_STRING) {
        cr_invalid_type(c, "a string");
        return NULL;
    }
    return t->str;
}

/* ---------- messages ---------- */

typedef enum {
    CR_ROLE_SYSTEM,
    CR_ROLE_DEVELOPER,
    CR_ROLE_USER,
    CR_ROLE_ASSISTANT,
    CR_ROLE_TOOL,
    CR_ROLE_FUNCTION,
} cr_role;

/* Message i's role; -1 with err when it is no object or has no known role. */
static int cr_role_of(cr_ctx *c, const json_value *m, size_t i, cr_role *role)
{
    if (m->type != JSON_OBJECT) {
        refuse_param(c->err, "messages[%zu]", i);
        return cr_invalid_type(c, "an object");
    }
    refuse_param(c->err, "messages[%zu].role", i);
    const json_value *r = json_get(m, "role");
    if (!r || r->type == JSON_NULL)
        return cr_missing(c);
    if (r->type != JSON_STRING)
        return cr_invalid_type(c, "a string");
    static const char *const names[] = {"system", "developer", "user", "assistant", "tool", "function"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (emit_is(r, names[k])) {
            *role = (cr_role)k;
            return 0;
        }
    char q[48];
    return refuse_set(c->err, REFUSE_INVALID_VALUE,
                      "Invalid value '%s' for '%s': expected system, developer, user, assistant or tool.",
                      refuse_quote(q, sizeof q, r->str), c->err ? c->err->param : "");
}

/* Text part j of message i: its text, or NULL when the part is of
 * another type that the rules ignore ("content.<type>": left out); -1
 * in *rc with err for anything else. */
static const json_value *cr_text_part(cr_ctx *c, const json_value *p, size_t i, size_t j, int *rc)
{
    *rc = 0;
    if (p->type != JSON_OBJECT) {
        refuse_param(c->err, "messages[%zu].content[%zu]", i, j);
        *rc = cr_invalid_type(c, "an object");
        return NULL;
    }
    refuse_param(c->err, "messages[%zu].content[%zu].type", i, j);
    const char *type = cr_type_of(c, p);
    if (!type) {
        *rc = -1;
        return NULL;
    }
    if (strcmp(type, "text") != 0) {
        if (!refuse_ignores2(c->rules, "content.", type))
            *rc = cr_unsupported_type(c, "this message takes text parts only", type);
        return NULL;
    }
    const json_value *t = json_get(p, "text");
    if (!t || t->type != JSON_STRING) {
        refuse_param(c->err, "messages[%zu].content[%zu].text", i, j);
        *rc = t ? cr_invalid_type(c, "a string") : cr_missing(c);
        return NULL;
    }
    return t;
}

/* Message i's content, a string or an array of parts; NULL for none (null
 * or absent), -1 in *rc with err for another type. */
static const json_value *cr_content_of(cr_ctx *c, const json_value *m, size_t i, int *rc)
{
    *rc = 0;
    const json_value *content = cr_get(m, "content");
    if (content && content->type != JSON_STRING && content->type != JSON_ARRAY) {
        refuse_param(c->err, "messages[%zu].content", i);
        *rc = cr_invalid_type(c, "a string or an array of content parts");
        return NULL;
    }
    return content;
}

/* Appends the text of message i's content (a string, or its text parts
 * joined as they are: the client split one text, it did not write
 * paragraphs) to acc. */
static int cr_text_of(cr_ctx *c, const json_value *m, size_t i, sbuf *acc)
{
    int rc;
    const json_value *content = cr_content_of(c, m, i, &rc);
    if (!content)
        return rc;
    if (content->type == JSON_STRING) {
        sbuf_append(acc, content->str, content->str_len);
        return 0;
    }
    size_t j = 0;
    for (const json_value *p = content->child; p; p = p->next, j++) {
        const json_value *t = cr_text_part(c, p, i, j, &rc);
        if (rc)
            return rc;
        if (t)
            sbuf_append(acc, t->str, t->str_len);
    }
    return 0;
}

/* The instructions from the leading system/developer messages (joined
 * with a blank line); c->rest is left at the first other message. */
static int cr_instructions(cr_ctx *c, const json_value *msgs)
{
    size_t i = 0;
    const json_value *m = msgs->child;
    for (; m; m = m->next, i++) {
        cr_role role;
        if (cr_role_of(c, m, i, &role) != 0)
            return -1;
        if (role != CR_ROLE_SYSTEM && role != CR_ROLE_DEVELOPER)
            break;
        size_t mark = c->ins.len;
        if (mark)
            sbuf_append(&c->ins, "\n\n", 2);
        size_t start = c->ins.len;
        if (cr_text_of(c, m, i, &c->ins) != 0)
            return -1;
        if (c->ins.len == start) { /* an empty message adds no blank line */
            c->ins.len = mark;
            if (c->ins.p)
                c->ins.p[mark] = '\0';
        }
    }
    c->rest = m;
    c->rest_index = i;
    return 0;
}

/* Begins an input item: the comma before it. */
static void cr_item(cr_ctx *c, size_t *items)
{
    if ((*items)++)
        sbuf_append(c->out, ",", 1);
}

/* A user part: text, image_url, file (input_audio and others: 400 unless ignored). */
static int cr_user_part(cr_ctx *c, const json_value *p, size_t i, size_t j, size_t *parts)
{
    sbuf *out = c->out;
    if (p->type != JSON_OBJECT) {
        refuse_param(c->err, "messages[%zu].content[%zu]", i, j);
        return cr_invalid_type(c, "an object");
    }
    refuse_param(c->err, "messages[%zu].content[%zu].type", i, j);
    const char *type = cr_type_of(c, p);
    if (!type)
        return -1;
    if (strcmp(type, "text") == 0) {
        const json_value *t = json_get(p, "text");
        if (!t || t->type != JSON_STRING) {
            refuse_param(c->err, "messages[%zu].content[%zu].text", i, j);
            return t ? cr_invalid_type(c, "a string") : cr_missing(c);
        }
        if ((*parts)++)
            sbuf_append(out, ",", 1);
        sbuf_puts(out, "{\"type\":\"input_text\",\"text\":");
        emit_str(out, t);
        sbuf_append(out, "}", 1);
        return 0;
    }
    if (strcmp(type, "image_url") == 0) {
        /* {"image_url": {"url", "detail"}}; a bare string url is taken too
         * (several chat servers accept it, and clients send it) */
        const json_value *img = cr_get(p, "image_url");
        const json_value *url = img && img->type == JSON_OBJECT ? json_get(img, "url") : img;
        const json_value *detail = img && img->type == JSON_OBJECT ? cr_get(img, "detail") : NULL;
        if (!url || url->type != JSON_STRING) {
            refuse_param(c->err, "messages[%zu].content[%zu].image_url%s", i, j,
                         img && img->type == JSON_OBJECT ? ".url" : "");
            return url ? cr_invalid_type(c, "a string") : cr_missing(c);
        }
        if ((*parts)++)
            sbuf_append(out, ",", 1);
        sbuf_puts(out, "{\"type\":\"input_image\",\"image_url\":");
        emit_str(out, url);
        if (detail) {
            sbuf_puts(out, ",\"detail\":");
            json_write(out, detail);
        }
        sbuf_append(out, "}", 1);
        return 0;
    }
    if (strcmp(type, "file") == 0) {
        const json_value *f = json_get(p, "file");
        if (!f || f->type != JSON_OBJECT) {
            refuse_param(c->err, "messages[%zu].content[%zu].file", i, j);
            return f && f->type != JSON_NULL ? cr_invalid_type(c, "an object") : cr_missing(c);
        }
        if ((*parts)++)
            sbuf_append(out, ",", 1);
        /* file_data, file_id, filename: the same members on input_file */
        sbuf_puts(out, "{\"type\":\"input_file\"");
        for (const json_value *m = f->child; m; m = m->next) {
            if (m->type == JSON_NULL || strcmp(m->key, "type") == 0)
                continue;
            sbuf_append(out, ",", 1);
            sbuf_json_str(out, m->key, strlen(m->key));
            sbuf_append(out, ":", 1);
            json_write(out, m);
        }
        sbuf_append(out, "}", 1);
        return 0;
    }
    if (refuse_ignores2(c->rules, "content.", type))
        return 0;
    if (strcmp(type, "input_audio") == 0)
        return cr_unsupported_type(c, "audio input has no equivalent there", type);
    return cr_unsupported_type(c, "it takes text, image and file parts", type);
}

/* A user message, or a later system/developer one (as developer: text
 * parts only), as a message item with input parts. */
static int cr_input_message(cr_ctx *c, const json_value *m, size_t i, const char *role, int media, size_t *items)
{
    sbuf *out = c->out;
    int rc;
    const json_value *content = cr_content_of(c, m, i, &rc);
    if (rc)
        return rc;
    if (!content) {
        refuse_param(c->err, "messages[%zu].content", i);
        return cr_missing(c);
    }
    cr_item(c, items);
    sbuf_puts(out, "{\"type\":\"message\",\"role\":\"");
    sbuf_puts(out, role);
    sbuf_puts(out, "\",\"content\":[");
    if (content->type == JSON_STRING) {
        sbuf_puts(out, "{\"type\":\"input_text\",\"text\":");
        emit_str(out, content);
        sbuf_puts(out, "}]}");
        return 0;
    }
    size_t parts = 0, j = 0;
    for (const json_value *p = content->child; p; p = p->next, j++) {
        if (media) {
            if (cr_user_part(c, p, i, j, &parts) != 0)
                return -1;
            continue;
        }
        const json_value *t = cr_text_part(c, p, i, j, &rc);
        if (rc)
            return rc;
        if (!t)
            continue;
        if (parts++)
            sbuf_append(out, ",", 1);
        sbuf_puts(out, "{\"type\":\"input_text\",\"text\":");
        emit_str(out, t);
        sbuf_append(out, "}", 1);
    }
    sbuf_puts(out, "]}");
    return 0;
}

/* Tool call j of assistant message i as a function_call item. */
static int cr_tool_call(cr_ctx *c, const json_value *tc, size_t i, size_t j, size_t *items)
{
    sbuf *out = c->out;
    if (tc->type != JSON_OBJECT) {
        refuse_param(c->err, "messages[%zu].tool_calls[%zu]", i, j);
        return cr_invalid_type(c, "an object");
    }
    const json_value *type = cr_get(tc, "type");
    if (type && !emit_is(type, "function")) {
        /* a custom tool call: custom tools are refused (the answer side
         * would have no custom_tool_call to give back), so is their history */
        refuse_param(c->err, "messages[%zu].tool_calls[%zu].type", i, j);
        return cr_unsupported_type(c, "only function tool calls are translated",
                                   type->type == JSON_STRING ? type->str : "?");
    }
    const json_value *id = json_get(tc, "id"), *fn = json_get(tc, "function");
    if (!id || id->type != JSON_STRING) {
        refuse_param(c->err, "messages[%zu].tool_calls[%zu].id", i, j);
        return id && id->type != JSON_NULL ? cr_invalid_type(c, "a string") : cr_missing(c);
    }
    if (!fn || fn->type != JSON_OBJECT) {
        refuse_param(c->err, "messages[%zu].tool_calls[%zu].function", i, j);
        return fn && fn->type != JSON_NULL ? cr_invalid_type(c, "an object") : cr_missing(c);
    }
    const json_value *name = json_get(fn, "name");
    if (!name || name->type != JSON_STRING) {
        refuse_param(c->err, "messages[%zu].tool_calls[%zu].function.name", i, j);
        return name && name->type != JSON_NULL ? cr_invalid_type(c, "a string") : cr_missing(c);
    }
    cr_item(c, items);
    sbuf_puts(out, "{\"type\":\"function_call\",\"call_id\":");
    emit_str(out, id);
    sbuf_puts(out, ",\"name\":");
    emit_str(out, name);
    /* arguments are a string of JSON; a client that sent the object itself
     * gets it as its text, and none as "{}" (the Responses API needs one) */
    sbuf_puts(out, ",\"arguments\":");
    emit_as_text(out, cr_get(fn, "arguments"), "{}");
    sbuf_append(out, "}", 1);
    return 0;
}

/* An assistant message: a message item with output_text / refusal parts
 * (when it says anything), then one function_call item per tool call. */
static int cr_assistant(cr_ctx *c, const json_value *m, size_t i, size_t *items)
{
    sbuf *out = c->out;
    const json_value *audio = cr_get(m, "audio"), *fcall = cr_get(m, "function_call");
    if (audio && !refuse_ignores(c->rules, "audio")) {
        refuse_param(c->err, "messages[%zu].audio", i);
        return cr_unsupported(c, "it gives no audio output to refer to");
    }
    if (fcall && !refuse_ignores(c->rules, "function_call")) {
        refuse_param(c->err, "messages[%zu].function_call", i);
        return cr_unsupported(c, "legacy function calls are not translated (use tool_calls)");
    }
    int rc;
    const json_value *content = cr_content_of(c, m, i, &rc);
    if (rc)
        return rc;
    const json_value *refusal = cr_get(m, "refusal"), *calls = cr_get(m, "tool_calls");
    if (refusal && refusal->type != JSON_STRING) {
        refuse_param(c->err, "messages[%zu].refusal", i);
        return cr_invalid_type(c, "a string");
    }
    if (calls && calls->type != JSON_ARRAY) {
        refuse_param(c->err, "messages[%zu].tool_calls", i);
        return cr_invalid_type(c, "an array");
    }
    int has_calls = calls && calls->count;
    /* "" beside tool calls is a placeholder, not something said; alone it
     * is kept (the client may mean an empty turn) */
    int says = refusal || (content && content->type == JSON_ARRAY && content->count) ||
               (content && content->type == JSON_STRING && (content->str_len || !has_calls));
    if (says) {
        cr_item(c, items);
        sbuf_puts(out, "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[");
        size_t parts = 0, j = 0;
        if (content && content->type == JSON_STRING) {
            sbuf_puts(out, "{\"type\":\"output_text\",\"text\":");
            emit_str(out, content);
            sbuf_append(out, "}", 1);
            parts++;
        }
        for (const json_value *p = content && content->type == JSON_ARRAY ? content->child : NULL; p;
             p = p->next, j++) {
            const json_value *ptype = p->type == JSON_OBJECT ? json_get(p, "type") : NULL;
            if (emit_is(ptype, "refusal")) {
                const json_value *r = json_get(p, "refusal");
                if (!r || r->type != JSON_STRING) {
                    refuse_param(c->err, "messages[%zu].content[%zu].refusal", i, j);
                    return r ? cr_invalid_type(c, "a string") : cr_missing(c);
                }
                if (parts++)
                    sbuf_append(out, ",", 1);
                sbuf_puts(out, "{\"type\":\"refusal\",\"refusal\":");
                emit_str(out, r);
                sbuf_append(out, "}", 1);
                continue;
            }
            const json_value *t = cr_text_part(c, p, i, j, &rc);
            if (rc)
                return rc;
            if (!t)
                continue;
            if (parts++)
                sbuf_append(out, ",", 1);
            sbuf_puts(out, "{\"type\":\"output_text\",\"text\":");
            emit_str(out, t);
            sbuf_append(out, "}", 1);
        }
        if (refusal) {
            if (parts++)
                sbuf_append(out, ",", 1);
            sbuf_puts(out, "{\"type\":\"refusal\",\"refusal\":");
            emit_str(out, refusal);
            sbuf_append(out, "}", 1);
        }
        sbuf_puts(out, "]}");
    }
    size_t j = 0;
    for (const json_value *tc = calls ? calls->child : NULL; tc; tc = tc->next, j++)
        if (cr_tool_call(c, tc, i, j, items) != 0)
            return -1;
    return 0;
}

/* A tool result as a function_call_output item. */
static int cr_tool_result(cr_ctx *c, const json_value *m, size_t i, size_t *items)
{
    sbuf *out = c->out;
    const json_value *id = json_get(m, "tool_call_id");
    if (!id || id->type != JSON_STRING) {
        refuse_param(c->err, "messages[%zu].tool_call_id", i);
        return id && id->type != JSON_NULL ? cr_invalid_type(c, "a string") : cr_missing(c);
    }
    sbuf text = SBUF_INIT;
    if (cr_text_of(c, m, i, &text) != 0) {
        sbuf_free(&text);
        return -1;
    }
    cr_item(c, items);
    sbuf_puts(out, "{\"type\":\"function_call_output\",\"call_id\":");
    emit_str(out, id);
    sbuf_puts(out, ",\"output\":");
    sbuf_json_str(out, text.p ? text.p : "", text.len);
    sbuf_append(out, "}", 1);
    sbuf_free(&text);
    return 0;
}

/* "messages" at its place: "instructions" (when the leading system
 * messages said something) and "input". */
static int cr_messages(cr_ctx *c, size_t *n)
{
    sbuf *out = c->out;
    if (c->ins.len) {
        emit_key(out, n, "instructions");
        sbuf_json_str(out, c->ins.p, c->ins.len);
    }
    emit_key(out, n, "input");
    sbuf_append(out, "[", 1);
    size_t items = 0, i = c->rest_index;
    for (const json_value *m = c->rest; m; m = m->next, i++) {
        cr_role role;
        if (cr_role_of(c, m, i, &role) != 0)
            return -1;
        int rc = 0;
        switch (role) {
        case CR_ROLE_SYSTEM:
        case CR_ROLE_DEVELOPER:
            /* a later system message cannot join the instructions without
             * moving it before the turns it followed: it goes where it was,
             * as the role the Responses API gives such messages */
            rc = cr_input_message(c, m, i, "developer", 0, &items);
            break;
        case CR_ROLE_USER: rc = cr_input_message(c, m, i, "user", 1, &items); break;
        case CR_ROLE_ASSISTANT: rc = cr_assistant(c, m, i, &items); break;
        case CR_ROLE_TOOL: rc = cr_tool_result(c, m, i, &items); break;
        case CR_ROLE_FUNCTION:
            if (refuse_ignores(c->rules, "role.function"))
                break;
            refuse_param(c->err, "messages[%zu].role", i);
            rc = cr_unsupported(c, "the legacy 'function' role is not translated (use tool_calls and the 'tool' role)");
            break;
        }
        if (rc)
            return rc;
    }
    sbuf_append(out, "]", 1);
    return 0;
}

/* ---------- tools, tool_choice, response_format ---------- */

static int cr_tools(cr_ctx *c, const json_value *tools, size_t *n)
{
    sbuf *out = c->out;
    if (tools->type != JSON_ARRAY) {
        refuse_param(c->err, "tools");
        return cr_invalid_type(c, "an array");
    }
    emit_key(out, n, "tools");
    sbuf_append(out, "[", 1);
    size_t j = 0, written = 0;
    for (const json_value *t = tools->child; t; t = t->next, j++) {
        if (t->type != JSON_OBJECT) {
            refuse_param(c->err, "tools[%zu]", j);
            return cr_invalid_type(c, "an object");
        }
        refuse_param(c->err, "tools[%zu].type", j);
        const char *type = cr_type_of(c, t);
        if (!type)
            return -1;
        if (strcmp(type, "function") != 0) {
            if (refuse_ignores2(c->rules, "tools.", type))
                continue;
            return cr_unsupported_type(c, "only function tools are translated", type);
        }
        const json_value *fn = json_get(t, "function");
        if (!fn || fn->type != JSON_OBJECT) {
            refuse_param(c->err, "tools[%zu].function", j);
            return fn && fn->type != JSON_NULL ? cr_invalid_type(c, "an object") : cr_missing(c);
        }
        const json_value *name = cr_get(fn, "name"), *desc = cr_get(fn, "description");
        const json_value *params = cr_get(fn, "parameters"), *strict = cr_get(fn, "strict");
        if (!name) {
            refuse_param(c->err, "tools[%zu].function.name", j);
            return cr_missing(c);
        }
        if (written++)
            sbuf_append(out, ",", 1);
        sbuf_puts(out, "{\"type\":\"function\",\"name\":");
        json_write(out, name);
        if (desc) {
            sbuf_puts(out, ",\"description\":");
            json_write(out, desc);
        }
        /* Chat lets a function go without parameters and not strict; the
         * Responses API wants parameters and is strict unless told not to
         * (a loose schema would then be refused), so both are spelled out */
        sbuf_puts(out, ",\"parameters\":");
        if (params)
            json_write(out, params);
        else
            sbuf_puts(out, "{\"type\":\"object\",\"properties\":{}}");
        sbuf_puts(out, ",\"strict\":");
        if (strict)
            json_write(out, strict);
        else
            sbuf_puts(out, "false");
        sbuf_append(out, "}", 1);
    }
    sbuf_append(out, "]", 1);
    return 0;
}

/* A {"type":"function","function":{"name"}} choice (at path) as
 * {"type":"function","name"}. */
static int cr_named_choice(cr_ctx *c, const json_value *o, const char *path)
{
    const json_value *fn = json_get(o, "function");
    const json_value *name = fn && fn->type == JSON_OBJECT ? json_get(fn, "name") : NULL;
    if (!name || name->type != JSON_STRING) {
        refuse_param(c->err, "%s.function%s", path, fn && fn->type == JSON_OBJECT ? ".name" : "");
        return name && name->type != JSON_NULL ? cr_invalid_type(c, "a string") : cr_missing(c);
    }
    sbuf_puts(c->out, "{\"type\":\"function\",\"name\":");
    emit_str(c->out, name);
    sbuf_append(c->out, "}", 1);
    return 0;
}

static int cr_tool_choice(cr_ctx *c, const json_value *tc, size_t *n)
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
        emit_key(out, n, "tool_choice");
        json_write(out, tc);
        return 0;
    }
    if (tc->type != JSON_OBJECT) {
        refuse_param(c->err, "tool_choice");
        return cr_invalid_type(c, "a string or an object");
    }
    refuse_param(c->err, "tool_choice.type");
    const char *type = cr_type_of(c, tc);
    if (!type)
        return -1;
    if (strcmp(type, "function") == 0) {
        emit_key(out, n, "tool_choice");
        return cr_named_choice(c, tc, "tool_choice");
    }
    if (strcmp(type, "allowed_tools") == 0) {
        const json_value *at = json_get(tc, "allowed_tools");
        const json_value *tools = at && at->type == JSON_OBJECT ? json_get(at, "tools") : NULL;
        if (!tools || tools->type != JSON_ARRAY) {
            refuse_param(c->err, "tool_choice.allowed_tools%s", at && at->type == JSON_OBJECT ? ".tools" : "");
            return tools || (at && at->type != JSON_NULL && at->type != JSON_OBJECT) ? cr_invalid_type(c, "an array")
                                                                                     : cr_missing(c);
        }
        emit_key(out, n, "tool_choice");
        sbuf_puts(out, "{\"type\":\"allowed_tools\"");
        const json_value *mode = cr_get(at, "mode");
        if (mode) {
            sbuf_puts(out, ",\"mode\":");
            json_write(out, mode);
        }
        sbuf_puts(out, ",\"tools\":[");
        size_t k = 0, written = 0;
        for (const json_value *t = tools->child; t; t = t->next, k++) {
            char path[64];
            snprintf(path, sizeof path, "tool_choice.allowed_tools.tools[%zu]", k);
            if (t->type != JSON_OBJECT) {
                refuse_param(c->err, "%s", path);
                return cr_invalid_type(c, "an object");
            }
            refuse_param(c->err, "%s.type", path);
            const char *tt = cr_type_of(c, t);
            if (!tt)
                return -1;
            if (strcmp(tt, "function") != 0) {
                if (refuse_ignores2(c->rules, "tools.", tt))
                    continue;
                return cr_unsupported_type(c, "only function tools are translated", tt);
            }
            if (written++)
                sbuf_append(out, ",", 1);
            if (cr_named_choice(c, t, path) != 0)
                return -1;
        }
        sbuf_puts(out, "]}");
        return 0;
    }
    /* a choice of a tool type that is not translated: left out with its
     * tools when ignored, else refused as they are */
    if (refuse_ignores2(c->rules, "tools.", type))
        return 0;
    return cr_unsupported_type(c, "only function tools are translated", type);
}

/* "text" from response_format and verbosity (whichever comes first in the
 * body writes both). */
static int cr_text(cr_ctx *c, size_t *n)
{
    sbuf *out = c->out;
    const json_value *rf = c->val[CR_RESPONSE_FORMAT], *verbosity = c->val[CR_VERBOSITY];
    const json_value *js = NULL;
    const char *type = NULL;
    if (verbosity && verbosity->type != JSON_STRING) {
        refuse_param(c->err, "verbosity");
        return cr_invalid_type(c, "a string");
    }
    if (rf) {
        if (rf->type != JSON_OBJECT) {
            refuse_param(c->err, "response_format");
            return cr_invalid_type(c, "an object");
        }
        refuse_param(c->err, "response_format.type");
        if (!(type = cr_type_of(c, rf)))
            return -1;
        if (strcmp(type, "json_schema") == 0) {
            js = json_get(rf, "json_schema");
            if (!js || js->type != JSON_OBJECT) {
                refuse_param(c->err, "response_format.json_schema");
                return js && js->type != JSON_NULL ? cr_invalid_type(c, "an object") : cr_missing(c);
            }
        } else if (strcmp(type, "text") != 0 && strcmp(type, "json_object") != 0) {
            char q[48];
            return refuse_set(c->err, REFUSE_INVALID_VALUE,
                              "Invalid value '%s' for 'response_format.type': expected text, json_object or "
                              "json_schema.",
                              refuse_quote(q, sizeof q, type));
        }
    }
    emit_key(out, n, "text");
    sbuf_append(out, "{", 1);
    size_t members = 0;
    if (type) {
        emit_key(out, &members, "format");
        sbuf_puts(out, "{\"type\":");
        sbuf_json_str(out, type, strlen(type));
        /* json_schema's members (name, schema, strict, description) sit
         * beside the type in text.format */
        for (const json_value *m = js ? js->child : NULL; m; m = m->next) {
            if (strcmp(m->key, "type") == 0)
                continue;
            sbuf_append(out, ",", 1);
            sbuf_json_str(out, m->key, strlen(m->key));
            sbuf_append(out, ":", 1);
            json_write(out, m);
        }
        sbuf_append(out, "}", 1);
    }
    if (verbosity) {
        emit_key(out, &members, "verbosity");
        json_write(out, verbosity);
    }
    sbuf_append(out, "}", 1);
    return 0;
}

/* ---------- the body ---------- */

/* Names the translation writes that are no Chat field: an unknown member
 * of the client's by such a name is left out when the translation writes
 * it too (one body must not name a field twice), and passes otherwise. */
static int cr_collides(const cr_ctx *c, const char *key)
{
    if (strcmp(key, "input") == 0)
        return 1;
    if (strcmp(key, "instructions") == 0)
        return c->ins.len > 0;
    if (strcmp(key, "text") == 0)
        return c->val[CR_RESPONSE_FORMAT] || c->val[CR_VERBOSITY];
    if (strcmp(key, "reasoning") == 0)
        return c->val[CR_REASONING_EFFORT] != NULL;
    if (strcmp(key, "max_output_tokens") == 0)
        return c->val[CR_MAX_COMPLETION_TOKENS] || c->val[CR_MAX_TOKENS];
    return 0;
}

static int cr_member(cr_ctx *c, int k, const json_value *v, size_t *n, int *text_done, int *max_done)
{
    sbuf *out = c->out;
    switch (k) {
    case CR_MESSAGES: return cr_messages(c, n);
    case CR_STREAM:
        emit_key(out, n, "stream");
        json_write(out, v);
        return 0;
    case CR_STREAM_OPTIONS: {
        /* include_usage has no counterpart (a Responses stream always ends
         * with its usage; the answer side gives the client its usage chunk
         * when it asked); include_obfuscation has the same name there */
        const json_value *st = c->val[CR_STREAM];
        const json_value *ob = v->type == JSON_OBJECT ? cr_get(v, "include_obfuscation") : NULL;
        if (ob && st && st->type == JSON_TRUE) {
            emit_key(out, n, "stream_options");
            sbuf_puts(out, "{\"include_obfuscation\":");
            json_write(out, ob);
            sbuf_append(out, "}", 1);
        }
        return 0;
    }
    case CR_TOOLS: return cr_tools(c, v, n);
    case CR_TOOL_CHOICE: return cr_tool_choice(c, v, n);
    case CR_RESPONSE_FORMAT:
    case CR_VERBOSITY:
        if (*text_done)
            return 0;
        *text_done = 1;
        return cr_text(c, n);
    case CR_REASONING_EFFORT:
        /* strings only, here and for verbosity: the value moves one level
         * down (under "reasoning"), and a container could then nest past
         * what json_parse takes */
        if (v->type != JSON_STRING) {
            refuse_param(c->err, "reasoning_effort");
            return cr_invalid_type(c, "a string");
        }
        emit_key(out, n, "reasoning");
        sbuf_puts(out, "{\"effort\":");
        json_write(out, v);
        sbuf_append(out, "}", 1);
        return 0;
    case CR_MAX_COMPLETION_TOKENS:
    case CR_MAX_TOKENS: {
        if (*max_done)
            return 0;
        *max_done = 1;
        /* max_completion_tokens replaced max_tokens in Chat: it wins */
        const json_value *m = c->val[CR_MAX_COMPLETION_TOKENS];
        if (!m)
            m = c->val[CR_MAX_TOKENS];
        emit_key(out, n, "max_output_tokens");
        if (m->type == JSON_NUMBER && m->num < CR_MIN_OUTPUT_TOKENS)
            sbuf_put_int(out, CR_MIN_OUTPUT_TOKENS);
        else
            json_write(out, m);
        return 0;
    }
    case CR_STORE:
        if (!refuse_ignores(c->rules, "store")) {
            emit_key(out, n, "store");
            json_write(out, v);
        }
        return 0;
    default: return 0;
    }
}

static int cr_body(cr_ctx *c, const json_value *doc)
{
    sbuf *out = c->out;
    for (const json_value *m = doc->child; m; m = m->next) {
        int k = cr_field_find(m->key);
        if (k >= 0)
            c->val[k] = m->type == JSON_NULL ? NULL : m;
    }
    const json_value *msgs = c->val[CR_MESSAGES];
    if (!msgs) {
        refuse_param(c->err, "messages");
        return cr_missing(c);
    }
    if (msgs->type != JSON_ARRAY) {
        refuse_param(c->err, "messages");
        return cr_invalid_type(c, "an array");
    }
    /* the instructions first: whether the body has them decides whether a
     * client's own "instructions" member may pass */
    if (cr_instructions(c, msgs) != 0)
        return -1;
    sbuf_append(out, "{", 1);
    size_t n = 0;
    int text_done = 0, max_done = 0;
    for (const json_value *m = doc->child; m; m = m->next) {
        int k = cr_field_find(m->key);
        if (k < 0) {
            if (!cr_collides(c, m->key)) {
                emit_key(out, &n, m->key);
                json_write(out, m);
            }
            continue;
        }
        if (c->val[k] != m) /* null, or an earlier copy of the name */
            continue;
        const cr_field *f = &cr_fields[k];
        if (f->kind == CR_SAME) {
            if (!refuse_ignores(c->rules, f->name)) {
                emit_key(out, &n, f->name);
                json_write(out, m);
            }
            continue;
        }
        if (f->kind == CR_REFUSE) {
            if ((f->harmless && f->harmless(m)) || refuse_ignores(c->rules, f->name))
                continue;
            refuse_param(c->err, "%s", f->name);
            if (strcmp(f->name, "n") == 0)
                return refuse_set(c->err, REFUSE_UNSUPPORTED,
                                  "'n' > 1 cannot be served by " CR_API ": %s. Ask for one choice, or send the "
                                  "request where an account speaks Chat Completions.",
                                  f->why);
            return cr_unsupported(c, f->why);
        }
        if (cr_member(c, k, m, &n, &text_done, &max_done) != 0)
            return -1;
    }
    /* Chat stores nothing unless asked; the Responses API stores unless
     * told not to: a chat client's silence means false */
    if (!c->val[CR_STORE] && !refuse_ignores(c->rules, "store")) {
        emit_key(out, &n, "store");
        sbuf_puts(out, "false");
    }
    sbuf_append(out, "}", 1);
    return 0;
}

int chat_request_to_responses(const json_value *doc, const policy_dialect *rules, sbuf *out, dialect_error *err)
{
    if (!doc || doc->type != JSON_OBJECT) {
        refuse_param(err, "%s", "");
        return refuse_set(err, REFUSE_INVALID_TYPE, "The request body must be a JSON object.");
    }
    cr_ctx c = {.rules = rules, .err = err, .out = out, .ins = SBUF_INIT};
    int rc = cr_body(&c, doc);
    sbuf_free(&c.ins);
    return rc;
}
