/* conversation.c: the body that replays a stored conversation on another
 * account, and what the gateway records of a relayed turn (see
 * conversation.h for what and why). Everything is spliced from the bytes
 * it was given: a container is walked member by member with
 * json_scan_value (which validates as json_parse does and allocates
 * nothing), and members and items are copied as they are. Work is linear
 * in the input; only keys holding escapes and the ids are decoded (with
 * json_parse, on their few bytes). */
#include "upstream/conversation.h"
#include "base/json.h"
#include <string.h>

/* A member of an object (key and value, the key with its quotes) or an
 * element of an array (value only): byte offsets [start, end). */
typedef struct conv_span {
    size_t ks, ke, vs, ve;
} conv_span;

/* Walks the one container that makes up a whole buffer. */
typedef struct conv_iter {
    const char *buf;
    size_t len, pos;
    int object; /* members of an object, else elements of an array */
    int depth;  /* containers open around each element where it will be written */
    int first;
} conv_iter;

/* 0 when buf (whitespace around allowed) opens an object (object 1) or an
 * array (object 0); -1 otherwise. depth: how many containers enclose its
 * elements in the document they are written into (json_parse's 128-level
 * limit counts them there: an item of a recorded array lands one level
 * deeper in a rebuilt body, inside its input array, and must still parse). */
static int conv_open(conv_iter *it, const char *buf, size_t len, int object, int depth)
{
    it->buf = buf;
    it->len = buf ? len : 0;
    it->object = object;
    it->depth = depth;
    it->first = 1;
    size_t p = json_scan_ws(buf, it->len, 0);
    if (!buf || p >= it->len || buf[p] != (object ? '{' : '['))
        return -1;
    it->pos = p + 1;
    return 0;
}

/* The next member or element into *s: 1 one was read, 0 the container
 * closed with nothing but whitespace after it, -1 the buffer is not one
 * valid JSON document. */
static int conv_next(conv_iter *it, conv_span *s)
{
    const char *b = it->buf;
    size_t len = it->len;
    char close = it->object ? '}' : ']';
    size_t p = json_scan_ws(b, len, it->pos);
    if (p >= len)
        return -1;
    if (b[p] == close) /* after a value, or at once: {} [] */
        return json_scan_ws(b, len, p + 1) == len ? 0 : -1;
    if (!it->first) {
        if (b[p] != ',')
            return -1;
        p = json_scan_ws(b, len, p + 1);
    }
    if (it->object) {
        size_t e = p < len && b[p] == '"' ? json_scan_value(b, len, p, it->depth) : 0;
        if (!e)
            return -1;
        s->ks = p;
        s->ke = e;
        p = json_scan_ws(b, len, e);
        if (p >= len || b[p] != ':')
            return -1;
        p = json_scan_ws(b, len, p + 1);
    }
    size_t e = json_scan_value(b, len, p, it->depth);
    if (!e)
        return -1;
    s->vs = p;
    s->ve = e;
    it->pos = e;
    it->first = 0;
    return 1;
}

/* The JSON string at [start, end) (quotes included, already validated)
 * decoded into out (cap bytes with the NUL); 0, or -1 when it holds a NUL
 * or does not fit. A string without escapes is copied; others go through
 * json_parse, after a bound on their raw size (an escape is at most six
 * bytes for one decoded byte or more). */
static int conv_decode(const char *b, size_t start, size_t end, char *out, size_t cap)
{
    size_t raw = end - start - 2;
    const char *s = b + start + 1;
    if (!memchr(s, '\\', raw)) {
        if (raw >= cap || memchr(s, '\0', raw))
            return -1;
        memcpy(out, s, raw);
        out[raw] = '\0';
        return 0;
    }
    if (raw > (cap - 1) * 6)
        return -1;
    json_value *v = json_parse(b + start, end - start, NULL, 0);
    int ok = v && v->type == JSON_STRING && v->str_len < cap && !memchr(v->str, '\0', v->str_len);
    if (ok)
        memcpy(out, v->str, v->str_len + 1);
    json_free(v);
    return ok ? 0 : -1;
}

