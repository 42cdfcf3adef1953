/* overlap.c: a continuation's repeat of the delivered text taken out (see
 * overlap.h). Held events are kept as (name, data) with the span of their
 * text's JSON string in data, and written out again when the repeat is
 * decided; the one whose text the repeat ends in gets the rest of its text
 * as a new JSON string in that span, every other byte as it came. */
#include "upstream/overlap.h"
#include "base/json.h"
#include <stdlib.h>
#include <string.h>

struct ov_event {
    char *name;
    sbuf data;
    size_t vs, ve;         /* the text's JSON string in data (quotes included); vs == ve: none */
    size_t text_at, text_len; /* its decoded text in t->text */
};
typedef struct ov_event ov_event;

static void ov_on_event(void *ud, const char *event, const char *data, size_t len);

size_t overlap_suffix_prefix(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t m = alen < blen ? alen : blen;
    if (!m)
        return 0;
    /* the prefix function of b[0..m): pi[i] = the longest proper border of b[0..i] */
    size_t *pi = malloc(m * sizeof *pi);
    if (!pi)
        return 0;
    pi[0] = 0;
    for (size_t i = 1, k = 0; i < m; i++) {
        while (k && b[i] != b[k])
            k = pi[k - 1];
        if (b[i] == b[k])
            k++;
        pi[i] = k;
    }
    /* a's last m bytes through the automaton: the state at the end is the
     * longest prefix of b that a ends with */
    size_t k = 0;
    for (size_t i = alen - m; i < alen; i++) {
        while (k && (k == m || a[i] != b[k]))
            k = pi[k - 1];
        if (k < m && a[i] == b[k])
            k++;
    }
    free(pi);
    return k;
}

void overlap_init(overlap_trim *t, api_kind api, const char *delivered, size_t len)
{
    memset(t, 0, sizeof *t);
    t->api = api;
    sbuf_append(&t->delivered, delivered ? delivered : "", len);
    sse_init(&t->parser, ov_on_event, t);
}

static void ov_drop_held(overlap_trim *t)
{
    for (size_t i = 0; i < t->nheld; i++) {
        free(t->held[i].name);
        sbuf_free(&t->held[i].data);
    }
    t->nheld = 0;
    free(t->held);
    t->held = NULL;
    t->capheld = 0;
}

void overlap_reset(overlap_trim *t)
{
    ov_drop_held(t);
    sbuf_free(&t->text);
    sse_free(&t->parser);
    sse_init(&t->parser, ov_on_event, t);
    t->decided = 0;
    t->removed = 0;
}

void overlap_free(overlap_trim *t)
{
    ov_drop_held(t);
    sbuf_free(&t->text);
    sbuf_free(&t->delivered);
    sse_free(&t->parser);
}

/* An event written out: its name, then its data a line at a time. */
static void ov_emit(sbuf *out, const char *name, const char *data, size_t len)
{
    if (name && *name) {
        sbuf_puts(out, "event: ");
        sbuf_puts(out, name);
        sbuf_puts(out, "\n");
    }
    for (size_t at = 0;;) {
        const char *nl = memchr(data + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - data) : len;
        sbuf_puts(out, "data: ");
        sbuf_append(out, data + at, end - at);
        sbuf_puts(out, "\n");
        if (!nl)
            break;
        at = end + 1;
    }
    sbuf_puts(out, "\n");
}

/* The span [*vs, *ve) of the JSON string value of key in the object at
 * buf[s..e); 0 when there is none. */
static int ov_member(const char *buf, size_t s, size_t e, const char *key, size_t *vs, size_t *ve)
{
    size_t a, b;
    if (s >= e || json_member_span(buf + s, e - s, key, &a, &b) != 0)
        return 0;
    *vs = s + a;
    *ve = s + b;
    return 1;
}

/* The text delta an event carries: 1 with its JSON string's span in data
 * and its decoded bytes appended to txt; 0 when it carries none. */
