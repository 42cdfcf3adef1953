/* resume.h: the request that finishes a cut chat-completions stream on
 * another account (opt-in stream resume, see docs/policies.md): the
 * client's request with the text already delivered appended as an
 * assistant message (a prefill), everything else unchanged. Pure: no I/O. */
#ifndef SY_RESUME_H
#define SY_RESUME_H
#include <stddef.h>
#include "base/json.h"
#include "base/sbuf.h"

/* Writes into out the body of doc (a chat-completions request object) with
 * {"role":"assistant","content":text} appended to its "messages". Returns 0,
 * or -1 (out untouched) when doc has no messages array. */
int resume_body_build(const json_value *doc, const char *text, size_t len, sbuf *out);

#endif
