/* adapt.c: an upstream's rules applied to a body in its own dialect (see
 * adapt.h). The body is written again member by member in its order with
 * json_write, so every member no rule names goes out as it came; the
 * members a rule owns are put at their place, or appended when the body
 * lacks them.
 *
 * A member a forced rule owns ("stream" when the upstream streams always,
 * "store" when it stores never, "instructions" when it requires them,
 * "input" when its items change) is written once, at the place of its last
 * copy: the copy json_get, and so the rest of the gateway, reads. The
 * owned names win over the drop and rename lists (a rule that forces a
 * field means the upstream refuses the request without it), and a rename
 * never writes a name that is owned, dropped, or already in the body (the
 * client's own member of that name wins): one body never names a field
 * twice because of a rule. Duplicates the client sent of other names go
 * as they came.
 *
 * No recursion here but json_write's, bounded by the parser's depth. */
#include "dialect/adapt.h"
#include "dialect/emit.h"
#include <string.h>

typedef struct adapt_ctx {
    const policy_dialect *r;
    sbuf *out;
    size_t n;                  /* members written */
    size_t n_drop, n_rename;   /* the rules' counts, clamped to their rows */
    int force_stream;          /* the rules own "stream": true */
    int force_store;           /* "store": false (Responses) */
    int want_ins;              /* "instructions" filled when absent or empty (Responses) */
    int touch_input;           /* "input" rewritten (Responses: input_list, system_role, strip_item_ids) */
    char role[sizeof ((policy_dialect *)0)->system_role]; /* system_role, NUL-terminated; "" none */
    /* per rename row: its target may not be written (adapt_taken), worked
     * out once per body: asking per member would make a body of many
     * members of a renamed name cost its length squared */
    unsigned char taken[POLICY_DIALECT_NAMES];
} adapt_ctx;

int adapt_has_work(api_kind upstream, const policy_dialect *r)
{
    if (!r)
        return 0;
    if (r->stream || r->n_drop || r->n_rename)
        return 1;
    if (upstream != API_RESPONSES)
        return 0;
    return r->store_off || r->has_instructions || r->input_list || r->strip_item_ids || r->system_role[0];
}

/* A row of a name list as a C string: NULL when it has no NUL within its
 * row or is empty (a name no body can hold). */
static const char *adapt_row(const char *row, size_t size)
{
    return row[0] && memchr(row, '\0', size) ? row : NULL;
}

static int adapt_dropped(const adapt_ctx *c, const char *key)
{
    return refuse_listed((const char (*)[POLICY_DIALECT_NAME_MAX])c->r->drop, c->n_drop, key);
}

/* The rename row for key, -1 for none. */
static int adapt_rename_of(const adapt_ctx *c, const char *key)
{
    for (size_t i = 0; i < c->n_rename; i++) {
        const char *from = adapt_row(c->r->rename_from[i], POLICY_DIALECT_NAME_MAX);
        if (from && strcmp(from, key) == 0 && adapt_row(c->r->rename_to[i], POLICY_DIALECT_NAME_MAX))
            return (int)i;
    }
    return -1;
}

/* 1 when a forced rule writes the member key itself. */
static int adapt_owned(const adapt_ctx *c, const char *key)
{
    return (c->force_stream && strcmp(key, "stream") == 0) || (c->force_store && strcmp(key, "store") == 0) ||
           (c->want_ins && strcmp(key, "instructions") == 0) || (c->touch_input && strcmp(key, "input") == 0);
}

/* Whether a member by the name `to` (a rename's target) may not be
 * written: owned by a rule, dropped, or kept by a member of the body
 * that already has that name (and keeps it). */
static int adapt_taken(const adapt_ctx *c, const json_value *doc, const char *to)
{
    if (adapt_owned(c, to) || adapt_dropped(c, to))
        return 1;
    return json_get(doc, to) && adapt_rename_of(c, to) < 0;
}

/* One input item: without "id" (strip_item_ids; an item_reference keeps
 * it: the id is all it is), a system message with the rules' role. */
static void adapt_item(const adapt_ctx *c, const json_value *it)
{
    sbuf *out = c->out;
    const json_value *type = json_get(it, "type");
    int message = !type || emit_is(type, "message");
    int reference = emit_is(type, "item_reference");
    size_t n = 0;
    sbuf_append(out, "{", 1);
    for (const json_value *m = it->child; m; m = m->next) {
        if (c->r->strip_item_ids && !reference && strcmp(m->key, "id") == 0)
            continue;
        emit_key(out, &n, m->key);
        if (c->role[0] && message && strcmp(m->key, "role") == 0 && emit_is(m, "system"))
            sbuf_json_str(out, c->role, strlen(c->role));
        else
            json_write(out, m);
    }
    sbuf_append(out, "}", 1);
}

