/* signin.c: the device-code sign-in on the loop (see signin.h). One
 * sign-in walks: the device-code request, polls at the server's interval
 * (each a transfer on the gateway's curl multi), the code exchange, the
 * login queued for the writer, and a short timer until the writer has
 * committed it. One evtimer per sign-in serves as the deadline of the
 * request in flight and as the wait between polls. */
#include "accounts/signin.h"
#include "accounts/login_file.h"
#include "accounts/login_flow.h"
#include "accounts/oauth.h"
#include "base/log.h"
#include "base/sbuf.h"
#include "base/text.h"
#include "store/store.h"
#include "upstream/upstream.h"
#include <event2/event.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIGNIN_BODY_MAX (64u << 10)

typedef enum { SIGNIN_REQ_NONE, SIGNIN_REQ_CODE, SIGNIN_REQ_POLL, SIGNIN_REQ_EXCHANGE } signin_req;

typedef struct signin {
    signins *owner;
    int used;
    signin_view v;
    login_device d;
    signin_req req;          /* the transfer in flight */
    upstream_req *up;
    sbuf body, resp;         /* what was sent (kept while curl reads it) and the answer */
    int status;
    uint64_t ticket;         /* the login queued for the writer */
    double store_deadline;   /* monotonic: the writer gets this long */
    struct event *timer;
    signin_ready_fn ready;
    void *ready_ud;
    int has_sort, sort;      /* the settings of the account it adds (signin_settings) */
    char *models;
} signin;

struct signins {
    gateway *gw;
    signin v[SIGNIN_MAX];
    int64_t next_id;
};

static void signin_arm(signin *s, long ms);

const char *signin_state_name(signin_state st)
{
    static const char *const names[] = {"starting", "pending", "storing", "approved", "denied", "expired", "failed"};
    return (unsigned)st < sizeof names / sizeof *names ? names[st] : "failed";
}

static double signin_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int signin_done(const signin *s) { return s->v.state >= SIGNIN_APPROVED; }

static void signin_call_ready(signin *s)
{
    signin_ready_fn fn = s->ready;
    s->ready = NULL;
    if (fn)
        fn(s->ready_ud, s->v.id);
}

/* The sign-in ends in st; what it held of the login is wiped. */
static void signin_end(signin *s, signin_state st, const char *why)
{
    if (s->up)
        upstream_cancel(s->up);
    s->up = NULL;
    s->req = SIGNIN_REQ_NONE;
    sbuf_secret_wipe(&s->body);
    sbuf_secret_wipe(&s->resp);
    memset(s->d.device_auth_id, 0, sizeof s->d.device_auth_id);
    s->v.state = st;
    if (why)
        sbuf_fmt_into(s->v.error, sizeof s->v.error, "%s", why);
    if (st != SIGNIN_APPROVED)
        log_info("sign-in %lld: %s%s%s", (long long)s->v.id, signin_state_name(st), why ? ": " : "", why ? why : "");
    evtimer_del(s->timer);
    signin_call_ready(s);
}

/* ---------- the transfers ---------- */

static int signin_up_headers(void *ud, int status, const upstream_header *h, size_t n)
{
    (void)h, (void)n;
    ((signin *)ud)->status = status;
    return 0;
}

static int signin_up_data(void *ud, const char *p, size_t n)
{
    signin *s = ud;
    if (s->resp.len + n > SIGNIN_BODY_MAX)
        return 0; /* kept short: an oversized answer fails to parse */
    sbuf_append(&s->resp, p, n);
    return 0;
}

static void signin_on_code(signin *s);
static void signin_on_poll(signin *s);
static void signin_on_exchange(signin *s);

