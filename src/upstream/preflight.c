/* preflight.c: the hold/commit/error decision for upstream SSE streams
 * (preflight.h). Each event's data is read as JSON and sorted into
 * semantic output, terminal, error or bookkeeping (ids, model, usage), for
 * both the Responses API and Chat Completions shapes. Chat chunks are read
 * in one pass without building a tree; after commit, text deltas are
 * recognised without reading them at all (docs/performance.md, "Streamed
 * path"). */
#include "upstream/preflight.h"
#include "base/json.h"
#include "upstream/usage.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

static void preflight_on_event(void *ud, const char *event, const char *data, size_t len);

void preflight_init(preflight *pf, api_kind api, size_t max_bytes)
{
    memset(pf, 0, sizeof *pf);
    pf->api = api;
    pf->state = PF_HOLD;
    pf->max_bytes = max_bytes;
    pf->input_tokens = pf->output_tokens = pf->total_tokens = pf->cached_tokens = -1;
    pf->rsp_seq = -1;
    sse_init(&pf->parser, preflight_on_event, pf);
}

void preflight_free(preflight *pf)
{
    sbuf_free(&pf->held);
    sbuf_free(&pf->error_message);
    sbuf_free(&pf->error_body);
    sbuf_free(&pf->text);
    sbuf_free(&pf->rsp_done_items);
    sse_free(&pf->parser);
}

void preflight_commit(preflight *pf)
{
    if (pf->state == PF_HOLD)
        pf->state = PF_COMMIT;
}

pf_state preflight_feed(preflight *pf, const char *buf, size_t n)
{
    if (pf->state == PF_ERROR)
        return PF_ERROR;
    /* append first: a commit inside this feed must find its trigger bytes held */
    sbuf_append(&pf->held, buf, n);
    sse_feed(&pf->parser, buf, n);
    if (pf->state == PF_HOLD && pf->held.len > pf->max_bytes)
        preflight_commit(pf);
    return pf->state;
}

size_t preflight_pass(preflight *pf, const char *buf, size_t n)
{
    sse_feed(&pf->parser, buf, n);
    size_t open = sse_open_bytes(&pf->parser);
    return open < n ? open : n;
}

size_t preflight_open_bytes(const preflight *pf)
{
    size_t open = sse_open_bytes(&pf->parser);
    return open < pf->held.len ? open : pf->held.len;
}

/* ---------- small helpers ---------- */

static int pf_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

static int pf_nonempty_str(const json_value *v)
{
    return v && v->type == JSON_STRING && v->str_len > 0;
}

/* Present and not null (an empty array counts as absent). */
static int pf_present(const json_value *v)
{
    if (!v || v->type == JSON_NULL)
        return 0;
    return (v->type != JSON_ARRAY && v->type != JSON_OBJECT) || v->count > 0;
}

/* Codes are usually strings but some providers send numbers (e.g. 429). */
static void pf_copy_field(char *dst, size_t cap, const json_value *obj, const char *key)
{
    const json_value *v = json_get(obj, key);
    if (v && v->type == JSON_STRING)
        sbuf_copy_cstr(dst, cap, v->str);
    else if (v && v->type == JSON_NUMBER)
        snprintf(dst, cap, "%.0f", v->num);
}

static void pf_semantic(preflight *pf)
{
    pf->saw_semantic = 1;
    preflight_commit(pf);
}

static void pf_terminal(preflight *pf)
{
    pf->saw_terminal = 1;
    preflight_commit(pf);
}

/* u read by read (usage_tokens_read, or Anthropic's) into the counts so far. */
static void pf_usage_by(preflight *pf, const json_value *u, void (*read)(const json_value *, usage_tokens *))
{
    usage_tokens t = {pf->input_tokens, pf->output_tokens, pf->total_tokens, pf->cached_tokens};
    read(u, &t);
    pf->input_tokens = t.in;
    pf->output_tokens = t.out;
    pf->total_tokens = t.total;
    pf->cached_tokens = t.cached;
}

static void pf_usage(preflight *pf, const json_value *u) { pf_usage_by(pf, u, usage_tokens_read); }
static void pf_usage_anthropic(preflight *pf, const json_value *u) { pf_usage_by(pf, u, usage_tokens_read_anthropic); }

/* ---------- errors ---------- */

/* Fills the error fields from whichever shape the event uses:
 * {"error":"text"}, {"error":{type,code,message}}, response.failed's
 * {"response":{"error":{...}}}, or type "error" with code/message on top. */
