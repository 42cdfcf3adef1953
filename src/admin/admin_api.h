/* admin_api.h: the admin surface of a running gateway: the JSON API under
 * /admin/api/ (read the pool, keys, request logs, aggregates and policy
 * status; enable/disable an account, reset its cooldown, set a key's
 * preferred account, set strategy or rotation, reload policies, add a
 * ChatGPT account by a device-code sign-in, list the alerts raised and send
 * a test one), the
 * dashboard's static files under /admin/ and Prometheus text at /metrics.
 * Served on the gateway's listener to loopback clients only, or on its own
 * listener (--admin-listen) to anyone who can reach that address. The API
 * wants the admin token (`switchyard admin token`); a platform key gets 403. */
#ifndef SY_ADMIN_API_H
#define SY_ADMIN_API_H
#include "core/gateway.h"
#include "route/pool.h"

/* Registers the admin paths on the gateway listener, or binds
 * --admin-listen and registers them there. -1 on failure. */
int admin_start(gateway *gw);
/* Ends what the admin surface runs on its own (the dashboard's sign-ins:
 * their requests cancelled); after the listeners are freed, before the
 * upstream client. */
void admin_stop(gateway *gw);
/* (Re)reads the admin token's hash from the database into gw. */
void admin_token_load(gateway *gw);

/* Routing state of an account as the dashboard and metrics name it:
 * "disabled", "breaker_open", "cooling", "busy", "half_open", "available". */
const char *admin_account_state(const pool_account *pa, double now);
/* The limit families of st resting now (store.h, account_family), for the
 * accounts documents: a JSON array of {family, model, until, remaining_s,
 * ladder_step} appended to b ([] none); and as one line of text per family
 * for the tables ("<family> for <secs>s after a 429 for <model>"; "" none). */
void admin_families_json(sbuf *b, const account_state *st, double now);
void admin_families_text(const account_state *st, double now, sbuf *out);
/* Constant-time comparison of two NUL-terminated hex digests; 1 if equal. */
int admin_digest_equal(const char *a, const char *b);
/* 1 if sa is a loopback address (127.0.0.0/8, ::1, ::ffff:127.x.x.x). */
struct sockaddr;
int admin_is_loopback(const struct sockaddr *sa);

#endif
