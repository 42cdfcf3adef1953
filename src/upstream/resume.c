/* resume.c: the continuation request of a cut stream and the splice of a
 * Responses continuation (see resume.h). The body is rewritten member by
 * member with json_write, so every field the client sent (model, tools,
 * temperature, ...) goes out exactly as it came: only the messages (or
 * input) list grows by one. The splice rewrites events the same way: each
 * event written again with the few members it changes put in place. */
#include "upstream/resume.h"
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* doc written again with the array member `list` ending in an assistant
 * message of text (a string member, Responses' plain input, becomes a
 * user message first). */
static void resume_body_write(const json_value *doc, const json_value *list, const char *text, size_t len,
                              sbuf *out)
{
    sbuf_puts(out, "{");
    for (const json_value *m = doc->child; m; m = m->next) {
        if (m != doc->child)
            sbuf_puts(out, ",");
        sbuf_json_str(out, m->key, strlen(m->key));
        sbuf_puts(out, ":");
        if (m != list) {
            json_write(out, m);
            continue;
        }
        sbuf_puts(out, "[");
        if (m->type == JSON_STRING) {
            sbuf_puts(out, "{\"role\":\"user\",\"content\":");
            sbuf_json_str(out, m->str, m->str_len);
            sbuf_puts(out, "},");
        }
        for (const json_value *e = m->type == JSON_ARRAY ? m->child : NULL; e; e = e->next) {
            json_write(out, e);
            sbuf_puts(out, ",");
        }
        sbuf_puts(out, "{\"role\":\"assistant\",\"content\":");
        sbuf_json_str(out, text, len);
        sbuf_puts(out, "}]");
    }
    sbuf_puts(out, "}");
}

int resume_body_build(const json_value *doc, const char *text, size_t len, sbuf *out)
{
    const json_value *msgs = doc ? json_get(doc, "messages") : NULL;
    if (!msgs || msgs->type != JSON_ARRAY)
        return -1;
    resume_body_write(doc, msgs, text, len, out);
    return 0;
}

int resume_responses_body_build(const json_value *doc, const char *text, size_t len, sbuf *out)
{
    const json_value *input = doc ? json_get(doc, "input") : NULL;
    if (!input || (input->type != JSON_ARRAY && input->type != JSON_STRING))
        return -1;
    resume_body_write(doc, input, text, len, out);
    return 0;
}

int resume_instruction_add(int responses, const char *body, size_t len, sbuf *out)
{
    size_t s, e;
    if (json_member_span(body, len, responses ? "input" : "messages", &s, &e) != 0 || body[s] != '[' ||
        body[e - 1] != ']')
        return -1;
    sbuf_append(out, body, e - 1);
    sbuf_puts(out, json_scan_ws(body, e - 1, s + 1) < e - 1 ? "," : "");
    if (responses)
        sbuf_puts(out, "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"" RESUME_INSTRUCTION "\"}]}");
    else
        sbuf_puts(out, "{\"role\":\"user\",\"content\":\"" RESUME_INSTRUCTION "\"}");
    sbuf_append(out, body + e - 1, len - (e - 1));
    return 0;
}

/* ---------- the splice of a Responses continuation ---------- */

/* A member written in place of the one of that name (raw JSON). */
typedef struct rs_sub {
    const char *key;
    const char *raw;
    size_t len;
} rs_sub;

/* obj written whole, each member named in subs given that raw value. */
static void rs_write(sbuf *out, const json_value *obj, const rs_sub *subs, size_t n)
{
    sbuf_puts(out, "{");
    for (const json_value *m = obj->child; m; m = m->next) {
        if (m != obj->child)
            sbuf_puts(out, ",");
        sbuf_json_str(out, m->key, strlen(m->key));
        sbuf_puts(out, ":");
        size_t i = 0;
        while (i < n && !(subs[i].raw && strcmp(subs[i].key, m->key) == 0))
            i++;
        if (i < n)
            sbuf_append(out, subs[i].raw, subs[i].len);
        else
            json_write(out, m);
    }
    sbuf_puts(out, "}");
}

static void rs_emit(resume_splice *s, const char *event, const char *json, size_t len)
{
    if (event && *event) {
        sbuf_puts(s->out, "event: ");
        sbuf_puts(s->out, event);
        sbuf_puts(s->out, "\n");
    }
    sbuf_puts(s->out, "data: ");
    sbuf_append(s->out, json, len);
    sbuf_puts(s->out, "\n\n");
}

/* The event doc again, with its sequence number going on from the cut
 * stream's and the members in subs replaced. */
