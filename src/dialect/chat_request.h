/* chat_request.h: a Chat Completions request made a Responses request
 * (docs/clients.md, "Translation: Chat Completions client ⇄ Responses
 * upstream", the Request table). The upstream's rules (stream, store,
 * default instructions, drop, rename) are not applied here: adapt.c does
 * that to what this writes, and fills default instructions only when the
 * system messages gave none. */
#ifndef SY_DIALECT_CHAT_REQUEST_H
#define SY_DIALECT_CHAT_REQUEST_H
#include "base/json.h"
#include "base/sbuf.h"
#include "dialect/refuse.h"
#include "policy/policy.h"

/* The Responses body for doc (the client's Chat Completions body, parsed
 * whole), appended to out. rules (NULL: none) is read for its ignore list
 * only: a field the Responses API cannot carry is a 400 naming it (-1, err
 * filled, out holding a partial body the caller discards) unless ignore
 * lists it, then it is left out. Fields the translation does not know pass
 * through unchanged (the upstream judges them). Returns 0 or -1. */
int chat_request_to_responses(const json_value *doc, const policy_dialect *rules, sbuf *out, dialect_error *err);

#endif
