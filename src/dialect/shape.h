/* shape.h: what the answer and stream translators of the dialects share
 * (docs/clients.md): the ids an answer in one dialect gets from another's,
 * token usage in each naming, finish_reason <-> status <-> stop_reason, and
 * the writers of a chat.completion, of the Responses items and response
 * object, and of the Anthropic Messages response object and its blocks. One writer per shape, so that a plain answer, an aggregated
 * stream and the last event of a translated stream are the same bytes for
 * the same content. */
#ifndef SY_DIALECT_SHAPE_H
#define SY_DIALECT_SHAPE_H
#include <stddef.h>
#include <stdint.h>
#include "base/json.h"
#include "base/sbuf.h"

/* Room for an id: an upstream's ids are kept up to 127 bytes (cut on a
 * character boundary), with a prefix of ours in front. */
#define SHAPE_ID_MAX 160
/* The chat id of an answer whose upstream gave no id. */
#define SHAPE_CHAT_ID_NONE "chatcmpl-switchyard"

/* ---------- ids ---------- */

/* A copy of s (NULL: "") cut to 127 bytes on a UTF-8 boundary. */
void shape_copy_id(char dst[SHAPE_ID_MAX], const char *s);
/* The chat id of an answer made from the response response_id: "resp_X"
 * gives "chatcmpl-X" (X kept as it is when it already starts with
 * "chatcmpl-", so a round trip gives the id back); "chatcmpl-switchyard"
 * when there is none. */
void shape_chat_id(char dst[SHAPE_ID_MAX], const char *response_id);
/* The response id of an answer made from the chat completion chat_id:
 * "resp_" + chat_id ("resp_switchyard" when there is none). */
void shape_response_id(char dst[SHAPE_ID_MAX], const char *chat_id);
/* What item ids made from a chat completion carry after their prefix
 * (msg_, rs_, fc_): the chat id without "chatcmpl-". */
const char *shape_id_suffix(const char *chat_id);
/* An item id made from a chat completion: prefix + its suffix, and "_n"
 * when n >= 0 ("msg_X", "rs_X", "fc_X_0", "call_X_1"). */
void shape_item_id(char dst[SHAPE_ID_MAX], const char *prefix, const char *chat_id, long n);

/* An integer member (created, created_at, an index): its value when it is
 * a number within [-2^53, 2^53] (truncated), else dflt. */
int64_t shape_int(const json_value *obj, const char *key, int64_t dflt);
/* An index member (output_index, a tool call's index): 0..INT32_MAX, or
 * -1 when it is absent or no such number. */
long shape_index(const json_value *obj, const char *key);
/* A string member, or "" (never NULL). */
const char *shape_str(const json_value *obj, const char *key);

/* ---------- usage ---------- */

typedef struct shape_usage {
    int known; /* a usage object was read */
    long in, out, total, cached, reasoning; /* -1 unknown */
} shape_usage;

void shape_usage_init(shape_usage *u);
/* Reads a usage object in either naming (input/prompt, output/completion,
 * *_tokens_details cached_tokens and reasoning_tokens); the members it
 * finds replace u's. Counts are clamped (upstream/usage.h). */
void shape_usage_read(const json_value *v, shape_usage *u);
/* {"prompt_tokens":...,"completion_tokens":...,"total_tokens":...,
 * "prompt_tokens_details":{"cached_tokens"},"completion_tokens_details":
 * {"reasoning_tokens"}}: unknown counts as 0. "null" when not known. */
void shape_usage_chat(sbuf *out, const shape_usage *u);
/* {"input_tokens":...,"input_tokens_details":{"cached_tokens"},
 * "output_tokens":...,"output_tokens_details":{"reasoning_tokens"},
 * "total_tokens":...}, or "null". */
void shape_usage_responses(sbuf *out, const shape_usage *u);

/* ---------- finish ---------- */

/* A response's status (and incomplete_details.reason) as a chat
 * finish_reason: incomplete with content_filter -> "content_filter", any
 * other incomplete -> "length", else "tool_calls" when it holds function
 * calls, else "stop". */
const char *shape_finish_reason(const char *status, const char *incomplete_reason, int has_calls);
/* A chat finish_reason as a response status: "length" -> "incomplete"
 * with *reason "max_output_tokens", "content_filter" -> "incomplete" with
 * "content_filter", anything else "completed" (*reason NULL). */
const char *shape_status(const char *finish, const char **reason);

/* ---------- writers ---------- */

/* JSON string literal of a NUL-terminated string. */
void shape_put_str(sbuf *out, const char *s);

/* Responses items, as the API writes them when finished. */
void shape_item_reasoning(sbuf *out, const char *id, const char *text, size_t n);
/* A message item up to its content list ("content":[); parts follow with
 * shape_part, then shape_item_message_end. */
void shape_item_message_begin(sbuf *out, const char *id, const char *status);
void shape_part(sbuf *out, int refusal, const char *text, size_t n);
void shape_item_message_end(sbuf *out);
void shape_item_call(sbuf *out, const char *id, const char *status, const char *call_id, const char *name,
                     size_t name_len, const char *args, size_t args_len);

