/* messages_count.h: an estimate of a Messages request's input tokens, for
 * POST /v1/messages/count_tokens where no account counts them natively (an
 * Anthropic account answers it itself). An estimate, and the edge says so
 * (docs/clients.md): OpenAI's tokenizers are not Anthropic's, and the
 * gateway reads no tokenizer at all. */
#ifndef SY_DIALECT_MESSAGES_COUNT_H
#define SY_DIALECT_MESSAGES_COUNT_H
#include <stddef.h>

/* Text bytes per token: the common rule of thumb for English and code. */
#define MESSAGES_COUNT_BYTES_PER_TOKEN 4
/* An image or a PDF, whatever its size: Anthropic's figure for an image of
 * about a megapixel (width * height / 750); a PDF page costs as much. */
#define MESSAGES_COUNT_MEDIA_TOKENS 1600

/* body (len bytes: a count_tokens or messages request) read for its text:
 * the system prompt, each message's text, tool_use inputs (as JSON),
 * tool_result text, plain-text documents, and each tool's name,
 * description and input_schema (as JSON); their bytes divided by
 * MESSAGES_COUNT_BYTES_PER_TOKEN, rounded up, plus
 * MESSAGES_COUNT_MEDIA_TOKENS per image or base64 document. Thinking
 * blocks are not counted (Anthropic strips earlier turns' thinking from
 * the context). Returns the estimate (>= 0), or -1 when body is not a
 * JSON object with a "messages" list. */
long messages_count_tokens_estimate(const char *body, size_t len);

#endif
