/* errors.c: error bodies for the client (dialect_error_body,
 * dialect_error_body_for, dialect_error_own) and the reading of an
 * upstream's error in any of its shapes (errors.h). What a client gets is
 * always one error object of its dialect (OpenAI's, or Anthropic's for a
 * Messages client) of at most ERRORS_BODY_MAX bytes and valid JSON
 * whatever came in: text and HTML are quoted in the message (control
 * characters escaped, bytes that are no UTF-8 replaced), long messages are
 * cut on a character boundary. */
#include "dialect/errors.h"
#include "dialect/dialect.h"
#include <stdio.h>
#include <string.h>

/* A body larger than this is not parsed as JSON: only its start is quoted. */
#define ERRORS_PARSE_MAX (1u << 20)
/* The escaped message takes at most this much of the body; type, code and
 * param are cut to ERRORS_FIELD_MAX bytes each (6 bytes escaped at worst):
 * together within ERRORS_BODY_MAX. */
#define ERRORS_MESSAGE_MAX (12u << 10)
#define ERRORS_FIELD_MAX 128u

static void errors_clear(errors_info *e)
{
    memset(e, 0, sizeof *e);
}

static const char *errors_text(const json_value *v)
{
    return v && v->type == JSON_STRING && v->str_len ? v->str : NULL;
}

static void errors_message(errors_info *e, const json_value *v)
{
    if (v && v->type == JSON_STRING && v->str_len) {
        e->message = v->str;
        e->message_len = v->str_len;
    }
}

/* A code as a string, or a number written into code_num. */
static void errors_code(errors_info *e, const json_value *v)
{
    if (errors_text(v)) {
        e->code = v->str;
    } else if (v && v->type == JSON_NUMBER) {
        int64_t n;
        if (json_num_to_int64(v->num, -999999999, 999999999, &n) == 0) {
            snprintf(e->code_num, sizeof e->code_num, "%lld", (long long)n);
            e->code = e->code_num;
        }
    }
}

/* An error object's members: message, type, code, param. */
static void errors_object(errors_info *e, const json_value *err)
{
    errors_message(e, json_get(err, "message"));
    e->type = errors_text(json_get(err, "type"));
    errors_code(e, json_get(err, "code"));
    e->param = errors_text(json_get(err, "param"));
}

/* Anthropic's own error types (its API's docs, "Errors"). */
static const char *const errors_anthropic_types[] = {
    "invalid_request_error", "authentication_error", "billing_error", "permission_error", "not_found_error",
    "request_too_large",     "rate_limit_error",     "api_error",     "timeout_error",    "overloaded_error"};

/* Is doc framed as Anthropic's error, {"type":"error","error":{"type":T}}
 * with T one of its types? */
static int errors_anthropic_typed(const json_value *doc)
{
    const json_value *err = json_get(doc, "error");
    const char *kind = json_get_str(doc, "type"), *type = json_get_str(err, "type");
    if (!kind || strcmp(kind, "error") != 0 || !type)
        return 0;
    for (size_t i = 0; i < sizeof errors_anthropic_types / sizeof errors_anthropic_types[0]; i++)
        if (strcmp(errors_anthropic_types[i], type) == 0)
            return 1;
    return 0;
}

/* ... and without a code, as Anthropic writes its own (the ChatGPT
 * backend's stream error has the same frame, and a code). */
static int errors_is_anthropic(const json_value *doc)
{
    return errors_anthropic_typed(doc) && !json_get(json_get(doc, "error"), "code");
}

