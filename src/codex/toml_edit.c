/* toml_edit.c: the format-preserving TOML editor (see toml_edit.h). The
 * document is kept as its bytes plus an index of statements (each key and
 * header with its byte span and full key path). An edit splices bytes into
 * a copy of the buffer and re-indexes the statements around it; what the
 * edit does not own is copied byte for byte, like git's config writer.
 * Whitespace, comments and the order of things are the user's.
 *
 * Cost, for a config.toml of 400,000 tables (which one attach edits nine
 * times): the index costs no allocation per statement (every decoded name
 * segment lives in one arena of the document, an entry's path is a run of
 * offsets into it, and a key repeats its table's offsets instead of
 * copying the names), and an edit parses only the statements around it
 * (te_index_window) instead of the whole document again. Allocations and
 * re-indexing were most of attach's time, and under AddressSanitizer, where
 * every malloc is dear, ten times as much. */
#include "codex/toml_edit.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TE_DEPTH_MAX 64 /* nesting of arrays and inline tables */
/* Parts of one dotted key or table name: every key entry holds its table's
 * path plus its own, so the parts bound the work per statement (a Codex
 * config's deepest names have four). */
#define TE_SEGS_MAX 128

typedef enum { TE_KV, TE_HEADER, TE_AHEADER } te_kind;

typedef struct te_entry {
    te_kind kind;
    int in_array;        /* under an [[array of tables]]: never edited */
    size_t start, end;   /* the whole statement: its line start .. past its line ending (or EOF) */
    size_t vstart, vend; /* TE_KV: the value's bytes */
    size_t seg, n;       /* full key path (the table's path + the key's segments): d->seg[seg .. seg + n) */
    size_t nrel;         /* TE_KV: how many segments the key itself has */
} te_entry;

/* The [[arrays of tables]] seen so far while indexing, each distinct path
 * once, hashed, so "is this header under an array?" costs a lookup per
 * prefix of its name instead of a scan of every earlier statement (which
 * made 40,000 tables take seconds). Slots hold entry index + 1. */
typedef struct te_aset {
    size_t *slot;
    uint64_t *hash;
    size_t cap, n;
} te_aset;

struct toml_doc {
    sbuf buf;
    size_t body; /* first byte after a UTF-8 BOM */
    te_entry *e;
    size_t ne, cap;
    /* The name arena: decoded segments, each NUL-terminated, one after
     * another in names; seg[] holds offsets into names (not pointers:
     * names moves as it grows), and each entry a run of seg[]. */
    sbuf names;
    size_t *seg;
    size_t nseg, segcap;
    const char *nl;    /* line ending of the file: "\r\n" if its first one is, else "\n" */
    te_aset arrays;    /* while indexing (the document, or an edit's window) */
    size_t work;       /* path comparisons of the last indexing (toml_index_work) */
    size_t statements; /* statements the last indexing parsed (toml_index_statements) */
};

typedef struct te_parser {
    const char *p;
    size_t len, pos;
    char *err;
    size_t errlen;
    int failed;
} te_parser;

/* ---------- errors and small helpers ---------- */

static void te_fail(te_parser *P, const char *why)
{
    if (P->failed)
        return;
    P->failed = 1;
    int line = 1;
    for (size_t i = 0; i < P->pos && i < P->len; i++)
        line += P->p[i] == '\n';
    if (P->err && P->errlen)
        snprintf(P->err, P->errlen, "line %d: %s", line, why);
}

static void te_errf(char *err, size_t errlen, const char *msg, const char *const *path, size_t n)
{
    sbuf b = SBUF_INIT;
    for (size_t i = 0; i < n; i++) {
        sbuf_puts(&b, i ? "." : "");
        sbuf_puts(&b, path[i]);
    }
    if (err && errlen)
        snprintf(err, errlen, msg, b.p ? b.p : "");
    sbuf_free(&b);
}

static int te_peek(const te_parser *P, size_t off) { return P->pos + off < P->len ? (unsigned char)P->p[P->pos + off] : -1; }

static void te_ws(te_parser *P)
{
    while (te_peek(P, 0) == ' ' || te_peek(P, 0) == '\t')
        P->pos++;
}

/* At a line ending or EOF: consumes it and returns 1; else 0. */
static int te_eol(te_parser *P)
{
    int c = te_peek(P, 0);
    if (c == -1)
        return 1;
    if (c == '\n') {
        P->pos++;
        return 1;
    }
    if (c == '\r' && te_peek(P, 1) == '\n') {
        P->pos += 2;
        return 1;
    }
    return 0;
}

/* A comment runs to the line ending; control characters other than tab are
 * not allowed in it. */
static void te_comment(te_parser *P)
{
    if (te_peek(P, 0) != '#')
        return;
    for (int c; (c = te_peek(P, 0)) != -1 && c != '\n'; P->pos++) {
        if (c == '\r' && te_peek(P, 1) == '\n')
            return;
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            te_fail(P, "control character in a comment");
            return;
        }
    }
}

/* Whitespace, line endings and comments (inside arrays and inline tables). */
static void te_ws_nl(te_parser *P)
{
    for (;;) {
        te_ws(P);
        te_comment(P);
        if (P->failed || te_peek(P, 0) == -1 || !te_eol(P))
            return;
    }
}

