/* spend.h: what requests cost. Prices are policy (policies/prices.lua, via
 * policy_price_get); this module turns a request's usage into USD for the
 * request log, `switchyard usage` and budgets. */
#ifndef SY_SPEND_H
#define SY_SPEND_H
#include "policy.h"

/* USD for input tokens (cached of them at the cached price) and output
 * tokens of model; -1 when the price or the usage is unknown. */
double spend_cost(policy_engine *pe, const char *model, long input, long cached, long output);

#endif
