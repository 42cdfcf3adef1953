/* claude_settings.c: editing Claude Code's settings.json in place, and the
 * record of an attach (see claude_settings.h and docs/claude.md).
 *
 * The file is validated with json_parse (the repo's strict parser: what it
 * refuses, attach refuses), then walked without a tree with json_scan_* to
 * find the byte spans of the top-level members and of env's members. Each
 * edit splices one span (a value replaced, a member added after the last
 * one or removed with the separator that came with it) and the text is
 * walked again: files are kilobytes and an attach sets five members, so
 * re-walking is simpler than keeping offsets right across edits. Insertion
 * and removal are exact inverses (a member is added as ",EOL INDENT name:
 * value" after the last value and removed as exactly that), which is what
 * makes a detach give the bytes back. */
#include "codex/claude_settings.h"
#include "base/json.h"
#include "base/sha256.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------- walking the text ---------- */

/* One member of an object: offsets into the text. */
typedef struct cs_member {
    size_t key_start, key_end, value_start, value_end;
} cs_member;

typedef struct cs_object {
    size_t open, close; /* the offsets of '{' and '}' */
    cs_member *m;
    size_t n, cap;
} cs_object;

static void cs_object_free(cs_object *o)
{
    free(o->m);
    memset(o, 0, sizeof *o);
}

static void cs_object_push(cs_object *o, const cs_member *m)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 16;
        cs_member *nm = realloc(o->m, cap * sizeof *nm);
        if (!nm)
            abort(); /* as sbuf: no useful work without memory */
        o->m = nm, o->cap = cap;
    }
    o->m[o->n++] = *m;
}

/* The members of the object whose '{' is at t[open]; inner is how many
 * containers are open around its members (json_scan_value's depth). The
 * text was validated by json_parse, so a failure here is a bug, not the
 * user's file: still reported rather than trusted. */
static int cs_object_read(const char *t, size_t len, size_t open, int inner, cs_object *o)
{
    memset(o, 0, sizeof *o);
    o->open = open;
    if (open >= len || t[open] != '{')
        return -1;
    size_t p = json_scan_ws(t, len, open + 1);
    if (p < len && t[p] == '}') {
        o->close = p;
        return 0;
    }
    for (;;) {
        cs_member m;
        if (p >= len || t[p] != '"')
            return -1;
        m.key_start = p;
        m.key_end = json_scan_value(t, len, p, inner);
        if (!m.key_end)
            return -1;
        p = json_scan_ws(t, len, m.key_end);
        if (p >= len || t[p] != ':')
            return -1;
        m.value_start = p = json_scan_ws(t, len, p + 1);
        m.value_end = json_scan_value(t, len, p, inner);
        if (!m.value_end)
            return -1;
        cs_object_push(o, &m);
        p = json_scan_ws(t, len, m.value_end);
        if (p < len && t[p] == ',') {
            p = json_scan_ws(t, len, p + 1);
            continue;
        }
        if (p < len && t[p] == '}') {
            o->close = p;
            return 0;
        }
        return -1;
    }
}

/* 1 if the member's name (a JSON string literal, escapes and all) is name. */
static int cs_key_is(const char *t, const cs_member *m, const char *name)
{
    const char *k = t + m->key_start + 1;
    size_t n = m->key_end - m->key_start - 2, want = strlen(name);
    if (!memchr(k, '\\', n))
        return n == want && memcmp(k, name, n) == 0;
    json_value *v = json_parse(t + m->key_start, m->key_end - m->key_start, NULL, 0);
    int same = v && v->type == JSON_STRING && v->str_len == want && memcmp(v->str, name, want) == 0;
    json_free(v);
    return same;
}

/* A settings file as attach sees it: the root's members and env's. */
typedef struct cs_doc {
    const char *t;
    size_t len;
    int blank;       /* nothing but whitespace: an empty object to attach */
    cs_object root;
    long env;        /* env's index in root.m, -1 when there is none */
    cs_object envo;  /* env's members (env >= 0) */
} cs_doc;

static void cs_doc_free(cs_doc *d)
{
    cs_object_free(&d->root);
    cs_object_free(&d->envo);
}

