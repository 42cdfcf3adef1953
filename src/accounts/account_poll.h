/* account_poll.h: the one per-account poller behind the usage poll
 * (usage_poll.h: a ChatGPT login's quota windows) and the model poll
 * (model_poll.h: the models an account serves). It owns when each account
 * is polled and how many polls run at once; the two poll modules own what
 * is asked and what an answer means.
 *
 * Bounded per tick whatever the pool's size (issue 33: a poll loop that
 * looked every account up in a list was O(N^2) per tick, and 20 000 due
 * polls started at once ran the descriptors out): the accounts are
 * mirrored in id order (rebuilt when the pool reloads, found by binary
 * search), a cursor visits at most ACCOUNT_POLL_SCAN_MIN accounts per
 * tick (more for a pool that needs it to see each account twice per poll
 * interval), and at most ACCOUNT_POLL_IN_FLIGHT polls (usage and models
 * together) are in flight: a due poll past that waits for the next run,
 * the cursor resuming where it stopped, so every account gets its turn.
 * A run comes with the serve tick (every second) and, while due polls
 * wait, 20 ms after a poll ends, so a slow upstream keeps 32 in flight
 * rather than 32 a second. A first start of a large pool spreads its
 * polls over time this way. */
#ifndef SY_ACCOUNT_POLL_H
#define SY_ACCOUNT_POLL_H
#include "core/gateway.h"
#include <stddef.h>
#include <stdint.h>

#define ACCOUNT_POLL_IN_FLIGHT 32   /* polls (usage and models together) in flight at once */
#define ACCOUNT_POLL_SCAN_MIN 256   /* accounts a tick looks at, at least */

typedef struct account_poll account_poll;

account_poll *account_poll_new(gateway *gw);
/* Cancels the polls in flight and the leases asked; before shared_free and
 * upstream_free. */
void account_poll_free(account_poll *ap);
/* Starts the polls that are due, within the bounds (the serve tick calls
 * it every second, and once at start). */
void account_poll_tick(account_poll *ap, double now);
/* The account's quota windows may have moved (it hit a rate limit, its
 * login was refreshed): poll its usage soon, at most once per
 * USAGE_POLL_AFTER_ERROR_GAP seconds. */
void account_poll_soon(account_poll *ap, int64_t account_id);

typedef struct account_poll_stats {
    size_t accounts;        /* accounts mirrored */
    size_t in_flight;       /* polls in flight now (<= ACCOUNT_POLL_IN_FLIGHT) */
    size_t in_flight_max;   /* the most at once since start */
    size_t scanned;         /* accounts the last tick looked at */
    uint64_t started;       /* polls started since start */
    uint64_t deferred;      /* ticks that stopped at the in-flight bound with a poll due */
} account_poll_stats;
void account_poll_stats_get(const account_poll *ap, account_poll_stats *out);

#endif