/* One escape after a backslash at P->pos (which points past the '\\');
 * decoded into out when out is given. */
static void te_escape(te_parser *P, sbuf *out)
{
    static const char from[] = "btnfr\"\\", to[] = "\b\t\n\f\r\"\\";
    int c = te_peek(P, 0);
    const char *hit = c > 0 ? strchr(from, c) : NULL;
    if (hit) {
        P->pos++;
        if (out)
            sbuf_append(out, &to[hit - from], 1);
        return;
    }
    if (c != 'u' && c != 'U') {
        te_fail(P, "invalid escape in a string");
        return;
    }
    int digits = c == 'u' ? 4 : 8;
    uint32_t cp = 0;
    P->pos++;
    for (int i = 0; i < digits; i++, P->pos++) {
        int h = sbuf_hex_digit(te_peek(P, 0));
        if (h < 0) {
            te_fail(P, "invalid \\u escape in a string");
            return;
        }
        cp = cp * 16 + (uint32_t)h;
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        te_fail(P, "\\u escape is not a Unicode scalar value");
        return;
    }
    char u[4];
    if (out)
        sbuf_append(out, u, sbuf_utf8_encode(u, cp));
}

/* In a multi-line basic string, a backslash followed by optional spaces
 * and a line ending trims up to the next non-blank character. 1 if so. */
static int te_string_line_escape(te_parser *P)
{
    size_t at = P->pos;
    te_ws(P);
    if (te_peek(P, 0) == -1 || !te_eol(P)) {
        P->pos = at;
        return 0;
    }
    for (int c; (c = te_peek(P, 0)) == ' ' || c == '\t' || c == '\n' || (c == '\r' && te_peek(P, 1) == '\n');)
        P->pos += c == '\r' ? 2 : 1;
    return 1;
}

/* A string of any of the four kinds at P->pos; decoded into out if given. */
static void te_string(te_parser *P, sbuf *out)
{
    int q = te_peek(P, 0);
    int multi = te_peek(P, 1) == q && te_peek(P, 2) == q;
    P->pos += multi ? 3 : 1;
    for (;;) {
        int c = te_peek(P, 0);
        if (c == -1) {
            te_fail(P, "unterminated string");
            return;
        }
        if (c == q && (!multi || (te_peek(P, 1) == q && te_peek(P, 2) == q))) {
            P->pos += multi ? 3 : 1;
            /* up to two more quotes belong to the content: """a""""" */
            for (int extra = 0; multi && extra < 2 && te_peek(P, 0) == q; extra++, P->pos++)
                if (out)
                    sbuf_append(out, &P->p[P->pos], 1);
            return;
        }
        if (c == '\\' && q == '"') {
            P->pos++;
            if (multi && te_string_line_escape(P))
                continue;
            te_escape(P, out);
            if (P->failed)
                return;
            continue;
        }
        if (c == '\n' || c == '\r') {
            if (!multi) {
                te_fail(P, "line ending inside a single-line string");
                return;
            }
            if (c == '\r' && te_peek(P, 1) != '\n') {
                te_fail(P, "bare carriage return inside a string");
                return;
            }
        } else if ((c < 0x20 && c != '\t') || c == 0x7f) {
            te_fail(P, "control character inside a string");
            return;
        }
        if (out)
            sbuf_append(out, &P->p[P->pos], 1);
        P->pos++;
    }
}

