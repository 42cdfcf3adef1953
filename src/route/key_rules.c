/* key_rules.c: per-key expiry, allowed models and rpm limit (see key_rules.h). */
#include "route/key_rules.h"
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int key_rules_model_allowed(const char *patterns, const char *model)
{
    if (!patterns || !*patterns)
        return 1;
    if (!model)
        model = "";
    char pat[256];
    for (const char *p = patterns; *p;) {
        size_t n = strcspn(p, ",");
        const char *b = p, *e = p + n;
        while (b < e && (*b == ' ' || *b == '\t'))
            b++;
        while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (e > b && (size_t)(e - b) < sizeof pat) {
            memcpy(pat, b, (size_t)(e - b));
            pat[e - b] = '\0';
            if (strcmp(pat, model) == 0 || fnmatch(pat, model, 0) == 0)
                return 1;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

static int key_deny(key_verdict *out, int status, const char *type, const char *code)
{
    out->status = status;
    out->type = type;
    out->code = code;
    return -1;
}

int key_rules_check(pool_key *pk, const char *model, double now, key_verdict *out)
{
    const platform_key *k = &pk->k;
    if (!k->expires_at && !k->allowed_models && !k->max_rpm && !(k->budget_usd > 0))
        return 0; /* a key without rules: nothing to check */
    memset(out, 0, sizeof *out);
    if (k->expires_at > 0 && now >= (double)k->expires_at) {
        char when[32];
        time_t t = (time_t)k->expires_at;
        struct tm tm;
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
        snprintf(out->message, sizeof out->message,
                 "platform key '%s' expired at %s (extend it with 'switchyard key update --expires')", k->name, when);
        return key_deny(out, 401, "invalid_request_error", "expired_api_key");
    }
    if (k->allowed_models && model && !key_rules_model_allowed(k->allowed_models, model)) {
        snprintf(out->message, sizeof out->message, "platform key '%s' may not use model '%.128s' (allowed: %.120s)",
                 k->name, model, k->allowed_models);
        return key_deny(out, 403, "invalid_request_error", "model_not_allowed");
    }
    if (k->budget_usd > 0 && budget_over(&pk->budget, k->budget_usd, now)) {
        char why[200];
        budget_describe(&pk->budget, k->budget_usd, k->budget_period, why, sizeof why);
        snprintf(out->message, sizeof out->message, "platform key '%s' is over its budget: %s", k->name, why);
        return key_deny(out, 429, "insufficient_quota", "insufficient_quota");
    }
    if (k->max_rpm > 0) {
        double mono = ratelimit_now(); /* an interval: the monotonic clock (ratelimit.h) */
        if (!ratelimit_allows(&pk->rpm, k->max_rpm, 1, mono)) {
            out->retry_after = ratelimit_wait_s(&pk->rpm, k->max_rpm, 1, mono);
            snprintf(out->message, sizeof out->message,
                     "platform key '%s' is limited to %d requests per minute; retry in %.1fs", k->name, k->max_rpm,
                     out->retry_after);
            return key_deny(out, 429, "requests", "rate_limit_exceeded");
        }
        ratelimit_take(&pk->rpm, k->max_rpm, 1, mono);
    }
    return 0;
}
