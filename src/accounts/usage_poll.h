/* usage_poll.h: keeps ChatGPT accounts' quota windows known while they are
 * idle. For every enabled chatgpt account it GETs the usage endpoint Codex
 * uses ({base up to /backend-api}/wham/usage, or {base}/api/codex/usage)
 * at start, every usage_poll_s seconds, and soon after the account hit a
 * 429 / quota error. The answer (plan, both windows' used percent, length
 * and reset time, credits) goes into the account's state, where the guard
 * and the cooldown hook see it, and is persisted through the writer. Polls
 * are transfers on the gateway's curl multi: nothing blocks the loop. */
#ifndef SY_USAGE_POLL_H
#define SY_USAGE_POLL_H
#include <stddef.h>
#include <stdint.h>
#include "core/gateway.h"
#include "store/store.h"

typedef struct usage_poll usage_poll;

usage_poll *usage_poll_new(gateway *gw);
void usage_poll_free(usage_poll *u); /* cancels polls in flight; before upstream_free */
/* Starts the polls that are due (the serve tick calls it every second). */
void usage_poll_tick(usage_poll *u, double now);
/* The account just hit a rate limit or quota: poll it soon (at most once
 * per USAGE_POLL_AFTER_ERROR_GAP seconds per account). */
void usage_poll_soon(usage_poll *u, int64_t account_id);
#define USAGE_POLL_AFTER_ERROR_GAP 30

/* The usage URL for an account base URL, into out (NUL-terminated). */
void usage_poll_url(const char *base_url, char *out, size_t n);
/* Applies a usage payload (JSON text) to st; 0 ok, -1 not a usage payload.
 * A plan_type with a control character or invalid UTF-8 is left out. */
int usage_poll_apply(account_state *st, const char *body, size_t len, double now);

#endif