int errors_read(const json_value *doc, errors_info *e)
{
    errors_clear(e);
    if (!doc || doc->type != JSON_OBJECT)
        return 0;
    const json_value *err = json_get(doc, "error");
    const char *kind = json_get_str(doc, "type");
    if (err && err->type == JSON_OBJECT) {
        errors_object(e, err);
        if (errors_is_anthropic(doc)) {
            /* for an OpenAI client: its type is the code (overloaded_error,
             * rate_limit_error), OpenAI's type is made from the status; a
             * prompt too long is what OpenAI calls context_length_exceeded
             * (Codex compacts its history on that code) */
            static const char too_long[] = "prompt is too long";
            int context = e->message && e->message_len >= sizeof too_long - 1 &&
                          memcmp(e->message, too_long, sizeof too_long - 1) == 0;
            e->code = context ? "context_length_exceeded" : e->type;
            e->type = NULL;
        }
        return 1;
    }
    if (err && err->type == JSON_STRING) {
        errors_message(e, err);
        errors_code(e, json_get(doc, "code"));
        return 1;
    }
    if (kind && strcmp(kind, "response.failed") == 0) {
        const json_value *r = json_get(doc, "response");
        err = json_get(r, "error");
        if (err && err->type == JSON_OBJECT)
            errors_object(e, err);
        return 1;
    }
    if (kind && strcmp(kind, "error") == 0) { /* a Responses error event: the members on top */
        errors_message(e, json_get(doc, "message"));
        errors_code(e, json_get(doc, "code"));
        e->param = errors_text(json_get(doc, "param"));
        return 1;
    }
    const json_value *detail = json_get(doc, "detail");
    if (detail && detail->type == JSON_STRING) {
        errors_message(e, detail);
        return 1;
    }
    if (detail && detail->type == JSON_OBJECT) {
        errors_object(e, detail);
        return 1;
    }
    if (detail && detail->type == JSON_ARRAY) { /* a validation error list: its first message */
        const json_value *first = json_at(detail, 0);
        errors_message(e, json_get(first, "msg"));
        if (!e->message)
            errors_message(e, json_get(first, "message"));
        return 1;
    }
    if (errors_text(json_get(doc, "message"))) {
        errors_message(e, json_get(doc, "message"));
        errors_code(e, json_get(doc, "code"));
        e->type = kind;
        return 1;
    }
    return 0;
}

static int errors_has(const char *s, const char *word)
{
    return s && strstr(s, word) != NULL;
}

/* Does the code or the type of e mention word? */
static int errors_says(const errors_info *e, const char *word)
{
    return errors_has(e->code, word) || errors_has(e->type, word);
}

int errors_status(const errors_info *e)
{
    if (errors_says(e, "quota") || errors_says(e, "rate_limit") || errors_says(e, "usage_limit") ||
        errors_says(e, "too_many_requests"))
        return 429;
    if (errors_says(e, "overloaded") || errors_says(e, "unavailable"))
        return 503;
    /* Anthropic's types whose status no OpenAI word says */
    if (errors_says(e, "request_too_large"))
        return 413;
    if (errors_says(e, "billing_error"))
        return 402;
    if (errors_says(e, "timeout_error"))
        return 504;
    if (errors_says(e, "authentication") || errors_says(e, "invalid_api_key") || errors_says(e, "unauthorized"))
        return 401;
    if (errors_says(e, "permission") || errors_says(e, "forbidden") || errors_says(e, "deactivated"))
        return 403;
    if (errors_says(e, "not_found"))
        return 404;
    if (errors_says(e, "invalid") || errors_says(e, "context_length") || errors_says(e, "unsupported") ||
        errors_says(e, "content_policy") || errors_says(e, "bad_request"))
        return 400;
    return 500;
}

const char *errors_type_for(int status, const char *code)
{
    if (code && strcmp(code, "insufficient_quota") == 0)
        return "insufficient_quota";
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    default: return status >= 500 || status < 400 ? "server_error" : "invalid_request_error";
    }
}

/* A code for an error that gives none, from its status. */
static const char *errors_code_for(int status)
{
    switch (status) {
    case 400: return "invalid_request";
    case 401: return "unauthorized";
    case 403: return "forbidden";
    case 404: return "not_found";
    case 408: return "timeout";
    case 409: return "conflict";
    case 413: return "request_too_large";
    case 422: return "invalid_request";
    case 429: return "rate_limit_exceeded";
    default: return status >= 500 || status < 400 ? "server_error" : "invalid_request";
    }
}

