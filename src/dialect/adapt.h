/* adapt.h: an upstream's rules (policy_dialect, from policies/dialect.lua)
 * applied to the raw bytes of a request body already in that upstream's
 * dialect: the client's own body (dialect_plan said ADAPT), or what a
 * translator wrote. For a Responses upstream: stream forced, store false,
 * instructions when the body has none (its leading system/developer
 * messages moved out of input, else the rules' default text), fields
 * dropped and renamed, a string input made a list, system messages in
 * input given another role, input items without their ids. For a Chat
 * upstream only drop, rename and stream apply (a forced stream asks for its
 * usage in stream_options); for a Messages upstream drop, rename and
 * stream. Every byte no rule changes
 * goes out as it came, in the same order (numbers, escapes, whitespace). */
#ifndef SY_DIALECT_ADAPT_H
#define SY_DIALECT_ADAPT_H
#include <stddef.h>
#include "base/sbuf.h"
#include "dialect/refuse.h"
#include "policy/policy.h"
#include "upstream/preflight.h"

/* 1 when rules (NULL: none) could change a body for upstream: any rule
 * that applies to that dialect is set. 0: adapt_body would write the body
 * as it is (the caller may skip it). */
int adapt_has_work(api_kind upstream, const policy_dialect *rules);

/* 1 when a forced rule writes the top-level member name itself for
 * upstream ("stream", "store", "instructions", "input"): once, at the place
 * of its last copy, whatever the drop and rename lists say of that name. */
int adapt_owns(api_kind upstream, const policy_dialect *rules, const char *name);

/* body (len bytes: a JSON object in upstream's dialect) with rules applied,
 * appended to out; *up_stream (NULL: not asked) set to whether the written
 * body streams. Returns 0, or -1 with err (a 400) when body is not a valid
 * JSON object (json_parse's grammar and nesting limit); out is then as it
 * was. */
int adapt_body(api_kind upstream, const policy_dialect *rules, const char *body, size_t len, sbuf *out, int *up_stream,
               dialect_error *err);

#endif
