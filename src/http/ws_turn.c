/* ws_turn.c: a Responses WebSocket frame as an HTTP request, and what a
 * turn's answer leaves for the next one (see ws_turn.h). Members are
 * spliced byte for byte, as upstream/conversation.c does: the frame's
 * numbers and escapes reach the upstream as Codex wrote them. The request
 * is written over the message itself, in its own buffer: each member kept
 * moves towards the start (a message may be as large as a body, and a
 * second copy of it would be held beside the first; issue 33). */
#include "http/ws_turn.h"
#include "base/json.h"
#include "upstream/conversation.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* client_metadata entries that are headers over HTTP, and that the proxy
 * forwards (proxy_attempt.c): a turn over the socket reaches the upstream
 * with the same headers as one over HTTP. */
static const char *const ws_metadata_headers[] = {
    "x-codex-turn-state", "x-codex-turn-metadata", "x-codex-beta-features", "x-codex-window-id",
    "x-codex-parent-thread-id", "x-openai-subagent", "x-client-request-id", "session_id", "session-id",
    "thread-id",
};
#define WS_N_METADATA_HEADERS (sizeof ws_metadata_headers / sizeof *ws_metadata_headers)
_Static_assert(WS_N_METADATA_HEADERS <= WS_TURN_MAX_HEADERS, "room for every forwarded header");

typedef struct ws_member {
    size_t k0, k1; /* the key's bytes between its quotes */
    size_t v0, v1; /* the value */
} ws_member;

/* Calls fn for each member of the JSON object buf[0..len), in order.
 * Returns 0, or -1 when buf is not exactly one valid JSON object. */
static int ws_members(const char *buf, size_t len, int (*fn)(void *ud, const char *buf, const ws_member *m),
                      void *ud)
{
    size_t pos = json_scan_ws(buf, len, 0);
    if (pos >= len || buf[pos] != '{')
        return -1;
    size_t end = json_scan_value(buf, len, pos, 0);
    if (!end || json_scan_ws(buf, len, end) != len)
        return -1;
    pos = json_scan_ws(buf, len, pos + 1);
    if (buf[pos] == '}')
        return 0;
    for (;;) { /* validated above: every step below holds */
        ws_member m;
        size_t kend = json_scan_value(buf, len, pos, 1);
        if (!kend)
            return -1;
        m.k0 = pos + 1;
        m.k1 = kend - 1;
        pos = json_scan_ws(buf, len, kend);
        pos = json_scan_ws(buf, len, pos + 1); /* past ':' */
        m.v0 = pos;
        m.v1 = json_scan_value(buf, len, pos, 1);
        if (!m.v1)
            return -1;
        if (fn(ud, buf, &m) != 0)
            return -1;
        pos = json_scan_ws(buf, len, m.v1);
        if (buf[pos] == '}')
            return 0;
        pos = json_scan_ws(buf, len, pos + 1); /* past ',' */
    }
}

/* 1 when the member's key is name. A key written with escapes is decoded. */
static int ws_key_is(const char *buf, const ws_member *m, const char *name)
{
    size_t n = m->k1 - m->k0;
    if (!memchr(buf + m->k0, '\\', n))
        return n == strlen(name) && memcmp(buf + m->k0, name, n) == 0;
    json_value *k = json_parse(buf + m->k0 - 1, n + 2, NULL, 0);
    int is = k && k->type == JSON_STRING && k->str_len == strlen(name) && memcmp(k->str, name, k->str_len) == 0;
    json_free(k);
    return is;
}

/* The member's value as a string (decoded) into out; -1 if it is not a
 * string or does not fit. */
static int ws_value_str(const char *buf, const ws_member *m, char *out, size_t n)
{
    if (buf[m->v0] != '"')
        return -1;
    json_value *v = json_parse(buf + m->v0, m->v1 - m->v0, NULL, 0);
    int ok = v && v->type == JSON_STRING && v->str_len < n && !memchr(v->str, '\0', v->str_len);
    if (ok)
        memcpy(out, v->str, v->str_len + 1);
    json_free(v);
    return ok ? 0 : -1;
}

typedef struct ws_reader {
    ws_request *r;
    char *out;            /* the request, made from the members that stay, over the message */
    size_t out_len;
    int members;          /* members written so far */
    char type[64];
    int has_type;
    int warmup;
    int has_prev;
    char prev[CONVERSATION_ID_MAX];
    int prev_bad;         /* not a string (or too long): left for the HTTP path to judge */
} ws_reader;

