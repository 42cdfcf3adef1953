/* stream_chat.h: the row (Responses upstream -> Chat Completions client,
 * streamed) of the table of pairs (stream.c), and the chat chunk writers
 * it shares with the row of a Messages upstream. */
#ifndef SY_DIALECT_STREAM_CHAT_H
#define SY_DIALECT_STREAM_CHAT_H
#include "dialect/track.h"

/* One Responses event (type, its data doc) in: the chat chunks it makes
 * appended to s->out. */
void stream_chat_event(dialect_stream *s, const char *type, const json_value *doc);
/* 1 when the stream ended properly (its [DONE] or error chunk was written
 * then), 0 when it was cut: nothing to add either way. */
int stream_chat_end(dialect_stream *s);

/* The chunk writers, for the translator of another upstream's stream into
 * a chat stream (stream_from_messages.c): each writes whole chunks to
 * s->out, in the API's shape (the role chunk first when none went out).
 *
 * The chunks' id, model and created: fixed by the first call (model NULL
 * or "": the client's); before any chunk goes out. */
void stream_chat_ids(dialect_stream *s, const char *chat_id, const char *model, int64_t created);
/* The first chunk (the assistant's role), once. */
void stream_chat_role(dialect_stream *s);
/* A delta of one string member: "content", "refusal", "reasoning_content". */
void stream_chat_text(dialect_stream *s, const char *member, const char *text, size_t n);
/* A tool call's first chunk (index, id: "" makes "call_<index>", type,
 * name, arguments ""), then its arguments' pieces. */
void stream_chat_call_head(dialect_stream *s, long index, const char *call_id, const char *name, size_t name_len);
void stream_chat_call_args(dialect_stream *s, long index, const char *text, size_t n);
/* The end: the finish chunk, the usage chunk when the client asked one
 * (u NULL or not known: none), data: [DONE]; the stream is terminal. */
void stream_chat_finish(dialect_stream *s, const char *finish, const shape_usage *u);
/* The upstream's error (doc, any shape errors_read reads) as the chat
 * stream's error chunk, and the end (no [DONE]); the stream failed. */
void stream_chat_fail(dialect_stream *s, const json_value *doc);

#endif
