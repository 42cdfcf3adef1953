/* stream_responses.h: the row (Chat Completions upstream -> Responses
 * client, streamed) of the table of pairs (stream.c), and the Responses
 * event writers it shares with the row of a Messages upstream. */
#ifndef SY_DIALECT_STREAM_RESPONSES_H
#define SY_DIALECT_STREAM_RESPONSES_H
#include "dialect/track.h"

/* One chat chunk (doc; NULL with type "[DONE]" for the end marker) in:
 * the Responses events it makes appended to s->out. */
void stream_responses_event(dialect_stream *s, const char *type, const json_value *doc);
/* A stream whose finish_reason came without [DONE] is completed here (1);
 * 1 when it was already, 0 when it was cut (nothing written). */
int stream_responses_end(dialect_stream *s);

/* The event writers, for the translator of another upstream's stream into
 * a Responses stream (stream_from_messages.c), with the same items, ids
 * (made from chat_id: resp_, msg_, rs_, fc_) and sequence numbers as a
 * chat stream gets. begin: response.created and .in_progress, once (the
 * others begin it with the client's model and id when it was not). */
void stream_responses_begin(dialect_stream *s, const char *chat_id, const char *model, int64_t created);
/* A piece of the answer's text (refusal 0) or of a refusal (1): into the
 * open message item (opened when none is, the open reasoning one finished
 * first). */
void stream_responses_text(dialect_stream *s, int refusal, const char *text, size_t n);
/* A piece of reasoning: into the open reasoning item's summary. */
void stream_responses_reasoning(dialect_stream *s, const char *text, size_t n);
/* A piece of the call keyed index: the first opens its function_call item
 * (call_id, name; the open text item finished first), the arguments
 * stream as function_call_arguments.delta. */
void stream_responses_call(dialect_stream *s, long index, const char *call_id, const char *name, size_t name_len,
                           const char *args, size_t args_len);
/* The call keyed index finished: its arguments' .done and its item's. */
void stream_responses_call_done(dialect_stream *s, long index);
/* Every item finished (the text item, then the calls not finished yet);
 * finish is the chat finish_reason the terminal event's status is made of. */
void stream_responses_close(dialect_stream *s, const char *finish);
/* The terminal event (response.completed, or .incomplete) with the whole
 * output and s->tr.usage; the stream is terminal. */
void stream_responses_complete(dialect_stream *s);
/* The upstream's error (doc) as response.failed; the stream failed. */
void stream_responses_fail(dialect_stream *s, const json_value *doc);

#endif
