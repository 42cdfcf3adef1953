/* shared_redis.h: the Redis implementation of shared state (route/shared.h;
 * docs/scale-out.md). */
#ifndef SY_SHARED_REDIS_H
#define SY_SHARED_REDIS_H
#include "core/gateway.h"
#include "core/redis_url.h"
#include "route/shared.h"

/* Starts connecting to u on gw's loop and returns at once: until the link
 * is up the instance serves on its own state (a login refresh due in the
 * first 3 s waits for the link, so that instances starting together do
 * not all refresh one login). NULL only when out of memory. */
shared *shared_redis_new(gateway *gw, const redis_url *u);

#endif
