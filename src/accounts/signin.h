/* signin.h: the ChatGPT device-code sign-in run by the gateway itself, for
 * the dashboard's "Add ChatGPT account" (docs/accounts.md, "Logging in from
 * the dashboard"). The same flow as `switchyard account login --device`
 * (its bodies and the reading of its answers are login_flow.h's), but every
 * request goes through the gateway's curl multi on the loop and the polls
 * wait on a timer: nothing blocks. An approved sign-in is exchanged for the
 * login, which the store's writer stores as `account import` stores one
 * (store_writer_put_import); the pool then loads it like any new account.
 * At most SIGNIN_MAX sign-ins are kept: running ones, and finished ones
 * (so the dashboard can read the outcome) until a new sign-in needs their
 * place, the oldest first. */
#ifndef SY_SIGNIN_H
#define SY_SIGNIN_H
#include <stddef.h>
#include <stdint.h>
#include "core/gateway.h"

#define SIGNIN_MAX 8
#define SIGNIN_POLL_STORE_MS 50 /* how often a sign-in looks whether its login is committed */

typedef struct signins signins;

typedef enum {
    SIGNIN_STARTING, /* asking the device-code endpoint for a user code */
    SIGNIN_PENDING,  /* the user code is out; polling until the user approves */
    SIGNIN_STORING,  /* approved: exchanging the code and storing the login */
    SIGNIN_APPROVED, /* stored: account names the account that holds it */
    SIGNIN_DENIED,
    SIGNIN_EXPIRED,  /* the device code expired before an approval */
    SIGNIN_FAILED    /* anything else: error says what */
} signin_state;

/* What the admin API shows of one sign-in (no secret in it: the user code
 * is for the user to type, and useless without the user's approval). */
typedef struct signin_view {
    int64_t id;
    signin_state state;
    char name[128];        /* the name asked for; "" none (the e-mail then) */
    char user_code[64], verify_url[512];
    double started_at, expires_at; /* unix seconds; expires_at 0 before the code came */
    long interval_s;
    char account[128];     /* SIGNIN_APPROVED: the account that holds the login */
    int updated;           /* SIGNIN_APPROVED: an account already held this login and was updated */
    char error[300];       /* DENIED, EXPIRED, FAILED: why, in words */
} signin_view;

/* Called once per sign-in when it leaves SIGNIN_STARTING (it has a code,
 * or it failed), on the loop. */
typedef void (*signin_ready_fn)(void *ud, int64_t id);

/* The settings of the account a sign-in adds, as `account add` takes them
 * (--sort, --models); an account that already held the login keeps its
 * own, as `account import` leaves them. */
typedef struct signin_settings {
    int has_sort, sort;
    const char *models;    /* normalized ("a,b", model_list_normalize); NULL none */
} signin_settings;

signins *signins_new(gateway *gw);
/* Cancels what is in flight (no callback runs) and frees everything. */
void signins_free(signins *s);

/* Starts a sign-in; name (NULL or "": the e-mail) names the account it adds,
 * set (NULL: none) gives its settings (copied). Returns its id (> 0); ready(ud, id) runs when it has a user code or
 * failed, never before this returns. -1 with err when none can start now
 * (SIGNIN_MAX running, a name too long or not plain text, a device-code URL
 * that is not one). */
int64_t signin_start(signins *s, const char *name, const signin_settings *set, signin_ready_fn ready, void *ud,
                     char *err, size_t errlen);
/* The sign-in's view; -1 when no sign-in has that id (never, or forgotten). */
int signin_get(signins *s, int64_t id, signin_view *out);
/* Drops the ready callback of a sign-in (its waiter is gone). */
void signin_forget_ready(signins *s, int64_t id);
/* "starting", "pending", "storing", "approved", "denied", "expired", "failed". */
const char *signin_state_name(signin_state st);

#endif
