/* json.c: the strict RFC 8259 parser, tree accessors and compact serializer
 * declared in json.h. One pass over the input, recursive descent bounded by
 * JSON_MAX_DEPTH. A document's nodes and strings live in one arena (a few
 * chunks, the first sized from the input), so parsing a request body costs a
 * couple of allocations instead of one per node and string, and json_free
 * releases the whole document at once. json_set_str allocates its new
 * strings from the same arena; what it replaces is reclaimed with the
 * document. */
#include "base/json.h"
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define JSON_MAX_DEPTH 128

#define JSON_CHUNK_MIN 512
#define JSON_CHUNK_MAX (64u << 10)

typedef struct json_chunk {
    struct json_chunk *next;
    size_t cap, used;
    max_align_t data[]; /* cap bytes */
} json_chunk;

/* What json_parse returns a pointer into: the root node and its arena. */
typedef struct json_doc {
    json_value root;
    json_chunk *chunks; /* newest first */
} json_doc;

typedef struct jparser {
    json_doc *doc;
    const char *s;
    size_t len;
    size_t pos;
    int depth;
    char *err;
    size_t errlen;
    int keep_depth;       /* 0: build everything; else containers deeper than this keep no children */
    const char *span_key; /* json_member_span: the top-level member whose value span is wanted */
    size_t span_start, span_end;
    const char *const *only; /* json_parse_members: the top-level members built (n_only of them) */
    size_t n_only;
    int skip;             /* > 0: the value being parsed is dropped: validated, nothing built */
    json_value scratch;   /* the node a skipped value gets (see json_node) */
} jparser;

/* A place in the arena, to give back what a dropped value took. */
typedef struct json_mark {
    json_chunk *chunk;
    size_t used;
} json_mark;

static json_value *json_parse_value(jparser *p);

