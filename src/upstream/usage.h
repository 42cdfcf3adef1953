/* usage.h: the numbers an upstream reports about itself — token usage
 * objects (Responses and Chat Completions naming), the x-codex-* usage
 * headers, Retry-After and resets_in_seconds. Every one is untrusted input:
 * it is parsed strictly and clamped into a range before it becomes a C
 * integer or a stored figure, so no value (1e85, inf, nan, -0, "12abc") can
 * reach an undefined float-to-integer conversion or a nonsense state. */
#ifndef SY_USAGE_H
#define SY_USAGE_H
#include <stdint.h>
#include "base/json.h"
#include "store/store.h"

#define USAGE_TOKENS_MAX 1000000000000000L /* 1e15: far above any real count, exact in a double */
#define USAGE_SECONDS_MAX 31536000.0       /* one year: Retry-After, resets, reset-after headers */

/* A count of tokens: -1 (unknown) for a negative or NaN value, else the
 * value truncated and capped at USAGE_TOKENS_MAX. */
long usage_count(double v);

/* -1 for a NaN or negative v, else v capped at max. */
double usage_capped(double v, double max);

/* Any double to an integer in [lo, hi]; NaN gives dflt. Never undefined. */
int64_t usage_clamp_int(double v, int64_t lo, int64_t hi, int64_t dflt);

typedef struct usage_tokens {
    long in, out, total; /* -1 unknown */
    long cached;         /* of in, served from the prompt cache; -1 unknown */
} usage_tokens;

/* Reads a usage object ({"input_tokens"|"prompt_tokens", "output_tokens"|
 * "completion_tokens", "total_tokens", "input_tokens_details"|
 * "prompt_tokens_details".cached_tokens}); fields it finds overwrite t's,
 * others are left as they are. u may be NULL or of any type. */
void usage_tokens_read(const json_value *u, usage_tokens *t);
/* The same for the Anthropic Messages API's usage (an anthropic account):
 * input_tokens plus cache_read_input_tokens and cache_creation_input_tokens
 * as the input, the reads as cached, the total made from in and out. */
void usage_tokens_read_anthropic(const json_value *u, usage_tokens *t);
/* What usage_tokens_read does with the numbers it found: in, out, total
 * and cached as read (-1 for none; in and out already chosen between the
 * two namings), each a count by usage_count, total summed when missing. */
void usage_tokens_set(usage_tokens *t, double in, double out, double total, double cached);

/* A header value that must be a plain non-negative number of seconds
 * (Retry-After's delta-seconds form): the value capped at
 * USAGE_SECONDS_MAX, or -1 when it is anything else. */
double usage_header_seconds(const char *v);

/* Applies one x-codex-{primary,secondary}-* usage header to an account's
 * state: used-percent (kept within 0..100), reset-at (unix seconds, at most
 * USAGE_SECONDS_MAX ahead of now), reset-after-seconds (within
 * 0..USAGE_SECONDS_MAX) and window-minutes (at most a year). Returns 1 if
 * the header was one of them and its value a plain non-negative number. */
int usage_header_apply(account_state *st, const char *name, const char *value, double now);

/* The windows of one limit family as an answer's headers give them (the
 * fields of account_state usage_header_apply sets, for a family other than
 * the account's main one). */
typedef struct usage_windows {
    double primary_used_pct, secondary_used_pct; /* -1 unknown */
    double primary_reset_at, secondary_reset_at; /* unix seconds, 0 unknown */
    double primary_window_s, secondary_window_s; /* 0 unknown */
} usage_windows;
#define USAGE_WINDOWS_UNKNOWN ((usage_windows){-1, -1, 0, 0, 0, 0})

/* usage_header_apply into w instead of an account's state. */
int usage_windows_apply(usage_windows *w, const char *name, const char *value, double now);

/* A limit family's name as Codex spells a limit id (codex-rs
 * rate_limits.rs): lowercase, '-' as '_' ("codex-bengalfox" and
 * "CODEX_BENGALFOX" are "codex_bengalfox"). 1 and the name in out (of
 * cap bytes) when in[0..len) is 1..cap-1 bytes of [A-Za-z0-9_-]; else 0. */
int usage_family_name(const char *in, size_t len, char *out, size_t cap);

/* The header of another limit family's window,
 * x-codex-<name>-{primary,secondary}-<field> (x-codex-bengalfox-primary-
 * used-percent: family "codex_bengalfox"), applied to w as
 * usage_header_apply applies the main family's; the family in fam. 1 when
 * it was one and its value good. The main family's own headers
 * (x-codex-primary-*) are not: 0. */
int usage_family_header(usage_windows *w, char *fam, size_t cap, const char *name, const char *value, double now);

/* error.resets_in_seconds of a JSON error document, or -1. */
double usage_resets_in(const json_value *doc);

#endif
