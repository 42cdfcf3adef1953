/* hold.h: an account held out of the pool until an operator acts. Some
 * refusals do not heal by waiting (a deactivated ChatGPT workspace, a
 * workspace that may not use Codex, a region the upstream does not serve,
 * an API key the upstream refuses as invalid):
 * classify names a state for them (policy_verdict.state), the gateway
 * stores it with the account (account.hold, written through
 * store_writer_put_hold) and the router skips the account until
 * `switchyard account reset`, the admin API's reset, or a changed login
 * (`account update` with another token, an `account import` that brings
 * other tokens) clears it. A restart keeps it; the gateway's own login
 * refresh does not clear it (the same login, the same workspace). This
 * module says what each state means and what to do about it, for the
 * router's skip reason, `account list`, `status`, the admin API and the
 * dashboard. docs/accounts.md. */
#ifndef SY_HOLD_H
#define SY_HOLD_H
#include <stddef.h>

/* Room for hold_fix's and hold_reason's texts with a long account name. */
#define HOLD_TEXT_MAX 256

typedef struct hold_info {
    const char *state; /* as stored */
    const char *what;  /* what happened, e.g. "the ChatGPT workspace was deactivated" */
    const char *fix;   /* what to do before the reset, e.g. "sign in to another workspace and ..." */
} hold_info;

/* What state means. A state the gateway does not know (a policy's own)
 * gets a general text; NULL or "" too. Never fails. */
hold_info hold_describe(const char *state);

/* The whole advice for account `name`: "<fix>, then `switchyard account
 * reset --name <name>`" into out (cut to n); for key_refused the update
 * command with the name, or the reset once the key works again. */
void hold_fix(const char *state, const char *name, char *out, size_t n);

/* The router's skip reason: "<state>: <what>; <the advice of hold_fix>"
 * into out (cut to n). */
void hold_reason(const char *state, const char *name, char *out, size_t n);

#endif
