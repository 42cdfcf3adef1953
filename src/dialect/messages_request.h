/* messages_request.h: an Anthropic Messages request (Claude Code, the
 * Anthropic SDKs) made a Responses request or a Chat Completions request
 * (docs/clients.md, "Anthropic Messages", the Request table). The
 * upstream's rules (stream, store, default instructions, drop, rename) are
 * not applied here: adapt.c does that to what this writes. */
#ifndef SY_DIALECT_MESSAGES_REQUEST_H
#define SY_DIALECT_MESSAGES_REQUEST_H
#include "base/json.h"
#include "base/sbuf.h"
#include "dialect/refuse.h"
#include "policy/policy.h"

/* thinking.budget_tokens as a reasoning effort: under LOW "low", under
 * MEDIUM "medium", else "high". Claude Code's "think" (4,000 tokens),
 * "think hard" (10,000) and "ultrathink" (31,999) land on the three. */
#define MESSAGES_BUDGET_LOW 4096
#define MESSAGES_BUDGET_MEDIUM 16384

/* The Responses body (Chat Completions body) for doc, the client's
 * Messages body parsed whole, appended to out. rules (NULL: none) is read
 * for its ignore list only. A field the target cannot carry, and any
 * top-level field this file does not know (Anthropic's own: it must not
 * reach an OpenAI upstream), is a 400 naming it as Anthropic writes paths
 * ("messages.2.content.0.type"; -1, err filled, out holding a partial body
 * the caller discards) unless ignore lists it ("top_k",
 * "tools.web_search_20250305", "content.search_result",
 * "output_config.task_budget"), then it is left out. Ids OpenAI would
 * refuse as too long (a call id, metadata.user_id: over 64 characters) go
 * as their SHA-256 in hex. Returns 0 or -1. */
int messages_request_to_responses(const json_value *doc, const policy_dialect *rules, sbuf *out, dialect_error *err);
int messages_request_to_chat(const json_value *doc, const policy_dialect *rules, sbuf *out, dialect_error *err);

#endif
