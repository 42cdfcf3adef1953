/* adapt.h: an upstream's rules (policy_dialect, from policies/dialect.lua)
 * applied to a request body already in that upstream's dialect: the
 * client's own body (dialect_plan said ADAPT), or what a translator wrote.
 * For a Responses upstream: stream forced, store false, default
 * instructions when the body has none, fields dropped and renamed, a
 * string input made a list, system messages in input given another role,
 * input items without their ids. For a Chat upstream only drop, rename and
 * stream apply. Everything else goes as it came, in the same order. */
#ifndef SY_DIALECT_ADAPT_H
#define SY_DIALECT_ADAPT_H
#include "base/json.h"
#include "base/sbuf.h"
#include "dialect/refuse.h"
#include "policy/policy.h"
#include "upstream/preflight.h"

/* 1 when rules (NULL: none) could change a body for upstream: any rule
 * that applies to that dialect is set. 0: adapt_body would write the body
 * as it is (the caller may skip it). */
int adapt_has_work(api_kind upstream, const policy_dialect *rules);

/* doc (a body in upstream's dialect) with rules applied, appended to out;
 * *up_stream set to whether the written body streams. Returns 0, or -1
 * with err (a 400) when doc is no JSON object. */
int adapt_body(api_kind upstream, const policy_dialect *rules, const json_value *doc, sbuf *out, int *up_stream,
               dialect_error *err);

#endif
