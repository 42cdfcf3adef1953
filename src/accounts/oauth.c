/* oauth.c: login refresh, single-flight per account, on the loop (see
 * oauth.h).
 *
 * One job per account being refreshed. Its life: the token endpoint is
 * POSTed through upstream.c; a 200 with an access token is handed to the
 * store writer at once (store_writer_put_login, committed without the group
 * window); when the writer says the commit is durable (its eventfd, watched
 * here) the new tokens replace the old ones in the pool and the waiting
 * requests go on. So nothing uses a token a crash could lose, and the only
 * window in which a crash burns a login is between the endpoint answering
 * and the writer's commit (one fsync).
 *
 * A refused refresh token (HTTP 401, or refresh_token_expired / _reused /
 * _invalidated, invalid_grant) marks the account needs_login (persisted,
 * never retried until the login is replaced). Anything else (network, 5xx,
 * 429, an answer without an access token, an exchange longer than
 * oauth_timeout_ms) waits oauth_retry_min_s, doubling up to
 * oauth_retry_max_s, before the next try. So does a 200 whose token has no
 * usable life (already expired, or about to): its token is kept, but it
 * must not schedule the next refresh for the next tick, or a broken
 * endpoint is asked every second forever. */
#include "accounts/oauth.h"
#include "core/gateway.h"
#include "route/pool.h"
#include "shared/shared.h"
#include "store/store.h"
#include "obs/alert.h"
#include "obs/trace.h"
#include "upstream/upstream.h"
#include "base/json.h"
#include "base/jwt.h"
#include "base/log.h"
#include "base/sbuf.h"
#include "base/text.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OAUTH_BODY_MAX (64u << 10)
/* A refreshed token that lives shorter than this (already expired, or
 * about to) is no schedule for the next refresh, which would be due at the
 * next tick: the next one backs off as after a failure. A token that lives
 * a few seconds is refreshed at half its life, as the endpoint asks. */
#define OAUTH_MIN_LIFE_S 2
/* expires_in beyond this (or a JWT exp further out) is taken as this: a
 * login is refreshed at least monthly, and no outside number reaches a cast. */
#define OAUTH_MAX_LIFE_S (30 * 86400)
/* Once the gateway is stopping, an exchange in flight gets at most this
 * much longer (its answer may hold the only copy of a rotated refresh
 * token, but the exit does not wait on a stalled endpoint). */
#define OAUTH_DRAIN_GRACE_MS 5000

typedef struct oauth_job oauth_job;

struct oauth_waiter {
    oauth_waiter *next;
    oauth_job *job;
    oauth_done_fn fn;
    void *ud;
};

struct oauth_job {
    oauth_job *next;
    oauth *o;
    int64_t account_id;
    char name[64];
    upstream_req *up;
    struct event *deadline; /* the exchange's whole time (oauth_timeout_ms) */
    double due;             /* when it fires (monotonic seconds) */
    int status;
    sbuf req;             /* request body: holds the refresh token, wiped */
    sbuf resp;            /* response body: holds the new tokens, wiped */
    char *used_refresh;   /* the refresh token sent (needs_login only applies while it is stored) */
    uint64_t ticket;      /* store writer ticket of the new login; 0 while the exchange runs */
    account fresh;        /* the new login, applied to the pool once durable */
    oauth_waiter *waiters;
    /* Several gateways (shared/shared.h): before the exchange, whether this
     * instance refreshes, takes a login another one refreshed, or waits. */
    shared_call *lease_call;  /* shared_refresh_begin's answer not in yet */
    int in_begin;             /* inside shared_refresh_begin (its answer may come before it returns) */
    int verdict;              /* -1 none yet, else a shared_refresh_verdict */
    int leased;               /* this instance refreshes: shared_refresh_end is owed */
    int waiting_peer;         /* another gateway refreshes: its login comes by oauth_on_shared_login */
    int adopted;              /* fresh came from another gateway, not from the token endpoint */
};