static int cs_doc_load(cs_doc *d, const char *t, size_t len, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    d->t = t ? t : "", d->len = t ? len : 0, d->env = -1;
    t = d->t, len = d->len;
    size_t p = json_scan_ws(t, len, 0);
    if (p == len) {
        d->blank = 1;
        return 0;
    }
    char perr[160] = "";
    /* keep_depth 1: the whole text is checked, only the root's members built */
    json_value *v = json_parse_shallow(t, len, 1, perr, sizeof perr);
    int obj = v && v->type == JSON_OBJECT;
    json_free(v);
    if (!v) {
        sbuf_fmt_into(err, errlen, "it is not valid JSON (%s)", perr);
        return -1;
    }
    if (!obj) {
        sbuf_fmt_into(err, errlen, "it is not a JSON object (Claude Code's settings are one)");
        return -1;
    }
    if (cs_object_read(t, len, p, 1, &d->root) != 0) {
        sbuf_fmt_into(err, errlen, "its members could not be walked");
        return -1;
    }
    for (size_t i = 0; i < d->root.n; i++) {
        if (!cs_key_is(t, &d->root.m[i], "env"))
            continue;
        if (d->env >= 0) {
            sbuf_fmt_into(err, errlen, "it has two \"env\" members (Claude Code would read only the last)");
            return -1;
        }
        d->env = (long)i;
    }
    if (d->env < 0)
        return 0;
    const cs_member *e = &d->root.m[d->env];
    if (t[e->value_start] != '{') {
        sbuf_fmt_into(err, errlen, "its \"env\" is not an object (Claude Code reads its variables from one)");
        return -1;
    }
    if (cs_object_read(t, len, e->value_start, 2, &d->envo) != 0) {
        sbuf_fmt_into(err, errlen, "its \"env\" could not be walked");
        return -1;
    }
    return 0;
}

/* env's member name: its index, -1 absent, -2 named twice. */
static long cs_env_find(const cs_doc *d, const char *name)
{
    long at = -1;
    for (size_t i = 0; d->env >= 0 && i < d->envo.n; i++) {
        if (!cs_key_is(d->t, &d->envo.m[i], name))
            continue;
        if (at >= 0)
            return -2;
        at = (long)i;
    }
    return at;
}

/* Loads text and checks the names attach edits are each there at most
 * once. The error is what to tell the user about the file. */
static int cs_doc_load_for(cs_doc *d, const char *t, size_t len, const char *const *names, size_t n, char *err,
                           size_t errlen)
{
    if (cs_doc_load(d, t, len, err, errlen) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (cs_env_find(d, names[i]) == -2) {
            sbuf_fmt_into(err, errlen, "its \"env\" sets %s twice (Claude Code would read only the last)", names[i]);
            return -1;
        }
    }
    return 0;
}

int claude_settings_check(const char *text, size_t len, const char *const *names, size_t n, char *err,
                          size_t errlen)
{
    cs_doc d;
    int rc = cs_doc_load_for(&d, text, len, names, n, err, errlen);
    cs_doc_free(&d);
    return rc;
}

/* The string value at [a, b) decoded into out: 1, or 0 when it is not a string. */
static int cs_string_at(const char *t, size_t a, size_t b, sbuf *out)
{
    if (t[a] != '"')
        return 0;
    json_value *v = json_parse(t + a, b - a, NULL, 0);
    int ok = v && v->type == JSON_STRING;
    if (ok)
        sbuf_append(out, v->str, v->str_len);
    json_free(v);
    return ok;
}

int claude_settings_env_get(const char *text, size_t len, const char *name, sbuf *out)
{
    cs_doc d;
    if (cs_doc_load(&d, text, len, NULL, 0) != 0) {
        cs_doc_free(&d);
        return -1;
    }
    long i = cs_env_find(&d, name);
    int rc = 0;
    if (i >= 0) {
        const cs_member *m = &d.envo.m[i];
        rc = cs_string_at(d.t, m->value_start, m->value_end, out) ? 1 : 2;
        if (rc == 2)
            sbuf_append(out, d.t + m->value_start, m->value_end - m->value_start);
    }
    cs_doc_free(&d);
    return rc;
}

/* ---------- the shape of what is added ---------- */

/* How an object lays out its members, read from its first one, so what is
 * added looks like what is there: one per line (eol set, each indented by
 * indent) or all on one line (eol "", indent the space after '{'). */