static int te_bare_char(int c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* One key segment (bare, "basic" or 'literal'), decoded into out when out
 * is given. A bare segment is its own bytes: appended as one span. */
static void te_key_seg(te_parser *P, sbuf *out)
{
    int c = te_peek(P, 0);
    if (c == '"' || c == '\'') {
        if (te_peek(P, 1) == c && te_peek(P, 2) == c) {
            te_fail(P, "a key cannot be a multi-line string");
            return;
        }
        te_string(P, out);
        return;
    }
    if (!te_bare_char(c)) {
        te_fail(P, "expected a key");
        return;
    }
    size_t from = P->pos;
    while (te_bare_char(te_peek(P, 0)))
        P->pos++;
    if (out)
        sbuf_append(out, P->p + from, P->pos - from);
}

/* Appends one offset into d->names to d->seg. */
static void te_seg_push(toml_doc *d, size_t off)
{
    if (d->nseg == d->segcap) {
        size_t cap = d->segcap ? d->segcap * 2 : 64;
        size_t *v = realloc(d->seg, cap * sizeof *v);
        if (!v)
            abort();
        d->seg = v;
        d->segcap = cap;
    }
    d->seg[d->nseg++] = off;
}

/* Segment i of the arena, as a C string. */
static const char *te_seg(const toml_doc *d, size_t i) { return d->names.p + d->seg[i]; }

/* A dotted key: seg (ws '.' ws seg)*. With d, each segment is decoded into
 * the arena and its offset pushed to d->seg; without (a key inside an
 * inline table, which is never indexed), it is only checked. */
static void te_key(te_parser *P, toml_doc *d)
{
    for (size_t parts = 0;; parts++) {
        if (parts == TE_SEGS_MAX) {
            te_fail(P, "a key or table name of more than 128 parts");
            return;
        }
        if (d) {
            size_t off = d->names.len;
            te_key_seg(P, &d->names);
            sbuf_append(&d->names, "", 1); /* the segment's NUL */
            te_seg_push(d, off);
        } else {
            te_key_seg(P, NULL);
        }
        if (P->failed)
            return;
        te_ws(P);
        if (te_peek(P, 0) != '.')
            return;
        P->pos++;
        te_ws(P);
    }
}

static void te_value(te_parser *P, int depth);

static void te_array(te_parser *P, int depth)
{
    P->pos++; /* [ */
    for (;;) {
        te_ws_nl(P);
        if (P->failed)
            return;
        if (te_peek(P, 0) == ']') {
            P->pos++;
            return;
        }
        te_value(P, depth + 1);
        te_ws_nl(P);
        if (P->failed)
            return;
        if (te_peek(P, 0) == ',') {
            P->pos++;
        } else if (te_peek(P, 0) != ']') {
            te_fail(P, "expected ',' or ']' in an array");
            return;
        }
    }
}

static void te_inline_table(te_parser *P, int depth)
{
    P->pos++; /* { */
    te_ws_nl(P);
    if (te_peek(P, 0) == '}') {
        P->pos++;
        return;
    }
    for (;;) {
        te_ws_nl(P);
        te_key(P, NULL);
        te_ws(P);
        if (!P->failed && te_peek(P, 0) != '=')
            te_fail(P, "expected '=' after a key in an inline table");
        if (P->failed)
            return;
        P->pos++;
        te_ws(P);
        te_value(P, depth + 1);
        te_ws_nl(P);
        if (P->failed)
            return;
        if (te_peek(P, 0) == '}') {
            P->pos++;
            return;
        }
        if (te_peek(P, 0) != ',') {
            te_fail(P, "expected ',' or '}' in an inline table");
            return;
        }
        P->pos++;
    }
}

static int te_scalar_char(int c) { return te_bare_char(c) || c == '+' || c == '.' || c == ':'; }

/* A number, boolean or date-time (checked loosely: the words true, false,
 * inf and nan, or something that starts like a number or a date). */
static void te_scalar(te_parser *P)
{
    size_t start = P->pos;
    while (te_scalar_char(te_peek(P, 0)))
        P->pos++;
    /* "1979-05-27 07:32:00": a space between the date and the time */
    if (P->pos - start == 10 && P->p[start + 4] == '-' && te_peek(P, 0) == ' ' && te_peek(P, 1) >= '0' &&
        te_peek(P, 1) <= '9') {
        P->pos++;
        while (te_scalar_char(te_peek(P, 0)))
            P->pos++;
    }
    size_t n = P->pos - start;
    const char *s = P->p + start;
    int c = n ? (unsigned char)s[0] : 0;
    int word = (n == 4 && !memcmp(s, "true", 4)) || (n == 5 && !memcmp(s, "false", 5));
    int special = (n == 3 && (!memcmp(s, "inf", 3) || !memcmp(s, "nan", 3))) ||
                  (n == 4 && (c == '+' || c == '-') && (!memcmp(s + 1, "inf", 3) || !memcmp(s + 1, "nan", 3)));
    if (n == 0)
        te_fail(P, "expected a value");
    else if (!word && !special && !(c >= '0' && c <= '9') && c != '+' && c != '-')
        te_fail(P, "invalid value (a string needs quotes)");
}

static void te_value(te_parser *P, int depth)
{
    if (depth > TE_DEPTH_MAX) {
        te_fail(P, "values nested too deeply");
        return;
    }
    int c = te_peek(P, 0);
    if (c == '"' || c == '\'')
        te_string(P, NULL);
    else if (c == '[')
        te_array(P, depth);
    else if (c == '{')
        te_inline_table(P, depth);
    else
        te_scalar(P);
}

/* ---------- the statement index ---------- */

/* Empties the index, keeping its memory for the next indexing. */
static void te_entries_reset(toml_doc *d)
{
    d->ne = 0;
    d->nseg = 0;
    sbuf_reset(&d->names);
}

static void te_entries_free(toml_doc *d)
{
    free(d->e);
    free(d->seg);
    sbuf_free(&d->names);
    d->e = NULL;
    d->seg = NULL;
    d->ne = d->cap = d->nseg = d->segcap = 0;
}

/* 1 if the k segments of the arena from seg on are path[0..k). */
static int te_segs_are(const toml_doc *d, size_t seg, const char *const *path, size_t k)
{
    for (size_t i = 0; i < k; i++)
        if (strcmp(te_seg(d, seg + i), path[i]) != 0)
            return 0;
    return 1;
}

/* e's path is path[0..n). */
static int te_is(const toml_doc *d, const te_entry *e, const char *const *path, size_t n)
{
    return e->n == n && te_segs_are(d, e->seg, path, n);
}

/* e's path is a prefix of path[0..n) (or equal): path lies inside e. */
static int te_holds(const toml_doc *d, const te_entry *e, const char *const *path, size_t n)
{
    return e->n <= n && te_segs_are(d, e->seg, path, e->n);
}

/* path[0..n) is a prefix of e's path (or equal): e lies inside path. */
static int te_under(const toml_doc *d, const te_entry *e, const char *const *path, size_t n)
{
    return n <= e->n && te_segs_are(d, e->seg, path, n);
}

/* Two runs of n segments of the arena name the same path. */
static int te_runs_eq(const toml_doc *d, size_t a, size_t b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (d->seg[a + i] != d->seg[b + i] && strcmp(te_seg(d, a + i), te_seg(d, b + i)) != 0)
            return 0;
    return 1;
}

static te_entry *te_entry_add(toml_doc *d, te_kind kind, size_t start)
{
    if (d->ne == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 32;
        d->e = realloc(d->e, d->cap * sizeof *d->e);
        if (!d->e)
            abort();
    }
    te_entry *e = &d->e[d->ne++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->start = start;
    return e;
}

static uint64_t te_hash_seg(uint64_t h, const char *seg)
{
    for (const unsigned char *c = (const unsigned char *)seg; *c; c++)
        h = (h ^ *c) * 1099511628211u;
    return (h ^ 0xff) * 1099511628211u; /* the separator */
}

/* The array header whose path is the run of n segments from seg (hash h),
 * or -1. */
static long te_aset_find(toml_doc *d, uint64_t h, size_t seg, size_t n)
{
    const te_aset *a = &d->arrays;
    for (size_t i = a->cap ? h & (a->cap - 1) : 0; a->cap && a->slot[i]; i = (i + 1) & (a->cap - 1)) {
        const te_entry *e = &d->e[a->slot[i] - 1];
        if (a->hash[i] != h)
            continue;
        d->work++;
        if (e->n == n && te_runs_eq(d, e->seg, seg, n))
            return (long)(a->slot[i] - 1);
    }
    return -1;
}

static void te_aset_put(te_aset *a, uint64_t h, size_t entry)
{
    if (2 * (a->n + 1) > a->cap) {
        te_aset b = {0};
        b.cap = a->cap ? a->cap * 2 : 16;
        b.slot = calloc(b.cap, sizeof *b.slot);
        b.hash = calloc(b.cap, sizeof *b.hash);
        if (!b.slot || !b.hash)
            abort();
        for (size_t i = 0; i < a->cap; i++)
            if (a->slot[i])
                te_aset_put(&b, a->hash[i], a->slot[i] - 1);
        free(a->slot);
        free(a->hash);
        *a = b;
    }
    size_t i = h & (a->cap - 1);
    while (a->slot[i])
        i = (i + 1) & (a->cap - 1);
    a->slot[i] = entry + 1;
    a->hash[i] = h;
    a->n++;
}

static void te_aset_free(te_aset *a)
{
    free(a->slot);
    free(a->hash);
    memset(a, 0, sizeof *a);
}

/* 1 if the path of n segments from seg lies under one of the [[arrays of
 * tables]] indexed so far: a lookup of each of its prefixes. */
static int te_under_array(toml_doc *d, size_t seg, size_t n)
{
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < n; i++) {
        h = te_hash_seg(h, te_seg(d, seg + i));
        if (te_aset_find(d, h, seg, i + 1) >= 0)
            return 1;
    }
    return 0;
}

/* Records the [[array]] header at entry index i (each path once). */
static void te_array_seen(toml_doc *d, size_t i)
{
    const te_entry *e = &d->e[i];
    uint64_t h = 1469598103934665603u;
    for (size_t k = 0; k < e->n; k++)
        h = te_hash_seg(h, te_seg(d, e->seg + k));
    if (te_aset_find(d, h, e->seg, e->n) < 0)
        te_aset_put(&d->arrays, h, i);
}

/* The table the statements being indexed belong to: the path of its
 * header entry (borrowed: a run of d->seg), empty for the root. */
typedef struct te_table {
    size_t seg, n;
    int in_array;
} te_table;

/* [a.b] or [[a.b]] at P->pos; the header becomes the current table. */
static void te_header(te_parser *P, toml_doc *d, size_t start, te_table *table)
{
    int arr = te_peek(P, 1) == '[';
    P->pos += arr ? 2 : 1;
    te_ws(P);
    size_t seg = d->nseg;
    te_key(P, d);
    te_ws(P);
    if (!P->failed && (te_peek(P, 0) != ']' || (arr && te_peek(P, 1) != ']')))
        te_fail(P, arr ? "expected ']]' after the table name" : "expected ']' after the table name");
    if (P->failed)
        return;
    P->pos += arr ? 2 : 1;
    size_t n = d->nseg - seg;
    int in_array = te_under_array(d, seg, n);
    te_entry *e = te_entry_add(d, arr ? TE_AHEADER : TE_HEADER, start);
    e->in_array = in_array;
    e->seg = seg;
    e->n = n;
    if (arr)
        te_array_seen(d, d->ne - 1);
    table->seg = seg;
    table->n = n;
    table->in_array = in_array || arr;
}

/* key = value at P->pos, in the current table: the entry's path is the
 * table's offsets followed by the key's own segments. */
static void te_keyval(te_parser *P, toml_doc *d, size_t start, const te_table *table)
{
    size_t seg = d->nseg;
    for (size_t i = 0; i < table->n; i++)
        te_seg_push(d, d->seg[table->seg + i]);
    te_key(P, d);
    te_ws(P);
    if (!P->failed && te_peek(P, 0) != '=')
        te_fail(P, "expected '=' after a key");
    if (!P->failed) {
        P->pos++;
        te_ws(P);
    }
    size_t vstart = P->pos;
    if (!P->failed)
        te_value(P, 0);
    if (P->failed)
        return;
    te_entry *e = te_entry_add(d, TE_KV, start);
    e->vstart = vstart;
    e->vend = P->pos;
    e->seg = seg;
    e->n = d->nseg - seg;
    e->nrel = e->n - table->n;
    e->in_array = table->in_array;
}

/* One statement at P->pos: a line, or the lines of a multi-line value,
 * holding a header, a key or nothing (a comment, a blank line). Each
 * statement starts where the last one's line ending was consumed, and its
 * parse looks at no byte past its own line ending. */
static void te_statement(te_parser *P, toml_doc *d, te_table *table)
{
    size_t start = P->pos, ne = d->ne;
    te_ws(P);
    int c = te_peek(P, 0);
    if (c == '[') {
        te_header(P, d, start, table);
    } else if (c != '#' && c != '\n' && c != '\r' && c != -1) {
        te_keyval(P, d, start, table);
    }
    te_ws(P);
    te_comment(P);
    if (!P->failed && !te_eol(P))
        te_fail(P, "unexpected text after a statement");
    if (!P->failed && d->ne > ne)
        d->e[d->ne - 1].end = P->pos;
    d->statements++;
}

/* The file's line ending: "\r\n" if its first one is, else "\n". */
static void te_newline_style(toml_doc *d)
{
    const char *p = d->buf.p ? d->buf.p : "", *lf = memchr(p, '\n', d->buf.len);
    d->nl = lf && lf > p && lf[-1] == '\r' ? "\r\n" : "\n";
}

/* Indexes d->buf; 0 ok, -1 with err filled (and the index empty). */
static int te_index(toml_doc *d, char *err, size_t errlen)
{
    te_parser P = {d->buf.p ? d->buf.p : "", d->buf.len, 0, err, errlen, 0};
    te_table table = {0, 0, 0};
    te_entries_reset(d);
    te_aset_free(&d->arrays);
    d->work = d->statements = 0;
    d->body = 0;
    if (P.len >= 3 && !memcmp(P.p, "\xEF\xBB\xBF", 3))
        d->body = P.pos = 3;
    te_newline_style(d);
    if (memchr(P.p, '\0', P.len))
        te_fail(&P, "the file contains a NUL byte");
    while (!P.failed && P.pos < P.len)
        te_statement(&P, d, &table);
    te_aset_free(&d->arrays);
    if (P.failed) {
        te_entries_reset(d);
        return -1;
    }
    return 0;
}

/* 1 if an entry of e[lo..hi) is a header ([[array]] headers only, when
 * arrays_only). */
static int te_window_has_header(const toml_doc *d, size_t lo, size_t hi, int arrays_only)
{
    for (size_t i = lo; i < hi; i++)
        if (d->e[i].kind == TE_AHEADER || (!arrays_only && d->e[i].kind == TE_HEADER))
            return 1;
    return 0;
}

/* After an edit replaced cut bytes at from with tlen new ones (d->buf holds
 * the new bytes, the index still describes the old), re-indexes only the
 * statements around the edit instead of the whole document. The parse
 * restarts at the statement boundary at or before from, in the parser's
 * state there (the table of the last header before it, the [[arrays]]
 * before it), and stops at the first statement boundary past the new bytes
 * that was a boundary of the old bytes too. From there on the bytes are the
 * old ones, so every later statement is the same, shifted by the edit's
 * length, as long as the parser's state there is the same: the window
 * holds no header, old or new, or the next statement is a header (it sets
 * its own table) and none of them is an [[array]] header, or nothing
 * follows. 0 done; -1 when the window does not parse or changes what
 * follows: the caller then re-indexes the whole document, which also says
 * why it does not parse. The window's replaced names stay in the arena
 * until the next whole indexing. */
static int te_index_window(toml_doc *d, size_t from, size_t cut, size_t tlen)
{
    if (from < 3)
        return -1; /* the first three bytes say whether there is a BOM */
    const char *p = d->buf.p;
    size_t ne_old = d->ne, len_old = d->buf.len - tlen + cut, text_end = from + tlen;
    /* i0: the first entry in the window; a: where its statements start */
    size_t lo = 0, hi = ne_old;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->e[mid].start <= from)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t i0 = lo, a = d->body;
    if (i0 > 0) {
        const te_entry *e = &d->e[i0 - 1];
        /* from lies inside that statement, or right after a last line
         * without a line ending (which the edit may continue) */
        if (from < e->end || p[e->end - 1] != '\n')
            a = d->e[--i0].start;
        else
            a = e->end;
    }
    te_table table = {0, 0, 0};
    for (size_t i = i0; i-- > 0;)
        if (d->e[i].kind != TE_KV) {
            table = (te_table){d->e[i].seg, d->e[i].n, d->e[i].in_array || d->e[i].kind == TE_AHEADER};
            break;
        }
    te_aset_free(&d->arrays);
    d->work = d->statements = 0;
    for (size_t i = 0; i < i0; i++)
        if (d->e[i].kind == TE_AHEADER)
            te_array_seen(d, i);
    /* the window's new entries are added after the old ones, then moved */
    te_parser P = {p, d->buf.len, a, NULL, 0, 0};
    size_t j = i0; /* the first old entry at or after the old position of P.pos */
    for (;;) {
        if (P.pos >= text_end) {
            size_t old = P.pos - tlen + cut;
            while (j < ne_old && d->e[j].start < old)
                j++;
            int boundary = old == len_old || old == a || (j < ne_old && d->e[j].start == old) ||
                           (j > 0 && d->e[j - 1].end == old);
            if (boundary)
                break;
        }
        te_statement(&P, d, &table);
        if (P.failed) {
            te_aset_free(&d->arrays);
            return -1;
        }
    }
    te_aset_free(&d->arrays);
    /* the statements after the window start in the same state as before
     * unless a header came or went in it: an [[array]] header changes
     * where every later header lies, any header the table of the keys
     * right after the window */
    int arrays = te_window_has_header(d, i0, j, 1) || te_window_has_header(d, ne_old, d->ne, 1);
    int headers = te_window_has_header(d, i0, j, 0) || te_window_has_header(d, ne_old, d->ne, 0);
    if (j < ne_old && (arrays || (headers && d->e[j].kind == TE_KV)))
        return -1;
    /* e[0..i0) + the new entries + e[j..ne_old) shifted */
    size_t nnew = d->ne - ne_old, ntail = ne_old - j;
    te_entry *fresh = NULL;
    if (nnew) {
        fresh = malloc(nnew * sizeof *fresh);
        if (!fresh)
            abort();
        memcpy(fresh, d->e + ne_old, nnew * sizeof *fresh);
    }
    if (ntail)
        memmove(d->e + i0 + nnew, d->e + j, ntail * sizeof *d->e);
    if (nnew)
        memcpy(d->e + i0, fresh, nnew * sizeof *fresh);
    free(fresh);
    d->ne = i0 + nnew + ntail;
    for (size_t i = i0 + nnew; i < d->ne; i++) {
        te_entry *e = &d->e[i];
        e->start = e->start - cut + tlen;
        e->end = e->end - cut + tlen;
        if (e->kind == TE_KV) {
            e->vstart = e->vstart - cut + tlen;
            e->vend = e->vend - cut + tlen;
        }
    }
    te_newline_style(d);
    return 0;
}