static void pf_error_fields(preflight *pf, const json_value *doc)
{
    if (!doc || doc->type != JSON_OBJECT)
        return;
    const json_value *err = json_get(doc, "error");
    if (err && err->type == JSON_STRING) {
        sbuf_append(&pf->error_message, err->str, err->str_len);
        return;
    }
    const char *type = json_get_str(doc, "type");
    if ((!err || err->type != JSON_OBJECT) && type && strcmp(type, "response.failed") == 0) {
        const json_value *resp = json_get(doc, "response");
        err = resp ? json_get(resp, "error") : NULL;
    }
    if (err && err->type == JSON_OBJECT)
        pf_copy_field(pf->error_type, sizeof pf->error_type, err, "type");
    else
        err = doc; /* top-level "type" is the event kind, not an error type */
    pf_copy_field(pf->error_code, sizeof pf->error_code, err, "code");
    const json_value *msg = json_get(err, "message");
    if (msg && msg->type == JSON_STRING)
        sbuf_append(&pf->error_message, msg->str, msg->str_len);
}

/* Before commit the error is final; after it only the first late error is
 * recorded, since later ones tend to be consequences of it. */
static void pf_error(preflight *pf, const json_value *doc, const char *data, size_t len)
{
    if (pf->state == PF_COMMIT && pf->late_error)
        return;
    pf->error_type[0] = pf->error_code[0] = '\0';
    sbuf_reset(&pf->error_message);
    sbuf_reset(&pf->error_body);
    sbuf_append(&pf->error_body, data, len);
    pf_error_fields(pf, doc);
    if (pf->state == PF_HOLD) {
        pf->state = PF_ERROR;
    } else if (pf->state == PF_COMMIT) {
        pf->late_error = 1;
        pf->late_error_at = sse_event_start(&pf->parser);
    }
}

static int pf_is_error_doc(const json_value *doc)
{
    const json_value *err = json_get(doc, "error");
    if (err && (err->type == JSON_OBJECT || err->type == JSON_STRING))
        return 1;
    const char *type = json_get_str(doc, "type");
    return type && (strcmp(type, "error") == 0 || strcmp(type, "response.failed") == 0);
}

/* ---------- Responses API ---------- */

static void pf_response_info(preflight *pf, const json_value *doc)
{
    const json_value *resp = json_get(doc, "response");
    if (!resp || resp->type != JSON_OBJECT)
        return;
    const char *id = json_get_str(resp, "id"), *model = json_get_str(resp, "model");
    if (id && *id)
        sbuf_copy_cstr(pf->response_id, sizeof pf->response_id, id);
    if (model && *model)
        sbuf_copy_cstr(pf->model, sizeof pf->model, model);
    pf_usage(pf, json_get(resp, "usage"));
}

/* An output item is output when it is a tool call of any kind, or (once
 * done) a message that carries content. */
static int pf_item_is_output(const json_value *doc, int done)
{
    const json_value *item = json_get(doc, "item");
    const char *t = json_get_str(item, "type");
    if (!t)
        return 0;
    if (strcmp(t, "reasoning") == 0)
        return 0;
    if (strcmp(t, "message") == 0)
        return done && pf_present(json_get(item, "content"));
    return 1;
}

static void pf_responses_event(preflight *pf, const json_value *doc, const char *type)
{
    int added = strcmp(type, "response.output_item.added") == 0;
    int done = strcmp(type, "response.output_item.done") == 0;
    if (pf_ends_with(type, ".delta") || ((added || done) && pf_item_is_output(doc, done)))
        pf_semantic(pf);
    else if (strcmp(type, "response.completed") == 0 || strcmp(type, "response.incomplete") == 0)
        pf_terminal(pf);
}

/* ---------- Anthropic Messages API (an anthropic account's stream) ---------- */

/* message_start carries the message's id, model and input usage;
 * message_delta the output usage; message_stop ends it. Output is a text
 * or tool input delta, or a tool_use block opened; a thinking block is not
 * (the client can be moved before its answer begins, as with reasoning). */