static void rs_emit_doc(resume_splice *s, const char *event, const json_value *doc, rs_sub *subs, size_t n)
{
    char seq[24];
    rs_sub all[8];
    size_t k = 0;
    for (size_t i = 0; i < n && k < 7; i++)
        all[k++] = subs[i];
    if (s->seq >= 0 && json_get(doc, "sequence_number")) {
        int m = snprintf(seq, sizeof seq, "%ld", s->seq++);
        all[k++] = (rs_sub){"sequence_number", seq, (size_t)m};
    }
    sbuf ev = SBUF_INIT;
    rs_write(&ev, doc, all, k);
    rs_emit(s, event, ev.p, ev.len);
    sbuf_free(&ev);
}

/* The message's own ids, as the client knows them. */
static size_t rs_ids(resume_splice *s, rs_sub *subs, sbuf *id, char oi[24], char ci[24])
{
    sbuf_json_str(id, s->item_id, strlen(s->item_id));
    int a = snprintf(oi, 24, "%ld", s->output_index), b = snprintf(ci, 24, "%ld", s->content_index);
    subs[0] = (rs_sub){"item_id", id->p, id->len};
    subs[1] = (rs_sub){"output_index", oi, (size_t)a};
    subs[2] = (rs_sub){"content_index", ci, (size_t)b};
    return 3;
}

/* Writes the finished message item: the continuation's (item, may be
 * NULL) with the cut one's id and the whole text, or one of our own. */
static void rs_msg_item(resume_splice *s, const json_value *item)
{
    sbuf_reset(&s->msg_item);
    sbuf id = SBUF_INIT, whole = SBUF_INIT, content = SBUF_INIT;
    sbuf_json_str(&id, s->item_id, strlen(s->item_id));
    sbuf_json_str(&whole, s->text.p ? s->text.p : "", s->text.len);
    const json_value *parts = item ? json_get(item, "content") : NULL;
    if (item && item->type == JSON_OBJECT && parts && parts->type == JSON_ARRAY) {
        sbuf_puts(&content, "[");
        long i = 0;
        for (const json_value *e = parts->child; e; e = e->next, i++) {
            if (e != parts->child)
                sbuf_puts(&content, ",");
            rs_sub t = {"text", whole.p, whole.len};
            if (i == s->cont_content && e->type == JSON_OBJECT)
                rs_write(&content, e, &t, 1);
            else
                json_write(&content, e);
        }
        sbuf_puts(&content, "]");
        rs_sub subs[] = {{"id", id.p, id.len}, {"content", content.p, content.len}};
        rs_write(&s->msg_item, item, subs, 2);
    } else {
        sbuf_puts(&s->msg_item, "{\"id\":");
        sbuf_append(&s->msg_item, id.p, id.len);
        sbuf_puts(&s->msg_item, ",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\","
                                "\"content\":[{\"type\":\"output_text\",\"annotations\":[],\"text\":");
        sbuf_append(&s->msg_item, whole.p, whole.len);
        sbuf_puts(&s->msg_item, "}]}");
    }
    sbuf_free(&id);
    sbuf_free(&whole);
    sbuf_free(&content);
}

/* The message's done events (text, part, item: up to and with `upto`)
 * the continuation did not send (it went on to another item, or ended,
 * without them): ours, with the whole text. */
static void rs_close(resume_splice *s, int upto)
{
    sbuf ev = SBUF_INIT, id = SBUF_INIT, whole = SBUF_INIT;
    sbuf_json_str(&id, s->item_id, strlen(s->item_id));
    sbuf_json_str(&whole, s->text.p ? s->text.p : "", s->text.len);
    const char *kinds[] = {"response.output_text.done", "response.content_part.done", "response.output_item.done"};
    int *flags[] = {&s->text_done, &s->part_done, &s->item_done};
    for (int k = 0; k <= upto && k < 3; k++) {
        if (*flags[k])
            continue;
        *flags[k] = 1;
        sbuf_reset(&ev);
        sbuf_printf(&ev, "{\"type\":\"%s\"", kinds[k]);
        if (s->seq >= 0)
            sbuf_printf(&ev, ",\"sequence_number\":%ld", s->seq++);
        if (k < 2) {
            sbuf_puts(&ev, ",\"item_id\":");
            sbuf_append(&ev, id.p, id.len);
        }
        sbuf_printf(&ev, ",\"output_index\":%ld", s->output_index);
        if (k < 2)
            sbuf_printf(&ev, ",\"content_index\":%ld", s->content_index);
        if (k == 0) {
            sbuf_puts(&ev, ",\"text\":");
            sbuf_append(&ev, whole.p, whole.len);
        } else if (k == 1) {
            sbuf_puts(&ev, ",\"part\":{\"type\":\"output_text\",\"annotations\":[],\"text\":");
            sbuf_append(&ev, whole.p, whole.len);
            sbuf_puts(&ev, "}");
        } else {
            if (!s->msg_item.len)
                rs_msg_item(s, NULL);
            sbuf_puts(&ev, ",\"item\":");
            sbuf_append(&ev, s->msg_item.p, s->msg_item.len);
        }
        sbuf_puts(&ev, "}");
        rs_emit(s, kinds[k], ev.p, ev.len);
    }
    sbuf_free(&ev);
    sbuf_free(&id);
    sbuf_free(&whole);
}