toml_doc *toml_parse(const char *buf, size_t len, char *err, size_t errlen)
{
    toml_doc *d = calloc(1, sizeof *d);
    if (!d)
        abort();
    sbuf_append(&d->buf, buf ? buf : "", len);
    if (te_index(d, err, errlen) != 0) {
        toml_free(d);
        return NULL;
    }
    return d;
}

void toml_free(toml_doc *d)
{
    if (!d)
        return;
    te_entries_free(d);
    sbuf_free(&d->buf);
    free(d);
}

size_t toml_index_work(const toml_doc *d) { return d->work; }

size_t toml_index_statements(const toml_doc *d) { return d->statements; }

int toml_index_check(const toml_doc *d)
{
    toml_doc *f = toml_parse(d->buf.p, d->buf.len, NULL, 0);
    int same = f && f->ne == d->ne && f->body == d->body && !strcmp(f->nl, d->nl);
    for (size_t i = 0; same && i < d->ne; i++) {
        const te_entry *a = &d->e[i], *b = &f->e[i];
        same = a->kind == b->kind && a->in_array == b->in_array && a->start == b->start && a->end == b->end &&
               a->vstart == b->vstart && a->vend == b->vend && a->n == b->n && a->nrel == b->nrel;
        for (size_t k = 0; same && k < a->n; k++)
            same = !strcmp(te_seg(d, a->seg + k), te_seg(f, b->seg + k));
    }
    toml_free(f);
    return same;
}