static void pf_messages_event(preflight *pf, const json_value *doc, const char *type)
{
    if (strcmp(type, "message_start") == 0) {
        const json_value *msg = json_get(doc, "message");
        const char *id = json_get_str(msg, "id"), *model = json_get_str(msg, "model");
        if (id && *id)
            sbuf_copy_cstr(pf->response_id, sizeof pf->response_id, id);
        if (model && *model)
            sbuf_copy_cstr(pf->model, sizeof pf->model, model);
        pf_usage_anthropic(pf, json_get(msg, "usage"));
    } else if (strcmp(type, "content_block_delta") == 0) {
        const char *dt = json_get_str(json_get(doc, "delta"), "type");
        if (dt && (strcmp(dt, "text_delta") == 0 || strcmp(dt, "input_json_delta") == 0))
            pf_semantic(pf);
    } else if (strcmp(type, "content_block_start") == 0) {
        const char *bt = json_get_str(json_get(doc, "content_block"), "type");
        if (bt && strcmp(bt, "text") != 0 && strcmp(bt, "thinking") != 0 && strcmp(bt, "redacted_thinking") != 0)
            pf_semantic(pf);
    } else if (strcmp(type, "message_delta") == 0) {
        pf_usage_anthropic(pf, json_get(doc, "usage"));
    } else if (strcmp(type, "message_stop") == 0) {
        pf_terminal(pf);
    }
}

/* keep_text: follows the one message whose text a resume could continue.
 * Whatever else shows up (a tool call, a refusal, a second message or
 * content part, the text finished) makes the stream unresumable; finished
 * reasoning items before the message are kept for the spliced final
 * response. Events that name no item (created, in_progress, rate limits)
 * change nothing. */
static void pf_rsp_keep(preflight *pf, const json_value *doc, const char *type)
{
    int64_t seq;
    if (json_get_int64(doc, "sequence_number", 0, INT64_MAX / 2, &seq) == 0)
        pf->rsp_seq = (long)seq;
    if (pf->rsp_unsafe)
        return;
    const json_value *item = json_get(doc, "item");
    const char *itype = json_get_str(item, "type"), *item_id = json_get_str(doc, "item_id");
    int64_t oi = -1, ci = -1;
    json_get_int64(doc, "output_index", 0, INT32_MAX, &oi);
    json_get_int64(doc, "content_index", 0, INT32_MAX, &ci);
    int ours = item_id && pf->rsp_item_id[0] && strcmp(item_id, pf->rsp_item_id) == 0;
    if (strcmp(type, "response.output_item.added") == 0) {
        const char *id = json_get_str(item, "id");
        if (itype && strcmp(itype, "reasoning") == 0 && !pf->rsp_item_id[0])
            pf->rsp_reasoning_open++;
        else if (itype && strcmp(itype, "message") == 0 && !pf->rsp_item_id[0] && id && *id &&
                 strlen(id) < sizeof pf->rsp_item_id && oi >= 0) {
            memcpy(pf->rsp_item_id, id, strlen(id) + 1);
            pf->rsp_output_index = (long)oi;
        } else
            pf->rsp_unsafe = 1;
    } else if (strcmp(type, "response.output_item.done") == 0) {
        if (itype && strcmp(itype, "reasoning") == 0 && pf->rsp_reasoning_open > 0) {
            pf->rsp_reasoning_open--;
            size_t before = pf->rsp_done_items.len;
            if (before)
                sbuf_puts(&pf->rsp_done_items, ",");
            json_write(&pf->rsp_done_items, item);
            if (pf->rsp_done_items.len > PREFLIGHT_ITEMS_MAX)
                pf->rsp_unsafe = 1;
        } else
            pf->rsp_unsafe = 1; /* a finished message (nothing to continue) or any other item */
    } else if (strcmp(type, "response.content_part.added") == 0) {
        const char *ptype = json_get_str(json_get(doc, "part"), "type");
        if (ours && !pf->rsp_part_open && ci >= 0 && ptype && strcmp(ptype, "output_text") == 0) {
            pf->rsp_part_open = 1;
            pf->rsp_content_index = (long)ci;
        } else
            pf->rsp_unsafe = 1;
    } else if (strcmp(type, "response.output_text.delta") == 0) {
        const json_value *d = json_get(doc, "delta");
        if (!ours || !pf->rsp_part_open || ci != pf->rsp_content_index || !d || d->type != JSON_STRING ||
            pf->text.len + d->str_len > PREFLIGHT_TEXT_MAX)
            pf->rsp_unsafe = 1;
        else
            sbuf_append(&pf->text, d->str, d->str_len);
    } else if (strncmp(type, "response.reasoning", 18) == 0) {
        if (!pf->rsp_reasoning_open)
            pf->rsp_unsafe = 1;
    } else if (item || item_id || json_get(doc, "output_index"))
        pf->rsp_unsafe = 1; /* text done, a refusal, a tool call's arguments, an annotation, ... */
}

int preflight_rsp_resumable(const preflight *pf)
{
    return pf->keep_text && pf->api == API_RESPONSES && !pf->rsp_unsafe && pf->rsp_part_open &&
           !pf->rsp_reasoning_open && pf->text.len > 0;
}