typedef struct cs_style {
    char eol[3];
    char indent[64];
    char colon[16]; /* between a name and its value */
    char sep[16];   /* on one line: after the comma between two members */
} cs_style;

static void cs_style_default(cs_style *s, const char *indent)
{
    memset(s, 0, sizeof *s);
    snprintf(s->eol, sizeof s->eol, "\n");
    snprintf(s->indent, sizeof s->indent, "%s", indent);
    snprintf(s->colon, sizeof s->colon, ": ");
}

/* The style of an object with at least one member. */
static void cs_style_of(const char *t, const cs_object *o, cs_style *s)
{
    const cs_member *m = &o->m[0];
    size_t a = o->open + 1, b = m->key_start;
    const char *nl = NULL;
    for (size_t i = a; i < b; i++)
        if (t[i] == '\n')
            nl = t + i;
    if (nl) {
        snprintf(s->eol, sizeof s->eol, "%s", nl > t + a && nl[-1] == '\r' ? "\r\n" : "\n");
        size_t n = (size_t)(t + b - nl - 1);
        snprintf(s->indent, sizeof s->indent, "%.*s", (int)(n < sizeof s->indent ? n : sizeof s->indent - 1),
                 nl + 1);
    } else {
        s->eol[0] = '\0';
        size_t n = b - a;
        snprintf(s->indent, sizeof s->indent, "%.*s", (int)(n < sizeof s->indent ? n : sizeof s->indent - 1),
                 t + a);
        snprintf(s->sep, sizeof s->sep, "%.15s", s->indent);
        if (o->n >= 2) { /* {"a": 1, "b": 2}: the space after a comma is not the one after '{' */
            size_t c = o->m[0].value_end;
            while (c < o->m[1].key_start && t[c] != ',')
                c++;
            size_t sn = o->m[1].key_start - c - 1;
            if (c < o->m[1].key_start && sn < sizeof s->sep)
                snprintf(s->sep, sizeof s->sep, "%.*s", (int)sn, t + c + 1);
        }
    }
    size_t cn = m->value_start - m->key_end;
    if (cn < sizeof s->colon && !memchr(t + m->key_end, '\n', cn))
        snprintf(s->colon, sizeof s->colon, "%.*s", (int)cn, t + m->key_end);
    else
        snprintf(s->colon, sizeof s->colon, ": ");
}

/* One member, "name": "value", as the style writes it. */
static void cs_put_member(sbuf *o, const cs_style *s, const char *name, const char *value)
{
    sbuf_json_str(o, name, strlen(name));
    sbuf_puts(o, s->colon);
    sbuf_json_str(o, value, strlen(value));
}

/* The members that follow an object's last one: ",EOL INDENT m" each (on
 * one line: "," and the space its members are separated by). */
static void cs_put_tail(sbuf *o, const cs_style *s, const claude_env_set *const *k, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sbuf_puts(o, ",");
        sbuf_puts(o, s->eol);
        sbuf_puts(o, s->eol[0] ? s->indent : s->sep);
        cs_put_member(o, s, k[i]->name, k[i]->value);
    }
}

/* A whole object holding the members: its members at s->indent, its
 * closing brace at outer (on one line: the members and the braces
 * spaced by s->indent, "{ a, b }" or "{a,b}"). */
static void cs_put_object(sbuf *o, const cs_style *s, const char *outer, const claude_env_set *const *k, size_t n)
{
    sbuf_puts(o, "{");
    for (size_t i = 0; i < n; i++) {
        sbuf_puts(o, i ? "," : "");
        sbuf_puts(o, s->eol);
        sbuf_puts(o, s->eol[0] || !i ? s->indent : s->sep);
        cs_put_member(o, s, k[i]->name, k[i]->value);
    }
    sbuf_puts(o, s->eol);
    sbuf_puts(o, s->eol[0] ? outer : s->indent);
    sbuf_puts(o, "}");
}

/* One indentation step of a file: what its root's members are indented
 * by (the root's brace is at the margin), else two spaces, Claude Code's. */
static const char *cs_unit(const cs_style *root)
{
    return root->eol[0] && root->indent[0] ? root->indent : "  ";
}

/* The style of an object inside the root (env): one step further in when
 * the root has a member per line, else the root's own one-line style. */
