/* ratelimit.c: token buckets and the clock they run on (see ratelimit.h). */
#include "route/ratelimit.h"
#include <time.h>

static double (*ratelimit_clock)(void); /* a test's clock, or NULL */

double ratelimit_now(void)
{
    if (ratelimit_clock)
        return ratelimit_clock();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1.0 + (double)ts.tv_sec + ts.tv_nsec / 1e9; /* never 0, the stamp of a bucket never used */
}

void ratelimit_set_clock(double (*now)(void)) { ratelimit_clock = now; }

double ratelimit_level(const ratelimit *b, int per_minute, double now)
{
    if (per_minute <= 0)
        return 1e300;
    if (b->per_minute != per_minute || b->stamp <= 0)
        return per_minute;
    /* now behind the stamp: the clock stepped back; nothing refilled yet */
    double l = b->level + (now > b->stamp ? (now - b->stamp) * per_minute / 60.0 : 0);
    return l > per_minute ? per_minute : l;
}

void ratelimit_refill(ratelimit *b, int per_minute, double now)
{
    if (per_minute <= 0) {
        b->per_minute = 0;
        return;
    }
    if (b->per_minute != per_minute || b->stamp <= 0) {
        b->per_minute = per_minute;
        b->level = per_minute;
        b->stamp = now;
        return;
    }
    if (now > b->stamp) {
        b->level += (now - b->stamp) * per_minute / 60.0;
        if (b->level > per_minute)
            b->level = per_minute;
        b->stamp = now;
    } else if (now < b->stamp) {
        b->stamp = now; /* the clock stepped back: the refill goes on from here, not from the old stamp */
    }
}

int ratelimit_allows(ratelimit *b, int per_minute, double units, double now)
{
    if (per_minute <= 0)
        return 1;
    ratelimit_refill(b, per_minute, now);
    return b->level >= units;
}

void ratelimit_take(ratelimit *b, int per_minute, double units, double now)
{
    if (per_minute <= 0)
        return;
    ratelimit_refill(b, per_minute, now);
    b->level -= units;
}

void ratelimit_drain(ratelimit *b, int per_minute, double now)
{
    if (per_minute <= 0)
        return;
    ratelimit_refill(b, per_minute, now);
    if (b->level > 0)
        b->level = 0;
}

double ratelimit_wait_s(const ratelimit *b, int per_minute, double units, double now)
{
    if (per_minute <= 0)
        return 0;
    double level = ratelimit_level(b, per_minute, now);
    if (units > per_minute)
        units = per_minute; /* never more than a full bucket away */
    return level >= units ? 0 : (units - level) * 60.0 / per_minute;
}

void ratelimit_set(ratelimit *b, int per_minute, double level, double now)
{
    if (per_minute <= 0)
        return;
    ratelimit_refill(b, per_minute, now); /* the limit and the stamp */
    b->level = level > per_minute ? per_minute : level;
}