/* ---------- Chat Completions ---------- */

/* keep_text: collects the text and notes tool calls of the first choice. */
static void pf_chat_keep(preflight *pf, const json_value *delta)
{
    if (pf_present(json_get(delta, "tool_calls")) || pf_present(json_get(delta, "function_call")))
        pf->saw_tool_call = 1;
    const json_value *c = json_get(delta, "content");
    if (!c || c->type != JSON_STRING || pf->text_overflow)
        return;
    if (pf->text.len + c->str_len > PREFLIGHT_TEXT_MAX) {
        pf->text_overflow = 1;
        return;
    }
    sbuf_append(&pf->text, c->str, c->str_len);
}

static void pf_chat_choice(preflight *pf, const json_value *choice)
{
    const json_value *delta = json_get(choice, "delta");
    if (pf->keep_text && delta && delta->type == JSON_OBJECT && json_get_num(choice, "index", 0) == 0)
        pf_chat_keep(pf, delta);
    if (delta && delta->type == JSON_OBJECT &&
        (pf_nonempty_str(json_get(delta, "content")) || pf_present(json_get(delta, "tool_calls")) ||
         pf_present(json_get(delta, "function_call")) || pf_nonempty_str(json_get(delta, "refusal")) ||
         pf_nonempty_str(json_get(delta, "reasoning_content")) || pf_nonempty_str(json_get(delta, "reasoning"))))
        pf_semantic(pf);
    const json_value *fr = json_get(choice, "finish_reason");
    if (fr && fr->type != JSON_NULL) {
        pf_semantic(pf);
        pf_terminal(pf);
    }
}

static void pf_chat_event(preflight *pf, const json_value *doc)
{
    const char *model = json_get_str(doc, "model");
    if (model && *model)
        sbuf_copy_cstr(pf->model, sizeof pf->model, model);
    const json_value *choices = json_get(doc, "choices");
    if (choices && choices->type == JSON_ARRAY)
        for (const json_value *c = choices->child; c; c = c->next)
            pf_chat_choice(pf, c);
    pf_usage(pf, json_get(doc, "usage"));
}

/* ---------- Chat Completions without a tree ---------- */

/* A chat chunk is read in one pass over its bytes (json_scan_value checks
 * the grammar json_parse would, nothing is built): the few members the
 * decisions need are picked out where they are, with json_get's rules
 * (the last of a repeated name wins). Anything unusual (a "type" or
 * "error" member, a member name with escapes, a model with escapes, a
 * document that is no object or no valid JSON) returns 0 and the tree
 * decides, so the outcome is the tree's. */
typedef struct pf_scan {
    const char *s;
    size_t len, pos;
} pf_scan;

typedef struct pf_chat_facts {
    const char *model;   /* the last model member's bytes (a plain string), or NULL */
    size_t model_len;
    int semantic, terminal;
    int usage;           /* the last usage member is an object: its numbers follow */
    double in, prompt, out, completion, total; /* NAN: no such number member */
    int in_details, prompt_details;           /* *_tokens_details present (any type) */
    double in_cached, prompt_cached;          /* their cached_tokens, NAN: none */
    /* keep_text (pf_chat_keep): of the one choice, when its index is 0 and
     * its delta an object: the content string's bytes (no escapes), a tool call */
    int choices;         /* elements of the last choices array */
    int keep;            /* that one choice is kept */
    const char *text;    /* its content, NULL: none or not a string */
    size_t text_len;
    int tool;
} pf_chat_facts;

static size_t pf_ws(const pf_scan *sc, size_t i) { return json_scan_ws(sc->s, sc->len, i); }

static int pf_key_is(const char *k, size_t klen, const char *name)
{
    return strlen(name) == klen && memcmp(k, name, klen) == 0;
}

/* The next member of the object being walked (sc->pos after its '{' or
 * after the previous value): 1 with its name and sc->pos on its value, 0 at
 * the end ('}' read), -1 for anything the tree must decide. */
static int pf_scan_member(pf_scan *sc, int *first, const char **key, size_t *klen)
{
    size_t i = pf_ws(sc, sc->pos);
    if (i >= sc->len)
        return -1;
    if (sc->s[i] == '}' && *first) {
        sc->pos = i + 1;
        return 0;
    }
    if (!*first) {
        if (sc->s[i] == '}') {
            sc->pos = i + 1;
            return 0;
        }
        if (sc->s[i] != ',')
            return -1;
        i = pf_ws(sc, i + 1);
    }
    *first = 0;
    size_t e;
    if (i >= sc->len || sc->s[i] != '"' || !(e = json_scan_value(sc->s, sc->len, i, 0)))
        return -1;
    *key = sc->s + i + 1;
    *klen = e - i - 2;
    if (memchr(*key, '\\', *klen))
        return -1; /* escaped names: the tree decodes them */
    i = pf_ws(sc, e);
    if (i >= sc->len || sc->s[i] != ':')
        return -1;
    sc->pos = pf_ws(sc, i + 1);
    return 1;
}