const char *toml_bytes(const toml_doc *d, size_t *len)
{
    *len = d->buf.len;
    return d->buf.p ? d->buf.p : "";
}

/* Replaces [from, to) of the document with text and re-indexes what the
 * edit touched; on a failure (a value that is not TOML, or a bug in the
 * editor) the document is unchanged. */
static int te_splice(toml_doc *d, size_t from, size_t to, const char *text, size_t tlen, char *err, size_t errlen)
{
    sbuf nb = SBUF_INIT;
    sbuf_reserve(&nb, d->buf.len - (to - from) + tlen);
    sbuf_append(&nb, d->buf.p, from);
    sbuf_append(&nb, text, tlen);
    sbuf_append(&nb, d->buf.p + to, d->buf.len - to);
    sbuf old = d->buf;
    d->buf = nb;
    char e2[256] = "";
    if (te_index_window(d, from, to - from, tlen) == 0 || te_index(d, e2, sizeof e2) == 0) {
        sbuf_free(&old);
        return 0;
    }
    sbuf_free(&d->buf);
    d->buf = old;
    te_index(d, NULL, 0);
    if (err && errlen)
        snprintf(err, errlen, "the edit would not parse (%s); the file is left as it is", e2);
    return -1;
}

/* ---------- lookups and edits ---------- */