static void cs_style_nested(const cs_style *root, cs_style *s)
{
    *s = *root;
    if (root->eol[0])
        snprintf(s->indent, sizeof s->indent, "%.31s%.31s", root->indent, cs_unit(root));
}

/* t with [a, b) replaced by ins, into out (emptied first). */
static void cs_splice(sbuf *out, const char *t, size_t len, size_t a, size_t b, const char *ins, size_t inslen)
{
    sbuf res = SBUF_INIT;
    sbuf_append(&res, t, a);
    sbuf_append(&res, ins, inslen);
    sbuf_append(&res, t + b, len - b);
    sbuf_free(out);
    *out = res;
}

/* ---------- attach ---------- */

/* Adds the members absent from env (k[0..n)) to the text of d into out. */
static void cs_add_members(const cs_doc *d, const claude_env_set *const *k, size_t n, sbuf *out)
{
    sbuf ins = SBUF_INIT;
    cs_style rs, es;
    if (d->blank || d->root.n == 0) {
        /* a new (or empty) file: the whole object, as Claude Code writes one */
        cs_style_default(&rs, "  ");
        cs_style_default(&es, "    ");
        sbuf_puts(&ins, "{\n  \"env\": ");
        cs_put_object(&ins, &es, "  ", k, n);
        sbuf_puts(&ins, "\n}");
        if (d->blank) {
            sbuf_puts(&ins, "\n");
            cs_splice(out, d->t, d->len, 0, d->len, ins.p, ins.len);
        } else {
            cs_splice(out, d->t, d->len, d->root.open, d->root.close + 1, ins.p, ins.len);
        }
        sbuf_free(&ins);
        return;
    }
    cs_style_of(d->t, &d->root, &rs);
    if (d->env < 0) {
        /* env after the root's last member, its members one step further in */
        cs_style_nested(&rs, &es);
        sbuf_puts(&ins, ",");
        sbuf_puts(&ins, rs.eol);
        sbuf_puts(&ins, rs.indent);
        sbuf_puts(&ins, "\"env\"");
        sbuf_puts(&ins, rs.colon);
        cs_put_object(&ins, &es, rs.eol[0] ? rs.indent : "", k, n);
        size_t at = d->root.m[d->root.n - 1].value_end;
        cs_splice(out, d->t, d->len, at, at, ins.p, ins.len);
    } else if (d->envo.n == 0) {
        /* env is {}: written afresh, one step in from env's own line */
        const cs_member *e = &d->root.m[d->env];
        cs_style_nested(&rs, &es);
        cs_put_object(&ins, &es, rs.eol[0] ? rs.indent : "", k, n);
        cs_splice(out, d->t, d->len, e->value_start, e->value_end, ins.p, ins.len);
    } else {
        cs_style_of(d->t, &d->envo, &es);
        cs_put_tail(&ins, &es, k, n);
        size_t at = d->envo.m[d->envo.n - 1].value_end;
        cs_splice(out, d->t, d->len, at, at, ins.p, ins.len);
    }
    sbuf_free(&ins);
}

int claude_settings_set(const char *text, size_t len, claude_env_set *keys, size_t n, int *env_created, sbuf *out,
                        char *err, size_t errlen)
{
    const char *names[CLAUDE_ENV_KEYS_MAX];
    if (n > CLAUDE_ENV_KEYS_MAX) {
        sbuf_fmt_into(err, errlen, "too many keys");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        names[i] = keys[i].name;
    sbuf cur = SBUF_INIT;
    sbuf_append(&cur, text ? text : "", text ? len : 0);
    cs_doc d;
    int rc = cs_doc_load_for(&d, cur.p, cur.len, names, n, err, errlen);
    *env_created = rc == 0 && d.env < 0;
    const claude_env_set *absent[CLAUDE_ENV_KEYS_MAX];
    size_t na = 0;
    /* the originals first, all from the file as it was */
    for (size_t i = 0; rc == 0 && i < n; i++) {
        long at = cs_env_find(&d, keys[i].name);
        keys[i].orig_present = at >= 0;
        sbuf_reset(&keys[i].orig);
        if (at >= 0)
            sbuf_append(&keys[i].orig, d.t + d.envo.m[at].value_start,
                        d.envo.m[at].value_end - d.envo.m[at].value_start);
        else
            absent[na++] = &keys[i];
    }
    /* then each present member's value replaced in place */
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (!keys[i].orig_present)
            continue;
        long at = cs_env_find(&d, keys[i].name);
        sbuf v = SBUF_INIT;
        sbuf_json_str(&v, keys[i].value, strlen(keys[i].value));
        cs_splice(&cur, d.t, d.len, d.envo.m[at].value_start, d.envo.m[at].value_end, v.p, v.len);
        sbuf_free(&v);
        cs_doc_free(&d);
        rc = cs_doc_load(&d, cur.p, cur.len, err, errlen);
    }
    if (rc == 0 && na)
        cs_add_members(&d, absent, na, &cur);
    cs_doc_free(&d);
    if (rc == 0)
        sbuf_append(out, cur.p, cur.len);
    sbuf_free(&cur);
    return rc;
}