/* 1 when the member's key is name (decoded: "inp\u0075t" is "input", as
 * json_get sees it). */
static int conv_key_is(const char *b, const conv_span *s, const char *name)
{
    size_t n = strlen(name), raw = s->ke - s->ks - 2;
    const char *k = b + s->ks + 1;
    if (!memchr(k, '\\', raw))
        return raw == n && memcmp(k, name, n) == 0;
    char key[32];
    return n < sizeof key && conv_decode(b, s->ks, s->ke, key, sizeof key) == 0 && strcmp(key, name) == 0;
}

/* The members of a request body this module reads (the last of each
 * name, as json_get reads them). */
typedef struct conv_body {
    conv_span input, prev, store, response, id, output;
    int has_input, has_prev, has_store, has_response, has_id, has_output;
} conv_body;

/* Reads the members of the object buf (len bytes) that matter here; 0, or
 * -1 when buf is not a valid JSON object. */
static int conv_body_read(const char *buf, size_t len, conv_body *m)
{
    conv_iter it;
    conv_span s;
    int r;
    memset(m, 0, sizeof *m);
    if (conv_open(&it, buf, len, 1, 1) != 0)
        return -1;
    while ((r = conv_next(&it, &s)) == 1) {
        /* the key's first byte rules most members out (an escape may be any) */
        if (!memchr("ipsro\\", buf[s.ks + 1], 6))
            continue;
        if (conv_key_is(buf, &s, "input"))
            m->input = s, m->has_input = 1;
        else if (conv_key_is(buf, &s, "previous_response_id"))
            m->prev = s, m->has_prev = 1;
        else if (conv_key_is(buf, &s, "store"))
            m->store = s, m->has_store = 1;
        else if (conv_key_is(buf, &s, "id"))
            m->id = s, m->has_id = 1;
        else if (conv_key_is(buf, &s, "output"))
            m->output = s, m->has_output = 1;
        else if (conv_key_is(buf, &s, "response"))
            m->response = s, m->has_response = 1;
    }
    return r;
}

/* Appends the request input at s (a string or an array, checked by the
 * caller) as an array's items, without the brackets: the string as one
 * user message, the array's elements as they are. Counts the items into
 * *items; -1 when the array is not valid JSON. */
static int conv_put_input_items(sbuf *out, const char *b, const conv_span *s, size_t *items, int *first)
{
    if (b[s->vs] == '"') {
        sbuf_puts(out, *first ? "{\"type\":\"message\",\"role\":\"user\",\"content\":"
                              : ",{\"type\":\"message\",\"role\":\"user\",\"content\":");
        sbuf_append(out, b + s->vs, s->ve - s->vs);
        sbuf_puts(out, "}");
        *first = 0;
        (*items)++;
        return 0;
    }
    conv_iter it;
    conv_span e;
    int r;
    if (conv_open(&it, b + s->vs, s->ve - s->vs, 0, 2) != 0) /* in the root object's input array */
        return -1;
    while ((r = conv_next(&it, &e)) == 1 && *items <= CONVERSATION_MAX_ITEMS) {
        if (!*first)
            sbuf_append(out, ",", 1);
        sbuf_append(out, b + s->vs + e.vs, e.ve - e.vs);
        *first = 0;
        (*items)++;
    }
    return r < 0 ? -1 : 0;
}

/* Appends the elements of the recorded array text a (n bytes) as items;
 * -1 when it is not a JSON array. */
static int conv_put_array_items(sbuf *out, const char *a, size_t n, size_t *items, int *first)
{
    if (!a)
        return -1;
    conv_span s = {0, 0, 0, n};
    size_t p = json_scan_ws(a, n, 0);
    if (p >= n || a[p] != '[')
        return -1;
    s.vs = p;
    return conv_put_input_items(out, a, &s, items, first);
}

/* ---------- the rebuild ---------- */

static int conv_fail(sbuf *out, size_t mark, char *err, size_t errlen, const char *msg)
{
    out->len = mark;
    if (out->p)
        out->p[mark] = '\0';
    sbuf_fmt_into(err, errlen, "%s", msg);
    return -1;
}