/* The index of the key at path, -1 absent, -2 not editable (err filled). */
static long te_find(const toml_doc *d, const char *const *path, size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; i < d->ne; i++) {
        const te_entry *e = &d->e[i];
        if (e->kind == TE_AHEADER && te_holds(d, e, path, n)) {
            te_errf(err, errlen, "%s is inside an array of tables ([[...]]), which switchyard does not edit", path, n);
            return -2;
        }
        if (e->kind != TE_KV || e->in_array)
            continue;
        if (te_is(d, e, path, n))
            return (long)i;
        if (te_holds(d, e, path, n)) {
            te_errf(err, errlen, "%s is inside an inline value (key = { ... }), which switchyard does not edit",
                    path, n);
            return -2;
        }
    }
    return -1;
}

int toml_get(const toml_doc *d, const char *const *path, size_t n, sbuf *raw, char *err, size_t errlen)
{
    long i = te_find(d, path, n, err, errlen);
    if (i == -2)
        return -1;
    if (i < 0)
        return 0;
    sbuf_append(raw, d->buf.p + d->e[i].vstart, d->e[i].vend - d->e[i].vstart);
    return 1;
}

static void te_key_text(sbuf *out, const char *const *segs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *s = segs[i];
        int bare = *s != '\0';
        for (const char *c = s; *c && bare; c++)
            bare = te_bare_char((unsigned char)*c);
        sbuf_puts(out, i ? "." : "");
        if (bare)
            sbuf_puts(out, s);
        else
            toml_quote(out, s);
    }
}

