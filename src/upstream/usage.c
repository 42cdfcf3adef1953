/* usage.c: untrusted numbers from upstream answers, parsed strictly and
 * clamped (see usage.h). */
#include "upstream/usage.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
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

/* The usage members usage_tokens_read looks at. */
enum { U_IN, U_PROMPT, U_OUT, U_COMPLETION, U_TOTAL, U_IN_DETAILS, U_PROMPT_DETAILS, U_CACHE_READ, U_CACHE_NEW, U_N };
static const char *const usage_members[U_N] = {"input_tokens",      "prompt_tokens",        "output_tokens",
                                               "completion_tokens", "total_tokens",         "input_tokens_details",
                                               "prompt_tokens_details", "cache_read_input_tokens",
                                               "cache_creation_input_tokens"};

static double usage_num(const json_value *v, double dflt) { return v && v->type == JSON_NUMBER ? v->num : dflt; }

/* The members of usage object u into m: one pass over them (json_get
 * walks them all for each name), each the last of its name, as json_get
 * reads it. 0 when u is no object (m untouched). */
static int usage_members_find(const json_value *u, const json_value *m[U_N])
{
    if (!u || u->type != JSON_OBJECT)
        return 0;
    for (const json_value *c = u->child; c; c = c->next)
        for (int i = 0; i < U_N; i++)
            if (c->key && c->key[0] == usage_members[i][0] && strcmp(c->key, usage_members[i]) == 0) {
                m[i] = c;
                break;
            }
    return 1;
}

void usage_tokens_read(const json_value *u, usage_tokens *t)
{
    const json_value *m[U_N] = {NULL};
    if (!usage_members_find(u, m))
        return;
    const json_value *d = m[U_IN_DETAILS] ? m[U_IN_DETAILS] : m[U_PROMPT_DETAILS]; /* Responses; Chat */
    usage_tokens_set(t, usage_num(m[U_IN], usage_num(m[U_PROMPT], -1)),
                     usage_num(m[U_OUT], usage_num(m[U_COMPLETION], -1)), usage_num(m[U_TOTAL], -1),
                     json_get_num(d, "cached_tokens", -1));
}

void usage_tokens_read_anthropic(const json_value *u, usage_tokens *t)
{
    const json_value *m[U_N] = {NULL};
    if (!usage_members_find(u, m))
        return;
    /* input_tokens leaves out what was read from the cache and written to
     * it: the input is all three, the cached part the reads. No total: it
     * is made from in and out, so a message_delta's output_tokens alone
     * makes it again */
    double in = usage_num(m[U_IN], -1), rd = usage_num(m[U_CACHE_READ], 0), nw = usage_num(m[U_CACHE_NEW], 0);
    usage_tokens_set(t, in < 0 ? -1 : in + (rd > 0 ? rd : 0) + (nw > 0 ? nw : 0), usage_num(m[U_OUT], -1), -1,
                     m[U_CACHE_READ] ? rd : -1);
    if (t->in >= 0 && t->out >= 0)
        t->total = t->in > USAGE_TOKENS_MAX - t->out ? USAGE_TOKENS_MAX : t->in + t->out;
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

/* One window field ("used-percent", "reset-at", "reset-after-seconds",
 * "window-minutes") into the window's three numbers. */
static int usage_field_apply(double *used, double *reset_at, double *window_s, const char *f, const char *value,
                             double now)
{
    double v;
    if (strcasecmp(f, "used-percent") == 0) {
        if ((v = usage_header_capped(value, 100)) < 0)
            return 0;
        *used = v;
    } else if (strcasecmp(f, "reset-at") == 0) { /* unix seconds, at most a year ahead */
        if ((v = usage_header_capped(value, now + USAGE_SECONDS_MAX)) < 0)
            return 0;
        *reset_at = v;
    } else if (strcasecmp(f, "reset-after-seconds") == 0) {
        if ((v = usage_header_capped(value, USAGE_SECONDS_MAX)) < 0)
            return 0;
        *reset_at = now + v;
    } else if (strcasecmp(f, "window-minutes") == 0) {
        if ((v = usage_header_capped(value, USAGE_SECONDS_MAX / 60)) < 0)
            return 0;
        *window_s = v * 60;
    } else {
        return 0;
    }
    return 1;
}

int usage_header_apply(account_state *st, const char *name, const char *value, double now)
{
    int secondary = strncasecmp(name, "x-codex-secondary-", 18) == 0;
    if (!secondary && strncasecmp(name, "x-codex-primary-", 16) != 0)
        return 0;
    const char *f = name + (secondary ? 18 : 16);
    return secondary ? usage_field_apply(&st->secondary_used_pct, &st->secondary_reset_at, &st->secondary_window_s, f,
                                         value, now)
                     : usage_field_apply(&st->primary_used_pct, &st->primary_reset_at, &st->primary_window_s, f,
                                         value, now);
}

int usage_windows_apply(usage_windows *w, const char *name, const char *value, double now)
{
    int secondary = strncasecmp(name, "x-codex-secondary-", 18) == 0;
    if (!secondary && strncasecmp(name, "x-codex-primary-", 16) != 0)
        return 0;
    const char *f = name + (secondary ? 18 : 16);
    return secondary ? usage_field_apply(&w->secondary_used_pct, &w->secondary_reset_at, &w->secondary_window_s, f,
                                         value, now)
                     : usage_field_apply(&w->primary_used_pct, &w->primary_reset_at, &w->primary_window_s, f, value,
                                         now);
}

int usage_family_name(const char *in, size_t len, char *out, size_t cap)
{
    if (!in || len == 0 || len >= cap)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        if (c == '-')
            c = '_';
        else if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
            return 0;
        out[i] = c;
    }
    out[len] = '\0';
    return 1;
}

int usage_family_header(usage_windows *w, char *fam, size_t cap, const char *name, const char *value, double now)
{
    if (strncasecmp(name, "x-codex-", 8) != 0)
        return 0;
    /* the last "-primary-" / "-secondary-": a family's name may itself
     * hold those words (x-codex-secondary-primary-used-percent is the
     * family "codex_secondary"), a field never does */
    const char *mid = NULL, *f = NULL;
    int secondary = 0;
    for (const char *s = name + 7; (s = strchr(s, '-')) != NULL; s++) {
        if (strncasecmp(s, "-primary-", 9) == 0)
            mid = s, f = s + 9, secondary = 0;
        else if (strncasecmp(s, "-secondary-", 11) == 0)
            mid = s, f = s + 11, secondary = 1;
    }
    if (!mid || mid == name + 7) /* x-codex-primary-*: the main family's */
        return 0;
    /* the family is the limit id: "codex" and the name between */
    if (!usage_family_name(name + 2, (size_t)(mid - name - 2), fam, cap))
        return 0;
    return secondary ? usage_field_apply(&w->secondary_used_pct, &w->secondary_reset_at, &w->secondary_window_s, f,
                                         value, now)
                     : usage_field_apply(&w->primary_used_pct, &w->primary_reset_at, &w->primary_window_s, f, value,
                                         now);
}

double usage_resets_in(const json_value *doc)
{
    const json_value *err = doc ? json_get(doc, "error") : NULL;
    double r = err ? json_get_num(err, "resets_in_seconds", -1) : -1;
    if (isnan(r) || r < 0)
        return -1;
    return r > USAGE_SECONDS_MAX ? USAGE_SECONDS_MAX : r;
}