static void signin_up_done(void *ud, up_result r, const char *errmsg)
{
    signin *s = ud;
    s->up = NULL;
    signin_req req = s->req;
    s->req = SIGNIN_REQ_NONE;
    evtimer_del(s->timer);
    sbuf_secret_wipe(&s->body);
    if (r != UP_OK) {
        static const char *const what[] = {"", "the device-code endpoint", "the device token endpoint",
                                           "the token endpoint"};
        char why[300];
        snprintf(why, sizeof why, "%s could not be reached: %s", what[req], errmsg ? errmsg : "network error");
        signin_end(s, SIGNIN_FAILED, why);
        return;
    }
    if (req == SIGNIN_REQ_CODE)
        signin_on_code(s);
    else if (req == SIGNIN_REQ_POLL)
        signin_on_poll(s);
    else
        signin_on_exchange(s);
    sbuf_secret_wipe(&s->resp);
}

static const upstream_callbacks signin_up_cb = {signin_up_headers, signin_up_data, signin_up_done};

/* POSTs s->body to url; the answer comes to signin_up_done. */
static void signin_post(signin *s, signin_req req, const char *url, const char *ctype)
{
    gateway *gw = s->owner->gw;
    upstream_header hdrs[] = {{"Content-Type", ctype}, {"Accept", "application/json"}};
    upstream_spec spec = {url, s->body.p, s->body.len, hdrs, 2, 0, 0, NULL};
    s->status = 0;
    sbuf_secret_wipe(&s->resp);
    s->req = req;
    s->up = upstream_start(gw->up, &spec, &signin_up_cb, s);
    if (!s->up) {
        s->req = SIGNIN_REQ_NONE;
        signin_end(s, SIGNIN_FAILED, "could not start a request to the authorization server");
        return;
    }
    signin_arm(s, gw->cfg.oauth_timeout_ms); /* the whole request's bound, as a refresh's */
}

static void signin_poll(signin *s)
{
    if (time(NULL) >= s->d.expires_at) {
        signin_end(s, SIGNIN_EXPIRED, "the device code expired before the sign-in was approved");
        return;
    }
    login_device_poll_body(&s->body, &s->d);
    signin_post(s, SIGNIN_REQ_POLL, s->owner->gw->cfg.oauth_device_token_url, LOGIN_JSON_TYPE);
}

static void signin_on_code(signin *s)
{
    char err[300];
    if (login_device_start_reply(s->status, s->resp.p, s->resp.len, (int64_t)time(NULL), &s->d, err,
                                 sizeof err) != 0) {
        signin_end(s, SIGNIN_FAILED, err);
        return;
    }
    memcpy(s->v.user_code, s->d.user_code, sizeof s->v.user_code);
    memcpy(s->v.verify_url, s->d.verify_url, sizeof s->v.verify_url);
    s->v.expires_at = (double)s->d.expires_at;
    s->v.interval_s = s->d.interval_s;
    s->v.state = SIGNIN_PENDING;
    log_info("sign-in %lld: waiting for the user code to be entered at %s", (long long)s->v.id, s->d.verify_url);
    signin_arm(s, s->d.interval_s * 1000);
    signin_call_ready(s);
}

static void signin_on_poll(signin *s)
{
    char code[2048], verifier[256], err[300] = "";
    login_poll_result r = login_device_poll_answer(s->status, s->resp.p, s->resp.len, &s->d, code, sizeof code,
                                                   verifier, sizeof verifier, err, sizeof err);
    s->v.interval_s = s->d.interval_s;
    if (r == LOGIN_POLL_PENDING) {
        signin_arm(s, s->d.interval_s * 1000);
    } else if (r == LOGIN_POLL_APPROVED) {
        s->v.state = SIGNIN_STORING;
        login_exchange_body(&s->body, OAUTH_CODEX_CLIENT_ID, s->d.redirect_uri, verifier, code);
        signin_post(s, SIGNIN_REQ_EXCHANGE, s->owner->gw->cfg.oauth_token_url, LOGIN_FORM_TYPE);
    } else {
        char why[400];
        snprintf(why, sizeof why, "%s (%s)",
                 r == LOGIN_POLL_DENIED    ? "the sign-in was denied"
                 : r == LOGIN_POLL_EXPIRED ? "the device code expired before the sign-in was approved"
                                           : "the device sign-in failed",
                 err);
        signin_end(s, r == LOGIN_POLL_DENIED ? SIGNIN_DENIED : r == LOGIN_POLL_EXPIRED ? SIGNIN_EXPIRED : SIGNIN_FAILED,
                   why);
    }
    explicit_bzero(code, sizeof code);
    explicit_bzero(verifier, sizeof verifier);
}

