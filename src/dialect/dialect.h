/* dialect.h: the API dialects a client and an upstream speak, and the
 * translations between them (docs/clients.md). A client speaks one dialect
 * (Responses, Chat Completions, or the Anthropic Messages API); an account
 * speaks one or both OpenAI dialects, and each upstream kind has rules of
 * its own (policy_dialect: the ChatGPT backend streams always, stores
 * never, requires instructions, refuses some parameters). The proxy meets
 * each side in its own dialect:
 *
 *   request   dialect_request: the client's body made the upstream's (its
 *             dialect, its rules), or a 400 naming the field that cannot be
 *             translated;
 *   answer    dialect_answer: a plain upstream answer made the client's;
 *   stream    dialect_stream: the upstream's events made the client's, one
 *             event at a time, with its own state per attempt (tool call
 *             indexes, output items, content blocks, text so far); or, for
 *             a client that asked no stream from an upstream that always
 *             streams, one aggregated answer at the end;
 *   errors    dialect_error_body (_for): an upstream's error body
 *             ({"detail": ...} of the ChatGPT backend, an error of another
 *             dialect, text) as the error object of the client's dialect;
 *             dialect_error_own: the gateway's own error in that shape.
 *
 * The pairs (client > upstream) there are translators for: chat>responses,
 * responses>chat, messages>responses, messages>chat, and into the Messages
 * API chat>messages and responses>messages (an OpenAI client on an
 * anthropic account: to_messages_request.c, stream_from_messages.c, the
 * Messages rows of answer.c and aggregate.c); and each dialect to itself
 * (passthrough, or adapted by the upstream's rules: a Messages upstream
 * serves a Messages client natively).
 *
 * The translators are a table of pairs (dialect.c, stream.c): adding a
 * dialect is adding rows. Passthrough (same dialect, no rule to apply)
 * never comes here: dialect_plan says so and the proxy sends the client's
 * bytes as they came. Pure: no I/O, no clock, no globals; fuzzed. */
#ifndef SY_DIALECT_H
#define SY_DIALECT_H
#include <stddef.h>
#include <stdint.h>
#include "base/json.h"
#include "base/sbuf.h"
#include "dialect/messages_count.h"
#include "dialect/refuse.h"
#include "policy/policy.h"
#include "upstream/preflight.h"

/* What an account speaks, as a bit set over api_kind. DIALECT_BOTH: the
 * two OpenAI dialects (what an account speaks unless told otherwise). */
#define DIALECT_BIT(api) (1u << (unsigned)(api))
#define DIALECT_BOTH (DIALECT_BIT(API_CHAT) | DIALECT_BIT(API_RESPONSES))

/* "responses" | "chat" | "messages" */
const char *dialect_name(api_kind api);
/* One name into *out: 0, -1 unknown. */
int dialect_parse(const char *s, api_kind *out);
/* "chat>responses" (client > upstream): the pair's name in logs, the trace,
 * the attempts record and the metrics ("messages>responses",
 * "messages>chat" for a Messages client, "chat>messages",
 * "responses>messages" on an anthropic account); "" for passthrough and
 * for a pair there is no translator for. */
const char *dialect_pair_name(api_kind client, api_kind upstream);

/* dialect_error, a request the gateway refuses to translate (status 400,
 * the field it names as param, a code and a message), is declared in
 * dialect/refuse.h, where the translators fill it. */

/* What the request needs on this attempt: NONE (passthrough: the client's
 * bytes go as they came), ADAPT (same dialect, the upstream's rules
 * change it) or TRANSLATE (another dialect). */
typedef enum { DIALECT_NONE, DIALECT_ADAPT, DIALECT_TRANSLATE } dialect_step;

#define DIALECT_FACT_NAMES 32 /* top-level names the facts keep (as signatures) */

/* The facts of the client's request the plan needs (read once per request,
 * from the parsed body: its top level is enough). The first four alone
 * (exact 0) give the plan of before: ADAPT whenever drop, rename or an
 * input rule is set. dialect_facts_read fills them all and sets exact: the
 * plan then says NONE only when adapt would write the body byte for byte
 * as it came, and ADAPT only when it changes it, except that it does not
 * look into input's items (the body's bulk: a look would cost what adapt
 * costs): with strip_item_ids or system_role set and items in input it
 * says ADAPT. */
