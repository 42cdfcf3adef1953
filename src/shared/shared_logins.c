/* shared_logins.c: the Redis implementation's logins (see
 * shared_redis_internal.h): a ChatGPT login's newest tokens shared
 * (login:NAME, sealed with SWITCHYARD_REDIS_KEY) and heard, the refresh
 * lease that lets one instance of the pool refresh a login at a time, and
 * once-per-pool jobs (a job's lease; the usage numbers one instance polled,
 * told to the others). */
#include "shared/shared_redis_internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------- logins ---------- */

/* A login's text from Redis as this instance reads it: opened when sealed
 * (its place "login:NAME" as the additional data), as is when plaintext. */
int shared_login_open(shared_redis *sr, const char *name, const char *p, size_t n, sbuf *out)
{
    char aad[300];
    snprintf(aad, sizeof aad, "login:%s", name);
    return shared_redis_open(&sr->base, aad, p, n, out);
}

/* A login text from Redis for the account named name: handed to oauth
 * (shared_on_login) when it is newer than what this instance holds. */
void shared_login_heard(shared_redis *sr, const char *name, const char *text, size_t len)
{
    pool_account *pa = shared_find(sr, name);
    sbuf plain = SBUF_INIT;
    if (!pa || !sr->base.on_login || shared_login_open(sr, name, text, len, &plain) != 0)
        return;
    json_value *doc = json_parse(plain.p, plain.len, NULL, 0);
    sbuf_secret_wipe(&plain);
    account login;
    memset(&login, 0, sizeof login);
    if (doc && shared_login_read(doc, &login) == 0 && login.last_refresh_at >= pa->a.last_refresh_at &&
        (!pa->a.refresh_token || !login.refresh_token || strcmp(pa->a.refresh_token, login.refresh_token) != 0 ||
         !pa->a.token || strcmp(pa->a.token, login.token) != 0))
        sr->base.on_login(sr->base.on_login_ud, name, &login);
    json_free(doc);
    store_account_clear(&login);
}

typedef struct shared_login_get {
    shared_redis *sr;
    char name[256];
} shared_login_get;

static void shared_on_login_got(void *ud, redisReply *r)
{
    shared_login_get *g = ud;
    if (r && r->type == REDIS_REPLY_STRING && !g->sr->closing)
        shared_login_heard(g->sr, g->name, r->str, r->len);
    free(g);
}

void shared_login_fetch(shared_redis *sr, const char *name)
{
    shared_login_get *g = calloc(1, sizeof *g);
    if (!g)
        return;
    g->sr = sr;
    snprintf(g->name, sizeof g->name, "%s", name);
    sbuf key = SBUF_INIT;
    shared_key(sr, "login", name, &key);
    const char *get[] = {"GET", key.p};
    if (shared_cmd(sr, shared_on_login_got, g, 2, get) != 0)
        free(g);
    sbuf_free(&key);
}

void shared_login_tell(shared_redis *sr, const char *name, const account *a)
{
    if (!redis_link_is_up(sr->link) || !a->token)
        return;
    if (sr->seen_sealed && !sr->has_key) /* the pool seals its logins: a plaintext one would undo that */
        return;
    sbuf key = SBUF_INIT, val = SBUF_INIT, msg = SBUF_INIT, sealed = SBUF_INIT;
    char aad[300];
    snprintf(aad, sizeof aad, "login:%s", name);
    shared_key(sr, "login", name, &key);
    shared_login_write(a, &val);
    if (shared_redis_seal(&sr->base, aad, val.p, val.len, &sealed) != 0) {
        sbuf_secret_wipe(&val);
        sbuf_free(&key);
        return;
    }
    const char *set[] = {"SET", key.p, sealed.p};
    shared_cmd(sr, NULL, NULL, 3, set);
    shared_message_write(&msg, "login", sr->id, name, NULL);
    const char *pub[] = {"PUBLISH", sr->channel, msg.p};
    shared_cmd(sr, NULL, NULL, 3, pub);
    sbuf_free(&key);
    sbuf_secret_wipe(&val);
    sbuf_secret_wipe(&sealed);
    sbuf_free(&msg);
}

/* ---------- once per pool: a job's lease, the usage numbers ---------- */

static void shared_lease_finish(shared_call *c, int granted)
{
    if (c->lease_fn && !c->sr->closing)
        c->lease_fn(c->ud, granted);
    free(c);
}

static void shared_on_lease_take(void *ud, redisReply *r)
{
    shared_call *c = ud;
    int granted = 1; /* the link went down (or Redis refused the script): this instance does the job */
    if (r && r->type == REDIS_REPLY_INTEGER)
        granted = r->integer == 1;
    else if (r)
        log_warn("redis: the lease %s got an answer it cannot read (%s); the job runs here", c->lease_key,
                 r->type == REDIS_REPLY_ERROR ? r->str : "not a number");
    shared_lease_finish(c, granted);
}