static int te_ends_nl(const toml_doc *d) { return d->buf.len > d->body && d->buf.p[d->buf.len - 1] == '\n'; }

/* Where a new top-level key goes: after the last top-level key, else before
 * the first table (and the comment lines directly above it), else at EOF. */
static size_t te_root_insert_pos(const toml_doc *d)
{
    size_t pos = d->buf.len;
    for (size_t i = 0; i < d->ne; i++) {
        if (d->e[i].kind != TE_KV) {
            if (i > 0)
                return d->e[i - 1].end;
            pos = d->e[i].start;
            break;
        }
        if (i == d->ne - 1)
            return d->e[i].end;
    }
    while (pos > d->body) {
        size_t ls = pos - 1; /* pos is a line start: walk back over the previous line */
        while (ls > d->body && d->buf.p[ls - 1] != '\n')
            ls--;
        size_t k = ls;
        while (k < pos && (d->buf.p[k] == ' ' || d->buf.p[k] == '\t'))
            k++;
        if (k >= pos || d->buf.p[k] != '#')
            break;
        pos = ls;
    }
    return pos;
}

/* After the last key of the [table] at header index h (or the header). */
static size_t te_table_insert_pos(const toml_doc *d, size_t h)
{
    size_t pos = d->e[h].end;
    for (size_t i = h + 1; i < d->ne && d->e[i].kind == TE_KV; i++)
        pos = d->e[i].end;
    return pos;
}

static long te_header_find(const toml_doc *d, const char *const *path, size_t n)
{
    for (size_t i = 0; i < d->ne; i++)
        if (d->e[i].kind == TE_HEADER && !d->e[i].in_array && te_is(d, &d->e[i], path, n))
            return (long)i;
    return -1;
}

/* Inserts `segs = raw` (a line) at pos, starting a line first if needed. */
static int te_insert_line(toml_doc *d, size_t pos, const char *const *segs, size_t nseg, const char *raw,
                          char *err, size_t errlen)
{
    sbuf t = SBUF_INIT;
    if (pos == d->buf.len && pos > d->body && !te_ends_nl(d))
        sbuf_puts(&t, d->nl);
    te_key_text(&t, segs, nseg);
    sbuf_printf(&t, " = %s%s", raw, d->nl);
    int rc = te_splice(d, pos, pos, t.p, t.len, err, errlen);
    sbuf_free(&t);
    return rc;
}

int toml_set(toml_doc *d, const char *const *path, size_t n, const char *raw, char *err, size_t errlen)
{
    if (n == 0)
        return -1;
    long i = te_find(d, path, n, err, errlen);
    if (i == -2)
        return -1;
    if (i >= 0)
        return te_splice(d, d->e[i].vstart, d->e[i].vend, raw, strlen(raw), err, errlen);
    for (size_t j = 0; j < d->ne; j++) {
        if ((d->e[j].n > n || (d->e[j].kind != TE_KV && d->e[j].n == n)) && te_under(d, &d->e[j], path, n)) {
            te_errf(err, errlen, "%s is a table in this file, not a value", path, n);
            return -1;
        }
    }
    size_t np = n - 1;
    if (np == 0)
        return te_insert_line(d, te_root_insert_pos(d), path, 1, raw, err, errlen);
    long h = te_header_find(d, path, np);
    if (h >= 0)
        return te_insert_line(d, te_table_insert_pos(d, (size_t)h), path + np, 1, raw, err, errlen);
    /* the table exists through dotted keys (a.b.c = 1): add one more beside the last */
    long last = -1;
    for (size_t j = 0; j < d->ne; j++) {
        const te_entry *e = &d->e[j];
        if (e->kind == TE_KV && !e->in_array && e->n > np && e->n - e->nrel <= np && te_under(d, e, path, np))
            last = (long)j;
    }
    if (last >= 0) {
        const te_entry *e = &d->e[last];
        size_t tbl = e->n - e->nrel;
        return te_insert_line(d, e->end, path + tbl, n - tbl, raw, err, errlen);
    }
    /* a new [table] at the end, after a blank line of its own (even below
     * one already there: removing the table removes exactly that line) */
    sbuf t = SBUF_INIT;
    if (d->buf.len > d->body) {
        if (!te_ends_nl(d))
            sbuf_puts(&t, d->nl);
        sbuf_puts(&t, d->nl);
    }
    sbuf_puts(&t, "[");
    te_key_text(&t, path, np);
    sbuf_printf(&t, "]%s", d->nl);
    te_key_text(&t, path + np, 1);
    sbuf_printf(&t, " = %s%s", raw, d->nl);
    int rc = te_splice(d, d->buf.len, d->buf.len, t.p, t.len, err, errlen);
    sbuf_free(&t);
    return rc;
}

