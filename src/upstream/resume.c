/* resume.c: builds the continuation request of a cut chat stream (see
 * resume.h). The body is rewritten member by member with json_write, so
 * every field the client sent (model, tools, temperature, ...) goes out
 * exactly as it came: only the messages list grows by one. */
#include "upstream/resume.h"
#include <string.h>

int resume_body_build(const json_value *doc, const char *text, size_t len, sbuf *out)
{
    const json_value *msgs = doc ? json_get(doc, "messages") : NULL;
    if (!msgs || msgs->type != JSON_ARRAY)
        return -1;
    sbuf_puts(out, "{");
    for (const json_value *m = doc->child; m; m = m->next) {
        if (m != doc->child)
            sbuf_puts(out, ",");
        sbuf_json_str(out, m->key, strlen(m->key));
        sbuf_puts(out, ":");
        if (m != msgs) {
            json_write(out, m);
            continue;
        }
        sbuf_puts(out, "[");
        for (const json_value *e = m->child; e; e = e->next) {
            json_write(out, e);
            sbuf_puts(out, ",");
        }
        sbuf_puts(out, "{\"role\":\"assistant\",\"content\":");
        sbuf_json_str(out, text, len);
        sbuf_puts(out, "}]");
    }
    sbuf_puts(out, "}");
    return 0;
}
