/* budget.c: budget windows and charges (see budget.h). */
#include "base/budget.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long budget_days(const char *period)
{
    if (!period || !*period)
        return 0;
    char *end = NULL;
    long n = strtol(period, &end, 10);
    return end != period && strcmp(end, "d") == 0 && n >= 1 && n <= 3660 ? n : 0;
}

int budget_period_valid(const char *period)
{
    return period && (strcmp(period, "month") == 0 || budget_days(period) > 0) ? 0 : -1;
}

void budget_window(const char *period, double now, double *start, double *end)
{
    long days = budget_days(period);
    if (days > 0) {
        double span = (double)days * 86400.0;
        *start = (double)(long long)(now / span) * span;
        *end = *start + span;
        return;
    }
    time_t t = (time_t)now;
    struct tm tm;
    gmtime_r(&t, &tm);
    tm.tm_mday = 1;
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    *start = (double)timegm(&tm);
    tm.tm_mon += 1; /* timegm normalises December + 1 */
    *end = (double)timegm(&tm);
}

void budget_charge(budget_state *b, const char *period, double usd, double now)
{
    if (now >= b->end || now < b->start) {
        budget_window(period, now, &b->start, &b->end);
        b->spent = 0;
        b->over = 0;
    }
    if (usd > 0)
        b->spent += usd;
}

int budget_over(const budget_state *b, double usd, double now)
{
    return usd > 0 && now >= b->start && now < b->end && b->over;
}

const char *budget_period_name(const char *period, char *buf, size_t n)
{
    long days = budget_days(period);
    if (days > 0)
        snprintf(buf, n, "%ld-day", days);
    else
        snprintf(buf, n, "monthly");
    return buf;
}

void budget_describe(const budget_state *b, double usd, const char *period, char *why, size_t n)
{
    char name[32], when[32];
    time_t t = (time_t)b->end;
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    snprintf(why, n, "$%.2f of its $%.2f %s budget used; it resets at %s", b->spent, usd,
             budget_period_name(period, name, sizeof name), when);
}