/* Records the first error only: later failures are consequences of it. */
static void json_fail(jparser *p, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void json_fail(jparser *p, size_t at, const char *fmt, ...)
{
    if (!p->err || !p->errlen || p->err[0])
        return;
    char msg[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(p->err, p->errlen, "offset %zu: %s", at, msg);
}

static void *json_xmalloc(size_t n)
{
    void *v = malloc(n);
    if (!v)
        abort(); /* same policy as sbuf: no useful work without memory */
    return v;
}

/* Starts d's next chunk: want bytes, capped at JSON_CHUNK_MAX, or need
 * when one allocation is larger than that. */
static json_chunk *json_chunk_push(json_doc *d, size_t want, size_t need)
{
    size_t cap = want > JSON_CHUNK_MAX ? JSON_CHUNK_MAX : want;
    if (cap < need)
        cap = need;
    json_chunk *c = json_xmalloc(sizeof *c + cap);
    c->next = d->chunks;
    c->cap = cap;
    c->used = 0;
    d->chunks = c;
    return c;
}

/* n bytes from the document's arena, aligned for any node (not zeroed). */
static void *json_alloc(json_doc *d, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
    json_chunk *c = d->chunks;
    if (c->cap - c->used < n)
        c = json_chunk_push(d, c->cap * 2, n);
    void *v = (char *)c->data + c->used;
    c->used += n;
    return v;
}

static json_mark json_mark_take(const json_doc *d) { return (json_mark){d->chunks, d->chunks->used}; }

/* Frees every chunk started after m and rewinds m's chunk to where it was. */
static void json_mark_restore(json_doc *d, json_mark m)
{
    while (d->chunks != m.chunk) {
        json_chunk *c = d->chunks;
        d->chunks = c->next;
        free(c);
    }
    d->chunks->used = m.used;
}

/* In a shallow parse, the children of this container are validated and then
 * dropped: the tree of a large body never exists (a 16 MiB array of zeros
 * would be 8 M nodes of 64 bytes). */
static int json_drops_children(const jparser *p) { return p->keep_depth && p->depth > p->keep_depth; }

static json_value *json_new(json_doc *d, json_type t)
{
    json_value *v = json_alloc(d, sizeof *v);
    memset(v, 0, sizeof *v);
    v->type = t;
    return v;
}

/* A node for the value being parsed; while skipping, the parser's scratch
 * node (written to, never linked: what a dropped value needs is no node). */
static json_value *json_node(jparser *p, json_type t)
{
    if (p->skip) {
        p->scratch.type = t;
        return &p->scratch;
    }
    return json_new(p->doc, t);
}

/* First chunk about the size the tree of len input bytes takes. */
static json_doc *json_doc_new(size_t len)
{
    json_doc *d = json_xmalloc(sizeof *d);
    memset(d, 0, sizeof *d);
    json_chunk_push(d, len * 4 < JSON_CHUNK_MIN ? JSON_CHUNK_MIN : len * 4, 0);
    return d;
}

static json_doc *json_doc_of(json_value *root) { return (json_doc *)((char *)root - offsetof(json_doc, root)); }

void json_free(json_value *v)
{
    if (!v)
        return;
    json_doc *d = json_doc_of(v);
    for (json_chunk *c = d->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(d);
}

static void json_skip_ws(jparser *p) { p->pos = json_scan_ws(p->s, p->len, p->pos); }

/* Describes the byte at pos for error messages. */
static void json_fail_unexpected(jparser *p, const char *what)
{
    if (p->pos >= p->len) {
        json_fail(p, p->pos, "unexpected end of input, expected %s", what);
        return;
    }
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c >= 0x20 && c < 0x7f)
        json_fail(p, p->pos, "unexpected '%c', expected %s", c, what);
    else
        json_fail(p, p->pos, "unexpected byte 0x%02x, expected %s", c, what);
}

static json_value *json_parse_literal(jparser *p, const char *word, json_type t)
{
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0) {
        json_fail(p, p->pos, "invalid literal");
        return NULL;
    }
    p->pos += n;
    return json_node(p, t);
}

static int json_is_digit(char c) { return c >= '0' && c <= '9'; }

/* Validates the number grammar, then converts. Plain integers of up to 15
 * digits are exact in a double, so they skip strtod (the common case).
 * strtod follows LC_NUMERIC: the gateway never calls setlocale. */
static json_value *json_parse_number(jparser *p)
{
    size_t start = p->pos, i = p->pos;
    const char *s = p->s;
    int simple = 1;
    if (i < p->len && s[i] == '-')
        i++;
    if (i >= p->len || !json_is_digit(s[i])) {
        json_fail(p, i, "invalid number");
        return NULL;
    }
    if (s[i] == '0') {
        i++;
        if (i < p->len && json_is_digit(s[i])) {
            json_fail(p, start, "leading zero in number");
            return NULL;
        }
    } else {
        while (i < p->len && json_is_digit(s[i]))
            i++;
    }
    if (i < p->len && s[i] == '.') {
        simple = 0;
        i++;
        if (i >= p->len || !json_is_digit(s[i])) {
            json_fail(p, i, "expected digit after decimal point");
            return NULL;
        }
        while (i < p->len && json_is_digit(s[i]))
            i++;
    }
    if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
        simple = 0;
        i++;
        if (i < p->len && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= p->len || !json_is_digit(s[i])) {
            json_fail(p, i, "expected digit in exponent");
            return NULL;
        }
        while (i < p->len && json_is_digit(s[i]))
            i++;
    }
    size_t n = i - start;
    double x;
    int neg = s[start] == '-';
    if (simple && n - (size_t)neg <= 15) {
        long long acc = 0;
        for (size_t k = start + (size_t)neg; k < i; k++)
            acc = acc * 10 + (s[k] - '0');
        x = neg ? -(double)acc : (double)acc;
        if (neg && acc == 0)
            x = -0.0;
    } else {
        /* copy: the input need not be NUL-terminated after the number */
        char small[64];
        char *tmp = n < sizeof small ? small : json_xmalloc(n + 1);
        memcpy(tmp, s + start, n);
        tmp[n] = '\0';
        x = strtod(tmp, NULL);
        if (tmp != small)
            free(tmp);
        if (isinf(x)) {
            json_fail(p, start, "number out of range");
            return NULL;
        }
    }
    p->pos = i;
    json_value *v = json_node(p, JSON_NUMBER);
    v->num = x;
    return v;
}

