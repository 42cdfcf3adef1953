/* budget.h: spending budgets in USD per account and per platform key, over
 * a calendar month (UTC) or a custom period of N days (consecutive N-day
 * windows counted from 1970-01-01 UTC, so every process agrees on them).
 * The state is what was spent in the current window; it is rebuilt from the
 * request log (request_logs.cost_usd) when the gateway starts, so it
 * survives restarts, and charged as requests finish. */
#ifndef SY_BUDGET_H
#define SY_BUDGET_H
#include <stddef.h>

typedef struct budget_state {
    double start, end;   /* the window spent is for; 0/0: not loaded */
    double spent;        /* USD */
    int over;            /* the budget policy's verdict on spent (spend.c asks it) */
    /* reservations of the requests in flight (route/budget_hold.h) */
    double held;         /* USD reserved now, released as each request ends */
    int holds;           /* how many requests hold a reservation */
    double typical;      /* running average cost of its priced requests (0: none seen yet) */
} budget_state;

/* 0 if period is "month" or "<N>d" (1 <= N <= 3660), else -1. */
int budget_period_valid(const char *period);
/* The window of period holding now: [*start, *end). */
void budget_window(const char *period, double now, double *start, double *end);
/* Adds usd to b, starting a new window first when now is past b's (a new
 * window starts "not over"). */
void budget_charge(budget_state *b, const char *period, double usd, double now);
/* 1 when a budget of usd (> 0) is used up at now: the policy said "over"
 * for the current window (a window that is past is not). */
int budget_over(const budget_state *b, double usd, double now);
/* "monthly" or "7-day" for messages. */
const char *budget_period_name(const char *period, char *buf, size_t n);
/* why: "$S of its $B monthly budget used; it resets at <ISO time>". */
void budget_describe(const budget_state *b, double usd, const char *period, char *why, size_t n);

#endif