static void signin_on_exchange(signin *s)
{
    login_list l = {0};
    l.v = calloc(1, sizeof *l.v);
    if (!l.v) {
        signin_end(s, SIGNIN_FAILED, "out of memory");
        return;
    }
    l.n = l.cap = 1;
    login_entry *e = &l.v[0];
    char err[300];
    if (login_exchange_reply(s->status, s->resp.p, s->resp.len, (int64_t)time(NULL), e, err, sizeof err) != 0) {
        login_list_free(&l);
        signin_end(s, SIGNIN_FAILED, err);
        return;
    }
    snprintf(e->label, sizeof e->label, "the sign-in");
    e->name = s->v.name[0] ? strdup(s->v.name) : NULL;
    e->has_sort = s->has_sort;
    e->sort = s->sort;
    e->models = s->models ? strdup(s->models) : NULL;
    if ((s->v.name[0] && !e->name) || (s->models && !e->models)) {
        login_list_free(&l);
        signin_end(s, SIGNIN_FAILED, "out of memory");
        return;
    }
    account_new an;
    char name[128];
    login_entry_to_account(e, &an, name, sizeof name);
    s->ticket = store_writer_put_import(s->owner->gw->st, &an, "the sign-in");
    login_list_free(&l);
    if (!s->ticket) {
        signin_end(s, SIGNIN_FAILED, "could not queue the login for the database");
        return;
    }
    s->store_deadline = signin_mono() + 30.0;
    signin_arm(s, SIGNIN_POLL_STORE_MS);
}

/* ---------- the timer ---------- */

static void signin_stored(signin *s)
{
    char name[128], err[256];
    store_import_outcome o = store_writer_import_result(s->owner->gw->st, s->ticket, name, sizeof name, err,
                                                        sizeof err);
    if (o == STORE_IMPORT_UNKNOWN) {
        if (store_writer_committed(s->owner->gw->st) >= s->ticket || signin_mono() > s->store_deadline)
            signin_end(s, SIGNIN_FAILED, "the database did not take the login in time");
        else
            signin_arm(s, SIGNIN_POLL_STORE_MS);
        return;
    }
    if (o == STORE_IMPORT_FAILED) {
        char why[300];
        snprintf(why, sizeof why, "the login could not be stored: %s", err);
        signin_end(s, SIGNIN_FAILED, why);
        return;
    }
    snprintf(s->v.account, sizeof s->v.account, "%s", name);
    s->v.updated = o == STORE_IMPORT_UPDATED;
    log_info("sign-in %lld: %s account %s", (long long)s->v.id, s->v.updated ? "updated" : "added", name);
    signin_end(s, SIGNIN_APPROVED, NULL);
}

static void signin_on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    signin *s = arg;
    if (s->up) { /* the request in flight outlived its bound */
        static const char *const who[] = {"", "the device-code endpoint", "the device token endpoint",
                                          "the token endpoint"};
        char why[200];
        snprintf(why, sizeof why, "%s did not answer within %ld ms", who[s->req], s->owner->gw->cfg.oauth_timeout_ms);
        signin_end(s, SIGNIN_FAILED, why);
    } else if (s->v.state == SIGNIN_PENDING) {
        signin_poll(s);
    } else if (s->v.state == SIGNIN_STORING && s->ticket) {
        signin_stored(s);
    }
}

static void signin_arm(signin *s, long ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(s->timer, &tv);
}

/* ---------- the table ---------- */