/* The client's output_index of a continuation item after the message; -1:
 * none (an item swallowed, or past RESUME_MAP_MAX). */
static long rs_mapped(const resume_splice *s, long oi)
{
    for (size_t i = 0; i < s->nmap; i++)
        if (s->map_from[i] == oi)
            return s->map_to[i];
    return -1;
}

/* response.completed / .incomplete: the cut response's id, and its output:
 * the finished items before the message, the message, the items after. */
static void rs_terminal(resume_splice *s, const char *event, const json_value *doc)
{
    rs_close(s, 2);
    const json_value *resp = json_get(doc, "response");
    if (!resp || resp->type != JSON_OBJECT) {
        rs_emit_doc(s, event, doc, NULL, 0);
        return;
    }
    sbuf id = SBUF_INIT, output = SBUF_INIT, r = SBUF_INIT;
    sbuf_json_str(&id, s->response_id, strlen(s->response_id));
    sbuf_puts(&output, "[");
    if (s->done_items.len) {
        sbuf_append(&output, s->done_items.p, s->done_items.len);
        sbuf_puts(&output, ",");
    }
    sbuf_append(&output, s->msg_item.p, s->msg_item.len);
    const json_value *out = json_get(resp, "output");
    long i = 0;
    for (const json_value *e = out && out->type == JSON_ARRAY ? out->child : NULL; e; e = e->next, i++)
        if (rs_mapped(s, i) >= 0) {
            sbuf_puts(&output, ",");
            json_write(&output, e);
        }
    sbuf_puts(&output, "]");
    rs_sub rsubs[] = {{"id", s->response_id[0] ? id.p : NULL, id.len}, {"output", output.p, output.len}};
    rs_write(&r, resp, rsubs, 2);
    rs_sub sub = {"response", r.p, r.len};
    rs_emit_doc(s, event, doc, &sub, 1);
    sbuf_free(&id);
    sbuf_free(&output);
    sbuf_free(&r);
}

/* An event of the message being continued. */
static void rs_message_event(resume_splice *s, const char *event, const json_value *doc, const char *type)
{
    int64_t ci = -1;
    json_get_int64(doc, "content_index", 0, INT32_MAX, &ci);
    rs_sub subs[5];
    sbuf id = SBUF_INIT, extra = SBUF_INIT;
    char oi[24], cis[24];
    size_t n = rs_ids(s, subs, &id, oi, cis);
    if (strcmp(type, "response.content_part.added") == 0) {
        if (s->cont_content < 0 && ci >= 0)
            s->cont_content = (long)ci; /* the client has the part already */
    } else if (strcmp(type, "response.output_item.done") == 0) {
        if (!s->item_done) { /* the continuation's item, with our id and the whole text */
            rs_msg_item(s, json_get(doc, "item"));
            rs_close(s, 2);
        }
    } else if (ci < 0 || ci != s->cont_content || s->item_done) {
        /* another part of the continuation's message: the client's message has one */
    } else if (strcmp(type, "response.output_text.delta") == 0) {
        const json_value *d = json_get(doc, "delta");
        if (d && d->type == JSON_STRING && !s->text_done) {
            sbuf_append(&s->text, d->str, d->str_len);
            rs_emit_doc(s, event, doc, subs, n);
        }
    } else if (strcmp(type, "response.output_text.done") == 0) {
        if (!s->text_done) {
            s->text_done = 1;
            sbuf_json_str(&extra, s->text.p ? s->text.p : "", s->text.len);
            subs[n++] = (rs_sub){"text", extra.p, extra.len};
            rs_emit_doc(s, event, doc, subs, n);
        }
    } else if (strcmp(type, "response.content_part.done") == 0) {
        const json_value *part = json_get(doc, "part");
        if (!s->part_done && part && part->type == JSON_OBJECT) {
            rs_close(s, 0); /* never a part done before its text's */
            sbuf whole = SBUF_INIT;
            sbuf_json_str(&whole, s->text.p ? s->text.p : "", s->text.len);
            rs_sub t = {"text", whole.p, whole.len};
            rs_write(&extra, part, &t, 1);
            sbuf_free(&whole);
            subs[n++] = (rs_sub){"part", extra.p, extra.len};
            s->part_done = 1;
            rs_emit_doc(s, event, doc, subs, n);
        }
    } else if (!s->text_done) {
        rs_emit_doc(s, event, doc, subs, n); /* e.g. an annotation of the text */
    }
    sbuf_free(&id);
    sbuf_free(&extra);
}

