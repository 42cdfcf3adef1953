/* pool_usage.h: what the pool as a whole can still do, in the shape Codex
 * reads (the usage endpoint's JSON and the x-codex-primary/secondary-*
 * headers). A pool is not one plan, so the gateway defines (docs/codex.md,
 * "Limits Codex shows"):
 *   used percent = 100 - the average of what each account has left of the
 *                  window (accounts whose usage is unknown are left out; a
 *                  window past its reset counts as unused), i.e. the share
 *                  of the pool's capacity spent, accounts weighing alike;
 *   resets at    = the soonest reset among accounts that used some of it:
 *                  when capacity next comes back;
 *   window       = the longest window length reported.
 * Computed afresh from the pool's state (usage polls and the x-codex-*
 * headers of every answer) on each call: one pass over the accounts, as
 * the router makes for every request anyway; a cached answer would show
 * the serving account's window as it was before its own answer. */
#ifndef SY_POOL_USAGE_H
#define SY_POOL_USAGE_H
#include "base/sbuf.h"
#include "route/pool.h"

typedef struct pool_window {
    int known;                /* some account reports this window */
    double used_pct;          /* 0..100 */
    double window_s;          /* 0 unknown */
    double reset_at;          /* unix seconds, 0 none */
} pool_window;

typedef struct pool_usage {
    pool_window primary, secondary;
    char plan_type[24];       /* the plan most accounts report, "" unknown */
    int accounts;             /* enabled accounts that can log in */
    int known;                /* of them, reporting usage */
} pool_usage;

/* The pool's usage as of now; valid until the next call (loop thread). */
const pool_usage *pool_usage_get(pool *p, double now);

/* 1 when a window of the pool is spent (used 100 %): the usage endpoint's
 * and the stream event's limit_reached (and not allowed). */
int pool_usage_spent(const pool_usage *u);

/* The usage endpoint's answer (/wham/usage, /api/codex/usage) for u. */
void pool_usage_json(const pool_usage *u, double now, sbuf *out);

#endif