/* Skips the value at sc->pos (inside depth open containers); 0 if invalid. */
static int pf_scan_skip(pf_scan *sc, int depth)
{
    size_t e = json_scan_value(sc->s, sc->len, sc->pos, depth);
    sc->pos = e;
    return e != 0;
}

/* pf_present / pf_nonempty_str of the value at sc->pos, which is then skipped. */
static int pf_scan_present(pf_scan *sc, int depth, int *present)
{
    size_t at = sc->pos;
    if (!pf_scan_skip(sc, depth))
        return 0;
    char c = sc->s[at];
    *present = c != 'n' && ((c != '[' && c != '{') || pf_ws(sc, at + 1) != sc->pos - 1);
    return 1;
}

static int pf_scan_nonempty_str(pf_scan *sc, int depth, int *nonempty)
{
    size_t at = sc->pos;
    if (!pf_scan_skip(sc, depth))
        return 0;
    *nonempty = sc->s[at] == '"' && sc->pos - at > 2;
    return 1;
}

static int pf_scan_num(pf_scan *sc, int depth, double *v);

/* A delta object (depth 4): does it carry output? (pf_chat_choice) And,
 * for keep_text, its content string and whether it holds a tool call:
 * content with an escape returns 0 (the tree decodes it). */
static int pf_scan_delta(pf_scan *sc, int *semantic, pf_chat_facts *f)
{
    int first = 1, r, content = 0, tools = 0, fcall = 0, refusal = 0, rc = 0, rs = 0;
    const char *k;
    size_t kl;
    sc->pos++; /* '{' */
    while ((r = pf_scan_member(sc, &first, &k, &kl)) == 1) {
        int ok;
        if (pf_key_is(k, kl, "content")) {
            size_t at = sc->pos;
            ok = pf_scan_nonempty_str(sc, 4, &content);
            f->text = ok && sc->s[at] == '"' ? sc->s + at + 1 : NULL;
            f->text_len = f->text ? sc->pos - at - 2 : 0;
            if (f->text && memchr(f->text, '\\', f->text_len))
                return 0;
        }
        else if (pf_key_is(k, kl, "refusal"))
            ok = pf_scan_nonempty_str(sc, 4, &refusal);
        else if (pf_key_is(k, kl, "reasoning_content")) /* a reasoning model's visible thinking: progress */
            ok = pf_scan_nonempty_str(sc, 4, &rc);
        else if (pf_key_is(k, kl, "reasoning"))
            ok = pf_scan_nonempty_str(sc, 4, &rs);
        else if (pf_key_is(k, kl, "tool_calls"))
            ok = pf_scan_present(sc, 4, &tools);
        else if (pf_key_is(k, kl, "function_call"))
            ok = pf_scan_present(sc, 4, &fcall);
        else
            ok = pf_scan_skip(sc, 4);
        if (!ok)
            return 0;
    }
    *semantic = content || tools || fcall || refusal || rc || rs;
    f->tool = tools || fcall;
    return r == 0;
}

/* One element of choices (depth 3). */
static int pf_scan_choice(pf_scan *sc, int *semantic, int *terminal, pf_chat_facts *f)
{
    int first = 1, r, delta = 0, finish = 0, delta_obj = 0;
    double index = 0;
    const char *k;
    size_t kl;
    f->text = NULL, f->text_len = 0, f->tool = 0;
    sc->pos++; /* '{' */
    while ((r = pf_scan_member(sc, &first, &k, &kl)) == 1) {
        int ok;
        if (pf_key_is(k, kl, "delta")) {
            delta = 0;
            f->text = NULL, f->text_len = 0, f->tool = 0;
            delta_obj = sc->s[sc->pos] == '{';
            ok = delta_obj ? pf_scan_delta(sc, &delta, f) : pf_scan_skip(sc, 3);
        } else if (pf_key_is(k, kl, "index")) {
            ok = pf_scan_num(sc, 3, &index);
            if (isnan(index))
                index = 0; /* json_get_num's default */
        } else if (pf_key_is(k, kl, "finish_reason")) {
            finish = sc->s[sc->pos] != 'n';
            ok = pf_scan_skip(sc, 3);
        } else {
            ok = pf_scan_skip(sc, 3);
        }
        if (!ok)
            return 0;
    }
    *semantic |= delta || finish;
    *terminal |= finish;
    f->keep = delta_obj && index == 0;
    return r == 0;
}

