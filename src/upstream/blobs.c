/* blobs.c: finds account-bound blobs ("encrypted_content" strings) in
 * Responses API answers and requests, and rewrites a request without the
 * ones the caller marks (see blobs.h). A position-aware walk over the JSON
 * text: the structure this module cares about (the root object, "input",
 * its items, the arrays inside an item and their elements) is walked here;
 * every other value is checked and skipped by json_scan_value, the house
 * parser's grammar without a tree, so "well-formed" means what json_parse
 * means. Nothing is decoded but the few strings read (a blob's value only
 * when it holds a backslash, and an item's "type"). Work is linear in the
 * body and the recursion is bounded by BLOBS_MAX_DEPTH. */
#include "upstream/blobs.h"
#include "base/json.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* json_scan_value's nesting limit (json.h: "the 128-level limit"). A value
 * skipped with `open` containers around it is scanned as if
 * BLOBS_JSON_DEPTH - BLOBS_MAX_DEPTH more were open, which makes its limit
 * BLOBS_MAX_DEPTH (test_nesting_deeper_than_64_levels_is_refused pins it). */
#define BLOBS_JSON_DEPTH 128

static const char blobs_needle[] = "\"encrypted_content\"";
#define BLOBS_NEEDLE_LEN (sizeof blobs_needle - 1)

/* ---------- keys ---------- */

#define BLOBS_FNV_PRIME 0x100000001b3ull
#define BLOBS_SEED_A 0xcbf29ce484222325ull /* FNV-1a's offset basis */
#define BLOBS_SEED_B 0x84222325cbf29ce4ull /* any other: the second lane */

static uint64_t blobs_fmix(uint64_t h)
{
    /* MurmurHash3's finaliser: spreads FNV's weak high bits over the hex */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

static void blobs_fnv2(uint64_t *a, uint64_t *b, const unsigned char *p, size_t n)
{
    uint64_t x = *a, y = *b;
    for (size_t i = 0; i < n; i++) {
        x = (x ^ p[i]) * BLOBS_FNV_PRIME;
        y = (y ^ p[i]) * BLOBS_FNV_PRIME;
    }
    *a = x;
    *b = y;
}

static void blobs_key_of(size_t n, const unsigned char *head, const unsigned char *tail, size_t hn, char key[BLOBS_KEY_SIZE])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char nb[8];
    for (int i = 0; i < 8; i++)
        nb[i] = (unsigned char)((uint64_t)n >> (8 * i));
    uint64_t a = BLOBS_SEED_A, b = BLOBS_SEED_B;
    blobs_fnv2(&a, &b, nb, sizeof nb);
    blobs_fnv2(&a, &b, head, hn);
    blobs_fnv2(&a, &b, tail, hn);
    a = blobs_fmix(a);
    b = blobs_fmix(b);
    memcpy(key, "bl:", 3);
    for (int i = 0; i < 16; i++) {
        key[3 + i] = hex[(a >> (60 - 4 * i)) & 15];
        key[19 + i] = hex[(b >> (60 - 4 * i)) & 15];
    }
    key[35] = '\0';
}

void blobs_key(const char *s, size_t n, char key[BLOBS_KEY_SIZE])
{
    size_t h = n < 64 ? n : 64;
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    blobs_key_of(n, u, u + n - h, h, key);
}

/* ---------- decoding a string's contents ---------- */

/* The value of the JSON string whose raw contents are raw[0..n), its
 * quotes at raw[-1] and raw[n] (json_scan_value accepted it): decoded by
 * json_parse, the one decoder of the tree, for the rare value with an
 * escape. NULL only without memory. */
static json_value *blobs_decode(const char *raw, size_t n)
{
    json_value *v = json_parse(raw - 1, n + 2, NULL, 0);
    if (v && v->type != JSON_STRING) {
        json_free(v);
        v = NULL;
    }
    return v;
}

/* The key of the string whose raw contents (between the quotes) are raw[0..n). */
static void blobs_key_raw(const char *raw, size_t n, char key[BLOBS_KEY_SIZE])
{
    json_value *v = memchr(raw, '\\', n) ? blobs_decode(raw, n) : NULL;
    if (v) /* escaped: the decoded value's key */
        blobs_key(v->str, v->str_len, key);
    else /* base64url: the usual case, bytes are the value */
        blobs_key(raw, n, key);
    json_free(v);
}

