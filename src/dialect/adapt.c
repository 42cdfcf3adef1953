/* adapt.c: an upstream's rules applied to a body in its own dialect (see
 * adapt.h), as a rewrite of the body's bytes, never a tree. Request
 * bodies of a Codex session are hundreds of KiB to MiB (the whole history
 * on every request), so the cost is one validating walk and one copy:
 *
 *   1. the walk (adapt_scan): the root object's members are read with the
 *      house scanner (json_scan_value: json_parse's grammar and depth limit,
 *      nothing built or decoded) and their spans kept; "input" is walked
 *      down to its items' members (and, for the leading messages that may
 *      become the instructions, their content parts), and what changes in
 *      it is kept as a list of edits in body order;
 *   2. the write (adapt_write): the body copied span by span, contiguous
 *      untouched spans in one piece, the members and edits the rules own
 *      written in their places.
 *
 * Work is linear in the body; recursion is none (the walk goes five fixed
 * levels down: root, input, item, content, part); only names holding an
 * escape and the few string values compared (a type, a role) are decoded.
 * Every member no rule names goes out byte for byte, whitespace included:
 * a number beyond 2^53 or an escape stays as the client wrote it.
 *
 * A member a forced rule owns ("stream" when the upstream streams always,
 * "store" when it stores never, "instructions" when it requires them,
 * "input" when its items change) is written once, at the place of its last
 * copy: the copy json_get, and so the rest of the gateway, reads. Names
 * are compared as json_get compares them (decoded, up to a NUL). The owned
 * names win over the drop and rename lists (a rule that forces a field
 * means the upstream refuses the request without it), and a rename never
 * writes a name that is owned, dropped, or already in the body (the
 * client's own member of that name wins): one body never names a field
 * twice because of a rule. Duplicates the client sent of other names go as
 * they came.
 *
 * Instructions, when the rules require them and the body has none (absent,
 * null, empty, not text): the messages of role "system" or "developer" that
 * open the input, before any other item, are moved out of it into
 * "instructions" (their text joined with a blank line between messages, as
 * chat_request.c joins a chat request's leading system messages); only a
 * body without such text gets the rules' default. A message moves only
 * when all of its content is text (a string, or parts of type "input_text"
 * or "text"): an image in a system message stays where it was, and the
 * default goes with it. The text is the parts' JSON string contents put
 * end to end, not decoded: escapes stay as written (so a surrogate pair
 * split across two parts is one character again). */
#include "dialect/adapt.h"
#include "base/json.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A name as a rule holds one, NUL included: longer names match no rule. */
#define ADAPT_NAME POLICY_DIALECT_NAME_MAX

enum { /* the top-level members the rules look at */
    ROOT_OTHER,
    ROOT_STREAM,
    ROOT_STORE,
    ROOT_INSTRUCTIONS,
    ROOT_INPUT,
    ROOT_STREAM_OPTIONS,
    ROOT_CLASSES
};
enum { /* the members of an input item the rules look at */
    ITEM_OTHER,
    ITEM_ID,
    ITEM_TYPE,
    ITEM_ROLE,
    ITEM_CONTENT
};
enum { /* the members of a content part */
    PART_OTHER,
    PART_TYPE,
    PART_TEXT
};

/* A member (ks..ke its name, quotes included; vs..ve its value) or an
 * array element (ks = ke = vs); sep is the offset of the comma before it,
 * 0 for the first. */
typedef struct adapt_span {
    size_t ks, ke, vs, ve, sep;
    int cls;
    int dropped;     /* top level: its name is in the drop list */
    int rename;      /* top level: its rename row, -1 none */
} adapt_span;

enum { EDIT_REMOVE, EDIT_ROLE };

/* Bytes [off, end) of the body: left out, or the role's literal instead. */
typedef struct adapt_edit {
    size_t off, end;
    int what;
} adapt_edit;

/* The contents (between the quotes) of a string of a leading message's
 * text; first: the first of its message. */
typedef struct adapt_text {
    size_t off, end;
    int first;
} adapt_text;

