/* stream_from_messages.h: the rows (Messages upstream -> Chat Completions
 * client and Messages upstream -> Responses client, streamed) of the
 * table of pairs (stream.c). */
#ifndef SY_DIALECT_STREAM_FROM_MESSAGES_H
#define SY_DIALECT_STREAM_FROM_MESSAGES_H
#include "dialect/track.h"

/* One Anthropic event (type, its data doc) in: the chat chunks or the
 * Responses events it makes appended to s->out (the client is the row's). */
void stream_from_messages_event(dialect_stream *s, const char *type, const json_value *doc);
/* The end: a stream whose message_delta came without message_stop is
 * finished here. 1 when the stream ended properly (its [DONE], terminal
 * event or error written), 0 when it was cut (nothing written). */
int stream_from_messages_end(dialect_stream *s);

#endif
