/* emit.c: the small JSON writing helpers of the request side (see emit.h). */
#include "dialect/emit.h"
#include <string.h>

void emit_key(sbuf *out, size_t *count, const char *key)
{
    if ((*count)++)
        sbuf_append(out, ",", 1);
    sbuf_json_str(out, key, strlen(key));
    sbuf_append(out, ":", 1);
}

void emit_str(sbuf *out, const json_value *s)
{
    if (s && s->type == JSON_STRING && s->str)
        sbuf_json_str(out, s->str, s->str_len);
    else
        sbuf_append(out, "\"\"", 2);
}

void emit_as_text(sbuf *out, const json_value *v, const char *dflt)
{
    if (!v || v->type == JSON_NULL) {
        sbuf_json_str(out, dflt, strlen(dflt));
        return;
    }
    if (v->type == JSON_STRING) {
        emit_str(out, v);
        return;
    }
    sbuf text = SBUF_INIT;
    json_write(&text, v);
    sbuf_json_str(out, text.p, text.len);
    sbuf_free(&text);
}

int emit_is(const json_value *v, const char *s)
{
    return v && v->type == JSON_STRING && v->str && strlen(s) == v->str_len && memcmp(v->str, s, v->str_len) == 0;
}

int emit_depth(const json_value *v, int limit)
{
    if (v->type != JSON_ARRAY && v->type != JSON_OBJECT)
        return 0;
    if (limit <= 0)
        return 1;
    int deepest = 0;
    for (const json_value *e = v->child; e; e = e->next) {
        int d = emit_depth(e, limit - 1);
        if (d > deepest)
            deepest = d;
        if (deepest >= limit)
            break;
    }
    return 1 + deepest;
}
