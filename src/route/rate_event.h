/* rate_event.h: the codex.rate_limits events of a Responses stream told in
 * the pool's numbers. The ChatGPT backend sends one in each stream (codex-rs
 * codex-api/src/rate_limits.rs reads it: {"type":"codex.rate_limits",
 * "plan_type", "metered_limit_name"|"limit_name", "rate_limits":{"allowed",
 * "limit_reached", "primary":{"used_percent","window_minutes","reset_at"},
 * "secondary":{...}}, "credits"}); it carries the serving account's windows,
 * while the answer's x-codex-* headers already describe the pool
 * (route/pool_usage.h). Only the rate_limits member is replaced, only for
 * the main limit (no limit name, or "codex"): a limit family's own event,
 * and anything that is not such an event, passes byte for byte. Pure. */
#ifndef SY_RATE_EVENT_H
#define SY_RATE_EVENT_H
#include <stddef.h>
#include "base/sbuf.h"
#include "route/pool_usage.h"

/* The event's data (one JSON object) with its rate_limits member replaced
 * by u's windows as the x-codex-* headers give them (the same rounding),
 * appended to out: 1. 0 and out untouched when the data is left as it is:
 * not valid JSON, not of type codex.rate_limits, a limit family's event,
 * no rate_limits member, or a pool that knows neither window. */
int rate_event_rewrite(const char *data, size_t len, const pool_usage *u, double now, sbuf *out);

/* buf[0..n) of an SSE stream with each whole event (ended by a blank line
 * in buf) whose single data: line rate_event_rewrite rewrites replaced;
 * every other byte as it was. 1 and the result in out (reset first) when
 * something changed; 0 and out untouched when nothing did. An event that
 * buf does not end, or with several data: lines, is left as it is. */
int rate_event_rewrite_sse(const char *buf, size_t n, const pool_usage *u, double now, sbuf *out);

#endif
