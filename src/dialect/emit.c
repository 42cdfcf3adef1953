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
