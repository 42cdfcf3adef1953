/* key_rules.h: a platform key's own rules, checked before any upstream is
 * touched: an expiry date (401), the models it may ask for (exact names or
 * fnmatch patterns such as "gpt-5*"; 403), its spending budget (429
 * insufficient_quota, naming the budget and when it resets; budget.c) and a
 * requests-per-minute limit (a token bucket; 429 with Retry-After). The rules are the key's
 * configuration (`switchyard key add/update`); checking them is mechanical,
 * so it is C, and costs nothing for a key without rules. */
#ifndef SY_KEY_RULES_H
#define SY_KEY_RULES_H
#include <stddef.h>
#include "route/pool.h"

typedef struct key_verdict {
    int status;           /* 0: allowed; else the HTTP status to answer */
    const char *type;     /* OpenAI error type */
    const char *code;
    char message[320];
    double retry_after;   /* seconds, for 429; 0 otherwise */
} key_verdict;

/* Checks pk's rules for a request for model (NULL for requests that name
 * none by nature, e.g. GET /v1/models; "" for a body without one) at now; takes one unit of the key's
 * rpm bucket when allowed. Returns 0 if allowed, else -1 with out filled. */
int key_rules_check(pool_key *pk, const char *model, double now, key_verdict *out);

/* 1 if model matches one of the comma-separated patterns (NULL: all). */
int key_rules_model_allowed(const char *patterns, const char *model);

#endif
