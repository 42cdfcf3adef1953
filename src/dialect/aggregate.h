/* aggregate.h: the rows of the table of pairs (stream.c) that gather an
 * upstream's stream into one plain answer for a client that asked no
 * stream (opts.aggregate): a Responses stream into a response object, a
 * chat stream into a chat.completion, a Messages stream into a Messages
 * response, each then made the client's dialect
 * by dialect_answer when that is another one (a Messages client's answer
 * is made so too). A failed stream gives the error object of the
 * client's dialect. */
#ifndef SY_DIALECT_AGGREGATE_H
#define SY_DIALECT_AGGREGATE_H
#include "dialect/track.h"

/* A Responses upstream's event in: nothing out until the end. */
void aggregate_responses_event(dialect_stream *s, const char *type, const json_value *doc);
/* The answer as a response object (Responses client) / a chat.completion
 * (chat client), or the error object when the stream failed; 1, or 0
 * (nothing written) when the stream was cut before its terminal event. */
int aggregate_responses_end(dialect_stream *s);
int aggregate_responses_end_chat(dialect_stream *s);
int aggregate_responses_end_messages(dialect_stream *s);

/* A chat upstream's chunk in (NULL doc: [DONE]). */
void aggregate_chat_event(dialect_stream *s, const char *type, const json_value *doc);
/* The answer as a chat.completion / a response object, or the error. */
int aggregate_chat_end(dialect_stream *s);
int aggregate_chat_end_responses(dialect_stream *s);
int aggregate_chat_end_messages(dialect_stream *s);

/* A Messages upstream's event in (an anthropic account's stream). */
void aggregate_messages_event(dialect_stream *s, const char *type, const json_value *doc);
/* The answer as a chat.completion / a response object, or the error. */
int aggregate_messages_end_chat(dialect_stream *s);
int aggregate_messages_end_responses(dialect_stream *s);

#endif
