/* usage_poll.c: the usage poll's kind (see usage_poll.h): which accounts,
 * the URL, and what an answer does to the account's state. When and how
 * many is account_poll.c's. */
#include "accounts/usage_poll.h"
#include "route/pool.h"
#include "shared/shared.h"
#include "store/store.h"
#include "base/json.h"
#include "base/log.h"
#include "accounts/oauth.h"
#include "base/sbuf.h"
#include "base/text.h"
#include "upstream/usage.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE_BODY_MAX (64u << 10)
#define USAGE_TIMEOUT_MS 30000

void usage_poll_url(const char *base_url, char *out, size_t n)
{
    size_t blen = strlen(base_url);
    while (blen && base_url[blen - 1] == '/')
        blen--;
    for (const char *p = strstr(base_url, "/backend-api"); p && (size_t)(p - base_url) < blen;
         p = strstr(p + 1, "/backend-api")) {
        char after = p[12];
        if (after == '\0' || after == '/') {
            snprintf(out, n, "%.*s/wham/usage", (int)(p + 12 - base_url), base_url);
            return;
        }
    }
    snprintf(out, n, "%.*s/api/codex/usage", (int)blen, base_url);
}

/* A number that the payload may give as a number or as a numeric string. */
static double usage_num(const json_value *obj, const char *key, double dflt)
{
    const char *s = json_get_str(obj, key);
    if (s) {
        char *end;
        double d = strtod(s, &end);
        return end != s && isfinite(d) ? d : dflt; /* "inf", "nan": no number */
    }
    return json_get_num(obj, key, dflt);
}

/* Figures clamped like the usage headers' (usage.c): a payload saying
 * 1e85 % or a reset in 1e300 s must not become the account's state. */
static void usage_window(const json_value *w, double now, double *used, double *window_s, double *reset_at)
{
    if (!w || w->type != JSON_OBJECT)
        return;
    double u = usage_capped(json_get_num(w, "used_percent", -1), 100);
    if (u >= 0)
        *used = u;
    double len = usage_capped(json_get_num(w, "limit_window_seconds", -1), USAGE_SECONDS_MAX);
    if (len > 0)
        *window_s = len;
    double at = usage_capped(json_get_num(w, "reset_at", -1), now + USAGE_SECONDS_MAX);
    double after = usage_capped(json_get_num(w, "reset_after_seconds", -1), USAGE_SECONDS_MAX);
    if (at > 0)
        *reset_at = at;
    else if (after >= 0)
        *reset_at = now + after;
}

int usage_poll_apply(account_state *st, const char *body, size_t len, double now)
{
    json_value *doc = json_parse(body, len, NULL, 0);
    if (!doc || doc->type != JSON_OBJECT) {
        json_free(doc);
        return -1;
    }
    const char *plan = json_get_str(doc, "plan_type");
    if (plan && !text_check_str(plan)) /* shown by status and account list: one with a control character is left out */
        sbuf_copy_cstr(st->plan_type, sizeof st->plan_type, plan);
    json_value *rl = json_get(doc, "rate_limit");
    if (rl && rl->type == JSON_OBJECT) {
        usage_window(json_get(rl, "primary_window"), now, &st->primary_used_pct, &st->primary_window_s,
                     &st->primary_reset_at);
        usage_window(json_get(rl, "secondary_window"), now, &st->secondary_used_pct, &st->secondary_window_s,
                     &st->secondary_reset_at);
    }
    json_value *cr = json_get(doc, "credits");
    if (cr && cr->type == JSON_OBJECT) {
        st->has_credits = json_get_bool(cr, "has_credits", st->has_credits);
        st->credits_unlimited = json_get_bool(cr, "unlimited", st->credits_unlimited);
        st->credits_balance = usage_num(cr, "balance", st->credits_balance);
    }
    json_free(doc);
    return 0;
}

/* A poll answered 401: the access token is no longer accepted. Recorded
 * (usage_poll_status, account list) and handed to login refresh (oauth.c),
 * which polls again once the new tokens are in. */
static void usage_poll_unauthorized(gateway *gw, pool_account *pa)
{
    log_warn("usage poll: account %s: the usage endpoint rejected its token (HTTP 401)", pa->a.name);
    oauth_refresh(gw->oauth, pa, "usage_poll_401");
}

static void usage_answer(gateway *gw, pool_account *pa, up_result r, int status, int too_large, const sbuf *body,
                         const char *errmsg)
{
    (void)too_large; /* a cut answer does not parse: said below */
    double now = gateway_now();
    pa->st.usage_poll_status = status;
    if (r != UP_OK) {
        log_info("usage poll: account %s: %s", pa->a.name, errmsg ? errmsg : "network error");
    } else if (status == 200) {
        if (usage_poll_apply(&pa->st, body->p ? body->p : "", body->len, now) == 0) {
            pa->st.usage_polled_at = now;
            shared_usage_tell(gw->shared, pa); /* the other gateways of the pool take these numbers */
            log_debug("usage poll: account %s: plan %s, primary %.0f%%, secondary %.0f%%", pa->a.name,
                      pa->st.plan_type[0] ? pa->st.plan_type : "?", pa->st.primary_used_pct,
                      pa->st.secondary_used_pct);
        } else {
            log_warn("usage poll: account %s: the usage endpoint answered something that is not a usage object",
                     pa->a.name);
        }
    } else {
        pa->st.usage_polled_at = now;
        if (status == 401)
            usage_poll_unauthorized(gw, pa);
        else
            log_info("usage poll: account %s: HTTP %d", pa->a.name, status);
    }
    pool_state_save(gw->pool, pa);
}

static long usage_every(const gateway *gw) { return gw->cfg.usage_poll_s; }

/* chatgpt logins, enabled; not while its token is being replaced or is
 * dead, nor a held account (refused until an operator acts) */
static int usage_wanted(const pool_account *pa)
{
    return pa->a.kind == ACCOUNT_CHATGPT && pa->a.enabled && !pa->refreshing && !pa->a.login_error && !pa->a.hold;
}

static void usage_url(const gateway *gw, const pool_account *pa, char *out, size_t n)
{
    (void)gw;
    usage_poll_url(pa->a.base_url, out, n);
}

/* The periodic poll: one instance of the pool per interval (the lease). */
const poll_kind usage_poll_kind = {"usage poll", "usage", USAGE_BODY_MAX, USAGE_TIMEOUT_MS,
                                   usage_every, usage_wanted, usage_url, usage_answer};
