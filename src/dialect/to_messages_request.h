/* to_messages_request.h: a Chat Completions request or a Responses request
 * made an Anthropic Messages request, for an account that speaks only the
 * Messages API (docs/clients.md, "Into the Messages API", the Request
 * table). The upstream's rules (stream, drop, rename) are not applied
 * here: adapt.c does that to what this writes. */
#ifndef SY_DIALECT_TO_MESSAGES_REQUEST_H
#define SY_DIALECT_TO_MESSAGES_REQUEST_H
#include "base/json.h"
#include "base/sbuf.h"
#include "dialect/refuse.h"
#include "policy/policy.h"

/* Anthropic requires max_tokens; OpenAI's APIs do not. A request that
 * names no limit gets this one: what every Claude model since 3.5 Sonnet
 * can give, a long answer or a large tool call's arguments, and small
 * enough that no model refuses it as above its own maximum. */
#define TO_MESSAGES_MAX_TOKENS 8192

/* A reasoning effort as a thinking budget (budget_tokens): minimal 1024
 * (Anthropic's least), low 4096, medium 16384, high and xhigh 32768;
 * "none" asks for no thinking. max_tokens counts the thinking too and
 * must exceed the budget: a smaller one is raised by the budget. */
#define TO_MESSAGES_BUDGET_MINIMAL 1024
#define TO_MESSAGES_BUDGET_LOW 4096
#define TO_MESSAGES_BUDGET_MEDIUM 16384
#define TO_MESSAGES_BUDGET_HIGH 32768

/* The Messages body for doc (the client's Chat Completions body, or its
 * Responses body, parsed whole), appended to out. rules (NULL: none) is
 * read for its ignore list only. A field the Messages API cannot carry,
 * and any top-level field this file does not know (Anthropic refuses
 * fields it does not know), is a 400 naming it as OpenAI writes paths
 * ("messages[2].tool_calls[0].function.arguments", "input[3].type"; -1,
 * err filled, out holding a partial body the caller discards) unless
 * ignore lists it ("n", "tools.web_search", "content.input_audio",
 * "text.verbosity", "role.function", "input.item_reference"), then it is
 * left out. Returns 0 or -1. */
int to_messages_request_chat(const json_value *doc, const policy_dialect *rules, sbuf *out, dialect_error *err);
int to_messages_request_responses(const json_value *doc, const policy_dialect *rules, sbuf *out,
                                  dialect_error *err);

#endif