static int json_hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int d = sbuf_hex_digit((unsigned char)s[i]);
        if (d < 0)
            return -1;
        v = v << 4 | (unsigned)d;
    }
    *out = v;
    return 0;
}

/* Length of the well-formed UTF-8 sequence at s (before end), 0 if invalid:
 * rejects overlongs, encoded surrogates and code points above U+10FFFF. */
static size_t json_utf8_len(const unsigned char *s, const unsigned char *end)
{
    unsigned char c = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if ((size_t)(end - s) < n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < n; k++)
        if (s[k] < 0x80 || s[k] > 0xBF)
            return 0;
    return n;
}

/* Decodes one \u escape at s (pointing at the 'u'), joining a surrogate
 * pair. Lone surrogates are grammatical JSON but not UTF-8: they become
 * U+FFFD. Returns bytes consumed after the backslash, 0 on bad hex. */
static size_t json_unicode_escape(const char *s, const char *end, unsigned *cp)
{
    unsigned hi, lo;
    if (end - s < 5 || json_hex4(s + 1, &hi) != 0)
        return 0;
    if (hi >= 0xDC00 && hi <= 0xDFFF) {
        *cp = 0xFFFD;
        return 5;
    }
    if (hi < 0xD800 || hi > 0xDBFF) {
        *cp = hi;
        return 5;
    }
    if (end - s >= 11 && s[5] == '\\' && s[6] == 'u' && json_hex4(s + 7, &lo) == 0 &&
        lo >= 0xDC00 && lo <= 0xDFFF) {
        *cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
        return 11;
    }
    *cp = 0xFFFD;
    return 5;
}

/* Bytes a string may hold as they are: printable ASCII but the quote and
 * the backslash (the parser's "plain" bytes). */
static const unsigned char json_plain_byte[256] = {
#define JSON_P8 1, 1, 1, 1, 1, 1, 1, 1
#define JSON_P32 JSON_P8, JSON_P8, JSON_P8, JSON_P8
    [0x20] = 1, 1, 0, 1, 1, 1, 1, 1, JSON_P8,        /* 0x20-0x2f; 0x22 '"' */
    JSON_P32,                                         /* 0x30-0x4f */
    JSON_P8, 1, 1, 1, 1, 0, 1, 1, 1,                  /* 0x50-0x5f; 0x5c '\\' */
    JSON_P32,                                         /* 0x60-0x7f */
#undef JSON_P32
#undef JSON_P8
};

/* The first byte at or after i (before len) that is not a json_plain_byte,
 * or len: sixteen bytes at a time where SSE2 is there (a control byte or a
 * non-ASCII one is below 0x20 as a signed byte), then byte by byte. */
static size_t json_plain_run(const char *s, size_t len, size_t i)
{
#ifdef __SSE2__
    const __m128i ctl = _mm_set1_epi8(0x20), quote = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\');
    while (i + 16 <= len) { /* i may be past len (a backslash ended the input) */
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        __m128i sp = _mm_or_si128(_mm_cmplt_epi8(v, ctl), _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bs)));
        unsigned m = (unsigned)_mm_movemask_epi8(sp);
        if (m)
            return i + (size_t)__builtin_ctz(m);
        i += 16;
    }
#endif
    while (i < len && json_plain_byte[(unsigned char)s[i]])
        i++;
    return i;
}

/* Parses the string at pos (on the opening quote) into a fresh NUL-terminated
 * buffer. A first scan finds the closing quote so the buffer is allocated
 * once: decoding never makes a string longer. The scan skips runs of plain
 * bytes with json_plain_run (most strings of a request or an answer are
 * nothing else). */
