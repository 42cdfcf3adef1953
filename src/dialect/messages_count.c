/* messages_count.c: the input token estimate of a Messages request (see
 * messages_count.h). The body is parsed once into a tree and its text
 * measured in place; only tool inputs and schemas are written out (their
 * JSON text is what a tokenizer would read). Nothing recurses but
 * json_write, bounded by the parser's 128 levels. */
#include "dialect/messages_count.h"
#include "base/json.h"
#include "base/sbuf.h"
#include <string.h>

typedef struct mc_sum {
    size_t bytes;  /* text read */
    size_t media;  /* images and base64 documents */
} mc_sum;

/* A string member's length (0 when it is none). */
static size_t mc_str(const json_value *obj, const char *key)
{
    const json_value *v = json_get(obj, key);
    return v && v->type == JSON_STRING ? v->str_len : 0;
}

/* The length of v's JSON text. */
static size_t mc_json(const json_value *v)
{
    if (!v)
        return 0;
    sbuf t = SBUF_INIT;
    json_write(&t, v);
    size_t n = t.len;
    sbuf_free(&t);
    return n;
}

/* One content block (of a message, or of a tool_result's content). */
static void mc_block(const json_value *b, mc_sum *s)
{
    const char *type = json_get_str(b, "type");
    if (!type)
        return;
    if (strcmp(type, "text") == 0) {
        s->bytes += mc_str(b, "text");
    } else if (strcmp(type, "image") == 0) {
        s->media++;
    } else if (strcmp(type, "document") == 0) {
        const json_value *src = json_get(b, "source");
        if (json_get_str(src, "type") && strcmp(json_get_str(src, "type"), "text") == 0)
            s->bytes += mc_str(src, "data");
        else
            s->media++;
    } else if (strcmp(type, "tool_use") == 0) {
        s->bytes += mc_str(b, "name") + mc_json(json_get(b, "input"));
    } else if (strcmp(type, "tool_result") == 0) {
        const json_value *c = json_get(b, "content");
        if (c && c->type == JSON_STRING)
            s->bytes += c->str_len;
        for (const json_value *p = c && c->type == JSON_ARRAY ? c->child : NULL; p; p = p->next) {
            const char *pt = json_get_str(p, "type");
            if (pt && strcmp(pt, "tool_result") != 0) /* no nesting: a result holds no results */
                mc_block(p, s);
        }
    }
}

/* A string, or a list of blocks. */
static void mc_content(const json_value *c, mc_sum *s)
{
    if (c && c->type == JSON_STRING)
        s->bytes += c->str_len;
    for (const json_value *b = c && c->type == JSON_ARRAY ? c->child : NULL; b; b = b->next)
        mc_block(b, s);
}

long messages_count_tokens_estimate(const char *body, size_t len)
{
    json_value *doc = body ? json_parse(body, len, NULL, 0) : NULL;
    const json_value *msgs = json_get(doc, "messages");
    if (!msgs || msgs->type != JSON_ARRAY) {
        json_free(doc);
        return -1;
    }
    mc_sum s = {0, 0};
    mc_content(json_get(doc, "system"), &s);
    for (const json_value *m = msgs->child; m; m = m->next)
        mc_content(json_get(m, "content"), &s);
    const json_value *tools = json_get(doc, "tools");
    for (const json_value *t = tools && tools->type == JSON_ARRAY ? tools->child : NULL; t; t = t->next)
        s.bytes += mc_str(t, "name") + mc_str(t, "description") + mc_json(json_get(t, "input_schema"));
    json_free(doc);
    /* a body within json_parse's reach is far below LONG_MAX tokens */
    size_t tokens = (s.bytes + MESSAGES_COUNT_BYTES_PER_TOKEN - 1) / MESSAGES_COUNT_BYTES_PER_TOKEN;
    return (long)(tokens + s.media * MESSAGES_COUNT_MEDIA_TOKENS);
}
