/* stream_messages.h: the rows (Responses upstream -> Messages client and
 * Chat Completions upstream -> Messages client, streamed) of the table of
 * pairs (stream.c). */
#ifndef SY_DIALECT_STREAM_MESSAGES_H
#define SY_DIALECT_STREAM_MESSAGES_H
#include "dialect/track.h"

/* One Responses event (type, its data doc) in: the Anthropic events it
 * makes appended to s->out. */
void stream_messages_from_responses(dialect_stream *s, const char *type, const json_value *doc);
/* One chat chunk (doc NULL: [DONE]) in. */
void stream_messages_from_chat(dialect_stream *s, const char *type, const json_value *doc);
/* The end: a chat stream whose finish_reason came but no [DONE] gets its
 * message_delta and message_stop now. 1 when the stream ended properly
 * (message_stop or an error event written), 0 when it was cut. */
int stream_messages_end(dialect_stream *s);

#endif
