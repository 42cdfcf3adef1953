/* budget_hold.c: a budget's reservations for its requests in flight and
 * its typical request cost (see budget_hold.h). */
#include "route/budget_hold.h"
#include <stdio.h>
#include <time.h>

#define BUDGET_HOLD_WEIGHT 0.25 /* the newest cost's share of the running average */
#define BUDGET_HOLD_EPSILON 1e-9 /* what a release leaves of a sum: rounding */

int budget_hold_take(policy_engine *pe, const budget_hold_owner *o, budget_state *b, double now, double *held,
                     char *why, size_t n)
{
    *held = 0;
    if (!(o->usd > 0))
        return 1;
    budget_charge(b, o->period, 0, now); /* the window of now */
    /* the requests in flight count as spent, by their estimates: asked of
     * the policy as their spend would be (with none in flight, b->over,
     * checked before, is the whole answer) */
    if (b->held > 0) {
        policy_budget pb = {o->kind, o->name, o->period, o->usd, b->spent + b->held, b->start, b->end, now};
        if (policy_budget_over(pe, &pb)) {
            char name[32], when[32];
            time_t t = (time_t)b->end;
            struct tm tm;
            strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
            snprintf(why, n, "$%.2f of its $%.2f %s budget used and $%.2f reserved by %d request(s) in flight; "
                             "it resets at %s",
                     b->spent, o->usd, budget_period_name(o->period, name, sizeof name), b->held, b->holds, when);
            return 0;
        }
    }
    if (b->typical > 0) {
        b->held += b->typical;
        b->holds++;
        *held = b->typical;
    }
    return 1;
}

void budget_hold_release(budget_state *b, double held)
{
    if (!(held > 0))
        return;
    b->held -= held;
    if (b->holds > 0)
        b->holds--;
    if (b->held < BUDGET_HOLD_EPSILON || b->holds == 0)
        b->held = 0;
}

void budget_hold_learn(budget_state *b, double usd)
{
    if (!(usd > 0))
        return;
    b->typical = b->typical > 0 ? b->typical + BUDGET_HOLD_WEIGHT * (usd - b->typical) : usd;
}
