/* stream_chat.h: the row (Responses upstream -> Chat Completions client,
 * streamed) of the table of pairs (stream.c). */
#ifndef SY_DIALECT_STREAM_CHAT_H
#define SY_DIALECT_STREAM_CHAT_H
#include "dialect/track.h"

/* One Responses event (type, its data doc) in: the chat chunks it makes
 * appended to s->out. */
void stream_chat_event(dialect_stream *s, const char *type, const json_value *doc);
/* 1 when the stream ended properly (its [DONE] or error chunk was written
 * then), 0 when it was cut: nothing to add either way. */
int stream_chat_end(dialect_stream *s);

#endif
