/* pool_usage.c: the pool's usage as Codex reads it (see pool_usage.h for
 * what a pool's "used percent" and "resets at" mean, and why). */
#include "route/pool_usage.h"
#include <math.h>
#include <string.h>

typedef struct window_sum {
    double left, window_s, reset_at;
    int n;
} window_sum;

static void window_add(window_sum *w, double used, double window_s, double reset_at, double now)
{
    if (used < 0)
        return;
    if (reset_at > 0 && reset_at <= now)
        used = 0; /* the window rolled over since it was seen */
    w->left += 100 - used;
    w->n++;
    if (window_s > w->window_s)
        w->window_s = window_s;
    if (used > 0 && reset_at > now && (w->reset_at == 0 || reset_at < w->reset_at))
        w->reset_at = reset_at;
}

static void window_set(pool_window *out, const window_sum *w)
{
    out->known = w->n > 0;
    out->used_pct = w->n ? 100 - w->left / w->n : 0;
    out->window_s = w->window_s;
    out->reset_at = w->reset_at;
}

const pool_usage *pool_usage_get(pool *p, double now)
{
    static pool_usage u; /* loop thread only */
    memset(&u, 0, sizeof u);
    window_sum pw = {0}, sw = {0};
    char plans[8][24];
    int votes[8] = {0}, nplans = 0;
    size_t n = pool_count(p);
    for (size_t i = 0; i < n; i++) {
        const pool_account *pa = pool_at(p, i);
        if (!pa->a.enabled || pa->a.login_error)
            continue;
        u.accounts++;
        const account_state *st = &pa->st;
        if (st->primary_used_pct < 0 && st->secondary_used_pct < 0)
            continue;
        u.known++;
        window_add(&pw, st->primary_used_pct, st->primary_window_s, st->primary_reset_at, now);
        window_add(&sw, st->secondary_used_pct, st->secondary_window_s, st->secondary_reset_at, now);
        if (!st->plan_type[0])
            continue;
        int k = 0;
        while (k < nplans && strcmp(plans[k], st->plan_type) != 0)
            k++;
        if (k == nplans && nplans < 8)
            memcpy(plans[nplans++], st->plan_type, sizeof plans[0]);
        if (k < nplans)
            votes[k]++;
    }
    window_set(&u.primary, &pw);
    window_set(&u.secondary, &sw);
    int best = -1;
    for (int k = 0; k < nplans; k++)
        if (best < 0 || votes[k] > votes[best])
            best = k;
    if (best >= 0)
        memcpy(u.plan_type, plans[best], sizeof u.plan_type);
    return &u;
}

static void window_json(sbuf *out, const pool_window *w, double now)
{
    if (!w->known) {
        sbuf_puts(out, "null");
        return;
    }
    sbuf_printf(out, "{\"used_percent\":%.0f", floor(w->used_pct + 0.5));
    if (w->window_s > 0)
        sbuf_printf(out, ",\"limit_window_seconds\":%.0f", w->window_s);
    if (w->reset_at > now)
        sbuf_printf(out, ",\"reset_after_seconds\":%.0f,\"reset_at\":%.0f", ceil(w->reset_at - now),
                    ceil(w->reset_at));
    sbuf_puts(out, "}");
}

int pool_usage_spent(const pool_usage *u)
{
    return (u->primary.known && u->primary.used_pct >= 100) || (u->secondary.known && u->secondary.used_pct >= 100);
}

void pool_usage_json(const pool_usage *u, double now, sbuf *out)
{
    sbuf_puts(out, "{\"plan_type\":");
    if (u->plan_type[0])
        sbuf_json_str(out, u->plan_type, strlen(u->plan_type));
    else
        sbuf_puts(out, "null");
    sbuf_puts(out, ",\"rate_limit\":{\"allowed\":");
    int spent = pool_usage_spent(u);
    sbuf_puts(out, spent ? "false" : "true");
    sbuf_printf(out, ",\"limit_reached\":%s,\"primary_window\":", spent ? "true" : "false");
    window_json(out, &u->primary, now);
    sbuf_puts(out, ",\"secondary_window\":");
    window_json(out, &u->secondary, now);
    sbuf_printf(out, "},\"pool\":{\"accounts\":%d,\"reporting\":%d}}\n", u->accounts, u->known);
}