static char *json_parse_string(jparser *p, size_t *out_len)
{
    size_t open = p->pos, i = p->pos + 1, len = p->len;
    const unsigned char *u = (const unsigned char *)p->s;
    const char *s = p->s;
    int plain = 1; /* printable ASCII only, no escapes: the common case, copied as is */
    for (;;) {
        i = json_plain_run(s, len, i);
        if (i >= len || u[i] == '"')
            break;
        plain = 0;
        i += u[i] == '\\' ? 2 : 1;
    }
    if (i >= len) {
        json_fail(p, open, "unterminated string");
        return NULL;
    }
    const char *end = s + i, *c = s + open + 1;
    if (plain && p->skip) { /* valid as it is and dropped: nothing to copy */
        *out_len = (size_t)(end - c);
        p->pos = i + 1;
        return (char *)c; /* not NUL-terminated; the caller only checks it for NULL */
    }
    char *buf = json_alloc(p->doc, (size_t)(end - c) + 1), *o = buf;
    if (plain) {
        memcpy(buf, c, (size_t)(end - c));
        buf[end - c] = '\0';
        *out_len = (size_t)(end - c);
        p->pos = i + 1;
        return buf;
    }
    while (c < end) {
        const char *run = c;
        while (c < end && (unsigned char)*c >= 0x20 && (unsigned char)*c < 0x80 && *c != '\\')
            c++;
        memcpy(o, run, (size_t)(c - run));
        o += c - run;
        if (c >= end)
            break;
        unsigned char b = (unsigned char)*c;
        if (b < 0x20) {
            json_fail(p, (size_t)(c - s), "control character in string");
            goto fail;
        }
        if (b >= 0x80) {
            size_t n = json_utf8_len((const unsigned char *)c, (const unsigned char *)end);
            if (!n) {
                json_fail(p, (size_t)(c - s), "invalid UTF-8 in string");
                goto fail;
            }
            memcpy(o, c, n);
            o += n;
            c += n;
            continue;
        }
        /* backslash: the scan guaranteed a following byte before end */
        char e = c[1], ch;
        switch (e) {
        case '"': ch = '"'; break;
        case '\\': ch = '\\'; break;
        case '/': ch = '/'; break;
        case 'b': ch = '\b'; break;
        case 'f': ch = '\f'; break;
        case 'n': ch = '\n'; break;
        case 'r': ch = '\r'; break;
        case 't': ch = '\t'; break;
        case 'u': {
            unsigned cp;
            size_t used = json_unicode_escape(c + 1, end, &cp);
            if (!used) {
                json_fail(p, (size_t)(c - s), "invalid \\u escape");
                goto fail;
            }
            o += sbuf_utf8_encode(o, cp);
            c += 1 + used;
            continue;
        }
        default:
            json_fail(p, (size_t)(c - s), "invalid escape");
            goto fail;
        }
        *o++ = ch;
        c += 2;
    }
    *o = '\0';
    *out_len = (size_t)(o - buf);
    p->pos = i + 1;
    return buf;
fail:
    return NULL; /* buf goes with the document */
}

static int json_enter(jparser *p)
{
    if (++p->depth > JSON_MAX_DEPTH) {
        json_fail(p, p->pos, "nesting deeper than %d levels", JSON_MAX_DEPTH);
        return -1;
    }
    return 0;
}

static json_value *json_parse_array(jparser *p)
{
    if (json_enter(p) != 0)
        return NULL;
    json_value *arr = json_node(p, JSON_ARRAY), **tail = &arr->child;
    p->pos++; /* '[' */
    json_skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == ']') {
        p->pos++;
        p->depth--;
        return arr;
    }
    int drop = json_drops_children(p);
    p->skip += drop;
    for (;;) {
        json_mark m = json_mark_take(p->doc);
        json_value *v = json_parse_value(p);
        if (!v)
            goto fail;
        if (drop) {
            json_mark_restore(p->doc, m);
        } else {
            *tail = v;
            tail = &v->next;
        }
        arr->count++;
        json_skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            json_skip_ws(p);
            if (p->pos < p->len && p->s[p->pos] == ']') {
                json_fail(p, p->pos, "trailing comma in array");
                goto fail;
            }
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == ']') {
            p->pos++;
            p->depth--;
            p->skip -= drop;
            return arr;
        }
        json_fail_unexpected(p, "',' or ']'");
        goto fail;
    }