/* The response object. output is the items, comma-separated, without the
 * brackets (NULL: none); error is a raw JSON object or NULL (null). */
typedef struct shape_head {
    const char *id;
    int64_t created;
    const char *status;
    const char *incomplete_reason; /* NULL: incomplete_details null */
    const char *model;
    const char *error;
    size_t error_len;
} shape_head;
void shape_response(sbuf *out, const shape_head *h, const char *output, size_t output_len, const shape_usage *u);

/* A chat.completion with one choice. */
typedef struct shape_chat {
    const char *id;
    int64_t created;
    const char *model;
    const sbuf *content, *refusal, *reasoning; /* NULL or empty: none */
    const sbuf *tool_calls;  /* tool call objects, comma-separated (shape_chat_call), or NULL */
    const char *finish;
    const char *usage;       /* raw JSON, or NULL: no usage member */
    size_t usage_len;
    const char *fingerprint; /* system_fingerprint, or NULL */
} shape_chat;
void shape_chat_completion(sbuf *out, const shape_chat *c);
/* One element of a message's tool_calls. */
void shape_chat_call(sbuf *out, const char *call_id, const char *name, size_t name_len, const char *args,
                     size_t args_len);

/* ---------- Anthropic Messages ---------- */

/* The Messages id of an answer made from the upstream's id: "resp_X" and
 * "chatcmpl-X" give "msg_X"; "msg_switchyard" when there is none. */
void shape_message_id(char dst[SHAPE_ID_MAX], const char *upstream_id);
/* A stop_reason from a response's status (a chat finish_reason goes
 * through shape_status first): incomplete with content_filter "refusal",
 * any other incomplete "max_tokens"; else "refusal" when the answer
 * refused, "tool_use" when it holds tool calls, "end_turn". (OpenAI's
 * answers do not say whether a stop sequence ended them: "stop_sequence"
 * is never given.) */
const char *shape_stop_reason(const char *status, const char *incomplete_reason, int has_calls, int refused);
/* {"input_tokens","cache_creation_input_tokens","cache_read_input_tokens",
 * "output_tokens"}: Anthropic counts cache reads apart from input_tokens,
 * so input_tokens is the input less the cached tokens; cache creation is
 * 0 (OpenAI caches without charging for it). Unknown counts (u NULL or not
 * known) as 0. */
void shape_usage_messages(sbuf *out, const shape_usage *u);
/* The Messages response object up to its content list:
 * {"id","type":"message","role":"assistant","model","content":[ ; blocks
 * follow (comma-separated), then shape_message_end. */
void shape_message_begin(sbuf *out, const char *id, const char *model);
/* ],"stop_reason","stop_sequence":null,"usage":{...}} (stop_reason NULL:
 * null, as message_start gives it). */
void shape_message_end(sbuf *out, const char *stop_reason, const shape_usage *u);
/* Content blocks: {"type":"text","text"} and {"type":"tool_use","id",
 * "name","input"}, input the arguments' JSON when they are an object that
 * fits the answer's depth, else {} (Anthropic's input is an object). */
void shape_block_text(sbuf *out, const char *text, size_t n);
void shape_block_tool_use(sbuf *out, const char *id, const char *name, size_t name_len, const char *args,
                          size_t args_len);

/* ---------- from Anthropic Messages ---------- */

/* Anthropic's usage counts as its answer and its stream give them: -1
 * until given. message_start brings the input's, message_delta the
 * output's (and, in newer versions of the API, the input's again). */
typedef struct shape_msg_usage {
    int known;
    long in, cache_read, cache_write, out;
} shape_msg_usage;

void shape_msg_usage_init(shape_msg_usage *m);
/* Reads a usage object (input_tokens, cache_read_input_tokens,
 * cache_creation_input_tokens, output_tokens): the members it finds
 * replace m's. Counts are clamped (upstream/usage.h). */
void shape_msg_usage_read(const json_value *v, shape_msg_usage *m);
/* m as the OpenAI dialects count: the input is input_tokens with the cache
 * reads and writes (Anthropic counts them apart), cached the cache reads,
 * the output output_tokens (thinking included; Anthropic does not say how
 * much of it was thinking: reasoning unknown). Not known: u->known 0. */
void shape_msg_usage_get(const shape_msg_usage *m, shape_usage *u);
/* The chat id of an answer made from a Messages id: "msg_X" gives
 * "chatcmpl-X" (a Responses id is then "resp_chatcmpl-X", as for any chat
 * answer: shape_response_id); "chatcmpl-switchyard" when there is none. */
void shape_chat_id_of_message(char dst[SHAPE_ID_MAX], const char *message_id);
/* A stop_reason as a chat finish_reason: max_tokens and
 * model_context_window_exceeded "length", refusal "content_filter",
 * tool_use "tool_calls"; end_turn, stop_sequence, pause_turn and none
 * "tool_calls" when the answer holds tool calls, else "stop". */
const char *shape_finish_of_stop(const char *stop_reason, int has_calls);

#endif