/* ---------- detach ---------- */

/* 1 if the member's value is the string attach wrote. */
static int cs_holds(const char *t, const cs_member *m, const claude_env_restore *k)
{
    sbuf v = SBUF_INIT;
    int holds = 0;
    if (cs_string_at(t, m->value_start, m->value_end, &v)) {
        if (k->written) {
            holds = v.len == strlen(k->written) && memcmp(v.p ? v.p : "", k->written, v.len) == 0;
        } else if (k->written_sha) {
            char sha[65];
            sha256_hex(v.p ? v.p : "", v.len, sha);
            holds = strcmp(sha, k->written_sha) == 0;
        }
    }
    sbuf_secret_wipe(&v); /* it may be the key */
    return holds;
}

int claude_settings_is_written(const char *text, size_t len, const claude_env_restore *k)
{
    cs_doc d;
    int rc = cs_doc_load(&d, text, len, NULL, 0);
    if (rc == 0) {
        long at = cs_env_find(&d, k->name);
        rc = at >= 0 && cs_holds(d.t, &d.envo.m[at], k);
    }
    cs_doc_free(&d);
    return rc;
}

/* Removes member i of o from d's text into out, with the separator that
 * came with it: the one before it when it is the last (what cs_put_tail
 * added), else the one after it. The only member leaves "{}". */
static void cs_remove_member(const cs_doc *d, const cs_object *o, size_t i, sbuf *out)
{
    size_t a, b;
    if (o->n == 1)
        a = o->open + 1, b = o->close;
    else if (i == o->n - 1)
        a = o->m[i - 1].value_end, b = o->m[i].value_end;
    else
        a = o->m[i].key_start, b = o->m[i + 1].key_start;
    cs_splice(out, d->t, d->len, a, b, "", 0);
}

int claude_settings_restore(const char *text, size_t len, claude_env_restore *keys, size_t n, int env_created,
                            sbuf *out, int *empty, char *err, size_t errlen)
{
    sbuf cur = SBUF_INIT;
    sbuf_append(&cur, text ? text : "", text ? len : 0);
    cs_doc d;
    int rc = cs_doc_load(&d, cur.p, cur.len, err, errlen);
    /* last set first: the members attach added come off in the reverse
     * order they went on, each exactly as it was added */
    for (size_t j = n; rc == 0 && j-- > 0;) {
        claude_env_restore *k = &keys[j];
        long at = cs_env_find(&d, k->name);
        k->changed = 0;
        if (at == -2) {
            sbuf_fmt_into(err, errlen, "its \"env\" sets %s twice", k->name);
            rc = -1;
            break;
        }
        const cs_member *m = at >= 0 ? &d.envo.m[at] : NULL;
        if (!m || !cs_holds(d.t, m, k)) {
            /* the user's now: absent where it was absent is the original anyway */
            int same = m ? k->orig_present && m->value_end - m->value_start == k->orig_len &&
                               memcmp(d.t + m->value_start, k->orig, k->orig_len) == 0
                         : !k->orig_present;
            k->changed = !same;
            continue;
        }
        if (k->orig_present)
            cs_splice(&cur, d.t, d.len, m->value_start, m->value_end, k->orig, k->orig_len);
        else
            cs_remove_member(&d, &d.envo, (size_t)at, &cur);
        cs_doc_free(&d);
        rc = cs_doc_load(&d, cur.p, cur.len, err, errlen);
    }
    if (rc == 0 && env_created && d.env >= 0 && d.envo.n == 0) {
        cs_remove_member(&d, &d.root, (size_t)d.env, &cur);
        cs_doc_free(&d);
        rc = cs_doc_load(&d, cur.p, cur.len, err, errlen);
    }
    if (rc == 0) {
        *empty = d.blank || d.root.n == 0;
        sbuf_append(out, cur.p, cur.len);
    }
    cs_doc_free(&d);
    sbuf_free(&cur);
    return rc;
}