static void adapt_input(const adapt_ctx *c, const json_value *input)
{
    sbuf *out = c->out;
    if (input->type == JSON_STRING && c->r->input_list) {
        sbuf_puts(out, "[{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":");
        emit_str(out, input);
        sbuf_puts(out, "}]}]");
        return;
    }
    if (input->type != JSON_ARRAY) {
        json_write(out, input);
        return;
    }
    sbuf_append(out, "[", 1);
    for (const json_value *it = input->child; it; it = it->next) {
        if (it != input->child)
            sbuf_append(out, ",", 1);
        if (it->type == JSON_OBJECT)
            adapt_item(c, it);
        else
            json_write(out, it);
    }
    sbuf_append(out, "]", 1);
}

static void adapt_default_instructions(adapt_ctx *c)
{
    const char *text = c->r->instructions;
    sbuf_json_str(c->out, text, strnlen(text, sizeof c->r->instructions));
}

int adapt_body(api_kind upstream, const policy_dialect *r, const json_value *doc, sbuf *out, int *up_stream,
               dialect_error *err)
{
    if (!doc || doc->type != JSON_OBJECT) {
        refuse_param(err, "%s", "");
        return refuse_set(err, REFUSE_INVALID_TYPE, "The request body must be a JSON object.");
    }
    static const policy_dialect none; /* no rules: every field as it came (const: no state) */
    int resp = upstream == API_RESPONSES;
    adapt_ctx c = {.r = r ? r : &none, .out = out};
    r = c.r;
    c.n_drop = r->n_drop < POLICY_DIALECT_NAMES ? r->n_drop : POLICY_DIALECT_NAMES;
    c.n_rename = r->n_rename < POLICY_DIALECT_NAMES ? r->n_rename : POLICY_DIALECT_NAMES;
    c.force_stream = r->stream != 0;
    c.force_store = resp && r->store_off;
    c.want_ins = resp && r->has_instructions;
    if (resp && memchr(r->system_role, '\0', sizeof r->system_role))
        memcpy(c.role, r->system_role, sizeof c.role);
    c.touch_input = resp && (r->input_list || r->strip_item_ids || c.role[0]);

    for (size_t i = 0; i < c.n_rename; i++)
        c.taken[i] = (unsigned char)(adapt_row(r->rename_to[i], POLICY_DIALECT_NAME_MAX) &&
                                     adapt_taken(&c, doc, r->rename_to[i]));

    const json_value *last_stream = json_get(doc, "stream"), *last_store = json_get(doc, "store");
    const json_value *last_ins = json_get(doc, "instructions"), *last_input = json_get(doc, "input");
    int wrote_stream = 0, wrote_store = 0, wrote_ins = 0, streams = 0;
    sbuf_append(out, "{", 1);
    for (const json_value *m = doc->child; m; m = m->next) {
        const char *key = m->key;
        if (adapt_owned(&c, key)) {
            if (strcmp(key, "stream") == 0) {
                if (m == last_stream) {
                    emit_key(out, &c.n, "stream");
                    sbuf_puts(out, "true");
                    wrote_stream = 1;
                }
            } else if (strcmp(key, "store") == 0) {
                if (m == last_store) {
                    emit_key(out, &c.n, "store");
                    sbuf_puts(out, "false");
                    wrote_store = 1;
                }
            } else if (strcmp(key, "instructions") == 0) {
                if (m == last_ins) {
                    emit_key(out, &c.n, "instructions");
                    if (m->type == JSON_STRING && m->str_len)
                        emit_str(out, m);
                    else /* null, "", or not text: the upstream requires them */
                        adapt_default_instructions(&c);
                    wrote_ins = 1;
                }
            } else if (m == last_input) {
                emit_key(out, &c.n, "input");
                adapt_input(&c, m);
            }
            continue;
        }
        if (adapt_dropped(&c, key))
            continue;
        int k = adapt_rename_of(&c, key);
        if (k >= 0) {
            if (c.taken[k])
                continue;
            key = r->rename_to[k];
        }
        emit_key(out, &c.n, key);
        json_write(out, m);
        if (strcmp(key, "stream") == 0)
            streams = m->type == JSON_TRUE; /* the last one written is the one read upstream */
    }
    if (c.force_stream) {
        if (!wrote_stream) {
            emit_key(out, &c.n, "stream");
            sbuf_puts(out, "true");
        }
        /* a chat stream carries its usage only when asked, and the gateway
         * needs it: a body the rule made stream asks for it */
        int streamed = last_stream && last_stream->type == JSON_TRUE;
        if (!resp && !streamed && !json_get(doc, "stream_options") && !adapt_dropped(&c, "stream_options")) {
            emit_key(out, &c.n, "stream_options");
            sbuf_puts(out, "{\"include_usage\":true}");
        }
        streams = 1;
    }
    if (c.force_store && !wrote_store) {
        emit_key(out, &c.n, "store");
        sbuf_puts(out, "false");
    }
    if (c.want_ins && !wrote_ins) {
        emit_key(out, &c.n, "instructions");
        adapt_default_instructions(&c);
    }
    sbuf_append(out, "}", 1);
    if (up_stream)
        *up_stream = streams;
    return 0;
}
