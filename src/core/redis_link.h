/* redis_link.h: the gateway's line to Redis (docs/scale-out.md), on the
 * libevent loop through hiredis's asynchronous API and its libevent
 * adapter: nothing here blocks the loop (a host name is resolved with
 * evdns, the connects are non-blocking, every answer comes back as a
 * callback). Two connections: one for commands, one SUBSCRIBEd to the
 * pool's channel (a subscribed connection takes no other command). Each
 * connection sends AUTH and SELECT first; the link is up once both answer
 * and the subscription is confirmed. A lost or silent link (a PING
 * unanswered for 1.5 s) is dropped and tried again with backoff (100 ms
 * doubling to 2 s), forever; the owner hears `up` on every (re)connect
 * (to resynchronise) and `down` on every loss. Knows nothing of the pool:
 * shared/shared_redis.c says what travels over it. */
#ifndef SY_REDIS_LINK_H
#define SY_REDIS_LINK_H
#include <stddef.h>
#include <event2/event.h>
#include "core/redis_url.h"

struct redisReply;
typedef struct redis_link redis_link;

/* The answer to a command; r is NULL when the link went down (or is being
 * freed) before it came. r belongs to hiredis: read it, do not keep it. */
typedef void (*redis_reply_fn)(void *ud, struct redisReply *r);

typedef struct redis_link_hooks {
    void (*up)(void *ud);                                /* both connections ready: resync now */
    void (*down)(void *ud);                              /* was up, is lost */
    void (*message)(void *ud, const char *p, size_t n);  /* a message on the channel */
    void *ud;
} redis_link_hooks;

/* Starts connecting at once (returns before it is up). NULL only when out
 * of memory. channel: the one channel the second connection subscribes to. */
redis_link *redis_link_new(struct event_base *base, const redis_url *u, const char *channel,
                           const redis_link_hooks *h);
/* Drops both connections: pending commands get their callback with NULL
 * (so free what they point to after this, not before); no hook is called. */
void redis_link_free(redis_link *l);

int redis_link_is_up(const redis_link *l);
/* Since when the link is not up (unix seconds); 0 while up. */
double redis_link_down_since(const redis_link *l);
/* The last liveness PING's round trip in seconds, -1 none yet. */
double redis_link_rtt(const redis_link *l);
/* Why the link is not up ("connection refused", "AUTH refused: ...",
 * "no answer to PING within 1.5 s"); "" while up. */
const char *redis_link_error(const redis_link *l);
/* Times the link came up (the first connect counts). */
unsigned long redis_link_ups(const redis_link *l);

/* Sends one command (binary-safe arguments) on the command connection.
 * 0: fn will be called exactly once (with NULL if the link goes down
 * first); -1: the link is not up, fn is never called. */
int redis_link_command(redis_link *l, redis_reply_fn fn, void *ud, int argc, const char **argv,
                       const size_t *lens);

#endif
