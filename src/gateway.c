/* gateway.c: the gateway's clock, and operations on the running gateway
 * as a whole that more than one module starts (a policy reload comes from
 * SIGHUP in serve.c and from the admin API). */
#include "gateway.h"
#include "log.h"
#include "metrics.h"
#include "spend.h"
#include <stdio.h>
#include <time.h>

double gateway_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int gateway_reload_policies(gateway *gw, const char *who)
{
    const char *dir = gw->cfg.policies_dir[0] ? gw->cfg.policies_dir : NULL;
    char err[512];
    policy_engine *fresh = policy_new(dir, err, sizeof err);
    gw->policy_reload_at = gateway_now();
    gw->policy_reload_ok = fresh != NULL;
    metrics_policy_reload(fresh != NULL);
    if (!fresh) {
        snprintf(gw->policy_reload_error, sizeof gw->policy_reload_error, "%s", err);
        log_error("%s: policy reload refused, the previous policy keeps serving: %s", who, err);
        return -1;
    }
    gw->policy_reload_error[0] = '\0';
    gw->policy_fallbacks_retired += policy_fallbacks(gw->policy);
    policy_free(gw->policy);
    gw->policy = fresh;
    gw->policy_loaded_at = gw->policy_reload_at;
    spend_judge_all(gw->pool, gw->policy, gw->policy_reload_at); /* the budget rule may have changed */
    log_info("%s: policies reloaded from %s", who, policy_source(fresh));
    return 0;
}
