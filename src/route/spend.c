/* spend.c: request cost, budget charges and verdicts (see spend.h). */
#include "route/spend.h"
#include "route/budget_hold.h"
#include <string.h>

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

static void spend_judge(policy_engine *pe, const char *kind, const char *name, double usd, const char *period,
                        budget_state *b, double now)
{
    budget_charge(b, period, 0, now); /* brings the window up to date */
    policy_budget pb = {kind, name, period, usd, b->spent, b->start, b->end, now};
    b->over = policy_budget_over(pe, &pb);
}

void spend_charge(pool *p, policy_engine *pe, int64_t key_id, int64_t account_id, double usd, double now)
{
    if (!(usd > 0))
        return;
    for (size_t i = 0; i < pool_key_count(p); i++) {
        pool_key *pk = pool_key_entry(p, i);
        if (pk->k.id != key_id || !(pk->k.budget_usd > 0))
            continue;
        budget_charge(&pk->budget, pk->k.budget_period, usd, now);
        budget_hold_learn(&pk->budget, usd);
        spend_judge(pe, "key", pk->k.name, pk->k.budget_usd, pk->k.budget_period, &pk->budget, now);
    }
    pool_account *pa = account_id ? pool_find(p, account_id) : NULL;
    if (pa && pa->a.budget_usd > 0) {
        budget_charge(&pa->budget, pa->a.budget_period, usd, now);
        budget_hold_learn(&pa->budget, usd);
        spend_judge(pe, "account", pa->a.name, pa->a.budget_usd, pa->a.budget_period, &pa->budget, now);
    }
}

void spend_judge_all(pool *p, policy_engine *pe, double now)
{
    for (size_t i = 0; i < pool_key_count(p); i++) {
        pool_key *pk = pool_key_entry(p, i);
        if (pk->k.budget_usd > 0)
            spend_judge(pe, "key", pk->k.name, pk->k.budget_usd, pk->k.budget_period, &pk->budget, now);
    }
    for (size_t i = 0; i < pool_count(p); i++) {
        pool_account *pa = pool_at(p, i);
        if (pa->a.budget_usd > 0)
            spend_judge(pe, "account", pa->a.name, pa->a.budget_usd, pa->a.budget_period, &pa->budget, now);
    }
}

static int spend_learn(policy_engine *pe, const char *kind, const char *name, double usd, const char *bperiod,
                       budget_state *b, const char *period, double start, double total, double now)
{
    if (!(usd > 0) || !bperiod || strcmp(bperiod, period) != 0)
        return 0;
    budget_charge(b, bperiod, 0, now); /* the window of now */
    if (b->start != start || !(total > b->spent))
        return 0;
    b->spent = total;
    spend_judge(pe, kind, name, usd, bperiod, b, now);
    return 1;
}

int spend_key_learn(policy_engine *pe, pool_key *pk, const char *period, double start, double total, double now)
{
    return spend_learn(pe, "key", pk->k.name, pk->k.budget_usd, pk->k.budget_period, &pk->budget, period, start,
                       total, now);
}

int spend_account_learn(policy_engine *pe, pool_account *pa, const char *period, double start, double total,
                        double now)
{
    return spend_learn(pe, "account", pa->a.name, pa->a.budget_usd, pa->a.budget_period, &pa->budget, period,
                       start, total, now);
}
