/* usage_poll.h: keeps ChatGPT accounts' quota windows known while they are
 * idle. For every enabled chatgpt account the poller (account_poll.h) GETs
 * the usage endpoint Codex uses ({base up to /backend-api}/wham/usage, or
 * {base}/api/codex/usage) at start, every usage_poll_s seconds (one
 * instance of a shared pool per interval: the `usage` lease), and soon
 * after the account hit a 429 / quota error or its login was refreshed.
 * The answer (plan, both windows' used percent, length and reset time,
 * credits) goes into the account's state, where the guard and the cooldown
 * hook see it, and is persisted through the writer. Polls are transfers on
 * the gateway's curl multi: nothing blocks the loop. */
#ifndef SY_USAGE_POLL_H
#define SY_USAGE_POLL_H
#include <stddef.h>
#include <stdint.h>
#include "core/gateway.h"
#include "store/store.h"

#include "accounts/poll_kind.h"

/* The usage poll, for account_poll.c. */
extern const poll_kind usage_poll_kind;
/* A poll soon (account_poll_soon) at most once per this many seconds per account. */
#define USAGE_POLL_AFTER_ERROR_GAP 30

/* The usage URL for an account base URL, into out (NUL-terminated). */
void usage_poll_url(const char *base_url, char *out, size_t n);
/* Applies a usage payload (JSON text) to st; 0 ok, -1 not a usage payload.
 * A plan_type with a control character or invalid UTF-8 is left out. */
int usage_poll_apply(account_state *st, const char *body, size_t len, double now);

#endif
