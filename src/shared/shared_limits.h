/* shared_limits.h: rate limits and budgets held across the gateways of one
 * pool over Redis (docs/scale-out.md, "Rate limits and budgets"): the
 * Redis side of shared/shared.h's limit calls, installed on gw->shared with
 * shared_limits_install and sharing its link (shared_redis_extend).
 *
 *   sy:{POOL}:bucket:key:HASH:rpm       a platform key's rpm bucket
 *   sy:{POOL}:bucket:account:NAME:rpm   an account's rpm bucket (and :tpm)
 *        hash {l: level, t: Redis time (ms) of l, pm: the limit}, PX until
 *        it would be full again (a missing bucket is a full one)
 *   sy:{POOL}:spend:key:HASH:PERIOD:START     what the pool spent in a budget's
 *   sy:{POOL}:spend:account:NAME:PERIOD:START window (USD, INCRBYFLOAT), EXPIREAT its end + 1 day
 *   channel  {"t":"spend","from","name":"key:HASH"|"account:NAME","body":{"p","w","usd"}}
 *
 * A take is one EVALSHA (the script loaded at every (re)connect, EVAL until
 * then or after a NOSCRIPT), on Redis's clock so the instances' clocks do
 * not matter; a request waits for it at most SHARED_ASK_MS. A spend is one
 * EVALSHA after the request (nobody waits): the script adds it, publishes
 * the new total to the others and answers it. */
#ifndef SY_SHARED_LIMITS_H
#define SY_SHARED_LIMITS_H
#include <stddef.h>
#include "base/json.h"
#include "core/gateway.h"

struct redisReply;
typedef struct shared_limits shared_limits;

/* Starts sharing gw's rate limits and budgets over gw->shared when that is
 * the Redis implementation; NULL otherwise (a lone gateway's local buckets
 * and totals are the whole story) or when out of memory. */
shared_limits *shared_limits_new(gateway *gw);
void shared_limits_free(shared_limits *sl); /* before gw->shared is freed; NULL is fine */

/* --- pure: what comes back from Redis and the other instances, checked --- */
/* The bucket script's answer {ok, level, level}: 0 and out filled, or -1. */
typedef struct shared_bucket_answer {
    int ok;          /* 1: taken */
    double level[2]; /* the buckets' levels after it, in the order sent */
} shared_bucket_answer;
int shared_bucket_answer_read(const struct redisReply *r, shared_bucket_answer *out);
/* A decimal number of n bytes (Redis's text of a float): 0 and *out, or -1
 * (not a whole number text, not finite, or beyond +-1e15). */
int shared_limits_number(const char *s, size_t n, double *out);
/* A spend message's body {"p":PERIOD,"w":START,"usd":TOTAL}: 0 and out
 * filled, or -1 (a period budget_period_valid refuses, a start that is not
 * a whole second of 1970..5138, a total not in 0..1e12). */
typedef struct shared_spend_total {
    char period[16];
    double start, usd;
} shared_spend_total;
int shared_spend_read(const json_value *body, shared_spend_total *out);
/* Seconds until a bucket of per_minute at level holds need again (0: now). */
double shared_bucket_wait_s(double level, int per_minute, double need);

#endif
