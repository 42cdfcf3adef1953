/* fill.h: the output of a Responses stream's terminal event, filled in.
 * The ChatGPT backend streams each output item in its
 * response.output_item.done event and ends with a response.completed
 * whose "output" is [] (reported in many public trackers). A client that
 * builds its final answer from the terminal event (the OpenAI SDK's
 * responses.stream(...).finalResponse(), LangChain, the Vercel AI SDK)
 * then gets an empty answer; Codex reads the item events and is not
 * affected. The relay fills the terminal event's empty output with the
 * items the stream carried. Pure: no tree, only the spans it needs; the
 * events given must be whole (the relay sends whole events). */
#ifndef SY_DIALECT_FILL_H
#define SY_DIALECT_FILL_H
#include <stddef.h>
#include "base/sbuf.h"

/* buf[0..n): whole SSE events. Each response.completed or
 * response.incomplete event whose data's response.output is an empty
 * array gets items (a JSON array text, "[...]") in its place. Returns 1
 * with out holding the rewritten bytes, 0 when nothing changed (out
 * untouched). */
int fill_output_sse(const char *buf, size_t n, const char *items, size_t ilen, sbuf *out);

#endif
