/* usage_poll.c: ChatGPT usage polling (see usage_poll.h). One entry per
 * chatgpt account holds when its next poll is due and the transfer in
 * flight; the account itself is always found again by id, because a pool
 * reload may move it. */
#include "accounts/usage_poll.h"
#include "accounts/account_get.h"
#include "route/pool.h"
#include "route/shared.h"
#include "store/store.h"
#include "upstream/upstream.h"
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

typedef struct usage_entry {
    int64_t account_id;
    double next_at;        /* next scheduled poll, unix seconds */
    double soon_at;        /* an error asked for a poll at this time, 0 none */
    double last_error_poll;
    upstream_req *up;      /* in flight, NULL none */
    int status;
    sbuf body;
    usage_poll *owner;
    int live;              /* the account still exists */
    shared_call *lease;    /* the pool's usage lease asked for (route/shared.h), NULL none */
    int leasing;
} usage_entry;

struct usage_poll {
    gateway *gw;
    usage_entry **e;
    size_t n, cap;
};

usage_poll *usage_poll_new(gateway *gw)
{
    usage_poll *u = calloc(1, sizeof *u);
    u->gw = gw;
    return u;
}

static void usage_entry_free(usage_entry *e)
{
    shared_call_cancel(e->owner->gw->shared, e->lease);
    if (e->up)
        upstream_cancel(e->up);
    sbuf_free(&e->body);
    free(e);
}

void usage_poll_free(usage_poll *u)
{
    if (!u)
        return;
    for (size_t i = 0; i < u->n; i++)
        usage_entry_free(u->e[i]);
    free(u->e);
    free(u);
}

static usage_entry *usage_find(usage_poll *u, int64_t id, int create)
{
    for (size_t i = 0; i < u->n; i++)
        if (u->e[i]->account_id == id)
            return u->e[i];
    if (!create)
        return NULL;
    if (u->n == u->cap) {
        u->cap = u->cap ? u->cap * 2 : 8;
        u->e = realloc(u->e, u->cap * sizeof *u->e);
    }
    usage_entry *e = calloc(1, sizeof *e);
    e->account_id = id;
    e->owner = u;
    u->e[u->n++] = e;
    return e;
}

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

static int usage_on_headers(void *ud, int status, const upstream_header *h, size_t n)
{
    (void)h, (void)n;
    usage_entry *e = ud;
    e->status = status;
    return 0;
}

static int usage_on_data(void *ud, const char *p, size_t n)
{
    usage_entry *e = ud;
    if (e->body.len + n <= USAGE_BODY_MAX)
        sbuf_append(&e->body, p, n);
    return 0;
}

static void usage_on_done(void *ud, up_result r, const char *errmsg)
{
    usage_entry *e = ud;
    gateway *gw = e->owner->gw;
    e->up = NULL; /* freed by upstream right after this returns */
    pool_account *pa = pool_find(gw->pool, e->account_id);
    if (!pa)
        return;
    double now = gateway_now();
    int status = r == UP_OK ? e->status : 0;
    pa->st.usage_poll_status = status;
    if (r != UP_OK) {
        log_info("usage poll: account %s: %s", pa->a.name, errmsg ? errmsg : "network error");
    } else if (status == 200) {
        if (usage_poll_apply(&pa->st, e->body.p ? e->body.p : "", e->body.len, now) == 0) {
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
    sbuf_reset(&e->body);
    pool_state_save(gw->pool, pa);
}

static const upstream_callbacks usage_cb = {usage_on_headers, usage_on_data, usage_on_done};

static void usage_start(usage_poll *u, usage_entry *e, const pool_account *pa)
{
    char url[2048];
    usage_poll_url(pa->a.base_url, url, sizeof url);
    e->status = 0;
    sbuf_reset(&e->body);
    /* chatgpt accounts only (usage_poll_tick); when it cannot start, nothing
     * will call back: the next poll is at the usual time */
    e->up = account_get_start(u->gw->up, pa, url, USAGE_TIMEOUT_MS, &usage_cb, e, "usage poll");
}

/* The pool's answer to the usage lease: this instance polls (it holds the
 * lease for the interval, or there is no pool), or another one does and
 * its numbers arrive through shared_usage_tell. */
static void usage_on_lease(void *ud, int granted)
{
    usage_entry *e = ud;
    e->lease = NULL;
    e->leasing = 0;
    pool_account *pa = pool_find(e->owner->gw->pool, e->account_id);
    if (!granted || !pa || e->up || pa->refreshing || pa->a.login_error || pa->a.hold)
        return;
    usage_start(e->owner, e, pa);
}

void usage_poll_tick(usage_poll *u, double now)
{
    long every = u->gw->cfg.usage_poll_s;
    for (size_t i = 0; i < u->n; i++)
        u->e[i]->live = 0;
    for (size_t i = 0; i < pool_count(u->gw->pool); i++) {
        pool_account *pa = pool_at(u->gw->pool, i);
        if (pa->a.kind != ACCOUNT_CHATGPT || !pa->a.enabled)
            continue;
        usage_entry *e = usage_find(u, pa->a.id, 1);
        e->live = 1;
        /* its token is being replaced, or is dead; a held account is refused until an operator acts */
        if (e->up || e->leasing || pa->refreshing || pa->a.login_error || pa->a.hold)
            continue;
        if (every > 0 && e->next_at > now + (double)every) /* the interval was shortened */
            e->next_at = now + (double)every;
        int due = every > 0 && now >= e->next_at;
        int soon = every > 0 && e->soon_at > 0 && now >= e->soon_at;
        if (!due && !soon)
            continue;
        if (soon) {
            e->last_error_poll = now;
            e->soon_at = 0;
        }
        if (every > 0)
            e->next_at = now + (double)every;
        if (soon) { /* after this instance's own 429: its own poll (the others did not see it) */
            usage_start(u, e, pa);
            continue;
        }
        /* the periodic poll: one instance of the pool per interval. The lease
         * lives two: its holder renews it at each of its polls, so it never
         * lapses between them (a lease of one interval did, by the tick's
         * jitter, and the poll changed hands), and another instance takes
         * over within two intervals of the holder's death */
        e->leasing = 1;
        shared_call *c = shared_lease_take(u->gw->shared, "usage", pa->a.name, 2 * every * 1000L, usage_on_lease, e);
        if (e->leasing)
            e->lease = c;
    }
    /* accounts removed, disabled or no longer chatgpt */
    for (size_t i = 0; i < u->n;) {
        if (u->e[i]->live) {
            i++;
            continue;
        }
        usage_entry_free(u->e[i]);
        u->e[i] = u->e[--u->n];
    }
}

void usage_poll_soon(usage_poll *u, int64_t account_id)
{
    if (!u)
        return;
    usage_entry *e = usage_find(u, account_id, 0);
    if (!e || e->soon_at > 0)
        return;
    double now = gateway_now();
    double at = e->last_error_poll + USAGE_POLL_AFTER_ERROR_GAP;
    e->soon_at = at > now ? at : now;
}