/* A short decoded string into buf, cut to fit on a character boundary. */
static void blobs_short_decode(const char *raw, size_t n, char *buf, size_t cap)
{
    json_value *v = memchr(raw, '\\', n) ? blobs_decode(raw, n) : NULL;
    const char *s = v ? v->str : raw;
    size_t len = v ? v->str_len : n;
    size_t k = len < cap - 1 ? len : cap - 1;
    /* the text is UTF-8 (json_scan_value checked the raw bytes and the
     * decoder writes nothing else): a cut leaves at most one character
     * unfinished, whose lead byte is at most 3 bytes back */
    if (k < len) {
        size_t b = k;
        while (b > 0 && ((unsigned char)s[b - 1] & 0xC0) == 0x80)
            b--;
        if (b > 0) {
            unsigned char c = (unsigned char)s[b - 1];
            size_t want = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
            if (b - 1 + want > k)
                k = b - 1;
        }
    }
    memcpy(buf, s, k);
    buf[k] = '\0';
    json_free(v);
}

/* ---------- the walk ---------- */

typedef struct bwalk bwalk;
/* A member's value at s[val] (no whitespace before it), `open` containers
 * around it; name..name_end are the name's bytes with their quotes. Returns
 * the offset past the value, 0 on an error. */
typedef size_t (*bwalk_member)(bwalk *w, size_t name, size_t name_end, size_t val, int open);
typedef size_t (*bwalk_elem)(bwalk *w, size_t val, size_t index, int open);

struct bwalk {
    const char *s;
    size_t len;
    blob_scan *scan;      /* blobs_scan */
    size_t item_first;    /* the current item's first ref in scan->v */
    char item_type[sizeof ((blob_ref *)0)->item_type];
    size_t part_first;    /* the current part's first ref */
    void (*fn)(void *ud, const char *key); /* blobs_minted */
    void *ud;
    size_t count;
};

static size_t bwalk_skip(const bwalk *w, size_t i, int open)
{
    return json_scan_value(w->s, w->len, i, open + (BLOBS_JSON_DEPTH - BLOBS_MAX_DEPTH));
}

static int bwalk_name_is(const bwalk *w, size_t name, size_t name_end, const char *quoted, size_t n)
{
    return name_end - name == n && memcmp(w->s + name, quoted, n) == 0;
}

static int bwalk_is_blob_name(const bwalk *w, size_t name, size_t name_end)
{
    return bwalk_name_is(w, name, name_end, blobs_needle, BLOBS_NEEDLE_LEN);
}

/* The object at s[i] ('{'), `open` containers around it. */
static size_t bwalk_object(bwalk *w, size_t i, int open, bwalk_member fn)
{
    const char *s = w->s;
    size_t len = w->len;
    i = json_scan_ws(s, len, i + 1);
    if (i < len && s[i] == '}')
        return i + 1;
    for (;;) {
        if (i >= len || s[i] != '"')
            return 0;
        size_t name = i;
        if (!(i = json_scan_value(s, len, i, 0)))
            return 0;
        size_t name_end = i;
        i = json_scan_ws(s, len, i);
        if (i >= len || s[i] != ':')
            return 0;
        i = json_scan_ws(s, len, i + 1);
        if (!(i = fn(w, name, name_end, i, open + 1)))
            return 0;
        i = json_scan_ws(s, len, i);
        if (i < len && s[i] == ',') {
            i = json_scan_ws(s, len, i + 1);
            continue;
        }
        return i < len && s[i] == '}' ? i + 1 : 0;
    }
}

/* The array at s[i] ('['), `open` containers around it. */
static size_t bwalk_array(bwalk *w, size_t i, int open, bwalk_elem fn)
{
    const char *s = w->s;
    size_t len = w->len;
    i = json_scan_ws(s, len, i + 1);
    if (i < len && s[i] == ']')
        return i + 1;
    for (size_t k = 0;; k++) {
        if (!(i = fn(w, i, k, open + 1)))
            return 0;
        i = json_scan_ws(s, len, i);
        if (i < len && s[i] == ',') {
            i = json_scan_ws(s, len, i + 1);
            continue;
        }
        return i < len && s[i] == ']' ? i + 1 : 0;
    }
}

/* ---------- answers ---------- */

static size_t minted_value(bwalk *w, size_t val, int open);

static size_t minted_member(bwalk *w, size_t name, size_t name_end, size_t val, int open)
{
    if (val < w->len && w->s[val] == '"' && bwalk_is_blob_name(w, name, name_end)) {
        size_t end = bwalk_skip(w, val, open);
        if (end) {
            char key[BLOBS_KEY_SIZE];
            blobs_key_raw(w->s + val + 1, end - val - 2, key);
            w->fn(w->ud, key);
            w->count++;
        }
        return end;
    }
    return minted_value(w, val, open);
}