static int ov_text(const overlap_trim *t, const char *data, size_t len, size_t *vs, size_t *ve, sbuf *txt)
{
    size_t s, e;
    if (t->api == API_CHAT) { /* choices[0].delta.content */
        if (!ov_member(data, 0, len, "choices", &s, &e) || data[s] != '[')
            return 0;
        size_t c0 = json_scan_ws(data, e, s + 1);
        if (c0 >= e || data[c0] != '{')
            return 0;
        size_t c1 = json_scan_value(data, e, c0, 1);
        if (!c1 || !ov_member(data, c0, c1, "delta", &s, &e) || data[s] != '{' || !ov_member(data, s, e, "content", &s, &e))
            return 0;
    } else { /* a response.output_text.delta's delta */
        size_t ts, te;
        static const char want[] = "\"response.output_text.delta\"";
        if (!ov_member(data, 0, len, "type", &ts, &te) || te - ts != sizeof want - 1 ||
            memcmp(data + ts, want, sizeof want - 1) != 0 || !ov_member(data, 0, len, "delta", &s, &e))
            return 0;
    }
    if (data[s] != '"')
        return 0;
    json_value *v = json_parse(data + s, e - s, NULL, 0);
    int ok = v && v->type == JSON_STRING;
    if (ok)
        sbuf_append(txt, v->str, v->str_len);
    json_free(v);
    *vs = s;
    *ve = e;
    return ok;
}

/* The repeat is decided on the text held: the longest end of the delivered
 * text the continuation begins with, when the client could not tell it from
 * new text; the held events go out without it. */
static void ov_decide(overlap_trim *t, sbuf *out)
{
    size_t k = overlap_suffix_prefix(t->delivered.p, t->delivered.len, t->text.p, t->text.len);
    if (!(k >= OVERLAP_MIN || (k && k == t->delivered.len)))
        k = 0;
    t->removed = k;
    t->decided = 1;
    size_t cut = k;
    for (size_t i = 0; i < t->nheld; i++) {
        ov_event *e = &t->held[i];
        if (e->vs == e->ve || !cut) {
            ov_emit(out, e->name, e->data.p, e->data.len);
            continue;
        }
        if (cut >= e->text_len) { /* all of its text is repeat */
            cut -= e->text_len;
            continue;
        }
        sbuf d = SBUF_INIT;
        sbuf_append(&d, e->data.p, e->vs);
        sbuf_json_str(&d, t->text.p + e->text_at + cut, e->text_len - cut);
        sbuf_append(&d, e->data.p + e->ve, e->data.len - e->ve);
        ov_emit(out, e->name, d.p, d.len);
        sbuf_free(&d);
        cut = 0;
    }
    ov_drop_held(t);
    sbuf_free(&t->text);
}

static void ov_on_event(void *ud, const char *event, const char *data, size_t len)
{
    overlap_trim *t = ud;
    if (t->decided) {
        ov_emit(t->out, event, data, len);
        return;
    }
    size_t vs = 0, ve = 0, before = t->text.len;
    int has = ov_text(t, data, len, &vs, &ve, &t->text);
    if (!has) {
        if (t->nheld) /* the text so far ended: what it repeats is all there is to know */
            ov_decide(t, t->out);
        ov_emit(t->out, event, data, len);
        return;
    }
    if (t->nheld == t->capheld) {
        size_t cap = t->capheld ? t->capheld * 2 : 8;
        ov_event *grown = realloc(t->held, cap * sizeof *grown);
        if (!grown) { /* out of memory: what is held goes out now, the repeat decided on it */
            t->text.len = before;
            ov_decide(t, t->out);
            ov_emit(t->out, event, data, len);
            return;
        }
        t->held = grown;
        t->capheld = cap;
    }
    ov_event *e = &t->held[t->nheld++];
    memset(e, 0, sizeof *e);
    size_t nl = strlen(event);
    e->name = malloc(nl + 1);
    if (e->name)
        memcpy(e->name, event, nl + 1);
    sbuf_append(&e->data, data, len);
    e->vs = vs;
    e->ve = ve;
    e->text_at = before;
    e->text_len = t->text.len - before;
    /* decided once the text is as long as what it could repeat, or is no
     * longer found in it (then no longer repeat can follow) */
    if (t->text.len >= t->delivered.len ||
        !memmem(t->delivered.p, t->delivered.len, t->text.p, t->text.len))
        ov_decide(t, t->out);
}

void overlap_feed(overlap_trim *t, const char *buf, size_t n, sbuf *out)
{
    t->out = out;
    sse_feed(&t->parser, buf, n);
    t->out = NULL;
}

void overlap_end(overlap_trim *t, sbuf *out)
{
    if (!t->decided && t->nheld)
        ov_decide(t, out);
}
