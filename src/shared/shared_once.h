/* shared_once.h: what one gateway of a pool does for all of them over
 * Redis (docs/scale-out.md, "Once per pool"), beside shared_config.c on
 * the same link (shared_redis_extend):
 *
 *   - usage numbers: a poll done by the instance holding an account's
 *     usage lease (accounts/usage_poll.c, shared_lease_take) is told with
 *     shared_usage_tell; here the others take it (the "usage" message, and
 *     sy:{POOL}:usage:NAME read at every (re)connect), so every instance
 *     shows and routes on the same numbers without polling itself;
 *   - the layout of the pool's keys: sy:{POOL}:schema holds its version;
 *     an instance finding it older than SHARED_SCHEMA migrates it under
 *     the lease migrate:schema (one instance, even when several start
 *     together), one finding it newer says so once.
 *
 * Retention sweeps of request logs and conversations are not here: each
 * instance sweeps its own database (the rows are its own). */
#ifndef SY_SHARED_ONCE_H
#define SY_SHARED_ONCE_H
#include "core/gateway.h"

/* The layout of the keys this build writes: 1, the keys of
 * docs/scale-out.md as of issue 25's slices. */
#define SHARED_SCHEMA 1

typedef struct shared_once shared_once;

/* Starts with gw->shared when that is the Redis implementation; NULL
 * otherwise (a lone gateway does every job itself) or out of memory. */
shared_once *shared_once_new(gateway *gw);
void shared_once_free(shared_once *so); /* before gw->shared is freed; NULL is fine */

#endif