/* The take script, one round trip: 0, or -1 (the link is not up). */
static int shared_lease_send(shared_call *c)
{
    shared_redis *sr = c->sr;
    if (!redis_link_is_up(sr->link))
        return -1;
    char px[32];
    snprintf(px, sizeof px, "%ld", c->lease_ttl_ms);
    const char *eval[] = {"EVAL", SHARED_LEASE_TAKE_LUA, "1", c->lease_key, sr->id, px};
    return shared_cmd(sr, shared_on_lease_take, c, 6, eval);
}

shared_call *shared_redis_lease_take(shared *sh, const char *job, const char *id, long ttl_ms,
                                            shared_lease_fn fn, void *ud)
{
    shared_redis *sr = (shared_redis *)sh;
    shared_call *c = calloc(1, sizeof *c);
    int w = c ? snprintf(c->lease_key, sizeof c->lease_key, "%slease:%s:%s", sr->prefix, job, id) : -1;
    if (!c || w < 0 || (size_t)w >= sizeof c->lease_key || ttl_ms <= 0) {
        free(c);
        fn(ud, 1);
        return NULL;
    }
    c->sr = sr;
    c->is_lease = 1;
    c->lease_fn = fn;
    c->ud = ud;
    c->lease_ttl_ms = ttl_ms;
    if (shared_lease_send(c) == 0)
        return c;
    if (!redis_link_ups(sr->link) && shared_mono() - sr->started < SHARED_START_GRACE_S) {
        c->queued_at = shared_mono(); /* instances starting together: wait for the link a moment */
        c->next = sr->pending;
        sr->pending = c;
        return c;
    }
    free(c); /* Redis is out of reach: each instance does its own */
    fn(ud, 1);
    return NULL;
}

void shared_redis_lease_release(shared *sh, const char *job, const char *id)
{
    shared_redis *sr = (shared_redis *)sh;
    char key[320];
    int w = snprintf(key, sizeof key, "%slease:%s:%s", sr->prefix, job, id);
    if (w < 0 || (size_t)w >= sizeof key || !redis_link_is_up(sr->link))
        return; /* not sent: it expires with its TTL */
    const char *eval[] = {"EVAL", SHARED_RELEASE_LUA, "1", key, sr->id};
    shared_cmd(sr, NULL, NULL, 5, eval);
}

/* SET usage:NAME (a week: an instance joining later reads it) and the
 * numbers themselves on the channel: no secret in them. */
void shared_redis_usage_told(shared *sh, const pool_account *pa)
{
    shared_redis *sr = (shared_redis *)sh;
    if (!redis_link_is_up(sr->link) || !pa->a.name)
        return;
    sbuf key = SBUF_INIT, val = SBUF_INIT, msg = SBUF_INIT;
    shared_key(sr, "usage", pa->a.name, &key);
    shared_usage_write(&pa->st, &val);
    const char *set[] = {"SET", key.p, val.p, "EX", SHARED_USAGE_TTL_S};
    shared_cmd(sr, NULL, NULL, 5, set);
    shared_message_write(&msg, "usage", sr->id, pa->a.name, val.p);
    const char *pub[] = {"PUBLISH", sr->channel, msg.p};
    shared_cmd(sr, NULL, NULL, 3, pub);
    sbuf_free(&key);
    sbuf_free(&val);
    sbuf_free(&msg);
}

/* ---------- the refresh lease ---------- */

static void shared_call_finish(shared_call *c, shared_refresh_verdict v, const account *login)
{
    if (c->fn)
        c->fn(c->ud, v, login);
    sbuf_secret_free(c->login);
    free(c);
}

static void shared_refresh_lease_release(shared_redis *sr, const char *name)
{
    sbuf key = SBUF_INIT;
    shared_key(sr, "lease:refresh", name, &key);
    const char *eval[] = {"EVAL", SHARED_RELEASE_LUA, "1", key.p, sr->id};
    shared_cmd(sr, NULL, NULL, 5, eval);
    sbuf_free(&key);
}

/* Both answers are in (SET NX, then GET of the login): decide. */
static void shared_call_decide(shared_call *c)
{
    shared_redis *sr = c->sr;
    if (sr->closing)
        c->fn = NULL; /* shutting down: nobody waits for it (oauth cancelled its calls first) */
    if (c->lost || sr->closing) { /* the link went down meanwhile: this instance refreshes on its own */
        shared_call_finish(c, SHARED_REFRESH_GO, NULL);
        return;
    }
    account login;
    memset(&login, 0, sizeof login);
    sbuf plain = SBUF_INIT;
    json_value *doc = c->login && shared_login_open(sr, c->name, c->login, c->login_len, &plain) == 0
                          ? json_parse(plain.p, plain.len, NULL, 0)
                          : NULL;
    sbuf_secret_wipe(&plain);
    int newer = doc && shared_login_read(doc, &login) == 0 && login.refresh_token &&
                login.last_refresh_at >= c->local_last_refresh && sbuf_hash(login.refresh_token) != c->local_refresh_hash;
    json_free(doc);
    if (newer) { /* refreshed elsewhere already: take it, refresh nothing */
        if (c->granted)
            shared_refresh_lease_release(sr, c->name);
        shared_call_finish(c, SHARED_REFRESH_ADOPT, &login);
    } else {
        shared_call_finish(c, c->granted ? SHARED_REFRESH_GO : SHARED_REFRESH_WAIT, NULL);
    }
    store_account_clear(&login);
}

