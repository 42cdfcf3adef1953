/* shared_redis.h: the Redis implementation of shared state (shared/shared.h;
 * docs/scale-out.md). */
#ifndef SY_SHARED_REDIS_H
#define SY_SHARED_REDIS_H
#include "core/gateway.h"
#include "core/redis_url.h"
#include "base/json.h"
#include "base/seal.h"
#include "core/redis_link.h"
#include "shared/shared.h"

/* Starts connecting to u on gw's loop and returns at once: until the link
 * is up the instance serves on its own state (a login refresh due in the
 * first 3 s waits for the link, so that instances starting together do
 * not all refresh one login). NULL only when out of memory. */
shared *shared_redis_new(gateway *gw, const redis_url *u);

/* What a module sharing more over the same link needs (the accounts, keys
 * and settings: shared/shared_config.c): its turn at every (re)connect,
 * after the link's own resync has begun, and the channel's messages of its
 * type from the other instances. */
typedef struct shared_redis_ext {
    const char *type; /* the "t" of the messages it takes */
    void (*up)(void *ud);
    void (*message)(void *ud, const char *name, const json_value *body);
    void *ud;
} shared_redis_ext;
/* Adds x (its messages, its turn at each (re)connect); -1 when sh is not
 * the Redis implementation or SHARED_REDIS_EXT_MAX are in. unextend takes
 * out every extension registered with ud. */
#define SHARED_REDIS_EXT_MAX 8
int shared_redis_extend(shared *sh, const shared_redis_ext *x);
void shared_redis_unextend(shared *sh, void *ud);
/* The link, the key prefix (sy:{POOL}:), the channel and this run's
 * instance id (the "from" of its messages). sh must be the Redis one. */
redis_link *shared_redis_link(shared *sh);
const char *shared_redis_prefix(const shared *sh);
const char *shared_redis_channel(const shared *sh);
const char *shared_redis_id(const shared *sh);

/* The pool's key (SWITCHYARD_REDIS_KEY, base/seal.h): with it, the logins
 * and the config hash's texts (they hold tokens) are sealed in Redis. */
void shared_redis_set_key(shared *sh, const unsigned char key[SEAL_KEY_LEN]);
/* plain (n bytes), sealed for aad when a key is set, else as it is, into
 * out: 0, or -1 (sealing failed: write nothing). */
int shared_redis_seal(shared *sh, const char *aad, const char *plain, size_t n, sbuf *out);
/* A value read from Redis into out: opened when sealed, as it is when
 * plaintext (older instances wrote it). -1 when sealed and this instance
 * cannot open it (no key, another key, changed): said once in the log, and
 * from then on this instance writes no plaintext login over the pool's. */
int shared_redis_open(shared *sh, const char *aad, const char *p, size_t n, sbuf *out);

#endif
