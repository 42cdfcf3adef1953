/* conversation.h: a stored Responses-API conversation sent to another
 * account. When the account that owns a request's previous_response_id
 * cannot serve, the gateway replays the conversation from its own record
 * (store/store_conversations.h): the request goes out without
 * previous_response_id and with the whole conversation as its input. This
 * module writes that body, and reads from the bodies the gateway relays
 * what it records. Pure: no I/O, bounded work, base/ only; fuzzed
 * (tests/fuzz/fuzz_conversation.c).
 *
 * How the bytes are made: spliced, not re-serialized. The body and the
 * recorded arrays are walked with base/json.h's scanner (json_scan_value,
 * which validates as json_parse does, nothing allocated) and every member
 * and item is copied byte for byte, so numbers, escapes, key order and
 * unknown fields reach the upstream exactly as the client and the upstream
 * wrote them; json_write would round numbers through a double.
 *
 * What the Responses API takes as input items (its OpenAPI types, as the
 * official SDK is generated from them: ResponseInputItem vs
 * ResponseOutputItem): every output item type is also an input item type.
 * An output "message" (role assistant, content output_text / refusal, with
 * id and status) is ResponseOutputMessageParam; "reasoning" (id, summary,
 * encrypted_content), "function_call", "file_search_call",
 * "web_search_call", "computer_call", "image_generation_call",
 * "code_interpreter_call", "local_shell_call", "mcp_call",
 * "mcp_list_tools" and "mcp_approval_request" each have their input twin;
 * "function_call_output", "computer_call_output",
 * "local_shell_call_output", "mcp_approval_response" and "item_reference"
 * are input-only. So output items are replayed as they are, unknown types
 * and fields too: the gateway does not know better than the upstream. Two
 * things do not travel and are not handled here: a reasoning item's
 * encrypted_content is readable only by the account that made it (the
 * caller strips those blobs afterwards), and an "item_reference" names an
 * item stored at the first account (passed as it is; the new account will
 * refuse it). The instructions of earlier turns are not replayed: the API
 * does not carry them over previous_response_id either.
 *
 * Duplicate members: the last "input" and the last "previous_response_id"
 * count (as json_get and the request checks read them); every copy of both
 * is dropped from the rebuilt body. */
#ifndef SY_CONVERSATION_H
#define SY_CONVERSATION_H
#include <stddef.h>
#include "base/conv_link.h"
#include "base/sbuf.h"

#define CONVERSATION_MAX_ITEMS 100000           /* input items of a rebuilt body */
#define CONVERSATION_MAX_BYTES ((size_t)64 << 20) /* bytes of a rebuilt body */
#define CONVERSATION_ID_MAX 128                 /* id buffers: 127 bytes and the NUL */

/* Writes into out (appending) the body to send instead of body (a
 * Responses request: a JSON object whose "previous_response_id" is
 * chain[n-1].response_id): the same members in the same order, without
 * "previous_response_id", and with "input" (where the last one stood, else
 * where previous_response_id stood) replaced by
 *   chain[0].input..., chain[0].output..., ..., chain[n-1].output...,
 *   the request's own input items
 * (a string input becomes {"type":"message","role":"user","content":s}).
 * chain is oldest first, linked: chain[0].previous_response_id NULL, each
 * next one's previous_response_id the one before's response_id (as
 * store_conversation_chain returns it). Returns 0, or -1 with err filled
 * and out as it was: body not an object, previous_response_id missing or
 * not a string or not the chain's last id, input neither a string nor an
 * array, a link that is not linked or whose input or output is not a JSON
 * array, more than CONVERSATION_MAX_ITEMS items or CONVERSATION_MAX_BYTES
 * bytes. */
int conversation_rebuild(const conv_link *chain, size_t n, const char *body, size_t len, sbuf *out, char *err,
                         size_t errlen);

/* What a relayed request adds to its conversation: its input as a JSON
 * array text (appended to input_json: the array's bytes, or a string input
 * as the one-message array above; no input gives []), its
 * previous_response_id ("" when absent or null) and whether it asked to be
 * stored (*store_flag 0 only for "store": false; the API's default is
 * true). Returns 0, or -1 (input_json as it was) when body is not a JSON
 * object, input is neither a string nor an array, or previous_response_id
 * is neither a string nor null or is longer than 127 bytes. */
int conversation_record_input(const char *body, size_t len, sbuf *input_json, char prev_id[CONVERSATION_ID_MAX],
                              int *store_flag);

/* What a response adds: its "id" and its "output" array (appended to
 * output_json as its bytes), from a plain answer body (the response
 * object) or from a streamed event that carries the response as its
 * "response" member (response.completed, and likewise response.incomplete
 * or response.failed: which to record is the caller's choice). Returns 0,
 * or -1 (output_json as it was) when neither holds a string id of 1 to 127
 * bytes and an output array. */
int conversation_record_output(const char *response_json, size_t len, sbuf *output_json,
                               char id[CONVERSATION_ID_MAX]);

#endif