/* s (n bytes) as a JSON string of at most max bytes, quotes included: cut
 * on a character boundary until its escaped form fits (escaping can grow
 * a byte up to six times, so the first guess is the raw size). */
static void errors_put_cut(sbuf *out, const char *s, size_t n, size_t max)
{
    size_t start = out->len, keep = n;
    for (;;) {
        sbuf_json_str(out, s, keep);
        size_t got = out->len - start;
        if (got <= max || keep == 0)
            return;
        out->len = start;
        out->p[start] = '\0';
        size_t next = (size_t)((double)keep * (double)(max - 2) / (double)got); /* by the overshoot's share */
        keep = sbuf_utf8_cut(s, keep, next < keep ? next : keep - 1);
    }
}

/* The members of e for status, cut to fit: "message":M,"type":T,"code":C,
 * "param":P, or with responses only "code":C,"message":M (the error object
 * of a failed response). */
/* e's message, or one made of its code or status when it has none
 * (fallback: the room for it). */
static const char *errors_text_of(int status, const errors_info *e, char fallback[256], size_t *mlen)
{
    if (e->message && e->message_len) {
        *mlen = e->message_len;
        return e->message;
    }
    if (e->code) /* {"detail":{"code":"deactivated_workspace"}}: the code says it */
        snprintf(fallback, 256, "the upstream answered %d: %.*s", status,
                 (int)sbuf_utf8_cut(e->code, strlen(e->code), ERRORS_FIELD_MAX), e->code);
    else
        snprintf(fallback, 256, "the upstream answered %d without a message", status);
    *mlen = strlen(fallback);
    return fallback;
}

static void errors_members(sbuf *out, int status, const errors_info *e, int responses)
{
    char fallback[256];
    size_t mlen;
    const char *msg = errors_text_of(status, e, fallback, &mlen);
    const char *code = e->code ? e->code : errors_code_for(status);
    const char *type = e->type ? e->type : errors_type_for(status, code);
    const size_t field = ERRORS_FIELD_MAX * 6 + 2;
    if (responses) {
        sbuf_puts(out, "\"code\":");
        errors_put_cut(out, code, strlen(code), field);
        sbuf_puts(out, ",\"message\":");
        errors_put_cut(out, msg, mlen, ERRORS_MESSAGE_MAX);
        return;
    }
    sbuf_puts(out, "\"message\":");
    errors_put_cut(out, msg, mlen, ERRORS_MESSAGE_MAX);
    sbuf_puts(out, ",\"type\":");
    errors_put_cut(out, type, strlen(type), field);
    sbuf_puts(out, ",\"code\":");
    errors_put_cut(out, code, strlen(code), field);
    sbuf_puts(out, ",\"param\":");
    if (e->param)
        errors_put_cut(out, e->param, strlen(e->param), field);
    else
        sbuf_puts(out, "null");
}

void errors_write(sbuf *out, int status, const errors_info *e)
{
    sbuf_puts(out, "{\"error\":{");
    errors_members(out, status, e, 0);
    sbuf_puts(out, "}}");
}

void errors_write_responses(sbuf *out, int status, const errors_info *e)
{
    sbuf_puts(out, "{");
    errors_members(out, status, e, 1);
    sbuf_puts(out, "}");
}

/* The text of a body that is no error JSON: an HTML page's <title> when it
 * has one, else the body; whitespace runs made one space, at most cap bytes. */
static void errors_plain_text(const char *body, size_t len, size_t cap, sbuf *text)
{
    const char *t = len > 7 ? memmem(body, len, "<title>", 7) : NULL;
    if (t) {
        const char *from = t + 7, *end = memmem(from, len - (size_t)(from - body), "</title>", 8);
        if (end && end > from) {
            body = from;
            len = (size_t)(end - from);
        }
    }
    int space = 0;
    for (size_t i = 0; i < len && text->len < cap; i++) {
        char c = body[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            space = text->len > 0;
            continue;
        }
        if (space)
            sbuf_append(text, " ", 1);
        space = 0;
        sbuf_append(text, &c, 1);
    }
}