/* The choices array (depth 2). */
static int pf_scan_choices(pf_scan *sc, pf_chat_facts *f)
{
    f->semantic = f->terminal = 0; /* a repeated choices: the last one counts */
    f->choices = f->keep = 0;
    size_t i = pf_ws(sc, sc->pos + 1);
    if (i < sc->len && sc->s[i] == ']') {
        sc->pos = i + 1;
        return 1;
    }
    for (;;) {
        sc->pos = i;
        int obj = i < sc->len && sc->s[i] == '{';
        int ok = obj ? pf_scan_choice(sc, &f->semantic, &f->terminal, f) : pf_scan_skip(sc, 2);
        if (++f->choices > 1 || !obj)
            f->keep = 0; /* keep_text reads one choice only here */
        if (!ok)
            return 0;
        i = pf_ws(sc, sc->pos);
        if (i < sc->len && sc->s[i] == ',') {
            i = pf_ws(sc, i + 1);
            continue;
        }
        if (i < sc->len && sc->s[i] == ']') {
            sc->pos = i + 1;
            return 1;
        }
        return 0;
    }
}

/* The number member value at sc->pos, then skipped: NAN when it is no
 * number (json_get_num gives its default then). 0 when it is a number in a
 * form other than a plain integer of up to 15 digits (the tree converts
 * those), or invalid. */
static int pf_scan_num(pf_scan *sc, int depth, double *v)
{
    size_t at = sc->pos;
    if (!pf_scan_skip(sc, depth))
        return 0;
    const char *s = sc->s;
    *v = NAN;
    if (s[at] != '-' && (s[at] < '0' || s[at] > '9'))
        return 1;
    int neg = s[at] == '-';
    size_t k = at + (size_t)neg;
    if (sc->pos - k > 15)
        return 0;
    long long acc = 0;
    for (; k < sc->pos; k++) {
        if (s[k] < '0' || s[k] > '9')
            return 0; /* a fraction or an exponent */
        acc = acc * 10 + (s[k] - '0');
    }
    *v = neg ? -(double)acc : (double)acc; /* as json_parse_number: "-0" is -0.0 */
    return 1;
}

/* A *_tokens_details object (depth 3): its last cached_tokens number. */
static int pf_scan_details(pf_scan *sc, double *cached)
{
    int first = 1, r;
    const char *k;
    size_t kl;
    *cached = NAN;
    sc->pos++; /* '{' */
    while ((r = pf_scan_member(sc, &first, &k, &kl)) == 1)
        if (!(pf_key_is(k, kl, "cached_tokens") ? pf_scan_num(sc, 3, cached) : pf_scan_skip(sc, 3)))
            return 0;
    return r == 0;
}

/* The usage object (depth 2): the members usage_tokens_read reads. */
static int pf_scan_usage(pf_scan *sc, pf_chat_facts *f)
{
    int first = 1, r;
    const char *k;
    size_t kl;
    f->usage = 1; /* a repeated usage: the last one counts */
    f->in = f->prompt = f->out = f->completion = f->total = f->in_cached = f->prompt_cached = NAN;
    f->in_details = f->prompt_details = 0;
    sc->pos++; /* '{' */
    while ((r = pf_scan_member(sc, &first, &k, &kl)) == 1) {
        int ok, details = 0;
        double *num = pf_key_is(k, kl, "input_tokens")        ? &f->in
                      : pf_key_is(k, kl, "prompt_tokens")     ? &f->prompt
                      : pf_key_is(k, kl, "output_tokens")     ? &f->out
                      : pf_key_is(k, kl, "completion_tokens") ? &f->completion
                      : pf_key_is(k, kl, "total_tokens")      ? &f->total
                                                              : NULL;
        double *cached = NULL;
        if (!num && pf_key_is(k, kl, "input_tokens_details")) {
            f->in_details = details = 1;
            cached = &f->in_cached;
        } else if (!num && pf_key_is(k, kl, "prompt_tokens_details")) {
            f->prompt_details = details = 1;
            cached = &f->prompt_cached;
        }
        if (num)
            ok = pf_scan_num(sc, 2, num);
        else if (details && sc->s[sc->pos] == '{')
            ok = pf_scan_details(sc, cached);
        else {
            if (details)
                *cached = NAN; /* present but no object: no cached_tokens */
            ok = pf_scan_skip(sc, 2);
        }
        if (!ok)
            return 0;
    }
    return r == 0;
}

