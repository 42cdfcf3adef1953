/* budget_hold.h: reservations against a budget while requests are in
 * flight (docs/configuration.md, "Budgets"; docs/scale-out.md, the budgets
 * row). A budget's spend is only known when a request ends, so without
 * them every request admitted while the budget was still under could
 * finish past it: the overrun was what all the requests in flight cost.
 * Each request of a key (or attempt on an account) with a budget reserves
 * an estimate as it starts: the budget's typical cost, the running average
 * of its priced requests (budget_hold_learn; a budget that has seen none
 * reserves nothing). The reservations of the requests in flight count as
 * spent: a request that finds spent + reserved over the budget (asked of
 * the budget policy, as that spend would be) is refused as over budget.
 * So, as without requests in flight, the request that crosses the budget
 * completes and the next is refused; the overrun is one request plus what
 * the requests in flight cost beyond their estimates, not their whole
 * cost. A reservation is released when its request ends, where the real
 * cost is charged. The reservations are this instance's own (see
 * docs/scale-out.md for what that leaves across instances). */
#ifndef SY_BUDGET_HOLD_H
#define SY_BUDGET_HOLD_H
#include "base/budget.h"
#include "policy/policy.h"

typedef struct budget_hold_owner {
    const char *kind;   /* "key" | "account" */
    const char *name;
    double usd;         /* the budget */
    const char *period;
} budget_hold_owner;

/* A request of o starts at now: 1 with *held set to what it reserves (0
 * when the budget has no typical cost yet), or 0 when the spend and the
 * reservations in flight are over the budget (nothing reserved; why says
 * so). The policy is asked only while reservations are in flight. */
int budget_hold_take(policy_engine *pe, const budget_hold_owner *o, budget_state *b, double now, double *held,
                     char *why, size_t n);
/* The request ended: its reservation (what budget_hold_take set) goes. */
void budget_hold_release(budget_state *b, double held);
/* A priced request of the budget cost usd: into its typical cost. */
void budget_hold_learn(budget_state *b, double usd);

#endif
