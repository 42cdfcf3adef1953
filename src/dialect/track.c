/* track.c: the budget and the small stores of a stream translator
 * (track.h): finished items by output index, tool calls by chat index,
 * and the failure record. */
#include "dialect/track.h"
#include "dialect/errors.h"
#include <stdlib.h>
#include <string.h>

int track_keep(dialect_stream *s, size_t n)
{
    if (s->overflow || n > s->keep_max - s->kept) {
        s->overflow = 1;
        return 0;
    }
    s->kept += n;
    return 1;
}

void track_append(dialect_stream *s, sbuf *b, const char *p, size_t n)
{
    if (n && track_keep(s, n))
        sbuf_append(b, p, n);
}

/* Room for one more element in an array of elem-sized ones (*cap grows
 * by doubling); 0 when the count limit is reached or memory is short. */
static int track_grow(void **v, size_t n, size_t *cap, size_t elem)
{
    if (n >= TRACK_ITEMS_MAX)
        return 0;
    if (n < *cap)
        return 1;
    size_t want = *cap ? *cap * 2 : 8;
    void *p = realloc(*v, want * elem);
    if (!p)
        return 0;
    *v = p;
    *cap = want;
    return 1;
}

int track_room(dialect_stream *s, void **v, size_t n, size_t *cap, size_t elem)
{
    if (n < *cap)
        return 1;
    size_t want = *cap ? *cap * 2 : 8;
    void *p = n < TRACK_ITEMS_MAX && track_keep(s, (want - *cap) * elem) ? realloc(*v, want * elem) : NULL;
    if (!p) {
        s->overflow = 1;
        return 0;
    }
    *v = p;
    *cap = want;
    return 1;
}

void track_event_open(sbuf *out, const char *type)
{
    sbuf_puts(out, "event: ");
    sbuf_puts(out, type);
    sbuf_puts(out, "\ndata: {\"type\":\"");
    sbuf_puts(out, type);
    sbuf_puts(out, "\"");
}

int track_items_put(dialect_stream *s, track_items *l, long output_index, const char *json, size_t len)
{
    size_t at = l->n;
    while (at > 0 && l->v[at - 1].output_index > output_index)
        at--;
    if (at > 0 && l->v[at - 1].output_index == output_index) {
        track_done *d = &l->v[at - 1];
        if (!track_keep(s, len))
            return -1;
        sbuf_reset(&d->json);
        sbuf_append(&d->json, json, len);
        return 0;
    }
    if (!track_keep(s, len + sizeof(track_done)))
        return -1;
    void *v = l->v;
    if (!track_grow(&v, l->n, &l->cap, sizeof *l->v)) {
        s->overflow = 1;
        return -1;
    }
    l->v = v;
    memmove(&l->v[at + 1], &l->v[at], (l->n - at) * sizeof *l->v);
    l->n++;
    l->v[at].output_index = output_index;
    l->v[at].json = (sbuf)SBUF_INIT;
    sbuf_append(&l->v[at].json, json, len);
    return 0;
}

void track_items_write(const track_items *l, sbuf *out)
{
    for (size_t i = 0; i < l->n; i++) {
        if (i)
            sbuf_puts(out, ",");
        sbuf_append(out, l->v[i].json.p, l->v[i].json.len);
    }
}

void track_items_free(track_items *l)
{
    for (size_t i = 0; i < l->n; i++)
        sbuf_free(&l->v[i].json);
    free(l->v);
    memset(l, 0, sizeof *l);
}

track_call *track_calls_find(track_calls *l, long i)
{
    for (size_t k = 0; k < l->n; k++)
        if (l->v[k].chat_index == i)
            return &l->v[k];
    return NULL;
}

track_call *track_calls_add(dialect_stream *s, track_calls *l, long i)
{
    void *v = l->v;
    if (!track_keep(s, sizeof(track_call)) || !track_grow(&v, l->n, &l->cap, sizeof *l->v)) {
        s->overflow = 1;
        return NULL;
    }
    l->v = v;
    track_call *c = &l->v[l->n++];
    memset(c, 0, sizeof *c);
    c->chat_index = i;
    c->output_index = -1;
    c->block = -1;
    return c;
}

track_call *track_calls_for(dialect_stream *s, track_calls *l, const json_value *elem, int *fresh)
{
    *fresh = 0;
    long i = shape_index(elem, "index");
    track_call *c = NULL;
    if (i >= 0) {
        c = track_calls_find(l, i);
    } else {
        char id[SHAPE_ID_MAX];
        shape_copy_id(id, json_get_str(elem, "id"));
        for (size_t k = 0; k < l->n && id[0] && !c; k++)
            if (strcmp(l->v[k].call_id, id) == 0)
                c = &l->v[k];
        if (!c && !id[0] && l->n)
            c = &l->v[l->n - 1];
        i = -2 - (long)l->n; /* a new one: an index no element gives (those are >= 0) */
    }
    if (c)
        return c;
    c = track_calls_add(s, l, i);
    if (c) {
        *fresh = 1;
        shape_copy_id(c->call_id, json_get_str(elem, "id"));
    }
    return c;
}

void track_calls_free(track_calls *l)
{
    for (size_t k = 0; k < l->n; k++) {
        sbuf_free(&l->v[k].name);
        sbuf_free(&l->v[k].args);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

int track_fail(dialect_stream *s, const json_value *doc, errors_info *e)
{
    errors_read(doc, e);
    s->failed = 1;
    s->finished = 1;
    s->terminal = 1;
    s->fail_status = errors_status(e);
    return s->fail_status;
}

const json_value *track_chat_choice(const json_value *doc)
{
    const json_value *list = json_get(doc, "choices");
    for (const json_value *c = list && list->type == JSON_ARRAY ? list->child : NULL; c; c = c->next)
        if (c->type == JSON_OBJECT && shape_index(c, "index") <= 0)
            return c;
    return NULL;
}

void track_free(dialect_stream *s)
{
    free(s->tc.items);
    sbuf_free(&s->tr.text);
    sbuf_free(&s->tr.parts);
    sbuf_free(&s->tr.final);
    track_calls_free(&s->tr.calls);
    track_items_free(&s->tr.done);
    track_items_free(&s->ra.items);
    sbuf_free(&s->ra.terminal);
    sbuf_free(&s->ca.content);
    sbuf_free(&s->ca.refusal);
    sbuf_free(&s->ca.reasoning);
    track_calls_free(&s->ca.calls);
    sbuf_free(&s->ca.usage);
    sbuf_free(&s->fail_body);
    for (size_t k = 0; k < s->tm.n; k++) {
        sbuf_free(&s->tm.v[k].name);
        sbuf_free(&s->tm.v[k].pending);
    }
    free(s->tm.v);
    track_calls_free(&s->tm.calls);
    free(s->fm.v);
    for (size_t k = 0; k < s->ma.n; k++) {
        sbuf_free(&s->ma.v[k].name);
        sbuf_free(&s->ma.v[k].text);
    }
    free(s->ma.v);
}