struct oauth {
    gateway *gw;
    oauth_refreshed_fn on_refreshed; /* oauth_on_refreshed, or NULL */
    void *on_refreshed_ud;
    oauth_job *jobs;
    struct event *notify_ev;
};

static oauth_job *oauth_job_find(oauth *o, int64_t account_id)
{
    for (oauth_job *j = o->jobs; j; j = j->next)
        if (j->account_id == account_id)
            return j;
    return NULL;
}

/* Unlinks and frees a job after calling its waiters with the outcome. */
static void oauth_job_end(oauth_job *j, int ok, const char *why)
{
    oauth *o = j->o;
    for (oauth_job **pp = &o->jobs; *pp; pp = &(*pp)->next)
        if (*pp == j) {
            *pp = j->next;
            break;
        }
    pool_account *pa = pool_find(o->gw->pool, j->account_id);
    if (pa)
        pa->refreshing = 0;
    shared_call_cancel(o->gw->shared, j->lease_call);
    if (j->leased) /* failed or abandoned: the lease goes back, another instance may try */
        shared_refresh_end(o->gw->shared, j->name, NULL);
    oauth_waiter *w = j->waiters;
    j->waiters = NULL;
    for (oauth_waiter *x = w; x; x = x->next)
        x->job = NULL; /* detached: a cancel now only silences it (see oauth_wait_cancel) */
    if (j->up)
        upstream_cancel(j->up);
    if (j->deadline)
        event_free(j->deadline);
    sbuf_secret_wipe(&j->req);
    sbuf_secret_wipe(&j->resp);
    sbuf_secret_free(j->used_refresh);
    store_account_clear(&j->fresh);
    char name[64];
    sbuf_copy_cstr(name, sizeof name, j->name);
    free(j);
    while (w) { /* a callback may start a new attempt (and a new job): j is gone by now */
        oauth_waiter *next = w->next;
        if (w->fn)
            w->fn(w->ud, ok, why);
        free(w);
        w = next;
    }
}

/* ---------- outcome ---------- */

/* One more refresh that did not give a usable login: the next waits
 * oauth_retry_min_s, doubling per consecutive one up to oauth_retry_max_s.
 * Returns the wait. */
static double oauth_back_off(oauth *o, pool_account *pa)
{
    pa->refresh_failures++;
    double wait = (double)o->gw->cfg.oauth_retry_min_s;
    for (int i = 1; i < pa->refresh_failures && wait < o->gw->cfg.oauth_retry_max_s; i++)
        wait *= 2;
    if (wait > o->gw->cfg.oauth_retry_max_s)
        wait = (double)o->gw->cfg.oauth_retry_max_s;
    pa->refresh_retry_at = gateway_now() + wait;
    return wait;
}

static void oauth_transient(oauth_job *j, const char *why)
{
    oauth *o = j->o;
    pool_account *pa = pool_find(o->gw->pool, j->account_id);
    double wait = pa ? oauth_back_off(o, pa) : 0;
    log_warn("account %s: login refresh failed (%s); next try in %.0fs", j->name, why, wait);
    trace_event(o->gw->trace, "TOKEN_REFRESH", "account=%s result=retry reason=\"%s\" retry_in_s=%.0f", j->name, why,
                wait);
    oauth_job_end(j, 0, why);
}

static void oauth_needs_login(oauth_job *j, const char *reason)
{
    oauth *o = j->o;
    pool_account *pa = pool_find(o->gw->pool, j->account_id);
    if (pa) {
        free(pa->a.login_error);
        pa->a.login_error = sbuf_strdup_nonempty(reason);
    }
    store_login l = {.account_id = j->account_id, .login_error = reason, .expect_refresh = j->used_refresh};
    store_writer_put_login(o->gw->st, &l);
    log_warn("account %s: the refresh token was refused (%s): needs_login; run 'codex login' and import it again",
             j->name, reason);
    trace_event(o->gw->trace, "TOKEN_REFRESH", "account=%s result=needs_login reason=\"%s\"", j->name, reason);
    alert_raise(o->gw->alerts, o->gw->policy, "account_needs_login", j->name, "", gateway_now(),
                "account %s needs a new login: its refresh token was refused (%.100s); sign in again and import it "
                "(`switchyard account import`)", j->name, reason);
    char why[200];
    snprintf(why, sizeof why, "needs_login: %.150s", reason);
    oauth_job_end(j, 0, why);
}