/* 1 when the chunk was a chat chunk read here; 0: the tree must decide. */
static int pf_chat_scan(const char *data, size_t len, pf_chat_facts *f)
{
    pf_scan sc = {data, len, json_scan_ws(data, len, 0)};
    memset(f, 0, sizeof *f);
    if (sc.pos >= len || data[sc.pos] != '{')
        return 0;
    sc.pos++;
    int first = 1, r;
    const char *k;
    size_t kl;
    while ((r = pf_scan_member(&sc, &first, &k, &kl)) == 1) {
        int ok;
        size_t at = sc.pos;
        if (pf_key_is(k, kl, "type") || pf_key_is(k, kl, "error"))
            return 0; /* Responses API or an error: the tree's */
        if (pf_key_is(k, kl, "choices") && data[at] == '[') {
            ok = pf_scan_choices(&sc, f);
        } else if (pf_key_is(k, kl, "usage") && data[at] == '{') {
            ok = pf_scan_usage(&sc, f);
        } else {
            ok = pf_scan_skip(&sc, 1);
            if (ok && pf_key_is(k, kl, "model")) {
                f->model = data[at] == '"' ? data + at + 1 : NULL;
                f->model_len = f->model ? sc.pos - at - 2 : 0;
                if (f->model && memchr(f->model, '\\', f->model_len))
                    return 0;
            } else if (ok && pf_key_is(k, kl, "usage")) {
                f->usage = 0; /* not an object: nothing to read */
            } else if (ok && pf_key_is(k, kl, "choices")) {
                f->semantic = f->terminal = 0; /* not an array: no choices */
                f->choices = f->keep = 0;
            }
        }
        if (!ok)
            return 0;
    }
    return r == 0 && json_scan_ws(data, len, sc.pos) == len;
}

/* pf_chat_keep from what pf_chat_scan found. */
static void pf_chat_keep_facts(preflight *pf, const pf_chat_facts *f)
{
    if (f->tool)
        pf->saw_tool_call = 1;
    if (!f->text || pf->text_overflow)
        return;
    if (pf->text.len + f->text_len > PREFLIGHT_TEXT_MAX) {
        pf->text_overflow = 1;
        return;
    }
    sbuf_append(&pf->text, f->text, f->text_len);
}

/* pf_chat_event from what pf_chat_scan found. */
static void pf_chat_apply(preflight *pf, const pf_chat_facts *f)
{
    if (pf->keep_text && f->keep)
        pf_chat_keep_facts(pf, f);
    if (f->model_len) {
        size_t n = f->model_len < sizeof pf->model - 1 ? f->model_len : sizeof pf->model - 1;
        memcpy(pf->model, f->model, n);
        pf->model[n] = '\0';
    }
    if (f->semantic)
        pf_semantic(pf);
    if (f->terminal)
        pf_terminal(pf);
    if (f->usage) { /* usage_tokens_read's choices: input_tokens over prompt_tokens, and so on */
        usage_tokens t = {pf->input_tokens, pf->output_tokens, pf->total_tokens, pf->cached_tokens};
        double cached = f->in_details ? f->in_cached : f->prompt_details ? f->prompt_cached : NAN;
        usage_tokens_set(&t, !isnan(f->in) ? f->in : !isnan(f->prompt) ? f->prompt : -1,
                         !isnan(f->out) ? f->out : !isnan(f->completion) ? f->completion : -1,
                         !isnan(f->total) ? f->total : -1, !isnan(cached) ? cached : -1);
        pf->input_tokens = t.in;
        pf->output_tokens = t.out;
        pf->total_tokens = t.total;
        pf->cached_tokens = t.cached;
    }
}

/* ---------- dispatch ---------- */

static int pf_is_done(const char *data, size_t len)
{
    while (len && (*data == ' ' || *data == '\t')) {
        data++;
        len--;
    }
    while (len && (data[len - 1] == ' ' || data[len - 1] == '\t'))
        len--;
    return len == 6 && memcmp(data, "[DONE]", 6) == 0;
}

/* A quote at q: does it open "usage" or "error" (1), or the first
 * "finish_reason" (noted in *f)? */
static int pf_quote_matters(const char *q, size_t left, const char **f)
{
    if (left < 7 || (q[1] != 'u' && q[1] != 'e' && q[1] != 'f'))
        return 0; /* most quotes: one look at the next byte */
    if (memcmp(q, "\"usage\"", 7) == 0 || memcmp(q, "\"error\"", 7) == 0)
        return 1;
    if (!*f && left >= 15 && memcmp(q, "\"finish_reason\"", 15) == 0)
        *f = q;
    return 0;
}

