/* responses_request.h: a Responses request made a Chat Completions request
 * (docs/clients.md, "Translation: Responses client ⇄ Chat Completions
 * upstream", Request). The upstream's rules (drop, rename, stream) are not
 * applied here: adapt.c does that to what this writes. */
#ifndef SY_DIALECT_RESPONSES_REQUEST_H
#define SY_DIALECT_RESPONSES_REQUEST_H
#include "base/json.h"
#include "base/sbuf.h"
#include "dialect/refuse.h"
#include "policy/policy.h"

/* The Chat Completions body for doc (the client's Responses body, parsed
 * whole; a previous_response_id already rebuilt into its input by the
 * conversation record), appended to out. rules (NULL: none) is read for
 * its ignore list only: what Chat cannot carry (hosted tools and their
 * history items, item_reference, include, truncation, background,
 * reasoning.summary, ...) is a 400 naming it (-1, err filled, out holding
 * a partial body the caller discards) unless ignore lists it, then it is
 * left out. Fields the translation does not know pass through unchanged.
 * Returns 0 or -1. */
int responses_request_to_chat(const json_value *doc, const policy_dialect *rules, sbuf *out, dialect_error *err);

/* 1 when doc's tools hold a custom tool (type "custom") named name: its
 * calls come back from a chat upstream as function calls whose arguments
 * are {"input": "..."}, and the answer side gives the client a
 * custom_tool_call with that input. */
int responses_request_is_custom_tool(const json_value *doc, const char *name);

/* 1 when type is the type of an input item a hosted tool makes
 * (web_search_call, local_shell_call_output, mcp_call, ...) and rules
 * (NULL: none) ignore that tool ("tools.web_search"): the item may be left
 * out; 0 when it is such an item and no rule lets it go; -1 when type is
 * no hosted tool's item. */
int responses_request_hosted_item(const policy_dialect *rules, const char *type);

#endif
