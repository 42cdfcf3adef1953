/* shared_state.h: the texts the gateways of one pool exchange through
 * Redis (docs/scale-out.md, "Keys and channels"), written and read: an
 * account's rest, a login, and the messages on the pool's channel. Pure
 * (no network, no pool lookups): what another instance (or anyone who can
 * write to that Redis) sent is checked field by field before it touches
 * an account; fuzzed. */
#ifndef SY_SHARED_STATE_H
#define SY_SHARED_STATE_H
#include <stddef.h>
#include "base/json.h"
#include "base/sbuf.h"
#include "route/pool.h"
#include "store/store.h"

#define SHARED_LADDER_MAX 64                 /* a ladder step beyond this is no step */
#define SHARED_FUTURE_MAX_S (366.0 * 86400)  /* a rest further out than this is no rest */

/* pa's rest as JSON: {"until","l429","step","class","brk","fam":[{"f","m","until","l429","step"}]}. */
void shared_rest_write(const pool_account *pa, sbuf *out);
/* How long the key of pa's rest should live: until its last rest ends,
 * plus an hour in which the ladder still remembers the 429 (ms, at least
 * a minute, at most 30 days). */
long long shared_rest_ttl_ms(const pool_account *pa, double now);
/* Merges another instance's rest into pa: the later cooldown wins, the
 * newer 429 brings its ladder step and class, a longer open breaker opens
 * pa's, a family's rest likewise (a slot is taken only for a family
 * resting now). A field out of range or of the wrong type is skipped.
 * Returns 1 if pa changed, 0 if not, -1 if rest is not an object. */
int shared_rest_merge(pool_account *pa, const json_value *rest, double now);

/* A login's tokens and claims as JSON (secrets: the caller wipes out). */
void shared_login_write(const account *a, sbuf *out);
/* Reads a login (out zeroed by the caller; store_account_clear frees it):
 * an access token (no whitespace or control characters: it becomes a
 * header) is required; the refresh and id tokens likewise when present;
 * email, plan and account id only if text_check accepts them. -1 when
 * no usable login (nothing kept). */
int shared_login_read(const json_value *doc, account *out);

/* A message on the channel: {"t":type,"from":instance,"name":account,"body":body}
 * (body: JSON text, or NULL for none). */
void shared_message_write(sbuf *out, const char *type, const char *from, const char *name, const char *body);
typedef struct shared_message {
    json_value *doc;   /* owns the rest; json_free(doc) */
    const char *type, *from, *name;
    const json_value *body; /* NULL none */
} shared_message;
/* 0 and m filled, or -1 (m->doc NULL) for anything that is not such a
 * message (type, from and name strings of 1..255 bytes). */
int shared_message_read(const char *p, size_t n, shared_message *m);

/* --- a usage poll's numbers, polled by one instance for all (shared_usage_tell) --- */
/* st's usage as JSON: {"at","status","plan","p":[used,window_s,reset_at],"s":[...],"cr":[has,unlimited,balance]}. */
void shared_usage_write(const account_state *st, sbuf *out);
/* Takes another instance's usage numbers into st when they were polled
 * later than st's own (a poll "at" no further ahead than a minute from
 * now); each figure checked (percentages 0..100 or -1, windows and resets
 * within a year, a plan text_check accepts): one out of range leaves the
 * whole text untaken. 1 taken, 0 not newer, -1 not such a text. */
int shared_usage_merge(account_state *st, const json_value *doc, double now);

#endif