static void signin_clear(signin *s)
{
    if (s->up)
        upstream_cancel(s->up);
    if (s->timer)
        event_free(s->timer);
    sbuf_secret_wipe(&s->body);
    sbuf_secret_wipe(&s->resp);
    sbuf_free(&s->body);
    sbuf_free(&s->resp);
    free(s->models);
    explicit_bzero(&s->d, sizeof s->d);
    memset(s, 0, sizeof *s);
}

signins *signins_new(gateway *gw)
{
    signins *s = calloc(1, sizeof *s);
    if (s) {
        s->gw = gw;
        s->next_id = 1;
    }
    return s;
}

void signins_free(signins *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < SIGNIN_MAX; i++)
        if (s->v[i].used)
            signin_clear(&s->v[i]);
    free(s);
}

/* A free slot: an unused one, else the oldest finished one; NULL when all
 * are running. */
static signin *signin_slot(signins *s)
{
    signin *best = NULL;
    for (size_t i = 0; i < SIGNIN_MAX; i++) {
        signin *x = &s->v[i];
        if (!x->used)
            return x;
        if (signin_done(x) && (!best || x->v.started_at < best->v.started_at))
            best = x;
    }
    return best;
}

int64_t signin_start(signins *s, const char *name, const signin_settings *set, signin_ready_fn ready, void *ud,
                     char *err, size_t errlen)
{
    gateway *gw = s->gw;
    if (name && (strlen(name) >= sizeof ((signin_view *)0)->name || text_check_str(name))) {
        sbuf_fmt_into(err, errlen, "%s", "'name' must be plain text of at most 127 bytes");
        return -1;
    }
    signin *x = signin_slot(s);
    if (!x) {
        sbuf_fmt_into(err, errlen, "%d sign-ins are already waiting for their users; retry when one ends",
                      SIGNIN_MAX);
        return -1;
    }
    if (x->used)
        signin_clear(x);
    x->owner = s;
    x->timer = evtimer_new(gw->base, signin_on_timer, x);
    if (!x->timer) {
        memset(x, 0, sizeof *x);
        sbuf_fmt_into(err, errlen, "%s", "out of memory");
        return -1;
    }
    x->used = 1;
    x->v.id = s->next_id++;
    x->v.state = SIGNIN_STARTING;
    x->v.started_at = (double)time(NULL);
    snprintf(x->v.name, sizeof x->v.name, "%s", name ? name : "");
    x->ready = ready;
    x->ready_ud = ud;
    if (set) {
        x->has_sort = set->has_sort;
        x->sort = set->sort;
        if (set->models && !(x->models = strdup(set->models))) {
            sbuf_fmt_into(err, errlen, "%s", "out of memory");
            signin_clear(x);
            return -1;
        }
    }
    char why[300];
    if (login_device_prepare(gw->cfg.oauth_device_code_url, &x->d, why, sizeof why) != 0) {
        sbuf_fmt_into(err, errlen, "%s", why);
        signin_clear(x);
        return -1;
    }
    login_device_start_body(&x->body, OAUTH_CODEX_CLIENT_ID);
    int64_t id = x->v.id;
    x->ready = NULL; /* a start that fails at once answers through err, not the callback */
    signin_post(x, SIGNIN_REQ_CODE, gw->cfg.oauth_device_code_url, LOGIN_JSON_TYPE);
    if (x->v.state == SIGNIN_FAILED) {
        sbuf_fmt_into(err, errlen, "%s", x->v.error);
        return -1;
    }
    x->ready = ready;
    log_info("sign-in %lld: started (device code)", (long long)id);
    return id;
}

static signin *signin_find(signins *s, int64_t id)
{
    for (size_t i = 0; i < SIGNIN_MAX; i++)
        if (s->v[i].used && s->v[i].v.id == id)
            return &s->v[i];
    return NULL;
}

int signin_get(signins *s, int64_t id, signin_view *out)
{
    signin *x = signin_find(s, id);
    if (!x)
        return -1;
    *out = x->v;
    return 0;
}

void signin_forget_ready(signins *s, int64_t id)
{
    signin *x = signin_find(s, id);
    if (x)
        x->ready = NULL;
}