fail:
    return NULL; /* the caller frees the document */
}

/* json_parse_members: key is one of the top-level members to build. */
static int json_member_wanted(const jparser *p, const char *key)
{
    for (size_t i = 0; i < p->n_only; i++)
        if (key[0] == p->only[i][0] && strcmp(key, p->only[i]) == 0)
            return 1;
    return 0;
}

static json_value *json_parse_object(jparser *p)
{
    if (json_enter(p) != 0)
        return NULL;
    json_value *obj = json_node(p, JSON_OBJECT), **tail = &obj->child;
    p->pos++; /* '{' */
    json_skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == '}') {
        p->pos++;
        p->depth--;
        return obj;
    }
    int drop = json_drops_children(p);
    p->skip += drop;
    for (;;) {
        json_mark m = json_mark_take(p->doc);
        if (p->pos >= p->len || p->s[p->pos] != '"') {
            if (p->pos < p->len && p->s[p->pos] == '}' && obj->count)
                json_fail(p, p->pos, "trailing comma in object");
            else
                json_fail_unexpected(p, "member name string");
            goto fail;
        }
        size_t klen;
        char *key = json_parse_string(p, &klen);
        if (!key)
            goto fail;
        json_skip_ws(p);
        if (p->pos >= p->len || p->s[p->pos] != ':') {
            json_fail_unexpected(p, "':'");
            goto fail;
        }
        p->pos++;
        json_skip_ws(p);
        size_t vstart = p->pos;
        int unwanted = p->only && p->depth == 1 && !json_member_wanted(p, key);
        p->skip += unwanted;
        json_value *v = json_parse_value(p);
        p->skip -= unwanted;
        if (!v)
            goto fail;
        if (p->span_key && p->depth == 1 && strcmp(key, p->span_key) == 0) {
            p->span_start = vstart; /* the last one wins, as in json_get */
            p->span_end = p->pos;
        }
        if (drop || unwanted) {
            json_mark_restore(p->doc, m);
        } else {
            v->key = key;
            *tail = v;
            tail = &v->next;
        }
        obj->count++;
        json_skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            json_skip_ws(p);
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == '}') {
            p->pos++;
            p->depth--;
            p->skip -= drop;
            return obj;
        }
        json_fail_unexpected(p, "',' or '}'");
        goto fail;
    }
fail:
    return NULL; /* the caller frees the document */
}

static json_value *json_parse_value(jparser *p)
{
    if (p->pos >= p->len) {
        json_fail_unexpected(p, "a value");
        return NULL;
    }
    char c = p->s[p->pos];
    switch (c) {
    case '{': return json_parse_object(p);
    case '[': return json_parse_array(p);
    case '"': {
        size_t n;
        char *s = json_parse_string(p, &n);
        if (!s)
            return NULL;
        json_value *v = json_node(p, JSON_STRING);
        v->str = s;
        v->str_len = n;
        return v;
    }
    case 't': return json_parse_literal(p, "true", JSON_TRUE);
    case 'f': return json_parse_literal(p, "false", JSON_FALSE);
    case 'n': return json_parse_literal(p, "null", JSON_NULL);
    default:
        if (c == '-' || json_is_digit(c))
            return json_parse_number(p);
        json_fail_unexpected(p, "a value");
        return NULL;
    }
}

static json_value *json_parse_with(jparser *p);

json_value *json_parse(const char *buf, size_t len, char *err, size_t errlen)
{
    jparser p = {.s = buf ? buf : "", .len = buf ? len : 0, .err = err, .errlen = errlen};
    return json_parse_with(&p);
}

json_value *json_parse_shallow(const char *buf, size_t len, int keep_depth, char *err, size_t errlen)
{
    jparser p = {.s = buf ? buf : "", .len = buf ? len : 0, .err = err, .errlen = errlen,
                 .keep_depth = keep_depth < 1 ? 1 : keep_depth};
    return json_parse_with(&p);
}