int toml_remove(toml_doc *d, const char *const *path, size_t n, char *err, size_t errlen)
{
    long i = te_find(d, path, n, err, errlen);
    if (i == -2)
        return -1;
    if (i < 0)
        return 0;
    return te_splice(d, d->e[i].start, d->e[i].end, "", 0, err, errlen) == 0 ? 1 : -1;
}

int toml_has_header(const toml_doc *d, const char *const *path, size_t n) { return te_header_find(d, path, n) >= 0; }

int toml_has_table(const toml_doc *d, const char *const *path, size_t n)
{
    for (size_t i = 0; i < d->ne; i++)
        if (d->e[i].n > n || (d->e[i].kind != TE_KV && d->e[i].n == n))
            if (te_under(d, &d->e[i], path, n))
                return 1;
    return 0;
}

int toml_remove_empty_table(toml_doc *d, const char *const *path, size_t n)
{
    long h = te_header_find(d, path, n);
    if (h < 0)
        return 0;
    size_t from = d->e[h].start, to = (size_t)h + 1 < d->ne ? d->e[h + 1].start : d->buf.len;
    if ((size_t)h + 1 < d->ne && d->e[h + 1].kind == TE_KV)
        return 0;
    for (size_t k = d->e[h].end; k < to; k++)
        if (!strchr(" \t\r\n", d->buf.p[k]))
            return 0; /* a comment: the user's */
    /* the header line goes with the blank line above it (the separator
     * attach added); blank lines below it stay, unless nothing is above */
    const char *p = d->buf.p;
    size_t eol = from >= d->body + 2 && !memcmp(p + from - 2, "\r\n", 2) ? 2
                 : from >= d->body + 1 && p[from - 1] == '\n'             ? 1
                                                                          : 0;
    if (eol && (from - eol == d->body || p[from - eol - 1] == '\n'))
        from -= eol;
    if (from > d->body)
        to = d->e[h].end;
    return te_splice(d, from, to, "", 0, NULL, 0) == 0;
}

/* ---------- values ---------- */

int toml_string_decode(const char *raw, size_t n, sbuf *out)
{
    if (n < 2 || (raw[0] != '"' && raw[0] != '\'') || (n >= 3 && raw[1] == raw[0] && raw[2] == raw[0]))
        return -1;
    sbuf tmp = SBUF_INIT;
    te_parser P = {raw, n, 0, NULL, 0, 0};
    te_string(&P, &tmp);
    int ok = !P.failed && P.pos == n;
    if (ok)
        sbuf_append(out, tmp.p ? tmp.p : "", tmp.len);
    sbuf_free(&tmp);
    return ok ? 0 : -1;
}

void toml_value_norm(const char *raw, size_t n, sbuf *out)
{
    sbuf_puts(out, "s:");
    if (toml_string_decode(raw, n, out) == 0)
        return;
    out->len -= 2;
    sbuf_puts(out, "r:");
    sbuf_append(out, raw, n);
}

void toml_quote(sbuf *out, const char *s)
{
    sbuf_puts(out, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            sbuf_printf(out, "\\%c", *c);
        else if (*c == '\n')
            sbuf_puts(out, "\\n");
        else if (*c == '\t')
            sbuf_puts(out, "\\t");
        else if (*c < 0x20 || *c == 0x7f)
            sbuf_printf(out, "\\u%04X", *c);
        else
            sbuf_append(out, c, 1);
    }
    sbuf_puts(out, "\"");
}

void toml_final_newline_restore(sbuf *out, const char *orig, size_t n)
{
    if (!n || orig[n - 1] == '\n' || out->len < 1 || out->p[out->len - 1] != '\n')
        return;
    const char *nl = memrchr(orig, '\n', n);
    size_t tail = nl ? n - (size_t)(nl - orig) - 1 : n;
    size_t cut = out->len - 1 - (out->len >= 2 && out->p[out->len - 2] == '\r');
    if (cut >= tail && !memcmp(out->p + cut - tail, orig + n - tail, tail) &&
        (cut == tail || out->p[cut - tail - 1] == '\n'))
        out->len = cut, out->p[cut] = '\0';
}
