/* stream_responses.h: the row (Chat Completions upstream -> Responses
 * client, streamed) of the table of pairs (stream.c). */
#ifndef SY_DIALECT_STREAM_RESPONSES_H
#define SY_DIALECT_STREAM_RESPONSES_H
#include "dialect/track.h"

/* One chat chunk (doc; NULL with type "[DONE]" for the end marker) in:
 * the Responses events it makes appended to s->out. */
void stream_responses_event(dialect_stream *s, const char *type, const json_value *doc);
/* A stream whose finish_reason came without [DONE] is completed here (1);
 * 1 when it was already, 0 when it was cut (nothing written). */
int stream_responses_end(dialect_stream *s);

#endif