json_value *json_parse_members(const char *buf, size_t len, int keep_depth, const char *const *keys, size_t nkeys)
{
    jparser p = {.s = buf ? buf : "", .len = buf ? len : 0, .keep_depth = keep_depth < 1 ? 1 : keep_depth,
                 .only = keys, .n_only = nkeys};
    return json_parse_with(&p);
}

int json_member_span(const char *buf, size_t len, const char *key, size_t *start, size_t *end)
{
    jparser p = {.s = buf ? buf : "", .len = buf ? len : 0, .keep_depth = 1, .span_key = key};
    json_value *v = json_parse_with(&p);
    int found = v && p.span_end > p.span_start;
    json_free(v);
    if (!found)
        return -1;
    *start = p.span_start;
    *end = p.span_end;
    return 0;
}

static json_value *json_parse_with(jparser *pp)
{
    jparser p = *pp;
    if (p.err && p.errlen)
        p.err[0] = '\0';
    /* a few members (a usage object and an id: ~600 bytes of nodes and
     * keys) fit the first chunk whatever the size of the input */
    p.doc = json_doc_new(p.only ? 256 : p.len);
    json_skip_ws(&p);
    json_value *v = json_parse_value(&p);
    if (v) {
        json_skip_ws(&p);
        if (p.pos != p.len) {
            json_fail(&p, p.pos, "trailing data after the document");
            v = NULL;
        }
    }
    if (!v) {
        json_free(&p.doc->root);
        return NULL;
    }
    p.doc->root = *v; /* the root moves into the document header; its arena copy is dropped */
    pp->span_start = p.span_start;
    pp->span_end = p.span_end;
    return &p.doc->root;
}

/* ---------- accessors ---------- */

/* With duplicate names the last one wins, as in JavaScript and Python, so
 * the gateway reads what most upstream parsers would read. */
json_value *json_get(const json_value *obj, const char *key)
{
    if (!obj || obj->type != JSON_OBJECT || !key)
        return NULL;
    json_value *found = NULL;
    for (json_value *c = obj->child; c; c = c->next)
        if (c->key && strcmp(c->key, key) == 0)
            found = c;
    return found;
}

json_value *json_at(const json_value *arr, size_t i)
{
    if (!arr || (arr->type != JSON_ARRAY && arr->type != JSON_OBJECT) || i >= arr->count)
        return NULL;
    json_value *c = arr->child;
    while (c && i--)
        c = c->next;
    return c;
}

const char *json_get_str(const json_value *obj, const char *key)
{
    json_value *v = json_get(obj, key);
    return v && v->type == JSON_STRING ? v->str : NULL;
}

int json_get_bool(const json_value *obj, const char *key, int dflt)
{
    json_value *v = json_get(obj, key);
    if (v && v->type == JSON_TRUE)
        return 1;
    if (v && v->type == JSON_FALSE)
        return 0;
    return dflt;
}

double json_get_num(const json_value *obj, const char *key, double dflt)
{
    json_value *v = json_get(obj, key);
    return v && v->type == JSON_NUMBER ? v->num : dflt;
}

