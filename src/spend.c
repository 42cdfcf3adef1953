/* spend.c: request cost from usage and the price policy (see spend.h). */
#include "spend.h"

double spend_cost(policy_engine *pe, const char *model, long input, long cached, long output)
{
    policy_price p;
    if (input < 0 || output < 0 || !policy_price_get(pe, model, &p))
        return -1;
    if (cached < 0)
        cached = 0;
    if (cached > input)
        cached = input;
    return ((double)(input - cached) * p.input + (double)cached * p.cached_input + (double)output * p.output) / 1e6;
}