/* After commit only usage, ids, terminal and error events matter. Text
 * deltas are most of a stream, so they are recognised without parsing:
 * a Responses event named *.delta, or a chat chunk that mentions neither
 * usage, nor an error, nor a non-null finish_reason. */
static int pf_needs_parse_after_commit(const char *event, const char *data, size_t len)
{
    if (*event) /* Responses' *.delta, Anthropic's content_block_delta: text */
        return !pf_ends_with(event, ".delta") && strcmp(event, "content_block_delta") != 0;
    /* one pass, sixteen bytes at a time, stopping only at a quote followed
     * by u, e or f (a chunk is mostly short strings: a search call per
     * quote, or even a look at each, cost more than the rest) */
    const char *end = data + len, *f = NULL;
    size_t i = 0;
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), u = _mm_set1_epi8('u'), x10 = _mm_set1_epi8(0x10), fch = _mm_set1_epi8('f');
    for (; len - i >= 17; i += 16) {
        __m128i w = _mm_loadu_si128((const __m128i *)(const void *)(data + i));
        __m128i n = _mm_loadu_si128((const __m128i *)(const void *)(data + i + 1)); /* the byte after each */
        __m128i next = _mm_or_si128(_mm_cmpeq_epi8(_mm_or_si128(n, x10), u), _mm_cmpeq_epi8(n, fch)); /* 'e' | 0x10 is 'u' */
        for (unsigned m = (unsigned)_mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(w, quote), next)); m; m &= m - 1) {
            size_t at = i + (size_t)__builtin_ctz(m);
            if (pf_quote_matters(data + at, len - at, &f))
                return 1;
        }
    }
#endif
    for (; i < len; i++)
        if (data[i] == '"' && pf_quote_matters(data + i, len - i, &f))
            return 1;
    if (!f)
        return 0;
    for (f += 15; f < end && (*f == ' ' || *f == ':' || *f == '\t'); f++)
        ;
    return f < end && *f != 'n';
}

/* Events are sorted by the shape of their data, not by pf->api: a type
 * member means Responses API, choices/usage mean Chat Completions. */
static void preflight_on_event(void *ud, const char *event, const char *data, size_t len)
{
    preflight *pf = ud;
    pf->events++;
    if (pf->state == PF_ERROR)
        return;
    if (pf_is_done(data, len)) {
        pf_terminal(pf);
        return;
    }
    if (pf->on_item_blobs && (!*event || strcmp(event, "response.output_item.done") == 0) &&
        memmem(data, len, "\"encrypted_content\"", 19))
        pf->on_item_blobs(pf->hooks_ud, data, len);
    if (pf->on_item_done && (!*event || strcmp(event, "response.output_item.done") == 0) &&
        memmem(data, len, "\"response.output_item.done\"", 27))
        pf->on_item_done(pf->hooks_ud, data, len);
    if (pf->state == PF_COMMIT && pf->saw_semantic && !pf->keep_text &&
        !pf_needs_parse_after_commit(event, data, len))
        return;
    pf_chat_facts facts;
    if (!pf->tree_only && strcmp(event, "error") != 0 && !(pf->keep_text && pf->api == API_RESPONSES) &&
        pf->api != API_MESSAGES &&
        pf_chat_scan(data, len, &facts) &&
        (!pf->keep_text || facts.choices <= 1)) {
        pf_chat_apply(pf, &facts);
        return;
    }
    json_value *doc = json_parse(data, len, NULL, 0);
    if (doc && doc->type != JSON_OBJECT) {
        json_free(doc);
        doc = NULL;
    }
    const char *type = doc ? json_get_str(doc, "type") : NULL;
    if (type && pf->api != API_MESSAGES)
        pf_response_info(pf, doc); /* ids and usage ride on many event kinds */
    if (type && pf->on_completed && strcmp(type, "response.completed") == 0)
        pf->on_completed(pf->hooks_ud, data, len);
    if (strcmp(event, "error") == 0 || (doc && pf_is_error_doc(doc)))
        pf_error(pf, doc, data, len);
    else if (type && pf->api == API_MESSAGES)
        pf_messages_event(pf, doc, type);
    else if (type) {
        if (pf->keep_text && pf->api == API_RESPONSES)
            pf_rsp_keep(pf, doc, type);
        pf_responses_event(pf, doc, type);
    }
    else if (doc)
        pf_chat_event(pf, doc);
    json_free(doc);
}
