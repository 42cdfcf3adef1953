/* spend.h: what requests cost, and the budgets that spend is charged to.
 * Prices are policy (policies/prices.lua, via policy_price_get), and so is
 * the verdict on a budget (policies/budget.lua, via policy_budget_over);
 * this module turns a request's usage into USD for the request log,
 * `switchyard usage` and budgets, charges it, and asks the budget policy
 * whenever a spend, a budget or the policy changes. */
#ifndef SY_SPEND_H
#define SY_SPEND_H
#include "policy/policy.h"
#include "route/pool.h"

/* USD for input tokens (cached of them at the cached price) and output
 * tokens of model; -1 when the price or the usage is unknown. */
double spend_cost(policy_engine *pe, const char *model, long input, long cached, long output);

/* A finished request cost usd (> 0): charged to the budgets of its key and
 * of the account that answered (when they have one), and the budget policy
 * asked again about each. */
void spend_charge(pool *p, policy_engine *pe, int64_t key_id, int64_t account_id, double usd, double now);

/* Asks the budget policy about every key and account with a budget: at
 * start, after the configuration or the policy changed. */
void spend_judge_all(pool *p, policy_engine *pe, double now);

/* The pool's total for the window starting at start of a budget of period
 * (what every gateway of the pool spent in it, shared/shared.h): when that
 * is the key's (or account's) budget now, its spent rises to total (never
 * falls: the pool may have lost what this gateway knows) and the budget
 * policy is asked again. 1 if it rose. */
int spend_key_learn(policy_engine *pe, pool_key *pk, const char *period, double start, double total, double now);
int spend_account_learn(policy_engine *pe, pool_account *pa, const char *period, double start, double total,
                        double now);

#endif
