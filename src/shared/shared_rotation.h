/* shared_rotation.h: the balanced strategy's rotation counted for the
 * whole pool over Redis (docs/scale-out.md, "The balanced rotation"):
 * one counter per platform key and model, sy:{POOL}:cursor:KEY:MODEL,
 * taken by INCR. Each gateway keeps a few positions reserved per key and
 * model: a pick uses the oldest and sends the INCR that reserves the next,
 * without waiting for it, so the request path waits only when nothing is
 * reserved (the first pick of that key and model here, or a burst that
 * used the reserve up), for one INCR, at most SHARED_ASK_MS. Every
 * position is used once across the pool, so consecutive picks, whichever
 * gateway makes them, go round the accounts. Used by shared_redis.c. */
#ifndef SY_SHARED_ROTATION_H
#define SY_SHARED_ROTATION_H
#include <stdint.h>
#include <event2/event.h>
#include "core/redis_link.h"

typedef struct shared_rotation shared_rotation;
typedef struct shared_rotation_wait shared_rotation_wait;
typedef void (*shared_rotation_fn)(void *ud, int64_t pos);

/* prefix: "sy:{POOL}:". NULL only when out of memory. */
shared_rotation *shared_rotation_new(struct event_base *base, redis_link *link, const char *prefix);
/* After the link is freed (its pending answers, NULL, still find r). */
void shared_rotation_free(shared_rotation *r);

/* A position for key and model (shared.h, shared_cursor_take): *pos set
 * and NULL returned, or (nothing reserved, fn given, the link up) a wait
 * whose fn is called once within wait_ms. */
shared_rotation_wait *shared_rotation_take(shared_rotation *r, const char *key, const char *model, int64_t *pos,
                                           shared_rotation_fn fn, void *ud, int wait_ms);
/* fn is not called; the INCR's answer, when it comes, is reserved. */
void shared_rotation_cancel(shared_rotation_wait *w);

#endif