typedef struct dialect_req_facts {
    int stream;            /* "stream": true */
    int has_instructions;  /* Responses: a non-empty "instructions" */
    int store_absent;      /* Responses: no "store" member (the API stores by default) */
    int store_true;        /* Responses: "store": true */
    int exact;             /* the members below are filled (dialect_facts_read) */
    int store_false;       /* the last "store" is false */
    unsigned repeated;     /* DIALECT_FACT_*: names the body gives more than once */
    int input;             /* DIALECT_INPUT_*: what the last "input" is */
    /* the top-level names (as json_get compares them) a rule could name,
     * as signatures: a name the body holds always matches its own; another
     * that matches too only costs an adapt that changes nothing. More than
     * DIALECT_FACT_NAMES: unknown, any drop or rename may apply. */
    size_t n_names;
    uint32_t names[DIALECT_FACT_NAMES];
} dialect_req_facts;

#define DIALECT_FACT_STREAM 1u
#define DIALECT_FACT_STORE 2u
#define DIALECT_FACT_INSTRUCTIONS 4u
#define DIALECT_FACT_INPUT 8u

enum { DIALECT_INPUT_NONE, DIALECT_INPUT_STRING, DIALECT_INPUT_EMPTY, DIALECT_INPUT_ITEMS, DIALECT_INPUT_OTHER };

/* The facts of a client's body from its parsed document (json_parse_shallow
 * with a depth of 1 is enough: the top-level members with their types and
 * counts). A doc that is no object leaves the facts empty (exact 0). */
void dialect_facts_read(dialect_req_facts *f, const json_value *doc);

dialect_step dialect_plan(api_kind client, api_kind upstream, const policy_dialect *rules,
                          const dialect_req_facts *f);

/* The upstream request body for the attempt: body (len bytes: the client's
 * body as it came) in client's dialect turned into upstream's, with rules
 * applied (NULL: none). Translating parses the body into a tree (the
 * translators read it whole); the rules are applied to the raw bytes (of
 * the client's body, or of the translator's output) without one, so every
 * byte no rule changes goes as it came. *up_stream is set to whether the
 * upstream request streams (the rules may force it). Returns 0 with out
 * filled, or -1 with err (out emptied): a body that is not a valid JSON
 * object, a field a translation cannot carry. */
int dialect_request(api_kind client, api_kind upstream, const policy_dialect *rules, const char *body, size_t len,
                    sbuf *out, int *up_stream, dialect_error *err);

/* A plain (non-stream) upstream answer body in upstream's dialect written
 * into out in client's (any pair of the three dialects). 0, or -1 when
 * body is not an answer of that dialect (out emptied; the proxy then
 * treats it as no answer). */
int dialect_answer(api_kind upstream, api_kind client, const char *body, size_t len, sbuf *out);

/* An upstream's error body (any status) as an OpenAI error object for the
 * client: {"error":{"message","type","code","param"}}. A body that already
 * is one is copied as it is; {"detail": "..."} or {"detail": {"code",
 * "message"}} (the ChatGPT backend) become one, with the code kept or made
 * from the status; Anthropic's {"type":"error","error":{"type","message"}}
 * becomes one with its type as the code ("prompt is too long" as
 * context_length_exceeded) and OpenAI's type from the status; anything
 * else (HTML, text) is quoted in the message, cut to fit. An error inside
 * a 2xx gets the status it stands for. At most 16 KiB, always valid JSON. */
void dialect_error_body(int status, const char *body, size_t len, sbuf *out);
/* The same for a client of any dialect: dialect_error_body's object for a
 * Responses or Chat Completions client; for a Messages client Anthropic's
 * {"type":"error","error":{"type","message"}}, its type from the status
 * (400 invalid_request_error, 401 authentication_error, 402
 * billing_error, 403 permission_error, 404 not_found_error, 413
 * request_too_large, 429 rate_limit_error, 500 api_error, 503 and 529
 * overloaded_error, 504 timeout_error), a body that already is an
 * Anthropic error copied as it is. The edge sends it with the upstream's
 * status (Anthropic's own overload status is 529: the caller decides
 * whether a 503 goes out as 529). */
void dialect_error_body_for(api_kind client, int status, const char *body, size_t len, sbuf *out);
/* The gateway's own error (a refusal, dialect_error included: its status,
 * code, param and message; a limit; a failure of its own) in the client's
 * dialect: {"error":{"message","type","code","param"}} with the type from
 * the status and the code given (NULL: from the status), or Anthropic's
 * {"type":"error","error":{"type","message"}} for a Messages client.
 * param may be NULL. */