int json_num_to_int64(double d, int64_t lo, int64_t hi, int64_t *out)
{
    /* compared as doubles before the cast: -2^63 and 2^63 are exact
     * doubles, and NaN fails both comparisons */
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
        return -1;
    int64_t v = (int64_t)d;
    if (v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int json_get_int64(const json_value *obj, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    json_value *v = json_get(obj, key);
    return v && v->type == JSON_NUMBER ? json_num_to_int64(v->num, lo, hi, out) : -1;
}

static char *json_strdup(json_doc *d, const char *s, size_t n)
{
    char *c = json_alloc(d, n + 1);
    memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

/* Turns v into the string val (or null when val is NULL); its members, if
 * any, are dropped. val is copied first: it may point into v itself. */
static void json_assign_str(json_doc *d, json_value *v, const char *val)
{
    size_t n = val ? strlen(val) : 0;
    char *copy = val ? json_strdup(d, val, n) : NULL;
    v->child = NULL;
    v->count = 0;
    v->type = val ? JSON_STRING : JSON_NULL;
    v->str = copy;
    v->str_len = n;
    v->num = 0;
}

/* Earlier duplicates of key are removed so the output is unambiguous. */
int json_set_str(json_value *obj, const char *key, const char *val)
{
    if (!obj || obj->type != JSON_OBJECT || !key)
        return -1;
    json_doc *d = json_doc_of(obj);
    json_value *target = json_get(obj, key);
    json_value **link = &obj->child, *last = NULL;
    while (*link) {
        json_value *c = *link;
        if (c != target && c->key && strcmp(c->key, key) == 0) {
            *link = c->next;
            obj->count--;
            continue;
        }
        last = c;
        link = &c->next;
    }
    if (!target) {
        target = json_new(d, JSON_NULL);
        target->key = json_strdup(d, key, strlen(key));
        if (last)
            last->next = target;
        else
            obj->child = target;
        obj->count++;
    }
    json_assign_str(d, target, val);
    return 0;
}

/* ---------- serializer ---------- */

/* Integral values print as integers; others use the shortest of %.15g..%.17g
 * that reads back as the same double (so 0.1 stays "0.1"). */
static void json_write_num(sbuf *out, double x)
{
    if (!isfinite(x)) {
        sbuf_puts(out, "null"); /* JSON has no inf/nan; cannot come from the parser */
        return;
    }
    if (x == floor(x) && fabs(x) < 9007199254740992.0) {
        if (x == 0 && signbit(x))
            sbuf_puts(out, "-0");
        else
            sbuf_printf(out, "%lld", (long long)x);
        return;
    }
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (prec == 17 || strtod(buf, NULL) == x)
            break;
    }
    sbuf_puts(out, buf);
}

void json_write(sbuf *out, const json_value *v)
{
    if (!v) {
        sbuf_puts(out, "null");
        return;
    }
    switch (v->type) {
    case JSON_NULL: sbuf_puts(out, "null"); break;
    case JSON_FALSE: sbuf_puts(out, "false"); break;
    case JSON_TRUE: sbuf_puts(out, "true"); break;
    case JSON_NUMBER: json_write_num(out, v->num); break;
    case JSON_STRING: sbuf_json_str(out, v->str ? v->str : "", v->str ? v->str_len : 0); break;
    case JSON_ARRAY:
        sbuf_append(out, "[", 1);
        for (const json_value *c = v->child; c; c = c->next) {
            if (c != v->child)
                sbuf_append(out, ",", 1);
            json_write(out, c);
        }
        sbuf_append(out, "]", 1);
        break;
    case JSON_OBJECT:
        sbuf_append(out, "{", 1);
        for (const json_value *c = v->child; c; c = c->next) {
            if (c != v->child)
                sbuf_append(out, ",", 1);
            const char *k = c->key ? c->key : "";
            sbuf_json_str(out, k, strlen(k));
            sbuf_append(out, ":", 1);
            json_write(out, c);
        }
        sbuf_append(out, "}", 1);
        break;
    }
}

/* ---------- scanning without a tree ---------- */

/* The same grammar as the parser above, checked in place: nothing is built,
 * decoded or allocated. Each function returns the offset just past what it
 * read, or 0 where json_parse would fail. */

static size_t json_scan_in(const char *s, size_t len, size_t i, int depth);

size_t json_scan_ws_run(const char *s, size_t len, size_t i)
{
    while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

static size_t json_scan_string(const char *s, size_t len, size_t i)
{
    i++; /* '"' */
    for (;;) {
        i = json_plain_run(s, len, i);
        if (i >= len)
            return 0;
        unsigned char b = (unsigned char)s[i];
        if (b == '"')
            return i + 1;
        if (b < 0x20)
            return 0;
        if (b >= 0x80) {
            size_t n = json_utf8_len((const unsigned char *)s + i, (const unsigned char *)s + len);
            if (!n)
                return 0;
            i += n;
            continue;
        }
        /* backslash */
        if (i + 1 >= len)
            return 0;
        switch (s[i + 1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            i += 2;
            break;
        case 'u': {
            unsigned cp;
            if (len - i < 6 || json_hex4(s + i + 2, &cp) != 0)
                return 0;
            i += 6; /* a surrogate pair is two of these; a lone one is still valid */
            break;
        }
        default:
            return 0;
        }
    }
}

static size_t json_scan_number(const char *s, size_t len, size_t i)
{
    size_t start = i;
    int simple = 1;
    if (i < len && s[i] == '-')
        i++;
    if (i >= len || !json_is_digit(s[i]))
        return 0;
    if (s[i] == '0') {
        if (++i < len && json_is_digit(s[i]))
            return 0;
    } else {
        while (i < len && json_is_digit(s[i]))
            i++;
    }
    if (i < len && s[i] == '.') {
        simple = 0;
        if (++i >= len || !json_is_digit(s[i]))
            return 0;
        while (i < len && json_is_digit(s[i]))
            i++;
    }
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        simple = 0;
        if (++i < len && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= len || !json_is_digit(s[i]))
            return 0;
        while (i < len && json_is_digit(s[i]))
            i++;
    }
    size_t n = i - start;
    if (simple && n - (s[start] == '-') <= 15)
        return i;
    char small[64]; /* out of range (inf) fails, as in json_parse_number */
    char *tmp = n < sizeof small ? small : json_xmalloc(n + 1);
    memcpy(tmp, s + start, n);
    tmp[n] = '\0';
    int inf = isinf(strtod(tmp, NULL));
    if (tmp != small)
        free(tmp);
    return inf ? 0 : i;
}

/* A container at s[i] ('[' or '{'), depth levels already open around it. */
static size_t json_scan_container(const char *s, size_t len, size_t i, int depth)
{
    char close = s[i] == '[' ? ']' : '}';
    if (++depth > JSON_MAX_DEPTH)
        return 0;
    i = json_scan_ws(s, len, i + 1);
    if (i < len && s[i] == close)
        return i + 1;
    for (;;) {
        if (close == '}') {
            if (i >= len || s[i] != '"' || !(i = json_scan_string(s, len, i)))
                return 0;
            i = json_scan_ws(s, len, i);
            if (i >= len || s[i] != ':')
                return 0;
            i = json_scan_ws(s, len, i + 1);
        }
        if (!(i = json_scan_in(s, len, i, depth)))
            return 0;
        i = json_scan_ws(s, len, i);
        if (i < len && s[i] == ',') {
            i = json_scan_ws(s, len, i + 1);
            continue;
        }
        return i < len && s[i] == close ? i + 1 : 0;
    }
}

static size_t json_scan_in(const char *s, size_t len, size_t i, int depth)
{
    if (i >= len)
        return 0;
    switch (s[i]) {
    case '{':
    case '[': return json_scan_container(s, len, i, depth);
    case '"': return json_scan_string(s, len, i);
    case 't': return len - i >= 4 && memcmp(s + i, "true", 4) == 0 ? i + 4 : 0;
    case 'f': return len - i >= 5 && memcmp(s + i, "false", 5) == 0 ? i + 5 : 0;
    case 'n': return len - i >= 4 && memcmp(s + i, "null", 4) == 0 ? i + 4 : 0;
    default: return json_scan_number(s, len, i);
    }
}

size_t json_scan_value(const char *s, size_t len, size_t i, int depth)
{
    if (s && i < len && s[i] == '"') /* names and most values */
        return json_scan_string(s, len, i);
    return s ? json_scan_in(s, len, i, depth) : 0;
}

void json_error_members(sbuf *out, const char *message, const char *type, const char *code)
{
    sbuf_puts(out, "\"message\":");
    sbuf_json_str(out, message, strlen(message));
    sbuf_puts(out, ",\"type\":");
    sbuf_json_str(out, type, strlen(type));
    sbuf_puts(out, ",\"code\":");
    if (code)
        sbuf_json_str(out, code, strlen(code));
    else
        sbuf_puts(out, "null");
}
