/* limits_fail.c: the fail-closed choice of the limits held across the
 * gateways (see limits_fail.h): which limits it covers and how a refusal
 * says why. The refusals themselves are the request path's (proxy.c for a
 * key, proxy_attempt.c for an account). */
#include "shared/limits_fail.h"
#include "shared/shared.h"
#include <stdio.h>
#include <string.h>

static int limits_fail_closed(const gateway *gw) { return strcmp(gw->cfg.shared_limits_fail, "closed") == 0; }

int limits_fail_key_strict(const gateway *gw, const platform_key *k)
{
    return k && k->max_rpm > 0 && limits_fail_closed(gw);
}

int limits_fail_account_strict(const gateway *gw, const account *a)
{
    return a && (a->max_rpm > 0 || a->max_tpm > 0 || a->max_concurrency > 0) && limits_fail_closed(gw);
}

limits_unseen limits_fail_reach(const gateway *gw)
{
    return shared_limits_reachable(gw->shared) == 0 ? LIMITS_UNSEEN_DOWN : LIMITS_SEEN;
}

void limits_fail_why(const gateway *gw, limits_unseen cause, char *out, size_t n)
{
    switch (cause) {
    case LIMITS_UNSEEN_DOWN:
        snprintf(out, n, "Redis is out of reach");
        break;
    case LIMITS_UNSEEN_LATE:
        snprintf(out, n, "Redis did not answer within %ld ms", gw->cfg.redis_wait_ms);
        break;
    case LIMITS_UNSEEN_FAILED:
        snprintf(out, n, "the link to Redis dropped, or Redis answered an error");
        break;
    default:
        snprintf(out, n, "the pool's answer is missing");
        break;
    }
}