void dialect_error_own(api_kind client, int status, const char *code, const char *param, const char *message,
                       sbuf *out);

/* ---------- streams ---------- */

typedef struct dialect_stream dialect_stream;

typedef struct dialect_stream_opts {
    int aggregate;         /* the client asked no stream: nothing until the end, then one answer */
    int include_usage;     /* a chat client's stream_options.include_usage: a last chunk with usage */
    const char *model;     /* the model the client asked (answers name it when the upstream does not) */
} dialect_stream_opts;

/* A translator for one attempt: the upstream's SSE bytes in upstream's
 * dialect in, the client's bytes (SSE events, or with aggregate one JSON
 * body at the end) out. NULL when out of memory. */
dialect_stream *dialect_stream_new(api_kind upstream, api_kind client, const dialect_stream_opts *o);
/* Feeds upstream bytes (any cut: an unfinished event waits for the rest);
 * appends what the client gets from them to out. */
void dialect_stream_feed(dialect_stream *s, const char *buf, size_t n, sbuf *out);
/* The upstream's stream is over. Appends what the client still needs: a
 * stream's closing events ([DONE] for chat) when the upstream ended it
 * properly, the aggregated answer with aggregate. Returns 1 when the
 * upstream's stream ended properly (a terminal event seen: the answer is
 * whole), 0 when it did not (the caller ends the client's stream as
 * interrupted, or fails over when nothing was sent). */
int dialect_stream_end(dialect_stream *s, sbuf *out);
/* The client's Responses id of the stream (a chat upstream's answer made a
 * Responses one: "resp_<chat id>"; a Messages upstream's msg_X:
 * "resp_chatcmpl-X"); "" when the client is not a Responses client of a
 * translated stream or no event named it yet.
 *
 * A Messages client's stream (from a Responses or a Chat upstream) is
 * Anthropic's events in Anthropic's order: message_start (usage 0: the
 * upstream tells it at the end), ping, then per content block
 * content_block_start, its deltas (text_delta, input_json_delta),
 * content_block_stop, one block at a time (parallel tool calls are given
 * one after the other), then message_delta (stop_reason and the usage)
 * and message_stop; an upstream error is an `error` event and the end.
 * The upstream's reasoning is left out (no thinking blocks: see
 * docs/clients.md). Aggregated, it is one Messages response object.
 *
 * A Messages upstream's stream (an anthropic account's) reaches a chat
 * client as chunks and a Responses client as events, written as a chat
 * upstream's would be: text and thinking (as reasoning_content, a
 * reasoning summary) as they come, each tool_use block a tool call with
 * the next index (a Responses function_call item finished with its
 * block), message_delta's stop_reason and usage at the end; its `error`
 * event is the client's error and fails the stream (overloaded_error 503,
 * rate_limit_error 429, invalid_request_error 400, ...). */
const char *dialect_stream_response_id(const dialect_stream *s);
/* The response object of the terminal event a Responses client got from a
 * translated stream (the whole output and usage); NULL (and *len 0) when
 * none was written (not ended, not a Responses client, kept past the
 * memory budget). Valid until the translator is freed. */
const char *dialect_stream_response(const dialect_stream *s, size_t *len);
/* 1 once the client's side has been given output (text, a tool call, a
 * refusal): from then on the attempt cannot move unseen. */
int dialect_stream_output_sent(const dialect_stream *s);
/* 1 when the upstream's stream ended in an error (response.failed, an
 * error event, a chat {"error":...} chunk), with *status (NULL: not
 * asked) the HTTP status it stands for (429 quota/rate limit, 400 a
 * refused request, 401/403/404, 503 overloaded, Anthropic's
 * request_too_large 413, billing_error 402 and timeout_error 504, else
 * 500); 0 otherwise.
 * Streamed, the client already got the error in its own dialect (a chat
 * error chunk and no [DONE], or response.failed). With aggregate, what
 * dialect_stream_end wrote is an OpenAI error object to send with that
 * status instead of an answer; an aggregated answer larger than the
 * translator keeps (64 MiB) or that is no answer is failed so too (502).
 * dialect_stream_end returns 1 for a failed stream (it ended as the
 * upstream meant). dialect_stream_new returns NULL, besides out of
 * memory, for a pair it has no translator for: the same dialect streamed
 * is passthrough. */
int dialect_stream_failed(const dialect_stream *s, int *status);
void dialect_stream_free(dialect_stream *s);

#endif