/* Error code of a token endpoint answer: {"error":{"code"}} (OpenAI) or
 * {"error":"invalid_grant"} (RFC 6749). */
static void oauth_error_code(const sbuf *body, char *out, size_t n)
{
    out[0] = '\0';
    json_value *doc = body->len ? json_parse(body->p, body->len, NULL, 0) : NULL;
    json_value *e = doc ? json_get(doc, "error") : NULL;
    const char *code = NULL;
    if (e && e->type == JSON_STRING)
        code = e->str;
    else if (e)
        code = json_get_str(e, "code");
    if (!code && doc)
        code = json_get_str(doc, "code");
    if (code) /* an identifier, never a token: keep it short and plain */
        for (size_t i = 0; code[i] && i + 1 < n && i < 63; i++) {
            char c = code[i];
            out[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ? c : '_';
            out[i + 1] = '\0';
        }
    json_free(doc);
}

static int oauth_code_permanent(const char *code)
{
    static const char *const permanent[] = {"refresh_token_expired", "refresh_token_reused",
                                            "refresh_token_invalidated", "invalid_grant"};
    for (size_t i = 0; i < sizeof permanent / sizeof *permanent; i++)
        if (strcmp(code, permanent[i]) == 0)
            return 1;
    return 0;
}

int oauth_answer_parse(const char *body, size_t len, int64_t now, account *f, char *note, size_t n)
{
    sbuf_fmt_into(note, n, "%s", "");
    json_value *doc = len ? json_parse(body, len, NULL, 0) : NULL;
    const char *access = doc ? json_get_str(doc, "access_token") : NULL;
    int bad = !access || !*access;
    for (const char *p = access; !bad && *p; p++) /* it becomes the Authorization header */
        bad = (unsigned char)*p <= ' ' || *p == 0x7f;
    if (bad) {
        json_free(doc);
        return -1;
    }
    f->token = sbuf_strdup_nonempty(access);
    f->refresh_token = sbuf_strdup_nonempty(json_get_str(doc, "refresh_token"));
    f->id_token = sbuf_strdup_nonempty(json_get_str(doc, "id_token"));
    int64_t expires_in = 0; /* an outside number: 1e300, NaN or a negative one is no expiry */
    json_get_int64(doc, "expires_in", 1, INT64_MAX, &expires_in);
    json_free(doc);
    jwt_claims c;
    if (jwt_claims_read(f->token, &c) == 0 && c.exp)
        f->token_expires_at = c.exp;
    else if (expires_in > 0)
        f->token_expires_at = now + (expires_in < OAUTH_MAX_LIFE_S ? expires_in : OAUTH_MAX_LIFE_S);
    if (f->token_expires_at > now + OAUTH_MAX_LIFE_S)
        f->token_expires_at = now + OAUTH_MAX_LIFE_S;
    if (f->id_token && jwt_claims_read(f->id_token, &c) == 0) {
        /* the claims become a header (ChatGPT-Account-Id), log and terminal
         * lines: one that is no fit value is left out (the stored one
         * stays), the tokens are kept (the refresh token is spent) */
        const struct {
            const char *what, *v;
            char **to;
        } claims[] = {{"email", c.email, &f->email},
                      {"chatgpt_plan_type", c.plan_type, &f->plan_type},
                      {"chatgpt_account_id", c.chatgpt_account_id, &f->chatgpt_account_id}};
        for (size_t i = 0; i < sizeof claims / sizeof *claims; i++) {
            const char *why = text_check_str(claims[i].v);
            if (!why)
                *claims[i].to = sbuf_strdup_nonempty(claims[i].v);
            else if (note && n && !note[0])
                sbuf_fmt_into(note, n, "the id_token's %s claim %s: left out", claims[i].what, why);
        }
    }
    f->last_refresh_at = now;
    return 0;
}

/* A 200: queue the new login for a durable commit. */
static void oauth_accept(oauth_job *j)
{
    oauth *o = j->o;
    account *f = &j->fresh;
    char note[160];
    if (oauth_answer_parse(j->resp.p, j->resp.len, (int64_t)gateway_now(), f, note, sizeof note) != 0) {
        oauth_transient(j, "the token endpoint answered 200 without a usable access_token");
        return;
    }
    if (note[0])
        log_warn("account %s: login refresh: %s", j->name, note);
    store_login l = {j->account_id, f->token, f->refresh_token, f->id_token, f->email, f->plan_type,
                     f->chatgpt_account_id, f->token_expires_at, f->last_refresh_at, NULL, NULL};
    j->ticket = store_writer_put_login(o->gw->st, &l);
    if (!j->ticket)
        oauth_transient(j, "could not queue the new login for the database");
}

/* 1 if f's token expires too soon to schedule the next refresh by. */
static int oauth_short_lived(const account *f)
{
    return f->token_expires_at && (double)f->token_expires_at - gateway_now() < OAUTH_MIN_LIFE_S;
}

/* The new login is durable: it replaces the old one in the pool. */
static void oauth_apply(oauth_job *j)
{
    oauth *o = j->o;
    pool_account *pa = pool_find(o->gw->pool, j->account_id);
    account *f = &j->fresh;
    if (pa) {
        account *a = &pa->a;
        sbuf_secret_free(a->token);
        a->token = f->token;
        f->token = NULL;
#define OAUTH_TAKE(field, wipe)                                     \
        if (f->field) {                                             \
            if (wipe)                                               \
                sbuf_secret_free(a->field);                          \
            else                                                    \
                free(a->field);                                     \
            a->field = f->field;                                    \
            f->field = NULL;                                        \
        }
        OAUTH_TAKE(refresh_token, 1)
        OAUTH_TAKE(id_token, 1)
        OAUTH_TAKE(email, 0)
        OAUTH_TAKE(plan_type, 0)
        OAUTH_TAKE(chatgpt_account_id, 0)
#undef OAUTH_TAKE
        a->token_expires_at = f->token_expires_at;
        a->last_refresh_at = f->last_refresh_at;
        free(a->login_error);
        a->login_error = NULL;
        if (!oauth_short_lived(f)) { /* a short-lived one backs off below, counting the ones before */
            pa->refresh_failures = 0;
            pa->refresh_retry_at = 0;
        }
        if (o->on_refreshed)
            o->on_refreshed(o->on_refreshed_ud, j->account_id); /* e.g. the windows, read with the new token */
    }
    if (j->leased) { /* the others take this login instead of refreshing theirs */
        shared_refresh_end(o->gw->shared, j->name, pa ? &pa->a : NULL);
        j->leased = 0;
    }
    double left = f->token_expires_at ? (double)f->token_expires_at - gateway_now() : -1;
    log_info("account %s: login %s%s", j->name, j->adopted ? "taken from another gateway's refresh" : "refreshed",
             pa ? "" : " (the account was removed meanwhile)");
    if (pa && oauth_short_lived(f)) { /* no schedule: back off, never a loop */
        double wait = oauth_back_off(o, pa);
        log_warn("account %s: the token endpoint's new token expires in %.0fs; the next refresh waits %.0fs",
                 j->name, left, wait);
        trace_event(o->gw->trace, "TOKEN_REFRESH", "account=%s result=short_lived expires_in_s=%.0f retry_in_s=%.0f",
                    j->name, left, wait);
    }
    trace_event(o->gw->trace, "TOKEN_REFRESH", "account=%s result=%s expires_in_s=%.0f", j->name,
                j->adopted ? "adopted" : "ok", left);
    oauth_job_end(j, 1, NULL);
}

/* ---------- the exchange ---------- */

static int oauth_up_headers(void *ud, int status, const upstream_header *h, size_t n)
{
    oauth_job *j = ud;
    j->status = status;
    return 0;
}

static int oauth_up_data(void *ud, const char *p, size_t n)
{
    oauth_job *j = ud;
    if (j->resp.len + n > OAUTH_BODY_MAX)
        return 0; /* kept short; an oversized answer fails to parse */
    sbuf_append(&j->resp, p, n);
    return 0;
}

static void oauth_up_done(void *ud, up_result r, const char *errmsg)
{
    oauth_job *j = ud;
    j->up = NULL;
    sbuf_secret_wipe(&j->req);
    char why[160], code[64];
    if (r != UP_OK) {
        snprintf(why, sizeof why, "token endpoint unreachable: %s", errmsg ? errmsg : "network error");
        oauth_transient(j, why);
        return;
    }
    if (j->status == 200) {
        oauth_accept(j);
        return;
    }
    oauth_error_code(&j->resp, code, sizeof code);
    if (j->status == 401 || oauth_code_permanent(code)) {
        snprintf(why, sizeof why, "%s", code[0] ? code : "HTTP 401 from the token endpoint");
        oauth_needs_login(j, why);
        return;
    }
    snprintf(why, sizeof why, "token endpoint answered HTTP %d%s%s", j->status, code[0] ? " " : "", code);
    oauth_transient(j, why);
}

static const upstream_callbacks oauth_up_cb = {oauth_up_headers, oauth_up_data, oauth_up_done};

/* The exchange took longer than oauth_timeout_ms (an endpoint that trickles
 * its answer never trips the idle limit): abandoned as a failure, so the
 * requests waiting for it fail over or get their error. */
static void oauth_on_deadline(evutil_socket_t fd, short what, void *arg)
{
    oauth_job *j = arg;
    if (j->waiting_peer || j->lease_call) {
        char why[160];
        snprintf(why, sizeof why, "another gateway's refresh of this login did not arrive within %ldms",
                 j->o->gw->cfg.oauth_timeout_ms);
        oauth_transient(j, why);
        return;
    }
    if (!j->up)
        return; /* answered; committing */
    upstream_cancel(j->up);
    j->up = NULL;
    sbuf_secret_wipe(&j->req);
    char why[160];
    if (j->o->gw->draining)
        snprintf(why, sizeof why, "the token endpoint did not answer before the gateway stopped");
    else
        snprintf(why, sizeof why, "the token endpoint did not answer within %ldms", j->o->gw->cfg.oauth_timeout_ms);
    oauth_transient(j, why);
}

static double oauth_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void oauth_arm(oauth_job *j, long ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    j->due = oauth_mono() + ms / 1000.0;
    evtimer_add(j->deadline, &tv);
}

static const char *oauth_client_id(const account *a, char *buf, size_t n)
{
    jwt_claims c;
    if (a->id_token && jwt_claims_read(a->id_token, &c) == 0 && c.client_id[0]) {
        sbuf_copy_cstr(buf, n, c.client_id);
        return buf;
    }
    return OAUTH_CODEX_CLIENT_ID;
}

/* Copies a login another gateway refreshed into j as its new one. */
static void oauth_take_login(oauth_job *j, const account *login)
{
    account *f = &j->fresh;
    store_account_clear(f);
    memset(f, 0, sizeof *f);
    f->token = sbuf_strdup_nonempty(login->token);
    f->refresh_token = sbuf_strdup_nonempty(login->refresh_token);
    f->id_token = sbuf_strdup_nonempty(login->id_token);
    f->email = sbuf_strdup_nonempty(login->email);
    f->plan_type = sbuf_strdup_nonempty(login->plan_type);
    f->chatgpt_account_id = sbuf_strdup_nonempty(login->chatgpt_account_id);
    f->token_expires_at = login->token_expires_at;
    f->last_refresh_at = login->last_refresh_at;
    j->adopted = 1;
    j->waiting_peer = 0;
}

/* Commits the login taken: applied as a refresh of this instance's would
 * be, once durable (oauth_on_committed). 0, or -1 when the job ended. */
static int oauth_commit_taken(oauth_job *j)
{
    account *f = &j->fresh;
    if (!f->token) {
        oauth_transient(j, "out of memory taking another gateway's login");
        return -1;
    }
    trace_event(j->o->gw->trace, "TOKEN_REFRESH", "account=%s result=adopt", j->name);
    store_login l = {j->account_id, f->token, f->refresh_token, f->id_token, f->email, f->plan_type,
                     f->chatgpt_account_id, f->token_expires_at, f->last_refresh_at, NULL, NULL};
    j->ticket = store_writer_put_login(j->o->gw->st, &l);
    if (!j->ticket) {
        oauth_transient(j, "could not queue the new login for the database");
        return -1;
    }
    return 0;
}

/* The exchange with the token endpoint. 0, or -1 when it could not start
 * (the job is ended then). */
static int oauth_exchange(oauth_job *j, pool_account *pa)
{
    oauth *o = j->o;
    char cid[128];
    sbuf_puts(&j->req, "{\"client_id\":");
    const char *client = oauth_client_id(&pa->a, cid, sizeof cid);
    sbuf_json_str(&j->req, client, strlen(client));
    sbuf_puts(&j->req, ",\"grant_type\":\"refresh_token\",\"refresh_token\":");
    sbuf_json_str(&j->req, pa->a.refresh_token, strlen(pa->a.refresh_token));
    sbuf_puts(&j->req, ",\"scope\":\"openid profile email\"}");
    static const upstream_header hdrs[] = {{"Content-Type", "application/json"}, {"Accept", "application/json"}};
    upstream_spec spec = {o->gw->cfg.oauth_token_url, j->req.p, j->req.len, hdrs, 2, 0, 0, NULL};
    j->up = upstream_start(o->gw->up, &spec, &oauth_up_cb, j);
    if (!j->up) {
        oauth_transient(j, "could not start the request");
        return -1;
    }
    long ms = o->gw->cfg.oauth_timeout_ms; /* a stopping gateway does not wait on it long (oauth_drain) */
    oauth_arm(j, o->gw->draining && ms > OAUTH_DRAIN_GRACE_MS ? OAUTH_DRAIN_GRACE_MS : ms);
    return 0;
}

/* What the shared state said (shared/shared.h): go on, take, or wait.
 * 0, or -1 when the job ended. */
static int oauth_proceed(oauth_job *j, const account *login)
{
    oauth *o = j->o;
    pool_account *pa = pool_find(o->gw->pool, j->account_id);
    if (j->verdict == SHARED_REFRESH_ADOPT && (login || j->adopted)) {
        if (login)
            oauth_take_login(j, login);
        return oauth_commit_taken(j);
    }
    if (j->verdict == SHARED_REFRESH_WAIT) {
        j->waiting_peer = 1;
        log_info("account %s: another gateway is refreshing this login; waiting for its result", j->name);
        trace_event(o->gw->trace, "TOKEN_REFRESH", "account=%s result=wait_peer", j->name);
        oauth_arm(j, o->gw->cfg.oauth_timeout_ms + 10000);
        return 0;
    }
    j->leased = 1;
    if (!pa || !pa->a.refresh_token) {
        oauth_transient(j, "the account or its refresh token is gone");
        return -1;
    }
    return oauth_exchange(j, pa);
}

static void oauth_on_verdict(void *ud, shared_refresh_verdict v, const account *login)
{
    oauth_job *j = ud;
    j->lease_call = NULL;
    j->verdict = (int)v;
    if (j->in_begin) { /* answered at once: oauth_start goes on; a login to take is copied now */
        if (v == SHARED_REFRESH_ADOPT && login)
            oauth_take_login(j, login);
        return;
    }
    oauth_proceed(j, login);
}

static oauth_job *oauth_start(oauth *o, pool_account *pa, const char *reason)
{
    oauth_job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->o = o;
    j->account_id = pa->a.id;
    j->verdict = -1;
    sbuf_copy_cstr(j->name, sizeof j->name, pa->a.name);
    j->used_refresh = sbuf_strdup_nonempty(pa->a.refresh_token);
    j->next = o->jobs;
    o->jobs = j;
    pa->refreshing = 1;
    trace_event(o->gw->trace, "TOKEN_REFRESH", "account=%s result=start reason=%s", j->name, reason);
    log_info("account %s: refreshing its login (%s)", j->name, reason);
    j->deadline = evtimer_new(o->gw->base, oauth_on_deadline, j);
    if (!j->deadline) {
        oauth_transient(j, "could not start the request");
        return NULL;
    }
    j->in_begin = 1;
    j->lease_call = shared_refresh_begin(o->gw->shared, pa, oauth_on_verdict, j);
    j->in_begin = 0;
    if (j->verdict < 0) { /* asked Redis: the answer comes later, bounded by the deadline */
        oauth_arm(j, o->gw->cfg.oauth_timeout_ms + 10000);
        return j;
    }
    return oauth_proceed(j, NULL) == 0 ? j : NULL; /* a login to take was copied by oauth_on_verdict */
}

/* 1 if pa's login can be refreshed now; else 0 and why. */
static int oauth_can_refresh(const pool_account *pa, double now, char *why, size_t n)
{
    if (pa->a.kind != ACCOUNT_CHATGPT || !pa->a.refresh_token)
        snprintf(why, n, "the account has no refresh token");
    else if (pa->a.login_error)
        snprintf(why, n, "needs_login: %s", pa->a.login_error);
    else if (pa->refresh_retry_at > now)
        snprintf(why, n, "login refresh backing off for %.0fs", pa->refresh_retry_at - now);
    else
        return 1;
    return 0;
}

/* ---------- committed logins ---------- */

static void oauth_on_committed(evutil_socket_t fd, short what, void *arg)
{
    oauth *o = arg;
    uint64_t v;
    while (read(fd, &v, sizeof v) > 0) {
    }
    uint64_t done = store_writer_committed(o->gw->st);
    for (int again = 1; again;) { /* oauth_apply unlinks the job: rescan */
        again = 0;
        for (oauth_job *j = o->jobs; j; j = j->next)
            if (j->ticket && j->ticket <= done) {
                oauth_apply(j);
                again = 1;
                break;
            }
    }
}

/* ---------- logins refreshed by another gateway ---------- */

/* Another gateway of the pool refreshed the login of the account named
 * name (shared/shared.h): a refresh waiting for it takes it; with none in
 * flight it is taken all the same (its refresh token replaced this one's,
 * which is spent). A refresh of this instance's own in flight (Redis was
 * out of reach when it began) keeps going. */
static void oauth_on_shared_login(void *ud, const char *name, const account *login)
{
    oauth *o = ud;
    pool_account *pa = NULL;
    for (size_t i = 0; i < pool_count(o->gw->pool) && !pa; i++)
        if (pool_at(o->gw->pool, i)->a.name && strcmp(pool_at(o->gw->pool, i)->a.name, name) == 0)
            pa = pool_at(o->gw->pool, i);
    if (!pa || pa->a.kind != ACCOUNT_CHATGPT)
        return;
    oauth_job *j = oauth_job_find(o, pa->a.id);
    if (j) {
        if (!j->waiting_peer && !j->lease_call)
            return; /* exchanging or committing already */
        shared_call_cancel(o->gw->shared, j->lease_call);
        j->lease_call = NULL;
        oauth_take_login(j, login);
        oauth_commit_taken(j);
        return;
    }
    j = calloc(1, sizeof *j);
    if (!j)
        return;
    j->o = o;
    j->account_id = pa->a.id;
    j->verdict = SHARED_REFRESH_ADOPT;
    sbuf_copy_cstr(j->name, sizeof j->name, pa->a.name);
    j->next = o->jobs;
    o->jobs = j;
    pa->refreshing = 1;
    oauth_take_login(j, login);
    oauth_commit_taken(j);
}

/* ---------- API ---------- */

oauth *oauth_new(gateway *gw)
{
    oauth *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    o->gw = gw;
    shared_on_login(gw->shared, oauth_on_shared_login, o);
    int fd = store_writer_notify_fd(gw->st);
    if (fd >= 0) {
        o->notify_ev = event_new(gw->base, fd, EV_READ | EV_PERSIST, oauth_on_committed, o);
        event_add(o->notify_ev, NULL);
    }
    return o;
}

void oauth_on_refreshed(oauth *o, oauth_refreshed_fn fn, void *ud)
{
    o->on_refreshed = fn;
    o->on_refreshed_ud = ud;
}

void oauth_free(oauth *o)
{
    if (!o)
        return;
    while (o->jobs) {
        oauth_job *j = o->jobs;
        for (oauth_waiter *w = j->waiters, *next; w; w = next) {
            next = w->next;
            free(w);
        }
        j->waiters = NULL;
        oauth_job_end(j, 0, "shutting down");
    }
    if (o->notify_ev)
        event_free(o->notify_ev);
    free(o);
}

int oauth_busy(const oauth *o) { return o && o->jobs != NULL; }

void oauth_drain(oauth *o)
{
    if (!o || o->gw->cfg.oauth_timeout_ms <= OAUTH_DRAIN_GRACE_MS)
        return;
    for (oauth_job *j = o->jobs; j; j = j->next)
        if (j->up && j->due - oauth_mono() > OAUTH_DRAIN_GRACE_MS / 1000.0)
            oauth_arm(j, OAUTH_DRAIN_GRACE_MS);
}

void oauth_tick(oauth *o)
{
    gateway *gw = o->gw;
    if (gw->draining)
        return;
    double now = gateway_now();
    char why[160];
    for (size_t i = 0; i < pool_count(gw->pool); i++) {
        pool_account *pa = pool_at(gw->pool, i);
        if (!pa->a.refresh_token || pa->refreshing || !pa->a.enabled || !oauth_can_refresh(pa, now, why, sizeof why))
            continue;
        const account *a = &pa->a;
        const char *reason = NULL;
        /* a token that lives shorter than twice the margin is refreshed at half its life, not at once */
        double margin = (double)gw->cfg.oauth_refresh_margin_s;
        double life = (double)(a->token_expires_at - a->last_refresh_at);
        if (a->last_refresh_at && life > 0 && margin > life / 2)
            margin = life / 2;
        if (a->token_expires_at && now >= (double)a->token_expires_at - margin)
            reason = a->token_expires_at <= now ? "expired" : "expiring";
        else if (!a->token_expires_at && now >= (double)a->last_refresh_at + OAUTH_UNKNOWN_EXP_EVERY_S)
            reason = "unknown_expiry_8_days";
        if (reason)
            oauth_start(o, pa, reason);
    }
}

int oauth_refresh(oauth *o, pool_account *pa, const char *reason)
{
    char why[200];
    if (!o || oauth_job_find(o, pa->a.id))
        return o != NULL;
    return oauth_can_refresh(pa, gateway_now(), why, sizeof why) && oauth_start(o, pa, reason) != NULL;
}

oauth_waiter *oauth_wait(oauth *o, pool_account *pa, const char *reason, oauth_done_fn fn, void *ud, char *why,
                         size_t n)
{
    oauth_job *j = oauth_job_find(o, pa->a.id);
    if (!j && !oauth_can_refresh(pa, gateway_now(), why, n))
        return NULL;
    if (!j && !(j = oauth_start(o, pa, reason))) {
        snprintf(why, n, "the refresh could not start");
        return NULL;
    }
    oauth_waiter *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(why, n, "out of memory");
        return NULL;
    }
    w->job = j;
    w->fn = fn;
    w->ud = ud;
    w->next = j->waiters;
    j->waiters = w;
    return w;
}

void oauth_wait_cancel(oauth *o, oauth_waiter *w)
{
    if (!w)
        return;
    if (!w->job) { /* its job is ending and calling the waiters: skip this one */
        w->fn = NULL;
        return;
    }
    for (oauth_waiter **pp = &w->job->waiters; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            free(w);
            return;
        }
}