/* ---------- the record ---------- */

void claude_record_free(claude_record *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++) {
        sbuf_secret_wipe(&r->k[i].orig); /* an original may be a secret of the user's */
        sbuf_free(&r->k[i].written);
    }
    sbuf_secret_wipe(&r->original);
    if (r->prev) {
        claude_record_free(r->prev);
        free(r->prev);
    }
    memset(r, 0, sizeof *r);
}

claude_record_key *claude_record_key_get(claude_record *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->k[i].name, name) == 0)
            return &r->k[i];
    return NULL;
}

void claude_record_copy(claude_record *dst, const claude_record *src)
{
    *dst = *src;
    dst->prev = NULL;
    memset(&dst->original, 0, sizeof dst->original);
    sbuf_append(&dst->original, src->original.p ? src->original.p : "", src->original.len);
    for (size_t i = 0; i < src->n; i++) {
        memset(&dst->k[i].orig, 0, sizeof dst->k[i].orig);
        memset(&dst->k[i].written, 0, sizeof dst->k[i].written);
        sbuf_append(&dst->k[i].orig, src->k[i].orig.p ? src->k[i].orig.p : "", src->k[i].orig.len);
        sbuf_append(&dst->k[i].written, src->k[i].written.p ? src->k[i].written.p : "", src->k[i].written.len);
    }
}

static void cr_str(sbuf *o, const char *name, const char *v, size_t n)
{
    sbuf_printf(o, ",\n  \"%s\": ", name);
    sbuf_json_str(o, v, n);
}

static void cr_write(const claude_record *r, sbuf *o, int with_prev)
{
    sbuf_puts(o, "{\n  \"version\": 1");
    cr_str(o, "state", r->state, strlen(r->state));
    cr_str(o, "settings", r->settings, strlen(r->settings));
    cr_str(o, "db", r->db, strlen(r->db));
    cr_str(o, "gateway", r->gateway, strlen(r->gateway));
    sbuf_printf(o, ",\n  \"key_id\": %lld", (long long)r->key_id);
    cr_str(o, "key_prefix", r->key_prefix, strlen(r->key_prefix));
    cr_str(o, "key_sha256", r->key_sha, strlen(r->key_sha));
    sbuf_printf(o, ",\n  \"created_at\": %lld", (long long)r->created_at);
    sbuf_printf(o, ",\n  \"original_present\": %s", r->original_present ? "true" : "false");
    sbuf_printf(o, ",\n  \"original_mode\": %d", r->original_mode);
    cr_str(o, "original_sha256", r->original_sha, strlen(r->original_sha));
    if (r->original_present)
        cr_str(o, "original", r->original.p ? r->original.p : "", r->original.len);
    else
        sbuf_puts(o, ",\n  \"original\": null");
    sbuf_printf(o, ",\n  \"env_created\": %s", r->env_created ? "true" : "false");
    cr_str(o, "written_sha256", r->written_sha, strlen(r->written_sha));
    sbuf_printf(o, ",\n  \"restore_present\": %s", r->restore_present ? "true" : "false");
    cr_str(o, "restore_sha256", r->restore_sha, strlen(r->restore_sha));
    sbuf_puts(o, ",\n  \"keys\": [");
    for (size_t i = 0; i < r->n; i++) {
        const claude_record_key *k = &r->k[i];
        sbuf_puts(o, i ? ",\n    {\"name\": " : "\n    {\"name\": ");
        sbuf_json_str(o, k->name, strlen(k->name));
        sbuf_puts(o, ", \"orig\": ");
        if (k->orig_present)
            sbuf_json_str(o, k->orig.p ? k->orig.p : "", k->orig.len);
        else
            sbuf_puts(o, "null");
        if (k->written_sha[0]) {
            sbuf_puts(o, ", \"written_sha256\": ");
            sbuf_json_str(o, k->written_sha, strlen(k->written_sha));
        } else {
            sbuf_puts(o, ", \"written\": ");
            sbuf_json_str(o, k->written.p ? k->written.p : "", k->written.len);
        }
        sbuf_puts(o, "}");
    }
    sbuf_puts(o, r->n ? "\n  ]" : "]");
    if (with_prev && r->prev) {
        sbuf_puts(o, ",\n  \"prev\": ");
        cr_write(r->prev, o, 0);
    }
    sbuf_puts(o, "\n}");
}

