/* usage.c: untrusted numbers from upstream answers, parsed strictly and
 * clamped (see usage.h). */
#include "usage.h"
#include <math.h>
#include <stdlib.h>
#include <strings.h>

int64_t usage_clamp_int(double v, int64_t lo, int64_t hi, int64_t dflt)
{
    if (isnan(v))
        return dflt;
    /* compare as doubles before any cast: a cast of an out-of-range double is undefined */
    if (v <= (double)lo)
        return lo;
    if (v >= (double)hi)
        return hi;
    return (int64_t)v;
}

long usage_count(double v)
{
    if (isnan(v) || v < 0)
        return -1;
    return (long)usage_clamp_int(v, 0, USAGE_TOKENS_MAX, -1);
}

void usage_tokens_set(usage_tokens *t, double in_v, double out_v, double total_v, double cached_v)
{
    long in = usage_count(in_v), out = usage_count(out_v), tot = usage_count(total_v);
    if (tot < 0 && in >= 0 && out >= 0)
        tot = in > USAGE_TOKENS_MAX - out ? USAGE_TOKENS_MAX : in + out;
    if (in >= 0)
        t->in = in;
    if (out >= 0)
        t->out = out;
    if (tot >= 0)
        t->total = tot;
    long cached = usage_count(cached_v);
    if (cached >= 0)
        t->cached = cached;
}

void usage_tokens_read(const json_value *u, usage_tokens *t)
{
    if (!u || u->type != JSON_OBJECT)
        return;
    const json_value *d = json_get(u, "input_tokens_details"); /* Responses; Chat: prompt_tokens_details */
    usage_tokens_set(t, json_get_num(u, "input_tokens", json_get_num(u, "prompt_tokens", -1)),
                     json_get_num(u, "output_tokens", json_get_num(u, "completion_tokens", -1)),
                     json_get_num(u, "total_tokens", -1),
                     json_get_num(d ? d : json_get(u, "prompt_tokens_details"), "cached_tokens", -1));
}

/* The whole value (spaces around allowed) as a finite number, else NAN. */
static double usage_parse_num(const char *v)
{
    if (!v)
        return NAN;
    char *end;
    double d = strtod(v, &end);
    if (end == v)
        return NAN;
    while (*end == ' ' || *end == '\t')
        end++;
    return *end || !isfinite(d) ? NAN : d;
}

static double usage_header_capped(const char *v, double max);

double usage_header_seconds(const char *v) { return usage_header_capped(v, USAGE_SECONDS_MAX); }

double usage_capped(double v, double max)
{
    if (isnan(v) || v < 0)
        return -1;
    return v > max ? max : v;
}

/* A header value that is a non-negative finite number, capped at max; -1
 * for anything else. */
static double usage_header_capped(const char *v, double max) { return usage_capped(usage_parse_num(v), max); }

int usage_header_apply(account_state *st, const char *name, const char *value, double now)
{
    int secondary = strncasecmp(name, "x-codex-secondary-", 18) == 0;
    if (!secondary && strncasecmp(name, "x-codex-primary-", 16) != 0)
        return 0;
    const char *f = name + (secondary ? 18 : 16);
    double v;
    if (strcasecmp(f, "used-percent") == 0) {
        if ((v = usage_header_capped(value, 100)) < 0)
            return 0;
        *(secondary ? &st->secondary_used_pct : &st->primary_used_pct) = v;
    } else if (strcasecmp(f, "reset-at") == 0) { /* unix seconds, at most a year ahead */
        if ((v = usage_header_capped(value, now + USAGE_SECONDS_MAX)) < 0)
            return 0;
        *(secondary ? &st->secondary_reset_at : &st->primary_reset_at) = v;
    } else if (strcasecmp(f, "reset-after-seconds") == 0) {
        if ((v = usage_header_capped(value, USAGE_SECONDS_MAX)) < 0)
            return 0;
        *(secondary ? &st->secondary_reset_at : &st->primary_reset_at) = now + v;
    } else if (strcasecmp(f, "window-minutes") == 0) {
        if ((v = usage_header_capped(value, USAGE_SECONDS_MAX / 60)) < 0)
            return 0;
        *(secondary ? &st->secondary_window_s : &st->primary_window_s) = v * 60;
    } else {
        return 0;
    }
    return 1;
}

double usage_resets_in(const json_value *doc)
{
    const json_value *err = doc ? json_get(doc, "error") : NULL;
    double r = err ? json_get_num(err, "resets_in_seconds", -1) : -1;
    if (isnan(r) || r < 0)
        return -1;
    return r > USAGE_SECONDS_MAX ? USAGE_SECONDS_MAX : r;
}