const char *errors_messages_type(int status)
{
    switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 402: return "billing_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:
    case 529: return "overloaded_error";
    case 504: return "timeout_error";
    default: return status >= 400 && status < 500 ? "invalid_request_error" : "api_error";
    }
}

void errors_write_messages(sbuf *out, int status, const errors_info *e)
{
    char fallback[256];
    size_t mlen;
    const char *msg = errors_text_of(status, e, fallback, &mlen);
    sbuf_puts(out, "{\"type\":\"error\",\"error\":{\"type\":\"");
    sbuf_puts(out, errors_messages_type(status));
    sbuf_puts(out, "\",\"message\":");
    errors_put_cut(out, msg, mlen, ERRORS_MESSAGE_MAX);
    sbuf_puts(out, "}}");
}

void errors_write_for(sbuf *out, api_kind client, int status, const errors_info *e)
{
    if (client == API_MESSAGES)
        errors_write_messages(out, status, e);
    else
        errors_write(out, status, e);
}

/* The body as it is: an error object of the client's dialect small
 * enough (OpenAI's {"error":{...,"message":"..."}}; Anthropic's
 * {"type":"error","error":{"type":...,"message":"..."}} for a Messages
 * client). Anything else is written again. */
static int errors_is_own(api_kind client, const json_value *doc, size_t len)
{
    const json_value *err = json_get(doc, "error");
    if (len > ERRORS_BODY_MAX || !err || err->type != JSON_OBJECT || !errors_text(json_get(err, "message")))
        return 0;
    /* Anthropic's own types only for a Messages client: a body of another
     * vendor's error would bring an error type it does not know; and
     * Anthropic's is written again for an OpenAI client (its shape and
     * types are not OpenAI's) */
    return client == API_MESSAGES ? errors_anthropic_typed(doc) : !errors_is_anthropic(doc);
}

void dialect_error_body_for(api_kind client, int status, const char *body, size_t len, sbuf *out)
{
    json_value *doc = body && len && len <= ERRORS_PARSE_MAX ? json_parse(body, len, NULL, 0) : NULL;
    errors_info e;
    int found = errors_read(doc, &e);
    if (found && errors_is_own(client, doc, len)) {
        sbuf_append(out, body, len);
        json_free(doc);
        return;
    }
    if (status < 400) /* an error inside a 2xx: its status from what it says */
        status = found ? errors_status(&e) : 502;
    if (found) {
        errors_write_for(out, client, status, &e);
        json_free(doc);
        return;
    }
    json_free(doc);
    sbuf text = SBUF_INIT, msg = SBUF_INIT;
    errors_plain_text(body ? body : "", body ? len : 0, 4096, &text);
    if (text.len) {
        sbuf_printf(&msg, "the upstream answered %d: ", status);
        sbuf_append(&msg, text.p, text.len);
    } else {
        sbuf_printf(&msg, "the upstream answered %d with no error message", status);
    }
    errors_clear(&e);
    e.message = msg.p;
    e.message_len = msg.len;
    errors_write_for(out, client, status, &e);
    sbuf_free(&text);
    sbuf_free(&msg);
}

void dialect_error_body(int status, const char *body, size_t len, sbuf *out)
{
    dialect_error_body_for(API_CHAT, status, body, len, out);
}

void dialect_error_own(api_kind client, int status, const char *code, const char *param, const char *message,
                       sbuf *out)
{
    errors_info e;
    errors_clear(&e);
    e.message = message;
    e.message_len = message ? strlen(message) : 0;
    e.code = code && *code ? code : NULL;
    e.param = param && *param ? param : NULL;
    errors_write_for(out, client, status, &e);
}