static void rs_on_event(void *ud, const char *event, const char *data, size_t len)
{
    resume_splice *s = ud;
    json_value *doc = json_parse(data, len, NULL, 0);
    const char *type = doc && doc->type == JSON_OBJECT ? json_get_str(doc, "type") : NULL;
    if (!type) { /* not an event of the API: as it came */
        rs_emit(s, event, data, len);
        json_free(doc);
        return;
    }
    int64_t oi = -1;
    int has_oi = json_get_int64(doc, "output_index", 0, INT32_MAX, &oi) == 0;
    if (strcmp(type, "response.created") == 0 || strcmp(type, "response.in_progress") == 0) {
        /* the client has its response started already */
    } else if (strcmp(type, "response.completed") == 0 || strcmp(type, "response.incomplete") == 0) {
        rs_terminal(s, event, doc);
    } else if (strcmp(type, "response.output_item.added") == 0 && has_oi) {
        const json_value *item = json_get(doc, "item");
        const char *itype = json_get_str(item, "type");
        if (s->cont_index < 0 && !s->item_done && itype && strcmp(itype, "message") == 0) {
            s->cont_index = (long)oi; /* the client's message goes on: its item is open already */
        } else if (s->cont_index < 0 && !s->item_done && itype && strcmp(itype, "reasoning") == 0) {
            /* thinking before the continued text: not the client's */
        } else if (s->nmap < RESUME_MAP_MAX) {
            rs_close(s, 2); /* the message ends where the next item starts */
            s->map_from[s->nmap] = (long)oi;
            s->map_to[s->nmap++] = s->next_index;
            char to[24];
            int m = snprintf(to, sizeof to, "%ld", s->next_index++);
            rs_sub sub = {"output_index", to, (size_t)m};
            rs_emit_doc(s, event, doc, &sub, 1);
        }
    } else if (has_oi && (long)oi == s->cont_index) {
        rs_message_event(s, event, doc, type);
    } else if (has_oi) {
        long to = rs_mapped(s, (long)oi);
        if (to >= 0) {
            char tos[24];
            int m = snprintf(tos, sizeof tos, "%ld", to);
            rs_sub sub = {"output_index", tos, (size_t)m};
            rs_emit_doc(s, event, doc, &sub, 1);
        }
    } else if (strcmp(type, "response.failed") == 0 && json_get(doc, "response")) {
        const json_value *resp = json_get(doc, "response");
        sbuf id = SBUF_INIT, r = SBUF_INIT;
        sbuf_json_str(&id, s->response_id, strlen(s->response_id));
        rs_sub rsub = {"id", s->response_id[0] ? id.p : NULL, id.len};
        if (resp->type == JSON_OBJECT)
            rs_write(&r, resp, &rsub, 1);
        rs_sub sub = {"response", r.len ? r.p : NULL, r.len};
        rs_emit_doc(s, event, doc, &sub, 1);
        sbuf_free(&id);
        sbuf_free(&r);
    } else {
        rs_emit_doc(s, event, doc, NULL, 0); /* an error, rate limits, a keepalive: in its turn */
    }
    json_free(doc);
}

void resume_splice_init(resume_splice *s, const resume_cut *cut)
{
    memset(s, 0, sizeof *s);
    sbuf_copy_cstr(s->response_id, sizeof s->response_id, cut->response_id ? cut->response_id : "");
    sbuf_copy_cstr(s->item_id, sizeof s->item_id, cut->item_id ? cut->item_id : "");
    s->output_index = cut->output_index;
    s->content_index = cut->content_index;
    s->seq = cut->last_seq >= 0 ? cut->last_seq + 1 : -1;
    sbuf_append(&s->text, cut->text ? cut->text : "", cut->text_len);
    if (cut->done_len)
        sbuf_append(&s->done_items, cut->done_items, cut->done_len);
    s->cont_index = s->cont_content = -1;
    s->next_index = cut->output_index + 1;
    sse_init(&s->parser, rs_on_event, s);
}

void resume_splice_feed(resume_splice *s, const char *buf, size_t n, sbuf *out)
{
    s->out = out;
    sse_feed(&s->parser, buf, n);
    s->out = NULL;
}

void resume_splice_free(resume_splice *s)
{
    sbuf_free(&s->text);
    sbuf_free(&s->done_items);
    sbuf_free(&s->msg_item);
    sse_free(&s->parser);
}
