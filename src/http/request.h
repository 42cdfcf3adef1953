/* request.h: the checks a client's request body passes before it is routed
 * (a JSON object, within the size limit, with well-typed routing fields),
 * and the fields routing reads from it. Pure: no I/O, so the server calls
 * it and the fuzzers and unit tests can too. */
#ifndef SY_REQUEST_H
#define SY_REQUEST_H
#include <stddef.h>
#include "base/json.h"
#include "base/sbuf.h"
#include "upstream/preflight.h"

/* A client request as the server hands it on (server_start's handler):
 * who asked, for what, and the body. */
typedef struct request_input {
    int64_t key_id;
    int64_t preferred_account;  /* 0 none */
    api_kind api;
    const char *endpoint;       /* "/v1/responses", "/v1/chat/completions", "/v1/models" */
    const char *suffix;         /* appended to the account base_url: "/responses", ... */
    int is_get;
    int stream;
    char model[128];
    char previous_response_id[128];
    int store_off;              /* "store": false (the Responses API stores by default) */
    char response_id[128];      /* GET or DELETE /v1/responses/{id}: the id ("" otherwise) */
    int is_delete;              /* DELETE /v1/responses/{id} */
    int input_items;            /* GET /v1/responses/{id}/input_items */
    char query[128];            /* GET /v1/models passed through: the client's "?..." (e.g. Codex's
                                 * ?client_version=), appended to the upstream URL; "" otherwise */
    json_value *doc;            /* parsed body, owned by the proxy from here (NULL for GET) */
    sbuf body;                  /* raw body, owned by the proxy from here */
} request_input;

typedef struct request_error {
    int status;          /* 400 or 413 */
    const char *code;    /* "invalid_json", "invalid_value", "invalid_type", "request_too_large" */
    char message[256];
} request_error;

/* Parses body[0..len) into in->doc and fills in->model, in->stream and
 * in->previous_response_id. Returns 0, or -1 with err filled (in->doc may
 * then be set: the caller frees it either way). */
int request_parse(const char *body, size_t len, size_t max_body, request_input *in, request_error *err);

#endif