/* 0 when chain[0..n) is linked oldest first and ends at prev; else err. */
static int conv_chain_check(const conv_link *chain, size_t n, const char *prev, char *err, size_t errlen)
{
    for (size_t k = 0; k < n; k++) {
        const conv_link *l = &chain[k];
        if (!l->response_id || !*l->response_id) {
            sbuf_fmt_into(err, errlen, "turn %zu of the stored conversation has no response id", k + 1);
            return -1;
        }
        const char *want = k ? chain[k - 1].response_id : NULL;
        const char *have = l->previous_response_id && *l->previous_response_id ? l->previous_response_id : NULL;
        if (!want && have) {
            sbuf_fmt_into(err, errlen, "the stored conversation starts at %s, which continues %s: its start is missing",
                          l->response_id, have);
            return -1;
        }
        if (want && (!have || strcmp(want, have) != 0)) {
            sbuf_fmt_into(err, errlen, "turn %zu of the stored conversation (%s) does not continue turn %zu (%s)",
                          k + 1, l->response_id, k, want);
            return -1;
        }
    }
    if (strcmp(chain[n - 1].response_id, prev) != 0) {
        sbuf_fmt_into(err, errlen, "the stored conversation ends at %s, not at the request's previous_response_id %s",
                      chain[n - 1].response_id, prev);
        return -1;
    }
    return 0;
}

/* The rebuilt input array: the chain's turns, then the request's own. */
static int conv_put_input(sbuf *out, size_t mark, const conv_link *chain, size_t n, const char *body,
                          const conv_body *m, char *err, size_t errlen)
{
    size_t items = 0;
    int first = 1;
    char msg[160];
    sbuf_puts(out, "\"input\":[");
    for (size_t k = 0; k < n; k++) {
        const char *what = "input";
        int r = conv_put_array_items(out, chain[k].input_json, chain[k].input_len, &items, &first);
        if (r == 0) {
            what = "output";
            r = conv_put_array_items(out, chain[k].output_json, chain[k].output_len, &items, &first);
        }
        if (r != 0) {
            sbuf_fmt_into(msg, sizeof msg, "the recorded %s of turn %zu (%s) is not a JSON array (or nests too deep)",
                          what, k + 1, chain[k].response_id);
            return conv_fail(out, mark, err, errlen, msg);
        }
        if (items > CONVERSATION_MAX_ITEMS)
            break;
    }
    if (items <= CONVERSATION_MAX_ITEMS && m->has_input && conv_put_input_items(out, body, &m->input, &items, &first) != 0)
        return conv_fail(out, mark, err, errlen, "the request's input is not valid JSON");
    if (items > CONVERSATION_MAX_ITEMS) {
        sbuf_fmt_into(msg, sizeof msg, "the conversation has more than %d items; a rebuilt request may have at most %d",
                      CONVERSATION_MAX_ITEMS, CONVERSATION_MAX_ITEMS);
        return conv_fail(out, mark, err, errlen, msg);
    }
    sbuf_puts(out, "]");
    return 0;
}

