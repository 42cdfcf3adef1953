/* errors.h: an upstream's error however it is shaped, read into a few
 * facts, and written back as the error object the client's dialect
 * expects: OpenAI's for a Responses or Chat Completions client,
 * Anthropic's for a Messages client (dialect_error_body and
 * dialect_error_body_for in dialect.h are built on these; the stream
 * translators use them for error events met mid-stream). */
#ifndef SY_DIALECT_ERRORS_H
#define SY_DIALECT_ERRORS_H
#include <stddef.h>
#include "base/json.h"
#include "base/sbuf.h"
#include "upstream/preflight.h"

/* An error body sent to a client is at most this long. */
#define ERRORS_BODY_MAX (16u << 10)

/* The facts of one error. Strings are borrowed from the document read
 * (or static); NULL when the error does not give them. */
typedef struct errors_info {
    const char *message;
    size_t message_len;
    const char *type, *code, *param;
    char code_num[32]; /* a code given as a number (429), as text */
} errors_info;

/* Reads the error in doc, any of: {"error":{message,type,code,param}},
 * {"error":"text"}, a Responses "error" event (code/message on top),
 * response.failed ({"response":{"error":{code,message}}}), the ChatGPT
 * backend's {"detail":"text"} / {"detail":{"code","message"}}, a
 * validation list {"detail":[{"msg":...}]}, a relay's {"message", "code"},
 * Anthropic's {"type":"error","error":{"type","message"}} (its type read
 * as the code, for an OpenAI client; "prompt is too long" as
 * context_length_exceeded). Returns 1 when doc holds an error, 0 (e
 * cleared) when not. */
int errors_read(const json_value *doc, errors_info *e);
/* The HTTP status an error met inside a stream stands for (it came with a
 * 200): 429 for quota and rate limits, 400 for a request the upstream
 * refuses, 401/403/404 for those kinds, 503 when overloaded, 413, 402 and
 * 504 for Anthropic's request_too_large, billing_error and timeout_error,
 * else 500. */
int errors_status(const errors_info *e);
/* The OpenAI error type for status (and code: insufficient_quota keeps
 * its own type): 400 invalid_request_error, 401 authentication_error,
 * 403 permission_error, 404 not_found_error, 429 rate_limit_error, 5xx
 * server_error, other 4xx invalid_request_error. */
const char *errors_type_for(int status, const char *code);
/* {"error":{"message","type","code","param"}} of e for status: the type
 * and code e lacks are made from status; the message is cut so that the
 * whole stays within ERRORS_BODY_MAX. */
void errors_write(sbuf *out, int status, const errors_info *e);
/* {"code","message"}: the error object of a failed response (its
 * response.error), on the same terms. */
void errors_write_responses(sbuf *out, int status, const errors_info *e);

/* Anthropic's error type for status: 400 invalid_request_error, 401
 * authentication_error, 402 billing_error, 403 permission_error, 404
 * not_found_error, 413 request_too_large, 429 rate_limit_error, 500
 * api_error, 503 and 529 overloaded_error, 504 timeout_error; another 4xx
 * invalid_request_error, anything else api_error. */
const char *errors_messages_type(int status);
/* {"type":"error","error":{"type","message"}} of e for status: the type
 * from status (errors_messages_type: an OpenAI upstream's types do not
 * follow Anthropic's, e.g. its 404 for an unknown model says
 * invalid_request_error), the message as errors_write cuts it. */
void errors_write_messages(sbuf *out, int status, const errors_info *e);
/* errors_write for a Responses or Chat Completions client,
 * errors_write_messages for a Messages client. */
void errors_write_for(sbuf *out, api_kind client, int status, const errors_info *e);

#endif