static size_t minted_elem(bwalk *w, size_t val, size_t index, int open)
{
    return minted_value(w, val, open);
}

static size_t minted_value(bwalk *w, size_t val, int open)
{
    if (val < w->len && (w->s[val] == '{' || w->s[val] == '[')) {
        if (open >= BLOBS_MAX_DEPTH)
            return 0;
        return w->s[val] == '{' ? bwalk_object(w, val, open, minted_member) : bwalk_array(w, val, open, minted_elem);
    }
    return bwalk_skip(w, val, open);
}

size_t blobs_minted(const char *json, size_t len, void (*fn)(void *ud, const char *key), void *ud)
{
    if (!json || !fn || !memmem(json, len, blobs_needle, BLOBS_NEEDLE_LEN))
        return 0;
    bwalk w = {.s = json, .len = len, .fn = fn, .ud = ud};
    minted_value(&w, json_scan_ws(json, len, 0), 0);
    return w.count;
}

/* ---------- requests ---------- */

int blobs_quick(const char *body, size_t len, void (*fn)(void *ud, const char *key), void *ud)
{
    int n = 0;
    const char *p = body, *end = body + len;
    while (p && p < end) {
        const char *t = memmem(p, (size_t)(end - p), blobs_needle, BLOBS_NEEDLE_LEN);
        if (!t)
            break;
        const char *q = t + BLOBS_NEEDLE_LEN;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
            q++;
        if (q == end)
            return -1;
        if (*q != ':') { /* the token was a string value (a part's "type"), not a member name */
            p = t + BLOBS_NEEDLE_LEN;
            continue;
        }
        for (q++; q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'); q++)
            ;
        if (q == end || *q != '"')
            return -1;
        const char *v = ++q;
        q = memchr(v, '"', (size_t)(end - v));
        if (!q || memchr(v, '\\', (size_t)(q - v)))
            return -1; /* an escape in the value, or a cut body: only a scan can say */
        char key[BLOBS_KEY_SIZE];
        blobs_key(v, (size_t)(q - v), key);
        if (fn)
            fn(ud, key);
        n++;
        p = q + 1;
    }
    return n;
}

/* A blob at the string s[val..end) of the current item; 0 past the limit. */
static int scan_add(bwalk *w, size_t val, size_t end, int in_part, size_t part_off)
{
    blob_scan *sc = w->scan;
    if (sc->n >= BLOBS_MAX_BLOBS)
        return 0;
    if (sc->n == sc->cap) {
        size_t cap = sc->cap ? sc->cap * 2 : 16;
        blob_ref *v = realloc(sc->v, cap * sizeof *v);
        if (!v)
            abort(); /* as sbuf: no useful work without memory */
        sc->v = v;
        sc->cap = cap;
    }
    blob_ref *r = &sc->v[sc->n++];
    memset(r, 0, sizeof *r);
    blobs_key_raw(w->s + val + 1, end - val - 2, r->key);
    r->in_part = in_part;
    r->item = sc->items - 1;
    r->part_off = part_off;
    return 1;
}

static size_t part_member(bwalk *w, size_t name, size_t name_end, size_t val, int open)
{
    size_t end = bwalk_skip(w, val, open);
    if (end && w->s[val] == '"' && bwalk_is_blob_name(w, name, name_end) && !scan_add(w, val, end, 1, 0))
        return 0;
    return end;
}

static size_t part_elem(bwalk *w, size_t val, size_t index, int open)
{
    if (val >= w->len || w->s[val] != '{')
        return bwalk_skip(w, val, open);
    w->part_first = w->scan->n;
    size_t end = bwalk_object(w, val, open, part_member);
    for (size_t k = w->part_first; end && k < w->scan->n; k++) {
        w->scan->v[k].part_off = val;
        w->scan->v[k].part_len = end - val;
    }
    return end;
}

static size_t item_member(bwalk *w, size_t name, size_t name_end, size_t val, int open)
{
    if (val < w->len && w->s[val] == '[')
        return bwalk_array(w, val, open, part_elem);
    size_t end = bwalk_skip(w, val, open);
    if (!end || w->s[val] != '"')
        return end;
    if (bwalk_is_blob_name(w, name, name_end))
        return scan_add(w, val, end, 0, 0) ? end : 0;
    if (bwalk_name_is(w, name, name_end, "\"type\"", 6)) /* the last one counts, as in json_get */
        blobs_short_decode(w->s + val + 1, end - val - 2, w->item_type, sizeof w->item_type);
    return end;
}

static size_t input_item(bwalk *w, size_t val, size_t index, int open)
{
    if (index >= BLOBS_MAX_ITEMS)
        return 0;
    w->scan->items = index + 1;
    if (val >= w->len || w->s[val] != '{')
        return bwalk_skip(w, val, open);
    w->item_first = w->scan->n;
    w->item_type[0] = '\0';
    size_t end = bwalk_object(w, val, open, item_member);
    for (size_t k = w->item_first; end && k < w->scan->n; k++) {
        blob_ref *r = &w->scan->v[k];
        r->item_off = val;
        r->item_len = end - val;
        memcpy(r->item_type, w->item_type, sizeof r->item_type);
    }
    return end;
}

static size_t root_member(bwalk *w, size_t name, size_t name_end, size_t val, int open)
{
    if (!bwalk_name_is(w, name, name_end, "\"input\"", 7))
        return bwalk_skip(w, val, open);
    w->scan->n = 0; /* a repeated "input": the last one counts */
    w->scan->items = 0;
    if (val < w->len && w->s[val] == '[')
        return bwalk_array(w, val, open, input_item);
    return bwalk_skip(w, val, open);
}

int blobs_scan(const char *body, size_t len, blob_scan *scan)
{
    scan->n = 0;
    scan->items = 0;
    scan->len = len;
    if (!body || !memmem(body, len, blobs_needle, BLOBS_NEEDLE_LEN))
        return 0;
    bwalk w = {.s = body, .len = len, .scan = scan};
    size_t i = json_scan_ws(body, len, 0);
    if (i < len && body[i] == '{' && (i = bwalk_object(&w, i, 0, root_member)) && json_scan_ws(body, len, i) == len)
        return 0;
    scan->n = 0;
    scan->items = 0;
    return -1;
}

void blobs_scan_free(blob_scan *scan)
{
    if (!scan)
        return;
    free(scan->v);
    memset(scan, 0, sizeof *scan);
}

/* ---------- rewriting ---------- */

enum { EDIT_REMOVE, EDIT_ITEM_TEXT, EDIT_PART_TEXT };

typedef struct bedit {
    size_t off, end;
    int what;
} bedit;

typedef struct brewrite {
    const char *s;
    size_t len;
    bedit *e;
    size_t n;
    int run;              /* a run of adjacent removed elements is pending */
    size_t run_a, run_b;  /* from the first one's start to the last one's end */
    int bad;
    int changed;
} brewrite;

static int blobs_is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static void rw_push(brewrite *r, size_t off, size_t end, int what)
{
    if (r->n && off < r->e[r->n - 1].end) {
        r->bad = 1;
        return;
    }
    r->e[r->n++] = (bedit){off, end, what};
}

/* Removes the pending run with one of the commas around it: the one after
 * it, or when it ends the array the one before it; neither when it is the
 * whole array. */
static void rw_flush(brewrite *r)
{
    if (!r->run)
        return;
    r->run = 0;
    size_t a = r->run_a, b = r->run_b, j = json_scan_ws(r->s, r->len, b);
    if (j < r->len && r->s[j] == ',') {
        rw_push(r, a, json_scan_ws(r->s, r->len, j + 1), EDIT_REMOVE);
        return;
    }
    if (j >= r->len || r->s[j] != ']') {
        r->bad = 1;
        return;
    }
    size_t k = a;
    while (k > 0 && blobs_is_ws(r->s[k - 1]))
        k--;
    if (k > 0 && r->s[k - 1] == ',')
        rw_push(r, k - 1, b, EDIT_REMOVE);
    else if (k > 0 && r->s[k - 1] == '[')
        rw_push(r, a, b, EDIT_REMOVE);
    else
        r->bad = 1;
}

static void rw_remove(brewrite *r, size_t a, size_t b)
{
    r->changed++;
    if (r->run) { /* the next element of the same array: only ws, a comma, ws between */
        size_t j = json_scan_ws(r->s, r->len, r->run_b);
        if (j < r->len && r->s[j] == ',' && json_scan_ws(r->s, r->len, j + 1) == a) {
            r->run_b = b;
            return;
        }
        rw_flush(r);
    }
    r->run = 1;
    r->run_a = a;
    r->run_b = b;
}

static void rw_text(brewrite *r, size_t a, size_t b, int what)
{
    r->changed++;
    rw_flush(r);
    rw_push(r, a, b, what);
}

static int blobs_rank(int action) { return action == BLOB_DROP ? 2 : action == BLOB_TEXT ? 1 : 0; }

/* bytes off..off+n of the body form an object: in range, braces at both ends */
static int rw_object_at(const brewrite *r, size_t off, size_t n)
{
    return n >= 2 && off < r->len && n <= r->len - off && r->s[off] == '{' && r->s[off + n - 1] == '}';
}

/* Checks one item's refs v[0..m) (same item) against the body and applies them. */
static void rw_item(brewrite *r, const blob_ref *v, size_t m)
{
    int all_parts = 1, best = BLOB_KEEP;
    size_t item_end = v[0].item_off + v[0].item_len;
    for (size_t k = 0; k < m; k++) {
        const blob_ref *b = &v[k];
        if (b->item_off != v[0].item_off || b->item_len != v[0].item_len ||
            (b->action != BLOB_KEEP && b->action != BLOB_DROP && b->action != BLOB_TEXT)) {
            r->bad = 1;
            return;
        }
        if (b->in_part && !(rw_object_at(r, b->part_off, b->part_len) && b->part_off > v[0].item_off &&
                            b->part_off + b->part_len < item_end)) {
            r->bad = 1;
            return;
        }
        all_parts &= b->in_part != 0;
        if (blobs_rank(b->action) > blobs_rank(best))
            best = b->action;
    }
    if (!all_parts) {
        if (best == BLOB_DROP)
            rw_remove(r, v[0].item_off, item_end);
        else if (best == BLOB_TEXT)
            rw_text(r, v[0].item_off, item_end, EDIT_ITEM_TEXT);
        return;
    }
    size_t prev_end = v[0].item_off + 1;
    for (size_t k = 0; k < m;) {
        size_t g = k;
        int act = BLOB_KEEP;
        for (; g < m && v[g].part_off == v[k].part_off; g++) {
            if (v[g].part_len != v[k].part_len) {
                r->bad = 1;
                return;
            }
            if (blobs_rank(v[g].action) > blobs_rank(act))
                act = v[g].action;
        }
        if (v[k].part_off < prev_end) {
            r->bad = 1;
            return;
        }
        prev_end = v[k].part_off + v[k].part_len;
        if (act == BLOB_DROP)
            rw_remove(r, v[k].part_off, prev_end);
        else if (act == BLOB_TEXT)
            rw_text(r, v[k].part_off, prev_end, EDIT_PART_TEXT);
        k = g;
    }
}

/* note as a JSON string literal that json_parse accepts: sbuf_json_str
 * writes bytes that are not UTF-8 as U+FFFD. */
static void rw_note(sbuf *lit, const char *note)
{
    sbuf_json_str(lit, note ? note : "", note ? strlen(note) : 0);
}

int blobs_rewrite(const char *body, size_t len, const blob_scan *scan, const char *note, sbuf *out)
{
    if (!body || !scan || scan->len != len || (scan->n && !scan->v))
        return -1;
    if (!scan->n)
        return 0;
    brewrite r = {.s = body, .len = len};
    r.e = malloc(scan->n * sizeof *r.e); /* an item or a part per ref at most */
    if (!r.e)
        abort();
    size_t prev_end = 0;
    for (size_t k = 0; k < scan->n && !r.bad;) {
        const blob_ref *v = &scan->v[k];
        size_t m = 1;
        while (k + m < scan->n && scan->v[k + m].item == v->item)
            m++;
        if (!rw_object_at(&r, v->item_off, v->item_len) || v->item_off < prev_end || v->item >= scan->items ||
            (k && v->item <= scan->v[k - 1].item)) {
            r.bad = 1;
            break;
        }
        prev_end = v->item_off + v->item_len;
        rw_item(&r, v, m);
        k += m;
    }
    if (!r.bad)
        rw_flush(&r);
    if (r.bad || !r.n) {
        free(r.e);
        return r.bad ? -1 : 0;
    }
    sbuf lit = SBUF_INIT;
    rw_note(&lit, note);
    static const char item_head[] = "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":";
    static const char part_head[] = "{\"type\":\"input_text\",\"text\":";
    sbuf_reserve(out, len + r.n * (lit.len + sizeof item_head));
    size_t pos = 0;
    for (size_t k = 0; k < r.n; k++) {
        const bedit *e = &r.e[k];
        sbuf_append(out, body + pos, e->off - pos);
        if (e->what == EDIT_ITEM_TEXT) {
            sbuf_append(out, item_head, sizeof item_head - 1);
            sbuf_append(out, lit.p, lit.len);
            sbuf_append(out, "}]}", 3);
        } else if (e->what == EDIT_PART_TEXT) {
            sbuf_append(out, part_head, sizeof part_head - 1);
            sbuf_append(out, lit.p, lit.len);
            sbuf_append(out, "}", 1);
        }
        pos = e->end;
    }
    sbuf_append(out, body + pos, len - pos);
    sbuf_free(&lit);
    free(r.e);
    return r.changed;
}
