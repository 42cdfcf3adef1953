/* oauth.h: keeps ChatGPT logins alive. Refreshes an account's access token
 * with its refresh token before it expires (and once after an upstream 401)
 * by POSTing the OAuth token endpoint on the loop, through upstream.c's
 * curl multi: no threads, no blocking. At most one refresh per account at a
 * time (a refresh token is single-use); requests that need the account
 * meanwhile wait for it. The new tokens are committed by the store writer
 * before anything uses them. A refused refresh token marks the account
 * needs_login; other failures are retried with backoff. docs/accounts.md. */
#ifndef SY_OAUTH_H
#define SY_OAUTH_H
#include <stddef.h>
#include <stdint.h>
#include "route/pool.h"

struct gateway;
typedef struct oauth oauth;
typedef struct oauth_waiter oauth_waiter;

/* ok: the account holds fresh, committed tokens. Otherwise why says what
 * went wrong (no secrets). Called from the loop, never from oauth_wait. */
typedef void (*oauth_done_fn)(void *ud, int ok, const char *why);

/* The default Codex client id, used when the id token names none. */
#define OAUTH_CODEX_CLIENT_ID "app_EMoamEEZ73f0CkXaXp7hrann"
/* When the access token's expiry is unknown, refresh this often (as Codex does). */
#define OAUTH_UNKNOWN_EXP_EVERY_S (8 * 86400)

oauth *oauth_new(struct gateway *gw);
void oauth_free(oauth *o);  /* cancels refreshes in flight; waiters are not called */

/* Called on the loop after a login's new tokens are durable and in the pool
 * (the top wires it to a usage poll: the windows, read with the new token).
 * A callback rather than an include: the usage poll already asks oauth for
 * a refresh after a 401, and the two must not need each other. */
typedef void (*oauth_refreshed_fn)(void *ud, int64_t account_id);
void oauth_on_refreshed(oauth *o, oauth_refreshed_fn fn, void *ud);

/* Starts the refreshes that are due (expiry within the margin, or unknown
 * expiry and 8 days since the last one). Called every second. */
void oauth_tick(oauth *o);
/* 1 while a refresh is in flight or committing (shutdown waits for it). */
int oauth_busy(const oauth *o);
/* The gateway is stopping: an exchange in flight gets at most a few more
 * seconds (instead of the rest of oauth_timeout_ms) before it is
 * abandoned, so the exit never waits long on a stalled endpoint. */
void oauth_drain(oauth *o);

/* Refreshes pa's login, or joins the refresh in flight, and calls fn when
 * it ends. Returns NULL (why filled) when no refresh can run now: no refresh
 * token, needs_login, or backing off after a failure. */
/* Starts a refresh of pa's login unless one runs or none can run now (no
 * refresh token, needs_login, backing off). 1 if one is in flight now. */
int oauth_refresh(oauth *o, pool_account *pa, const char *reason);

oauth_waiter *oauth_wait(oauth *o, pool_account *pa, const char *reason, oauth_done_fn fn, void *ud, char *why,
                         size_t n);
void oauth_wait_cancel(oauth *o, oauth_waiter *w); /* fn will not be called */

/* A token endpoint's 200 body, read into f (zeroed by the caller): its
 * token, refresh_token, id_token and token_expires_at (the access token's
 * exp, else now + expires_in), and email, plan_type and chatgpt_account_id
 * from the id token's claims. Pure (no network, no pool), so fuzzed.
 * Returns -1 when the body holds no usable access token (one with
 * whitespace or a control character is not: it becomes a header). A claim
 * with a control character or invalid UTF-8 (text_check) is left out, the
 * stored value stays, and note says so ("" otherwise; note may be NULL):
 * the tokens are kept, as the refresh token they replace is spent. */
int oauth_answer_parse(const char *body, size_t len, int64_t now, account *f, char *note, size_t n);

#endif