typedef struct adapt_ctx {
    const char *s;
    size_t len;
    const policy_dialect *r;
    size_t n_drop, n_rename;   /* the rules' counts, clamped to their rows */
    int resp;                  /* a Responses upstream */
    int chat;                  /* a Chat Completions upstream (stream_options is its own) */
    int force_stream;          /* the rules own "stream": true */
    int force_store;           /* "store": false (Responses) */
    int want_ins;              /* "instructions" filled when absent or empty (Responses) */
    int own_input;             /* "input" rewritten (Responses: input_list, system_role, strip_item_ids,
                                * instructions) */
    int walk_items;            /* input's items are looked at */
    char role[sizeof ((policy_dialect *)0)->system_role]; /* system_role, NUL-terminated; "" none */

    /* the walk: the top-level members */
    adapt_span *root;
    size_t n_root, cap_root;
    size_t open;                     /* the root's opening brace */
    size_t last[ROOT_CLASSES];       /* 1 + the index of the last member of each class; 0 none */
    unsigned char present[POLICY_DIALECT_NAMES]; /* a member is named rename_to[k] */
    unsigned char taken[POLICY_DIALECT_NAMES];   /* rename_to[k] may not be written (adapt_taken) */

    /* the walk: what changes in the last "input" (reset at each copy) */
    adapt_edit *e;
    size_t n_e, cap_e;
    adapt_text *t;
    size_t n_t, cap_t;
    size_t text_mark;          /* the texts of the item being walked start here */
    size_t lead;               /* the leading system/developer messages that can move */
    size_t lead_from, lead_to; /* the bytes they take, with the separator after them */
    size_t lead_text;          /* the raw bytes of their text */
    adapt_span *item;          /* the members of the item being walked (reused) */
    size_t n_item, cap_item;
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

/* The role a system message in input takes: NULL for none (or a row
 * without its NUL, which names no role). */
static const char *adapt_role_of(const policy_dialect *r)
{
    return r->system_role[0] && memchr(r->system_role, '\0', sizeof r->system_role) ? r->system_role : NULL;
}

int adapt_owns(api_kind upstream, const policy_dialect *r, const char *name)
{
    if (!r || !name)
        return 0;
    if (r->stream && strcmp(name, "stream") == 0)
        return 1;
    if (upstream != API_RESPONSES)
        return 0;
    return (r->store_off && strcmp(name, "store") == 0) || (r->has_instructions && strcmp(name, "instructions") == 0) ||
           ((r->input_list || r->strip_item_ids || adapt_role_of(r) || r->has_instructions) &&
            strcmp(name, "input") == 0);
}

/* ---------- small helpers ---------- */

/* base with room for one more of n elements of size bytes (*cap of them
 * now); aborts without memory, as sbuf does. */
static void *adapt_grow(void *base, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return base;
    size_t c = *cap ? *cap * 2 : 16;
    if (c > SIZE_MAX / size)
        abort();
    void *p = realloc(base, c * size);
    if (!p)
        abort();
    *cap = c;
    return p;
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

/* The name at s[ks..ke) (a JSON string, quotes included, already
 * validated) as json_get compares names: decoded, up to its first NUL,
 * into k. -1 when that is longer than a rule's name can be: it matches no
 * rule. Only a name holding an escape is decoded (json_parse, on its own
 * few bytes). */
static int adapt_name(const char *s, size_t ks, size_t ke, char k[ADAPT_NAME])
{
    const char *raw = s + ks + 1;
    size_t n = ke - ks - 2;
    if (!memchr(raw, '\\', n)) {
        if (n >= ADAPT_NAME)
            return -1;
        memcpy(k, raw, n);
        k[n] = '\0';
        return 0;
    }
    json_value *v = json_parse(s + ks, ke - ks, NULL, 0);
    size_t m = v && v->type == JSON_STRING ? strlen(v->str) : ADAPT_NAME;
    if (m < ADAPT_NAME)
        memcpy(k, v->str, m + 1);
    json_free(v);
    return m < ADAPT_NAME ? 0 : -1;
}

/* 1 + the index of the name at s[ks..ke) in names (n of them), 0 none. */
static int adapt_name_in(const char *s, size_t ks, size_t ke, const char *const *names, int n)
{
    char k[ADAPT_NAME];
    if (adapt_name(s, ks, ke, k) != 0)
        return 0;
    for (int i = 0; i < n; i++)
        if (strcmp(k, names[i]) == 0)
            return i + 1;
    return 0;
}

/* 1 when the value at s[vs..ve) (validated) is a string whose decoded
 * bytes are exactly lit: a NUL inside counts ("system\u0000" is not
 * "system"), as emit_is compares. */
static int adapt_str_is(const char *s, size_t vs, size_t ve, const char *lit)
{
    if (s[vs] != '"')
        return 0;
    size_t n = strlen(lit), raw = ve - vs - 2;
    const char *p = s + vs + 1;
    if (raw > 6 * n) /* an escape is at most six bytes for one decoded byte */
        return 0;
    if (!memchr(p, '\\', raw))
        return raw == n && memcmp(p, lit, n) == 0;
    json_value *v = json_parse(s + vs, ve - vs, NULL, 0);
    int eq = v && v->type == JSON_STRING && v->str_len == n && memcmp(v->str, lit, n) == 0;
    json_free(v);
    return eq;
}

/* The value at s[vs..ve) is the literal lit ("true", "false"). */
static int adapt_lit_is(const adapt_ctx *c, const adapt_span *m, const char *lit)
{
    size_t n = strlen(lit);
    return m->ve - m->vs == n && memcmp(c->s + m->vs, lit, n) == 0;
}

/* ---------- the walk ---------- */

/* The elements of one container of the body, in order. */
typedef struct adapt_iter {
    const char *s;
    size_t len;
    size_t pos;      /* past the last element read, or the opening bracket */
    int object;      /* members of an object, else elements of an array */
    int depth;       /* containers open around each element (json_scan_value's limit counts them) */
    int first;
} adapt_iter;

static void adapt_iter_open(adapt_iter *it, const adapt_ctx *c, size_t at, int depth)
{
    it->s = c->s;
    it->len = c->len;
    it->pos = at + 1;
    it->object = c->s[at] == '{';
    it->depth = depth;
    it->first = 1;
}

/* The next element into sp (its name for an object, sep, and vs, its
 * value's first byte; the caller then reads the value and sets sp->ve and
 * it->pos): 1. 0 when the container closed (it->pos past its bracket); -1
 * when it is not valid JSON. */
static int adapt_iter_next(adapt_iter *it, adapt_span *sp)
{
    const char *s = it->s;
    size_t len = it->len, p = json_scan_ws(s, len, it->pos);
    if (p >= len)
        return -1;
    if (s[p] == (it->object ? '}' : ']')) { /* at once, or after an element: not after a comma */
        it->pos = p + 1;
        return 0;
    }
    sp->sep = 0;
    if (!it->first) {
        if (s[p] != ',')
            return -1;
        sp->sep = p;
        p = json_scan_ws(s, len, p + 1);
    }
    it->first = 0;
    if (it->object) {
        size_t e = p < len && s[p] == '"' ? json_scan_value(s, len, p, it->depth) : 0;
        if (!e)
            return -1;
        sp->ks = p;
        sp->ke = e;
        p = json_scan_ws(s, len, e);
        if (p >= len || s[p] != ':')
            return -1;
        p = json_scan_ws(s, len, p + 1);
    } else {
        sp->ks = sp->ke = p;
    }
    if (p >= len)
        return -1;
    sp->vs = p;
    return 1;
}

/* The element's value checked and skipped: 0, -1 when it is not valid. */
static int adapt_iter_skip(adapt_iter *it, adapt_span *sp)
{
    sp->ve = json_scan_value(it->s, it->len, sp->vs, it->depth);
    it->pos = sp->ve;
    return sp->ve ? 0 : -1;
}

static void adapt_edit_add(adapt_ctx *c, size_t off, size_t end, int what)
{
    if (what == EDIT_REMOVE && c->n_e && c->e[c->n_e - 1].what == EDIT_REMOVE && c->e[c->n_e - 1].end == off) {
        c->e[c->n_e - 1].end = end; /* removals that meet are one */
        return;
    }
    c->e = adapt_grow(c->e, &c->cap_e, c->n_e, sizeof *c->e);
    c->e[c->n_e++] = (adapt_edit){off, end, what};
}

/* A string of a leading message's text (the value at sp, a string). */
static void adapt_text_add(adapt_ctx *c, const adapt_span *sp)
{
    c->t = adapt_grow(c->t, &c->cap_t, c->n_t, sizeof *c->t);
    c->t[c->n_t] = (adapt_text){sp->vs + 1, sp->ve - 1, c->n_t == c->text_mark};
    c->n_t++;
}

/* A content part of a leading message (the object at sp->vs): 1 when it is
 * text (its type "input_text" or "text", its text a string), recorded; 0
 * when it is another part; -1 when it is not valid JSON. */
static int adapt_walk_part(adapt_ctx *c, adapt_span *part)
{
    static const char *const names[] = {"type", "text"};
    adapt_iter it;
    adapt_span sp = {0}, type = {0}, text = {0};
    int r, has_type = 0, has_text = 0;
    adapt_iter_open(&it, c, part->vs, 5);
    while ((r = adapt_iter_next(&it, &sp)) == 1) {
        if (adapt_iter_skip(&it, &sp) != 0)
            return -1;
        int cls = adapt_name_in(c->s, sp.ks, sp.ke, names, 2);
        if (cls == PART_TYPE) { /* the last copy counts, as in json_get */
            type = sp;
            has_type = 1;
        } else if (cls == PART_TEXT) {
            text = sp;
            has_text = 1;
        }
    }
    if (r < 0)
        return -1;
    part->ve = it.pos;
    if (!has_type || !has_text || c->s[text.vs] != '"' ||
        !(adapt_str_is(c->s, type.vs, type.ve, "input_text") || adapt_str_is(c->s, type.vs, type.ve, "text")))
        return 0;
    adapt_text_add(c, &text);
    return 1;
}

/* The "content" of an item that may be a leading message (the value at
 * sp->vs): its text recorded; *text_only 1 when it is all text (a string,
 * or an array of text parts). 0, -1 when it is not valid JSON. */
static int adapt_walk_content(adapt_ctx *c, adapt_iter *item, adapt_span *sp, int *text_only)
{
    *text_only = 0;
    if (c->s[sp->vs] == '"') {
        if (adapt_iter_skip(item, sp) != 0)
            return -1;
        adapt_text_add(c, sp);
        *text_only = 1;
        return 0;
    }
    if (c->s[sp->vs] != '[')
        return adapt_iter_skip(item, sp);
    adapt_iter it;
    adapt_span part = {0};
    int r, all = 1;
    adapt_iter_open(&it, c, sp->vs, 4);
    while ((r = adapt_iter_next(&it, &part)) == 1) {
        if (c->s[part.vs] != '{') {
            all = 0;
            if (adapt_iter_skip(&it, &part) != 0)
                return -1;
            continue;
        }
        int text = adapt_walk_part(c, &part);
        if (text < 0)
            return -1;
        it.pos = part.ve;
        all &= text;
    }
    if (r < 0)
        return -1;
    sp->ve = item->pos = it.pos;
    *text_only = all;
    return 0;
}

/* The edits of one item (its members in c->item, the object opening at
 * open): its "id" members left out (strip), a "system" role given the
 * rules' (rename). A member left out takes the separator before it, or,
 * the first, what opens the object up to it; the first member kept after
 * only left-out ones then loses its comma: the result is what writing the
 * kept members would give, with every byte of theirs as it was. */
static void adapt_item_edits(adapt_ctx *c, size_t open, int strip, int rename)
{
    int kept = 0;
    for (size_t i = 0; i < c->n_item; i++) {
        const adapt_span *m = &c->item[i];
        if (strip && m->cls == ITEM_ID) {
            adapt_edit_add(c, i ? c->item[i - 1].ve : open + 1, m->ve, EDIT_REMOVE);
            continue;
        }
        if (!kept && i)
            adapt_edit_add(c, c->item[i - 1].ve, m->sep + 1, EDIT_REMOVE);
        kept = 1;
        if (rename && m->cls == ITEM_ROLE && adapt_str_is(c->s, m->vs, m->ve, "system"))
            adapt_edit_add(c, m->vs, m->ve, EDIT_ROLE);
    }
}

/* One input item (the object at at); lead: it may be a leading message
 * that moves to the instructions, *movable set to whether it is. Returns
 * the offset past it, 0 when it is not valid JSON. */
static size_t adapt_walk_item(adapt_ctx *c, size_t at, int lead, int *movable)
{
    static const char *const names[] = {"id", "type", "role", "content"};
    adapt_iter it;
    adapt_span sp = {0};
    size_t type = 0, role = 0; /* 1 + the index of the last of each; 0 none */
    int r, text_only = 0;
    c->n_item = 0;
    c->text_mark = c->n_t;
    adapt_iter_open(&it, c, at, 3);
    while ((r = adapt_iter_next(&it, &sp)) == 1) {
        sp.cls = adapt_name_in(c->s, sp.ks, sp.ke, names, 4);
        if (sp.cls == ITEM_CONTENT && lead) {
            c->n_t = c->text_mark; /* the last "content" counts */
            if (adapt_walk_content(c, &it, &sp, &text_only) != 0)
                return 0;
        } else if (adapt_iter_skip(&it, &sp) != 0) {
            return 0;
        }
        c->item = adapt_grow(c->item, &c->cap_item, c->n_item, sizeof *c->item);
        c->item[c->n_item++] = sp;
        if (sp.cls == ITEM_TYPE)
            type = c->n_item;
        else if (sp.cls == ITEM_ROLE)
            role = c->n_item;
    }
    if (r < 0)
        return 0;
    const adapt_span *ty = type ? &c->item[type - 1] : NULL, *ro = role ? &c->item[role - 1] : NULL;
    int message = !ty || adapt_str_is(c->s, ty->vs, ty->ve, "message");
    int reference = ty && adapt_str_is(c->s, ty->vs, ty->ve, "item_reference");
    if (lead) {
        *movable = message && text_only && ro &&
                   (adapt_str_is(c->s, ro->vs, ro->ve, "system") || adapt_str_is(c->s, ro->vs, ro->ve, "developer"));
        if (!*movable)
            c->n_t = c->text_mark;
    }
    /* an item_reference keeps its id: the id is all it is */
    int strip = c->r->strip_item_ids && !reference, rename = c->role[0] && message;
    if (strip || rename)
        adapt_item_edits(c, at, strip, rename);
    return it.pos;
}

/* An "input" array (at at): its items' edits, and its leading messages
 * that may become the instructions. The offset past it, 0 when invalid. */
static size_t adapt_walk_input(adapt_ctx *c, size_t at)
{
    adapt_iter it;
    adapt_span sp = {0};
    size_t index = 0;
    int r, lead = c->want_ins;
    c->lead_from = at + 1;
    adapt_iter_open(&it, c, at, 2);
    while ((r = adapt_iter_next(&it, &sp)) == 1) {
        int movable = 0;
        if (c->s[sp.vs] == '{') {
            if (!(sp.ve = adapt_walk_item(c, sp.vs, lead, &movable)))
                return 0;
            it.pos = sp.ve;
        } else if (adapt_iter_skip(&it, &sp) != 0) {
            return 0;
        }
        if (lead && movable) {
            c->lead = index + 1;
            c->lead_to = sp.ve; /* all so far: up to the end of the last one */
        } else if (lead) {
            lead = 0;
            if (c->lead) /* up to this one, its comma included */
                c->lead_to = sp.sep + 1;
        }
        index++;
    }
    if (r < 0)
        return 0;
    for (size_t i = 0; i < c->n_t; i++)
        c->lead_text += c->t[i].end - c->t[i].off;
    return it.pos;
}

/* A top-level member's name: its class, whether it is dropped or renamed,
 * and which rename targets it holds. */
static void adapt_root_name(adapt_ctx *c, adapt_span *sp)
{
    char k[ADAPT_NAME];
    sp->cls = ROOT_OTHER;
    sp->dropped = 0;
    sp->rename = -1;
    if (adapt_name(c->s, sp->ks, sp->ke, k) != 0)
        return;
    static const char *const names[] = {"stream", "store", "instructions", "input", "stream_options"};
    for (int i = 0; i < 5; i++)
        if (strcmp(k, names[i]) == 0)
            sp->cls = ROOT_STREAM + i;
    sp->dropped = adapt_dropped(c, k);
    sp->rename = adapt_rename_of(c, k);
    for (size_t i = 0; i < c->n_rename; i++) {
        const char *to = adapt_row(c->r->rename_to[i], POLICY_DIALECT_NAME_MAX);
        if (to && strcmp(k, to) == 0)
            c->present[i] = 1;
    }
}

/* The walk of the whole body: 0, -1 when it is no valid JSON object. */
static int adapt_scan(adapt_ctx *c)
{
    size_t i = json_scan_ws(c->s, c->len, 0);
    if (i >= c->len || c->s[i] != '{')
        return -1;
    c->open = i;
    adapt_iter it;
    adapt_span sp = {0};
    int r;
    adapt_iter_open(&it, c, i, 1);
    while ((r = adapt_iter_next(&it, &sp)) == 1) {
        adapt_root_name(c, &sp);
        if (sp.cls == ROOT_INPUT && c->resp) { /* the last copy counts: what an earlier one said goes */
            c->n_e = c->n_t = 0;
            c->lead = c->lead_text = 0;
        }
        if (sp.cls == ROOT_INPUT && c->walk_items && c->s[sp.vs] == '[') {
            if (!(sp.ve = adapt_walk_input(c, sp.vs)))
                return -1;
            it.pos = sp.ve;
        } else if (adapt_iter_skip(&it, &sp) != 0) {
            return -1;
        }
        c->root = adapt_grow(c->root, &c->cap_root, c->n_root, sizeof *c->root);
        c->root[c->n_root++] = sp;
        c->last[sp.cls] = c->n_root;
    }
    if (r < 0)
        return -1;
    return json_scan_ws(c->s, c->len, it.pos) == c->len ? 0 : -1;
}

/* ---------- the write ---------- */

/* The output: a run of body bytes [a, b) waits to be copied, so that
 * untouched spans that meet go out in one piece. */
typedef struct adapt_out {
    sbuf *out;
    const char *s;
    size_t a, b;
} adapt_out;

static void adapt_flush(adapt_out *w)
{
    if (w->b > w->a)
        sbuf_append(w->out, w->s + w->a, w->b - w->a);
    w->a = w->b = 0;
}

static void adapt_copy(adapt_out *w, size_t a, size_t b)
{
    if (a == b)
        return;
    if (w->b == a && w->b > w->a) {
        w->b = b;
        return;
    }
    adapt_flush(w);
    w->a = a;
    w->b = b;
}

static void adapt_put(adapt_out *w, const char *p, size_t n)
{
    adapt_flush(w);
    sbuf_append(w->out, p, n);
}

static void adapt_put_str(adapt_out *w, const char *s, size_t cap)
{
    adapt_flush(w);
    sbuf_json_str(w->out, s, strnlen(s, cap));
}

/* 1 when the rules write members of this class themselves. */
static int adapt_owned(const adapt_ctx *c, int cls)
{
    switch (cls) {
    case ROOT_STREAM: return c->force_stream;
    case ROOT_STORE: return c->force_store;
    case ROOT_INSTRUCTIONS: return c->want_ins;
    case ROOT_INPUT: return c->own_input;
    default: return 0;
    }
}

/* Whether a member by the name `to` (a rename's target) may not be
 * written: owned by a rule, dropped, or kept by a member of the body that
 * already has that name (and keeps it). */
static int adapt_taken(const adapt_ctx *c, size_t k)
{
    const char *to = c->r->rename_to[k];
    if (adapt_owns(c->resp ? API_RESPONSES : API_CHAT, c->r, to) || adapt_dropped(c, to))
        return 1;
    return c->present[k] && adapt_rename_of(c, to) < 0;
}

/* The instructions: the leading messages' text when they move, else the
 * rules' default. */
static void adapt_put_instructions(const adapt_ctx *c, adapt_out *w, int move)
{
    if (!move) {
        adapt_put_str(w, c->r->instructions, sizeof c->r->instructions);
        return;
    }
    adapt_flush(w);
    sbuf *out = w->out;
    sbuf_append(out, "\"", 1);
    size_t open = out->len, mark = open, start = open;
    for (size_t i = 0; i < c->n_t; i++) {
        const adapt_text *t = &c->t[i];
        if (t->first) {
            if (out->len == start) /* the message before said nothing: no blank line for it */
                out->len = mark;
            mark = out->len;
            if (mark > open)
                sbuf_append(out, "\\n\\n", 4);
            start = out->len;
        }
        sbuf_append(out, c->s + t->off, t->end - t->off);
    }
    if (out->len == start)
        out->len = mark;
    sbuf_append(out, "\"", 1);
}

/* The last "input" with its edits, the leading messages left out when
 * they move. */
static void adapt_put_input(const adapt_ctx *c, adapt_out *w, const adapt_span *m, int move)
{
    if (c->s[m->vs] == '"' && c->r->input_list) {
        adapt_put(w, "[{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":", 72);
        adapt_copy(w, m->vs, m->ve); /* the same string, byte for byte */
        adapt_put(w, "}]}]", 4);
        return;
    }
    if (c->s[m->vs] != '[') {
        adapt_copy(w, m->vs, m->ve);
        return;
    }
    size_t pos = m->vs, k = 0;
    if (move) {
        adapt_copy(w, pos, c->lead_from);
        pos = c->lead_to;
        while (k < c->n_e && c->e[k].off < pos) /* edits inside the messages that moved */
            k++;
    }
    for (; k < c->n_e; k++) {
        const adapt_edit *e = &c->e[k];
        adapt_copy(w, pos, e->off);
        if (e->what == EDIT_ROLE)
            adapt_put_str(w, c->role, sizeof c->role);
        pos = e->end;
    }
    adapt_copy(w, pos, m->ve);
}

/* A member appended (the body had none of that name): its comma when
 * members are written before it, then "key":. */
static void adapt_put_key(adapt_out *w, size_t *written, const char *key)
{
    adapt_flush(w);
    if ((*written)++)
        sbuf_append(w->out, ",", 1);
    sbuf_json_str(w->out, key, strlen(key));
    sbuf_append(w->out, ":", 1);
}

/* The body written with the rules applied; returns whether it streams. */
static int adapt_write(adapt_ctx *c, sbuf *out)
{
    const adapt_span *last_stream = c->last[ROOT_STREAM] ? &c->root[c->last[ROOT_STREAM] - 1] : NULL;
    const adapt_span *last_ins = c->last[ROOT_INSTRUCTIONS] ? &c->root[c->last[ROOT_INSTRUCTIONS] - 1] : NULL;
    const adapt_span *last_input = c->last[ROOT_INPUT] ? &c->root[c->last[ROOT_INPUT] - 1] : NULL;
    /* instructions the body has: a string with something in it */
    int ins_ok = last_ins && c->s[last_ins->vs] == '"' && last_ins->ve - last_ins->vs > 2;
    int move = c->want_ins && !ins_ok && last_input && c->s[last_input->vs] == '[' && c->lead && c->lead_text;
    for (size_t k = 0; k < c->n_rename; k++)
        c->taken[k] = (unsigned char)(adapt_row(c->r->rename_to[k], POLICY_DIALECT_NAME_MAX) && adapt_taken(c, k));

    adapt_out w = {out, c->s, 0, 0};
    sbuf_reserve(out, c->len + 128);
    adapt_copy(&w, 0, c->open + 1);
    size_t written = 0;
    int streams = 0;
    for (size_t i = 0; i < c->n_root; i++) {
        const adapt_span *m = &c->root[i];
        const char *key = NULL; /* a rename's new name; NULL: the member's own bytes */
        int own = adapt_owned(c, m->cls);
        if (own) {
            if (i + 1 != c->last[m->cls])
                continue;
        } else if (m->dropped) {
            continue;
        } else if (m->rename >= 0) {
            if (c->taken[m->rename])
                continue;
            key = c->r->rename_to[m->rename];
        }
        /* the separator before it as it came; for the first one written
         * after members left out, what follows their comma */
        if (written)
            adapt_copy(&w, c->root[i - 1].ve, m->ks);
        else
            adapt_copy(&w, i ? m->sep + 1 : c->open + 1, m->ks);
        written++;
        if (key) {
            adapt_put_str(&w, key, POLICY_DIALECT_NAME_MAX);
            adapt_copy(&w, m->ke, m->vs);
        } else {
            adapt_copy(&w, m->ks, m->vs);
        }
        if (!own) {
            adapt_copy(&w, m->vs, m->ve);
            if (key ? strcmp(key, "stream") == 0 : m->cls == ROOT_STREAM)
                streams = adapt_lit_is(c, m, "true"); /* the last one written is the one read upstream */
            continue;
        }
        switch (m->cls) {
        case ROOT_STREAM:
            if (adapt_lit_is(c, m, "true"))
                adapt_copy(&w, m->vs, m->ve);
            else
                adapt_put(&w, "true", 4);
            break;
        case ROOT_STORE:
            if (adapt_lit_is(c, m, "false"))
                adapt_copy(&w, m->vs, m->ve);
            else
                adapt_put(&w, "false", 5);
            break;
        case ROOT_INSTRUCTIONS:
            if (ins_ok)
                adapt_copy(&w, m->vs, m->ve);
            else /* null, "", or not text: the upstream requires them */
                adapt_put_instructions(c, &w, move);
            break;
        default: adapt_put_input(c, &w, m, move); break;
        }
    }
    if (c->force_stream) {
        if (!last_stream) {
            adapt_put_key(&w, &written, "stream");
            sbuf_append(out, "true", 4);
        }
        /* a chat stream carries its usage only when asked, and the gateway
         * needs it: a body the rule made stream asks for it */
        int streamed = last_stream && adapt_lit_is(c, last_stream, "true");
        if (c->chat && !streamed && !c->last[ROOT_STREAM_OPTIONS] && !adapt_dropped(c, "stream_options")) {
            adapt_put_key(&w, &written, "stream_options");
            sbuf_puts(out, "{\"include_usage\":true}");
        }
        streams = 1;
    }
    if (c->force_store && !c->last[ROOT_STORE]) {
        adapt_put_key(&w, &written, "store");
        sbuf_append(out, "false", 5);
    }
    if (c->want_ins && !last_ins) {
        adapt_put_key(&w, &written, "instructions");
        adapt_put_instructions(c, &w, move);
    }
    /* what closes the body as it came: the whitespace before the brace, the
     * brace, and what follows it */
    adapt_copy(&w, c->n_root ? c->root[c->n_root - 1].ve : c->open + 1, c->len);
    adapt_flush(&w);
    return streams;
}

static void adapt_free(adapt_ctx *c)
{
    free(c->root);
    free(c->e);
    free(c->t);
    free(c->item);
}

int adapt_body(api_kind upstream, const policy_dialect *r, const char *body, size_t len, sbuf *out, int *up_stream,
               dialect_error *err)
{
    static const policy_dialect none; /* no rules: every byte as it came (const: no state) */
    adapt_ctx c;
    memset(&c, 0, sizeof c);
    c.s = body;
    c.len = body ? len : 0;
    c.r = r = r ? r : &none;
    c.resp = upstream == API_RESPONSES;
    c.chat = upstream == API_CHAT;
    c.n_drop = r->n_drop < POLICY_DIALECT_NAMES ? r->n_drop : POLICY_DIALECT_NAMES;
    c.n_rename = r->n_rename < POLICY_DIALECT_NAMES ? r->n_rename : POLICY_DIALECT_NAMES;
    c.force_stream = r->stream != 0;
    c.force_store = c.resp && r->store_off;
    c.want_ins = c.resp && r->has_instructions;
    if (c.resp && adapt_role_of(r))
        memcpy(c.role, r->system_role, sizeof c.role);
    c.own_input = c.resp && (r->input_list || r->strip_item_ids || c.role[0] || c.want_ins);
    c.walk_items = c.resp && (r->strip_item_ids || c.role[0] || c.want_ins);
    if (!body || adapt_scan(&c) != 0) {
        size_t i = body ? json_scan_ws(body, len, 0) : 0;
        adapt_free(&c);
        refuse_param(err, "%s", "");
        if (!body || i >= len || body[i] != '{')
            return refuse_set(err, REFUSE_INVALID_TYPE, "The request body must be a JSON object.");
        return refuse_set(err, REFUSE_INVALID_VALUE, "The request body is not valid JSON.");
    }
    int streams = adapt_write(&c, out);
    adapt_free(&c);
    if (up_stream)
        *up_stream = streams;
    return 0;
}