/* A header value is sent as it is: it must hold no control character. */
static int ws_header_value_ok(const char *s, size_t n)
{
    if (!n || n > WS_TURN_HEADER_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 0;
    return 1;
}

static void ws_read_metadata(ws_reader *rd, const char *buf, const ws_member *m)
{
    json_value *md = json_parse(buf + m->v0, m->v1 - m->v0, NULL, 0);
    if (md && md->type == JSON_OBJECT)
        for (size_t i = 0; i < WS_N_METADATA_HEADERS; i++) {
            const json_value *v = json_get(md, ws_metadata_headers[i]);
            if (!v || v->type != JSON_STRING || !ws_header_value_ok(v->str, v->str_len))
                continue;
            ws_header *h = &rd->r->headers[rd->r->n_headers++];
            h->name = ws_metadata_headers[i];
            h->value = malloc(v->str_len + 1);
            if (!h->value)
                abort(); /* same policy as sbuf */
            memcpy(h->value, v->str, v->str_len + 1);
        }
    json_free(md);
}

static int ws_on_member(void *ud, const char *buf, const ws_member *m)
{
    ws_reader *rd = ud;
    if (ws_key_is(buf, m, "type")) {
        rd->has_type = ws_value_str(buf, m, rd->type, sizeof rd->type) == 0;
        return 0;
    }
    if (ws_key_is(buf, m, "generate")) {
        rd->warmup = m->v1 - m->v0 == 5 && memcmp(buf + m->v0, "false", 5) == 0;
        return 0;
    }
    if (ws_key_is(buf, m, "client_metadata")) {
        if (!rd->r->n_headers) /* the first one only */
            ws_read_metadata(rd, buf, m);
        return 0;
    }
    if (ws_key_is(buf, m, "stream"))
        return 0; /* the answer comes as events: always streamed */
    if (ws_key_is(buf, m, "model"))
        ws_value_str(buf, m, rd->r->model, sizeof rd->r->model);
    if (ws_key_is(buf, m, "previous_response_id")) {
        rd->has_prev = 1;
        rd->prev_bad = ws_value_str(buf, m, rd->prev, sizeof rd->prev) != 0;
        if (rd->prev_bad && m->v1 - m->v0 == 4 && memcmp(buf + m->v0, "null", 4) == 0) {
            rd->has_prev = 0; /* null: none */
            rd->prev_bad = 0;
        }
    }
    /* "key" : value, as written, moved down: what is written so far ends at
     * or before the previous member's end, and at least one byte ({ or ,)
     * stands between that and this key, so the separator lands on bytes
     * already read and the member ends at or before its old end, where the
     * scan goes on */
    rd->out[rd->out_len++] = rd->members++ ? ',' : '{';
    memmove(rd->out + rd->out_len, buf + m->k0 - 1, m->v1 - (m->k0 - 1));
    rd->out_len += m->v1 - (m->k0 - 1);
    return 0;
}

static ws_frame_kind ws_bad(ws_request *r, const char *code, const char *message)
{
    r->error_status = 400;
    r->error_code = code;
    sbuf_copy_cstr(r->error_message, sizeof r->error_message, message);
    sbuf_free(&r->body);
    return WS_FRAME_BAD;
}

ws_frame_kind ws_frame_request(sbuf *message, const conv_link *last, ws_request *out)
{
    memset(out, 0, sizeof *out);
    sbuf body = *message; /* taken: the request is written over it */
    *message = (sbuf)SBUF_INIT;
    ws_reader rd = {.r = out, .out = body.p};
    if (!body.p || ws_members(body.p, body.len, ws_on_member, &rd) != 0) {
        sbuf_free(&body);
        return ws_bad(out, "invalid_json", "a WebSocket message must be one JSON object");
    }
    if (!rd.has_type) {
        sbuf_free(&body);
        return ws_bad(out, "invalid_value", "a WebSocket message needs a string \"type\"");
    }
    if (strcmp(rd.type, "response.processed") == 0) {
        sbuf_free(&body);
        return WS_FRAME_IGNORE;
    }
    if (strcmp(rd.type, "response.create") != 0) {
        sbuf_free(&body);
        char msg[160];
        snprintf(msg, sizeof msg, "unsupported message type '%.64s': this gateway serves response.create", rd.type);
        return ws_bad(out, "unsupported_message_type", msg);
    }
    body.len = rd.out_len; /* "type" was dropped: room for what follows without growing */
    sbuf_append(&body, rd.members ? "," : "{", 1);
    sbuf_puts(&body, "\"stream\":true}");
    if (rd.has_prev && !rd.prev_bad && last && last->response_id && strcmp(rd.prev, last->response_id) == 0) {
        char err[160];
        conv_link link = *last;
        link.previous_response_id = NULL; /* the rebuild starts the chain here */
        if (conversation_rebuild(&link, 1, body.p, body.len, &out->body, err, sizeof err) != 0) {
            sbuf_free(&body);
            char msg[224];
            snprintf(msg, sizeof msg, "cannot continue the previous response: %s", err);
            return ws_bad(out, "invalid_value", msg);
        }
        sbuf_free(&body);
        out->chained = 1;
    } else {
        out->body = body;
    }
    return rd.warmup ? WS_FRAME_WARMUP : WS_FRAME_CREATE;
}

void ws_request_free(ws_request *r)
{
    sbuf_free(&r->body);
    for (size_t i = 0; i < r->n_headers; i++)
        free(r->headers[i].value);
    r->n_headers = 0;
}

const char *ws_request_header(const ws_request *r, const char *name)
{
    for (size_t i = 0; i < r->n_headers; i++)
        if (strcmp(r->headers[i].name, name) == 0)
            return r->headers[i].value;
    return NULL;
}

/* ---------- what an answer leaves ---------- */

void ws_event_type(const char *data, size_t len, char *out, size_t n)
{
    out[0] = '\0';
    size_t lim = len < 256 ? len : 256;
    const char *k = memmem(data, lim, "\"type\"", 6);
    if (!k)
        return;
    size_t i = (size_t)(k - data) + 6;
    while (i < lim && (data[i] == ' ' || data[i] == ':' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r'))
        i++;
    if (i >= lim || data[i] != '"')
        return;
    i++;
    size_t o = 0;
    while (i < lim && data[i] != '"' && data[i] != '\\' && o + 1 < n)
        out[o++] = data[i++];
    if (i >= lim || data[i] != '"')
        o = 0; /* cut, escaped or too long: not a type this reader knows */
    out[o] = '\0';
}

void ws_collect_init(ws_collect *c, size_t max_bytes)
{
    memset(c, 0, sizeof *c);
    c->max_bytes = max_bytes;
}

void ws_collect_free(ws_collect *c)
{
    sbuf_free(&c->items);
    sbuf_free(&c->output);
}

/* A response.output_item.done: its item, kept as written. */
static void ws_collect_item(ws_collect *c, const char *data, size_t len)
{
    size_t s, e;
    if (c->overflow || json_member_span(data, len, "item", &s, &e) != 0 || data[s] != '{')
        return;
    if (c->items.len + (e - s) + 2 > c->max_bytes) {
        c->overflow = 1;
        sbuf_free(&c->items);
        c->n_items = 0;
        return;
    }
    sbuf_append(&c->items, c->n_items++ ? "," : "[", 1);
    sbuf_append(&c->items, data + s, e - s);
}

void ws_collect_event(ws_collect *c, const char *data, size_t len)
{
    char type[64];
    ws_event_type(data, len, type, sizeof type);
    if (strcmp(type, "response.output_item.done") == 0) {
        ws_collect_item(c, data, len);
        return;
    }
    if (strcmp(type, "response.failed") == 0 || strcmp(type, "response.incomplete") == 0 ||
        strcmp(type, "error") == 0) {
        c->terminal = 1;
        return;
    }
    if (strcmp(type, "response.completed") != 0)
        return;
    c->terminal = 1;
    sbuf out = SBUF_INIT;
    char id[CONVERSATION_ID_MAX];
    if (conversation_record_output(data, len, &out, id) != 0) {
        sbuf_free(&out);
        return;
    }
    /* an empty output beside items streamed: the items are the output */
    size_t p = json_scan_ws(out.p, out.len, 1);
    if (p < out.len && out.p[p] == ']' && c->n_items && !c->overflow) {
        sbuf_reset(&out);
        sbuf_append(&out, c->items.p, c->items.len);
        sbuf_append(&out, "]", 1);
    }
    if (out.len > c->max_bytes) {
        c->overflow = 1;
        sbuf_free(&out);
        return;
    }
    sbuf_free(&c->output);
    c->output = out;
    memcpy(c->response_id, id, sizeof c->response_id < sizeof id ? sizeof c->response_id : sizeof id);
    c->response_id[sizeof c->response_id - 1] = '\0';
    c->completed = 1;
}
