/* model_list.c: model lists as comma-separated names (see model_list.h). */
#include "upstream/model_list.h"
#include "base/json.h"
#include "base/text.h"
#include <string.h>

int model_list_has(const char *csv, const char *model)
{
    if (!csv || !model || !*model)
        return 0;
    size_t m = strlen(model);
    for (const char *p = csv; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == m && memcmp(p, model, m) == 0)
            return 1;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

/* 1 if s[n] may be a model name: printable, no space, comma or quote. */
static int model_list_name_ok(const char *s, size_t n)
{
    if (!n || n > MODEL_LIST_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c == ',' || c == '"' || c == '\\' || c == 0x7f)
            return 0;
    }
    return 1;
}

/* Appends name to the list in out unless it is there already; counts it. */
static void model_list_add(sbuf *out, const char *name, size_t n, size_t *count)
{
    char tmp[MODEL_LIST_NAME_MAX + 1];
    memcpy(tmp, name, n);
    tmp[n] = '\0';
    if (out->len && model_list_has(out->p, tmp))
        return;
    if (out->len)
        sbuf_append(out, ",", 1);
    sbuf_append(out, name, n);
    (*count)++;
}

int model_list_normalize(const char *in, sbuf *out, char *err, size_t errlen)
{
    sbuf_reset(out);
    sbuf_append(out, "", 0);
    size_t count = 0;
    const char *p = in ? in : "";
    while ((unsigned char)*p == ' ' || *p == '\t')
        p++;
    if (!*p)
        return 0;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        const char *s = p;
        while (n && (*s == ' ' || *s == '\t'))
            s++, n--;
        while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
            n--;
        if (!n) {
            sbuf_fmt_into(err, errlen, "an empty model name in the list (two commas in a row, or one at an end)");
            return -1;
        }
        if (!model_list_name_ok(s, n)) {
            /* the name is quoted escaped: the message reaches a terminal and logs */
            sbuf q = SBUF_INIT;
            text_escape(&q, s, n > 64 ? 64 : n, "'");
            sbuf_fmt_into(err, errlen, "bad model name '%s' (no spaces, quotes or control bytes; at most %d bytes)",
                          q.p ? q.p : "", MODEL_LIST_NAME_MAX);
            sbuf_free(&q);
            return -1;
        }
        model_list_add(out, s, n, &count);
        if (count > MODEL_LIST_MAX) {
            sbuf_fmt_into(err, errlen, "more than %d models in the list", MODEL_LIST_MAX);
            return -1;
        }
        if (!e)
            return 0;
        p = e + 1;
    }
}

int model_list_parse_upstream(const char *body, size_t len, sbuf *ids, sbuf *codex)
{
    if (!body)
        return -1;
    json_value *root = json_parse(body, len, NULL, 0);
    json_value *data = root ? json_get(root, "data") : NULL;
    json_value *models = root ? json_get(root, "models") : NULL;
    int is_codex = !(data && data->type == JSON_ARRAY) && models && models->type == JSON_ARRAY;
    json_value *arr = is_codex ? models : data;
    if (!arr || arr->type != JSON_ARRAY) {
        json_free(root);
        return -1;
    }
    size_t count = 0, kept = 0;
    sbuf seen = SBUF_INIT; /* this answer's ids: ids may hold others' before it */
    if (is_codex && codex)
        sbuf_puts(codex, "[");
    for (json_value *it = arr->child; it && count < MODEL_LIST_MAX; it = it->next) {
        const char *id = it->type == JSON_OBJECT ? json_get_str(it, is_codex ? "slug" : "id") : NULL;
        if (!id || !model_list_name_ok(id, strlen(id)) || (seen.len && model_list_has(seen.p, id)))
            continue;
        model_list_add(&seen, id, strlen(id), &count);
        if (!ids->len || !model_list_has(ids->p, id)) {
            if (ids->len)
                sbuf_append(ids, ",", 1);
            sbuf_puts(ids, id);
        }
        if (is_codex && codex) {
            if (kept++)
                sbuf_puts(codex, ",");
            json_write(codex, it);
        }
    }
    if (is_codex && codex)
        sbuf_puts(codex, "]");
    sbuf_free(&seen);
    json_free(root);
    return is_codex;
}
