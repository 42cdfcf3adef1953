/* request.c: client body validation and the routing fields (see request.h). */
#include "http/request.h"
#include "base/text.h"
#include <stdio.h>
#include <string.h>

static int request_fail(request_error *err, int status, const char *code, const char *msg)
{
    err->status = status;
    err->code = code;
    sbuf_copy_cstr(err->message, sizeof err->message, msg);
    return -1;
}

/* A member that must have one of two JSON types when present. */
static int request_check_type(const json_value *doc, const char *key, json_type a, json_type b, const char *what,
                              request_error *err)
{
    json_value *v = json_get(doc, key);
    if (!v || v->type == a || v->type == b)
        return 0;
    char msg[160];
    snprintf(msg, sizeof msg, "'%s' must be %s", key, what);
    return request_fail(err, 400, "invalid_type", msg);
}

/* Field types the upstream would reject anyway: refused here, before any
 * account is tried (and charged a failure) for them. */
static int request_check_fields(const request_input *in, request_error *err)
{
    if (in->api != API_RESPONSES)
        return request_check_type(in->doc, "messages", JSON_ARRAY, JSON_ARRAY, "an array", err);
    if (request_check_type(in->doc, "input", JSON_STRING, JSON_ARRAY, "a string or an array", err) < 0)
        return -1;
    return request_check_type(in->doc, "previous_response_id", JSON_STRING, JSON_NULL, "a string", err);
}

int request_parse(const char *body, size_t len, size_t max_body, request_input *in, request_error *err)
{
    if (len > max_body) {
        char msg[128];
        snprintf(msg, sizeof msg, "request body is %zu bytes; the limit is %zu", len, max_body);
        return request_fail(err, 413, "request_too_large", msg);
    }
    char perr[160];
    /* Validated whole, but only the top level is kept as a tree: a 16 MiB
     * [0,0,...] would otherwise be 8 M nodes (see docs/architecture.md). */
    in->doc = json_parse_shallow(body, len, 1, perr, sizeof perr);
    if (!in->doc || in->doc->type != JSON_OBJECT) {
        char msg[256];
        snprintf(msg, sizeof msg, "request body is not a JSON object: %s", in->doc ? "wrong type" : perr);
        return request_fail(err, 400, "invalid_json", msg);
    }
    const char *model = json_get_str(in->doc, "model");
    if (json_get(in->doc, "model") && !model)
        return request_fail(err, 400, "invalid_value", "'model' must be a string");
    /* the model becomes log and trace fields, request log rows and terminal
     * lines; no model name holds a control character (nor a NUL) */
    if (model && text_check(model, json_get(in->doc, "model")->str_len))
        return request_fail(err, 400, "invalid_value", "'model' must not contain control characters");
    sbuf_copy_cstr(in->model, sizeof in->model, model ? model : "");
    json_value *sv = json_get(in->doc, "stream");
    if (sv && sv->type != JSON_TRUE && sv->type != JSON_FALSE && sv->type != JSON_NULL)
        return request_fail(err, 400, "invalid_value", "'stream' must be a boolean");
    in->stream = json_get_bool(in->doc, "stream", 0);
    if (request_check_fields(in, err) < 0)
        return -1;
    const char *prev = json_get_str(in->doc, "previous_response_id");
    sbuf_copy_cstr(in->previous_response_id, sizeof in->previous_response_id, prev ? prev : "");
    json_value *st = json_get(in->doc, "store");
    in->store_off = st && st->type == JSON_FALSE;
    return 0;
}