void claude_record_write(const claude_record *r, sbuf *out)
{
    cr_write(r, out, 1);
    sbuf_puts(out, "\n");
}

static int cr_copy(const json_value *o, const char *name, char *dst, size_t n)
{
    const char *s = json_get_str(o, name);
    if (!s || strlen(s) >= n)
        return -1;
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

static int cr_read(const json_value *o, claude_record *r, int depth)
{
    memset(r, 0, sizeof *r);
    int64_t id = 0, created = 0, mode = 0;
    if (!o || o->type != JSON_OBJECT || json_get_num(o, "version", 0) != 1 ||
        cr_copy(o, "state", r->state, sizeof r->state) || cr_copy(o, "settings", r->settings, sizeof r->settings) ||
        cr_copy(o, "db", r->db, sizeof r->db) || cr_copy(o, "gateway", r->gateway, sizeof r->gateway) ||
        cr_copy(o, "key_prefix", r->key_prefix, sizeof r->key_prefix) ||
        cr_copy(o, "key_sha256", r->key_sha, sizeof r->key_sha) ||
        cr_copy(o, "original_sha256", r->original_sha, sizeof r->original_sha) ||
        cr_copy(o, "written_sha256", r->written_sha, sizeof r->written_sha) ||
        cr_copy(o, "restore_sha256", r->restore_sha, sizeof r->restore_sha) ||
        json_get_int64(o, "key_id", 0, INT64_MAX, &id) || json_get_int64(o, "created_at", 0, INT64_MAX, &created) ||
        json_get_int64(o, "original_mode", 0, 07777, &mode))
        return -1;
    r->key_id = id, r->created_at = created, r->original_mode = (int)mode;
    r->original_present = json_get_bool(o, "original_present", 0);
    r->env_created = json_get_bool(o, "env_created", 0);
    r->restore_present = json_get_bool(o, "restore_present", 0);
    const json_value *orig = json_get(o, "original");
    if (r->original_present) {
        if (!orig || orig->type != JSON_STRING)
            return -1;
        sbuf_append(&r->original, orig->str, orig->str_len);
    }
    const json_value *keys = json_get(o, "keys");
    if (!keys || keys->type != JSON_ARRAY || keys->count > CLAUDE_ENV_KEYS_MAX)
        return -1;
    for (const json_value *k = keys->child; k; k = k->next) {
        claude_record_key *rk = &r->k[r->n++];
        const json_value *ko = json_get(k, "orig"), *kw = json_get(k, "written");
        if (cr_copy(k, "name", rk->name, sizeof rk->name) || !ko || (ko->type != JSON_STRING && ko->type != JSON_NULL))
            return -1;
        rk->orig_present = ko->type == JSON_STRING;
        if (rk->orig_present)
            sbuf_append(&rk->orig, ko->str, ko->str_len);
        if (kw && kw->type == JSON_STRING)
            sbuf_append(&rk->written, kw->str, kw->str_len);
        else if (cr_copy(k, "written_sha256", rk->written_sha, sizeof rk->written_sha))
            return -1;
    }
    const json_value *prev = json_get(o, "prev");
    if (prev && depth == 0) {
        r->prev = calloc(1, sizeof *r->prev);
        if (!r->prev)
            abort();
        if (cr_read(prev, r->prev, 1) != 0)
            return -1;
    }
    return 0;
}

int claude_record_read(const char *text, size_t len, claude_record *r, char *err, size_t errlen)
{
    char perr[160] = "";
    json_value *doc = json_parse(text ? text : "", text ? len : 0, perr, sizeof perr);
    int rc = doc ? cr_read(doc, r, 0) : -1;
    json_free(doc);
    if (rc != 0) {
        claude_record_free(r);
        sbuf_fmt_into(err, errlen, "not an attach record%s%s", perr[0] ? ": " : "", perr);
    }
    return rc;
}