int conversation_rebuild(const conv_link *chain, size_t n, const char *body, size_t len, sbuf *out, char *err,
                         size_t errlen)
{
    size_t mark = out->len;
    conv_body m;
    char prev[CONVERSATION_ID_MAX], msg[256];
    if (!chain || n == 0)
        return conv_fail(out, mark, err, errlen, "no stored turns to rebuild the conversation from");
    if (conv_body_read(body, len, &m) != 0)
        return conv_fail(out, mark, err, errlen, "the request body is not a valid JSON object");
    if (!m.has_prev || body[m.prev.vs] == 'n')
        return conv_fail(out, mark, err, errlen, "the request has no previous_response_id to rebuild");
    if (body[m.prev.vs] != '"' || conv_decode(body, m.prev.vs, m.prev.ve, prev, sizeof prev) != 0 || !prev[0])
        return conv_fail(out, mark, err, errlen, "'previous_response_id' must be a string of 1 to 127 bytes");
    if (m.has_input && body[m.input.vs] != '"' && body[m.input.vs] != '[')
        return conv_fail(out, mark, err, errlen, "'input' must be a string or an array");
    if (conv_chain_check(chain, n, prev, msg, sizeof msg) != 0)
        return conv_fail(out, mark, err, errlen, msg);
    /* An upper bound of the result, before anything is copied. */
    size_t total = len + 64;
    for (size_t k = 0; k < n && total <= CONVERSATION_MAX_BYTES; k++)
        total += chain[k].input_len + chain[k].output_len + 2;
    if (total > CONVERSATION_MAX_BYTES) {
        sbuf_fmt_into(msg, sizeof msg, "the conversation is more than %zu bytes; a rebuilt request may have at most %zu",
                      CONVERSATION_MAX_BYTES, CONVERSATION_MAX_BYTES);
        return conv_fail(out, mark, err, errlen, msg);
    }
    sbuf_reserve(out, total);
    /* The input goes where the last "input" stood, else where the last
     * previous_response_id stood; every copy of both is left out. */
    size_t where = m.has_input ? m.input.ks : m.prev.ks;
    conv_iter it;
    conv_span s;
    int first = 1;
    if (conv_open(&it, body, len, 1, 1) != 0) /* conv_body_read read it whole: cannot fail */
        return conv_fail(out, mark, err, errlen, "the request body is not a JSON object");
    sbuf_append(out, "{", 1);
    while (conv_next(&it, &s) == 1) {
        int ours = conv_key_is(body, &s, "input") || conv_key_is(body, &s, "previous_response_id");
        if (ours && s.ks != where)
            continue;
        if (!first)
            sbuf_append(out, ",", 1);
        first = 0;
        if (ours) {
            if (conv_put_input(out, mark, chain, n, body, &m, err, errlen) != 0)
                return -1;
            continue;
        }
        sbuf_append(out, body + s.ks, s.ke - s.ks);
        sbuf_append(out, ":", 1);
        sbuf_append(out, body + s.vs, s.ve - s.vs);
    }
    sbuf_append(out, "}", 1);
    return 0;
}

/* ---------- what is recorded ---------- */

int conversation_record_input(const char *body, size_t len, sbuf *input_json, char prev_id[CONVERSATION_ID_MAX],
                              int *store_flag)
{
    conv_body m;
    prev_id[0] = '\0';
    *store_flag = 1;
    if (conv_body_read(body, len, &m) != 0)
        return -1;
    if (m.has_input && body[m.input.vs] != '"' && body[m.input.vs] != '[')
        return -1;
    if (m.has_prev && body[m.prev.vs] != 'n' &&
        (body[m.prev.vs] != '"' || conv_decode(body, m.prev.vs, m.prev.ve, prev_id, CONVERSATION_ID_MAX) != 0)) {
        prev_id[0] = '\0';
        return -1;
    }
    if (m.has_store && body[m.store.vs] == 'f')
        *store_flag = 0;
    if (!m.has_input)
        sbuf_puts(input_json, "[]");
    else if (body[m.input.vs] == '[')
        sbuf_append(input_json, body + m.input.vs, m.input.ve - m.input.vs);
    else {
        size_t items = 0;
        int first = 1;
        sbuf_puts(input_json, "[");
        conv_put_input_items(input_json, body, &m.input, &items, &first);
        sbuf_puts(input_json, "]");
    }
    return 0;
}

int conversation_record_output(const char *response_json, size_t len, sbuf *output_json,
                               char id[CONVERSATION_ID_MAX])
{
    conv_body m;
    id[0] = '\0';
    if (conv_body_read(response_json, len, &m) != 0)
        return -1;
    const char *b = response_json;
    if (m.has_response && b[m.response.vs] == '{') { /* a streamed event: the response is its member */
        b += m.response.vs;
        if (conv_body_read(b, m.response.ve - m.response.vs, &m) != 0)
            return -1;
    }
    if (!m.has_id || !m.has_output || b[m.id.vs] != '"' || b[m.output.vs] != '[' ||
        conv_decode(b, m.id.vs, m.id.ve, id, CONVERSATION_ID_MAX) != 0 || !id[0]) {
        id[0] = '\0';
        return -1;
    }
    sbuf_append(output_json, b + m.output.vs, m.output.ve - m.output.vs);
    return 0;
}