static void shared_on_lease_set(void *ud, redisReply *r)
{
    shared_call *c = ud;
    if (!r)
        c->lost = 1;
    else
        c->granted = r->type == REDIS_REPLY_STATUS && r->str && strcmp(r->str, "OK") == 0;
    if (++c->replies == 2)
        shared_call_decide(c);
}

static void shared_on_lease_login(void *ud, redisReply *r)
{
    shared_call *c = ud;
    if (!r)
        c->lost = 1;
    else if (r->type == REDIS_REPLY_STRING && r->len < (1u << 20)) {
        c->login = malloc(r->len + 1);
        if (c->login) {
            memcpy(c->login, r->str, r->len);
            c->login[r->len] = '\0';
            c->login_len = r->len;
        }
    }
    if (++c->replies == 2)
        shared_call_decide(c);
}

/* SET lease NX PX and GET login, in one write: 0, or -1 (the link is down). */
static int shared_call_send(shared_call *c)
{
    shared_redis *sr = c->sr;
    if (!redis_link_is_up(sr->link))
        return -1;
    sbuf lease = SBUF_INIT, login = SBUF_INIT;
    shared_key(sr, "lease:refresh", c->name, &lease);
    shared_key(sr, "login", c->name, &login);
    char px[32];
    snprintf(px, sizeof px, "%ld", sr->base.gw->cfg.oauth_timeout_ms + SHARED_LEASE_EXTRA_MS);
    const char *set[] = {"SET", lease.p, sr->id, "NX", "PX", px};
    const char *get[] = {"GET", login.p};
    int rc = shared_cmd(sr, shared_on_lease_set, c, 6, set);
    if (rc == 0 && shared_cmd(sr, shared_on_lease_login, c, 2, get) != 0)
        c->lost = 1, c->replies++; /* the SET's answer (or its NULL) decides alone */
    sbuf_free(&lease);
    sbuf_free(&login);
    return rc;
}

shared_call *shared_redis_refresh_begin(shared *sh, const pool_account *pa, shared_refresh_fn fn, void *ud)
{
    shared_redis *sr = (shared_redis *)sh;
    shared_call *c = calloc(1, sizeof *c);
    if (!c || !pa->a.name) {
        free(c);
        fn(ud, SHARED_REFRESH_GO, NULL);
        return NULL;
    }
    c->sr = sr;
    c->fn = fn;
    c->ud = ud;
    snprintf(c->name, sizeof c->name, "%s", pa->a.name);
    c->local_last_refresh = pa->a.last_refresh_at;
    c->local_refresh_hash = pa->a.refresh_token ? sbuf_hash(pa->a.refresh_token) : 0;
    if (shared_call_send(c) == 0)
        return c;
    if (!redis_link_ups(sr->link) && shared_mono() - sr->started < SHARED_START_GRACE_S) {
        c->queued_at = shared_mono(); /* starting together: wait for the link a moment */
        c->next = sr->pending;
        sr->pending = c;
        return c;
    }
    free(c); /* Redis is out of reach: refresh here (docs/scale-out.md, "Faults") */
    fn(ud, SHARED_REFRESH_GO, NULL);
    return NULL;
}

void shared_redis_refresh_end(shared *sh, const char *account_name, const account *fresh)
{
    shared_redis *sr = (shared_redis *)sh;
    if (fresh)
        shared_login_tell(sr, account_name, fresh); /* before the release: the others hear it first */
    shared_refresh_lease_release(sr, account_name);
}

/* The pending refreshes: sent once the link is up, or let go after the grace. */
void shared_pending_flush(shared_redis *sr, int give_up)
{
    shared_call *list = sr->pending;
    sr->pending = NULL;
    while (list) {
        shared_call *c = list;
        list = c->next;
        c->next = NULL;
        if (!give_up && (c->is_lease ? shared_lease_send(c) : shared_call_send(c)) == 0)
            continue;
        if (!give_up && shared_mono() - c->queued_at < SHARED_START_GRACE_S) {
            c->next = sr->pending;
            sr->pending = c;
            continue;
        }
        if (c->is_lease)
            shared_lease_finish(c, 1); /* no link: this instance does the job, as a lone gateway would */
        else
            shared_call_finish(c, SHARED_REFRESH_GO, NULL);
    }
}
