/* shared_redis.c: shared state over Redis (see shared.h, shared_redis.h;
 * the key layout is docs/scale-out.md's "Keys and channels").
 *
 *   sy:{POOL}:rest:NAME           an account's rest (shared_state.h), PX until an hour after it ends
 *   sy:{POOL}:login:NAME          the newest login of a ChatGPT account (its tokens: secrets)
 *   sy:{POOL}:lease:refresh:NAME  who refreshes that login now: an instance id, NX PX
 *   sy:{POOL}:events:DB           the channel: {"t":"rest"|"login","from","name","body"}
 *   sy:{POOL}:owner:KEY           the account (by name) that produced a response, issued a turn
 *                                 state ("ts:…") or minted a blob ("bl:…"), EX 7 days
 *   sy:{POOL}:sess:SESSION        the account (by name) that served a session's last turn, EX the idle time
 *   sy:{POOL}:inflight:NAME       the slots of an account's max_concurrency held now: a sorted set of
 *                                 "INSTANCE:SEQ" scored by expiry (Redis's clock, ms), taken by a script
 *                                 (loaded once per connect: EVALSHA, the text again after NOSCRIPT)
 *   sy:{POOL}:conv:ID, conv-order, conv-bytes
 *                                 the turns of stored conversations (shared_conv.h: its scripts and texts)
 *   sy:{POOL}:cursor:KEY:MODEL    the balanced rotation's position (shared_rotation.c)
 *
 * On the channel besides: {"t":"reset","name":NAME,"body":{"gen":N}} (an
 * operator's reset of the account: its rest key is deleted and the others
 * clear the rest instead of merging it) and {"t":"sess","name":SESSION,
 * "body":ACCOUNT} (a session told here: the others that know the session
 * follow it to its account).
 *
 * Accounts are named by name, not id: each instance numbers the accounts
 * of its own database. A rest changed here is SET and PUBLISHed at once
 * (two commands in one write, no answer awaited); one heard is merged into
 * the local pool (shared_state.c), which the request path reads as
 * before: no Redis round trip on it. On every (re)connect the keys are
 * read back with SCAN + MGET and this instance's own rests and newer
 * logins are told again, so an outage loses nothing either side knew. */
#include "shared/shared_redis.h"
#include "shared/shared_deadline.h"
#include "core/redis_script.h"
#include "shared/shared_state.h"
#include "shared/shared_conv.h"
#include "route/affinity.h"
#include "shared/shared_rotation.h"
#include "core/redis_link.h"
#include "base/log.h"
#include "base/sbuf.h"
#include "base/seal.h"
#include "obs/metrics.h"
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define SHARED_START_GRACE_S 3.0   /* a refresh at start-up waits this long for the link */
#define SHARED_LEASE_EXTRA_MS 10000 /* a refresh lease lives oauth_timeout_ms + this */
#define SHARED_SCAN_COUNT "500"
#define SHARED_OWNER_TTL_S "604800" /* 7 days: as long as the store keeps an owner row */
/* A slot not renewed for SWITCHYARD_REDIS_SLOT_TTL_S (30 by default) is
 * free (its instance died); held slots are renewed three times per TTL, so
 * a live one survives two renewals lost (shared_slot_ttl_s below). */
/* Takes a slot when fewer than the limit are held (the expired dropped
 * first), on Redis's clock so the instances' clocks do not matter:
 * {1, held} or {0, held}. */
#define SHARED_SLOT_TAKE_LUA                                                                      \
    "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) " \
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) "                                          \
    "local n = redis.call('ZCARD', KEYS[1]) "                                                        \
    "if n < tonumber(ARGV[2]) then "                                                                 \
    "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1]) "                                 \
    "redis.call('PEXPIRE', KEYS[1], ARGV[3]) return {1, n + 1} end "                                 \
    "return {0, n}"
/* Renews a slot still held (one dropped as expired stays dropped). */
#define SHARED_SLOT_RENEW_LUA                                                                     \
    "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) " \
    "if redis.call('ZSCORE', KEYS[1], ARGV[1]) then "                                                \
    "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1]) "                                 \
    "redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end return 0"
/* A job's lease: taken when free, renewed when this instance holds it. */
#define SHARED_LEASE_TAKE_LUA                                                                     \
    "local cur = redis.call('GET', KEYS[1]) "                                                        \
    "if cur == false or cur == ARGV[1] then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end " \
    "return 0"
#define SHARED_USAGE_TTL_S "604800"
#define SHARED_RELEASE_LUA \
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"

typedef struct shared_redis shared_redis;

/* A slot this instance took (or is taking): until given back and answered. */
typedef struct shared_slot {
    struct shared_slot *next;
    uint64_t seq;
    char key[320];          /* sy:{POOL}:inflight:NAME */
    char member[56];        /* INSTANCE:SEQ */
    char limit[24];
    int answered, granted, given;
    int sent_text;          /* the take went as EVAL with the script's text (after NOSCRIPT) */
} shared_slot;

/* A refresh_begin, or an ask, in flight (shared_call). */
struct shared_call {
    shared_call *next;      /* in pending, while waiting for the link */
    shared_redis *sr;
    shared_refresh_fn fn;   /* NULL: cancelled */
    /* an ask (ask != NULL): its records, its deadline, its caller */
    shared_ask *ask;
    shared_ask_done_fn done;
    shared_deadline dl;      /* an ask's, a slot's or a chain's wait: open while the caller waits */
    /* a slot_take (slot != NULL) */
    shared_slot *slot;
    shared_slot_fn slot_fn;
    /* a chain_get (chain set) */
    int chain;
    shared_chain_fn chain_fn;
    size_t chain_depth, chain_bytes;
    char chain_id[SHARED_CONV_ID];
    void *ud;
    char name[256];
    int64_t local_last_refresh;
    uint64_t local_refresh_hash; /* sbuf_hash of the refresh token it has: not the secret itself */
    double queued_at;
    int replies, granted, lost;
    char *login;            /* the GET's answer, wiped */
    size_t login_len;
    /* a lease_take (is_lease): its callback, NULL once cancelled */
    int is_lease;
    shared_lease_fn lease_fn;
    char lease_key[320];
    long lease_ttl_ms;
    /* a cursor_take (rot != NULL) */
    shared_rotation_wait *rot;
    shared_cursor_fn cursor_fn;
};

/* A login seen at a resync: which instance's is newer. */
typedef struct shared_seen {
    char *name;
    int64_t last_refresh_at;
} shared_seen;

struct shared_redis {
    shared base;
    redis_link *link;
    char prefix[64];        /* sy:{POOL}: */
    char channel[96];
    char id[33];            /* this run's instance id: the owner of its leases, the from of its messages */
    double started;         /* monotonic */
    shared_call *pending;   /* refreshes waiting for the first connect */
    struct event *tick;
    int scanning;           /* a resync in progress (its generation) */
    unsigned long scan_gen;
    /* the pool's data lost while the link stayed up (FLUSHALL, eviction, a
     * replica promoted empty): the pool's generation (sy:{POOL}:gen, a
     * token the first instance to come up writes, SET NX) is read every
     * SHARED_LOSS_CHECK_TICKS ticks; once seen since the link came up, its
     * absence, or another token (an instance that noticed first wrote a
     * new one), is the loss, and the link's turn is run again (a resync) */
    int layout_seen;
    char gen[48];           /* the generation seen ("" none yet) */
    int loss_asking;
    unsigned ticks;
    shared_seen *seen;
    size_t nseen, capseen;
    shared_slot *slots;     /* slots taken and not yet given back and answered */
    uint64_t slot_seq;
    double slots_renewed;   /* monotonic */
    int closing;
    shared_redis_ext ext[SHARED_REDIS_EXT_MAX]; /* shared_config.c and the like */
    size_t next;
    /* the pool's key (SWITCHYARD_REDIS_KEY): logins and config texts sealed */
    unsigned char key[SEAL_KEY_LEN];
    int has_key;
    int seen_sealed;         /* a sealed value this instance cannot open was seen: it writes no login */
    int said_nokey, said_badkey;
    shared_rotation *rot;   /* the balanced rotation's positions */
    redis_script slot_take, slot_renew; /* the slot scripts, by their SHA1 (core/redis_script.h) */
};

static double shared_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static pool_account *shared_find(shared_redis *sr, const char *name)
{
    pool *p = sr->base.gw->pool;
    for (size_t i = 0; i < pool_count(p); i++) {
        pool_account *pa = pool_at(p, i);
        if (pa->a.name && strcmp(pa->a.name, name) == 0)
            return pa;
    }
    return NULL;
}

static void shared_key(const shared_redis *sr, const char *kind, const char *name, sbuf *out)
{
    out->len = 0;
    sbuf_printf(out, "%s%s:%s", sr->prefix, kind, name);
}

/* A command of C strings; the answer ignored (fire and forget). */
static int shared_cmd(shared_redis *sr, redis_reply_fn fn, void *ud, int argc, const char **argv)
{
    size_t lens[8];
    for (int i = 0; i < argc && i < 8; i++)
        lens[i] = strlen(argv[i]);
    return redis_link_command(sr->link, fn, ud, argc, argv, lens);
}

/* ---------- rests ---------- */

static void shared_rest_tell(shared_redis *sr, pool_account *pa)
{
    if (!redis_link_is_up(sr->link) || !pa->a.name)
        return;
    double now = gateway_now();
    sbuf key = SBUF_INIT, val = SBUF_INIT, msg = SBUF_INIT;
    shared_key(sr, "rest", pa->a.name, &key);
    shared_rest_write(pa, &val);
    char px[32];
    snprintf(px, sizeof px, "%lld", shared_rest_ttl_ms(pa, now));
    const char *set[] = {"SET", key.p, val.p, "PX", px};
    shared_cmd(sr, NULL, NULL, 5, set);
    shared_message_write(&msg, "rest", sr->id, pa->a.name, val.p);
    const char *pub[] = {"PUBLISH", sr->channel, msg.p};
    shared_cmd(sr, NULL, NULL, 3, pub);
    sbuf_free(&key);
    sbuf_free(&val);
    sbuf_free(&msg);
}

/* An operator's reset of pa here (pool_account_reset): the rest key goes
 * and the others clear their rest (a rest heard is merged, and merging
 * never shortens one, so a reset needs its own message). */
static void shared_reset_tell(shared_redis *sr, pool_account *pa)
{
    if (!redis_link_is_up(sr->link) || !pa->a.name)
        return;
    if (pa->a.reset_gen > pa->reset_heard)
        pa->reset_heard = pa->a.reset_gen;
    sbuf key = SBUF_INIT, msg = SBUF_INIT;
    char body[48];
    shared_key(sr, "rest", pa->a.name, &key);
    const char *del[] = {"DEL", key.p};
    shared_cmd(sr, NULL, NULL, 2, del);
    snprintf(body, sizeof body, "{\"gen\":%lld,\"row\":%s}", (long long)pa->a.reset_gen,
             pa->rest_reset == 2 ? "true" : "false");
    shared_message_write(&msg, "reset", sr->id, pa->a.name, body);
    const char *pub[] = {"PUBLISH", sr->channel, msg.p};
    shared_cmd(sr, NULL, NULL, 3, pub);
    sbuf_free(&key);
    sbuf_free(&msg);
    log_info("redis: account %s was reset here; its rest is cleared for the pool", pa->a.name);
}

static void shared_redis_rest_changed(shared *sh, pool_account *pa)
{
    if (pa->rest_reset)
        shared_reset_tell((shared_redis *)sh, pa);
    else
        shared_rest_tell((shared_redis *)sh, pa);
}

/* Another instance's reset of the account named name: cleared here as a
 * reset of its own (the same generation or a newer one than this
 * instance's row; an older one is stale), and not told back. A reset
 * by a row's reset_gen is applied once per generation: an instance whose
 * copy of the row arrives later (one that was away) tells it again, and
 * that must not clear a rest learned since. */
static void shared_reset_heard(shared_redis *sr, const char *name, const json_value *body)
{
    pool_account *pa = shared_find(sr, name);
    int64_t gen = -1;
    if (!pa || !body || body->type != JSON_OBJECT || json_get_int64(body, "gen", 0, INT64_MAX, &gen) != 0 ||
        gen < pa->a.reset_gen || (json_get_bool(body, "row", 0) && gen <= pa->reset_heard))
        return;
    pool_account_reset(pa);
    pa->rest_reset = 0;
    if (gen > pa->reset_heard)
        pa->reset_heard = gen; /* its row, when it arrives, is not a second reset */
    pool_rest_mark_take(pa);
    pool_state_save(sr->base.gw->pool, pa);
    log_info("account %s: reset by another gateway (cooldown, ladder and breaker cleared)", name);
}

/* Another instance's rest of the account named name. */
static void shared_rest_heard(shared_redis *sr, const char *name, const json_value *rest)
{
    pool_account *pa = shared_find(sr, name);
    if (!pa)
        return;
    if (shared_rest_merge(pa, rest, gateway_now()) == 1) {
        pool_rest_mark_take(pa); /* heard, not to be told back */
        pool_state_save(sr->base.gw->pool, pa);
        log_debug("redis: account %s rests until %.0f (from another instance)", name, pa->st.cooldown_until);
    }
}

/* ---------- logins ---------- */

/* A login's text from Redis as this instance reads it: opened when sealed
 * (its place "login:NAME" as the additional data), as is when plaintext. */
static int shared_login_open(shared_redis *sr, const char *name, const char *p, size_t n, sbuf *out)
{
    char aad[300];
    snprintf(aad, sizeof aad, "login:%s", name);
    return shared_redis_open(&sr->base, aad, p, n, out);
}

/* A login text from Redis for the account named name: handed to oauth
 * (shared_on_login) when it is newer than what this instance holds. */
static void shared_login_heard(shared_redis *sr, const char *name, const char *text, size_t len)
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

static void shared_login_fetch(shared_redis *sr, const char *name)
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

static void shared_login_tell(shared_redis *sr, const char *name, const account *a)
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

static shared_call *shared_redis_lease_take(shared *sh, const char *job, const char *id, long ttl_ms,
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

static void shared_redis_lease_release(shared *sh, const char *job, const char *id)
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
static void shared_redis_usage_told(shared *sh, const pool_account *pa)
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

static shared_call *shared_redis_refresh_begin(shared *sh, const pool_account *pa, shared_refresh_fn fn, void *ud)
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

static void shared_redis_refresh_end(shared *sh, const char *account_name, const account *fresh)
{
    shared_redis *sr = (shared_redis *)sh;
    if (fresh)
        shared_login_tell(sr, account_name, fresh); /* before the release: the others hear it first */
    shared_refresh_lease_release(sr, account_name);
}

static void shared_redis_call_cancel(shared *sh, shared_call *c)
{
    shared_redis *sr = (shared_redis *)sh;
    if (c->is_lease) { /* waiting for the link or its answer: freed then */
        c->lease_fn = NULL;
        return;
    }
    if (c->rot) { /* a pick waiting for its position: the position, when it comes, is reserved */
        shared_rotation_cancel(c->rot);
        free(c);
        return;
    }
    if (c->ask || c->slot || c->chain) { /* in flight: freed when its answer is in */
        shared_deadline_cancel(&c->dl);
        return;
    }
    for (shared_call **pp = &sr->pending; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            free(c);
            return;
        }
    c->fn = NULL; /* in flight: freed when its answers are in */
}

/* The pending refreshes: sent once the link is up, or let go after the grace. */
static void shared_pending_flush(shared_redis *sr, int give_up)
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

static long shared_slot_ttl_s(const shared_redis *sr) { return sr->base.gw->cfg.redis_slot_ttl_s; }
static void shared_slots_renew(shared_redis *sr);
static void shared_resync_begin(shared_redis *sr);
static void shared_on_down(void *ud);

#define SHARED_LOSS_CHECK_TICKS 4 /* a second: one EXISTS a second per instance */

typedef struct shared_loss_check {
    shared_redis *sr;
    unsigned long gen;
} shared_loss_check;

static void shared_on_layout_exists(void *ud, redisReply *r)
{
    shared_loss_check *c = ud;
    shared_redis *sr = c->sr;
    int current = c->gen == sr->scan_gen;
    free(c);
    if (sr->closing || !current)
        return;
    sr->loss_asking = 0;
    if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL))
        return;
    if (r->type == REDIS_REPLY_STRING && !sr->layout_seen) {
        snprintf(sr->gen, sizeof sr->gen, "%.*s", (int)r->len, r->str);
        log_debug("redis: the pool's generation %s seen; its loss is watched from now on", sr->gen);
        sr->layout_seen = 1;
        return;
    }
    if (r->type == REDIS_REPLY_STRING && strlen(sr->gen) == r->len && memcmp(sr->gen, r->str, r->len) == 0)
        return; /* the same pool */
    if (!sr->layout_seen) /* not written yet since the link came up */
        return;
    log_warn("redis: the pool's keys are gone while the link stayed up (FLUSHALL, eviction, or a replica promoted "
             "empty): resynchronising as on a reconnect");
    metrics_redis_resync(1);
    shared_on_down(sr);
    shared_resync_begin(sr);
}

/* The pool's layout key still there? (the loss check above) */
static void shared_loss_check_send(shared_redis *sr)
{
    if (sr->loss_asking || sr->scanning || !redis_link_is_up(sr->link))
        return;
    shared_loss_check *c = malloc(sizeof *c);
    if (!c)
        return;
    *c = (shared_loss_check){sr, sr->scan_gen};
    char key[96];
    snprintf(key, sizeof key, "%sgen", sr->prefix);
    const char *argv[] = {"GET", key};
    if (shared_cmd(sr, shared_on_layout_exists, c, 2, argv) != 0) {
        free(c);
        return;
    }
    sr->loss_asking = 1;
}

static void shared_on_tick(evutil_socket_t fd, short what, void *arg)
{
    shared_redis *sr = arg;
    if (sr->pending)
        shared_pending_flush(sr, 0);
    if (sr->slots)
        shared_slots_renew(sr);
    if (++sr->ticks % SHARED_LOSS_CHECK_TICKS == 0 || !sr->layout_seen) /* each tick until first seen */
        shared_loss_check_send(sr);
}

/* ---------- who holds what: owners and sessions ---------- */

/* "sy:{POOL}:kind:key" into buf (n bytes): 0, or -1 when it does not fit. */
static int shared_key_buf(const shared_redis *sr, const char *kind, const char *key, char *buf, size_t n)
{
    int w = snprintf(buf, n, "%s%s:%s", sr->prefix, kind, key);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

/* A record of this instance's: written with its TTL, no answer awaited.
 * Not published: a record is asked for only where it is missed, so the
 * other instances do not keep every record of the pool. */
static void shared_record_tell(shared_redis *sr, const char *kind, const char *key, int64_t account_id,
                               const char *ttl_s)
{
    const pool_account *pa = pool_find(sr->base.gw->pool, account_id);
    char k[SHARED_ASK_KEY + 96];
    if (!redis_link_is_up(sr->link) || !pa || !pa->a.name || shared_key_buf(sr, kind, key, k, sizeof k) != 0)
        return;
    const char *set[] = {"SET", k, pa->a.name, "EX", ttl_s};
    shared_cmd(sr, NULL, NULL, 5, set);
}

static void shared_redis_owner_told(shared *sh, const char *key, int64_t account_id)
{
    shared_record_tell((shared_redis *)sh, "owner", key, account_id, SHARED_OWNER_TTL_S);
}

/* A session is written (for the instances that miss it) and published
 * (for those that know it: a move is a local hit there, which would keep
 * the older account until the entry idles out). */
static void shared_redis_session_told(shared *sh, const char *session, int64_t account_id)
{
    shared_redis *sr = (shared_redis *)sh;
    char ttl[32];
    long idle = sh->gw->cfg.affinity_idle_s;
    snprintf(ttl, sizeof ttl, "%ld", idle > 0 ? idle : 1);
    shared_record_tell(sr, "sess", session, account_id, ttl);
    const pool_account *pa = pool_find(sh->gw->pool, account_id);
    if (!redis_link_is_up(sr->link) || !pa || !pa->a.name || strlen(session) >= SHARED_ASK_KEY)
        return;
    sbuf name = SBUF_INIT, msg = SBUF_INIT;
    sbuf_json_str(&name, pa->a.name, strlen(pa->a.name));
    shared_message_write(&msg, "sess", sr->id, session, name.p);
    const char *pub[] = {"PUBLISH", sr->channel, msg.p};
    shared_cmd(sr, NULL, NULL, 3, pub);
    sbuf_free(&name);
    sbuf_free(&msg);
}

/* Another instance told a session's account: followed here when this
 * instance knows the session (one it does not know is asked for when a
 * turn of it comes: the table keeps only what this instance served). */
static void shared_session_heard(shared_redis *sr, const char *session, const json_value *body)
{
    gateway *gw = sr->base.gw;
    double now = gateway_now();
    if (!gw->affinity || !body || body->type != JSON_STRING || strlen(session) >= SHARED_ASK_KEY)
        return;
    int64_t had = affinity_get(gw->affinity, session, now);
    const pool_account *pa = had ? shared_find(sr, body->str) : NULL;
    if (pa && pa->a.id != had) {
        affinity_put(gw->affinity, session, pa->a.id, now);
        log_debug("redis: session %s follows another instance to account %s", session, pa->a.name);
    }
}

static void shared_on_ask_deadline(void *arg)
{
    shared_call *c = arg;
    log_debug("redis: no answer to a request's ask in time: it goes on with what it knows");
    c->done(c->ud);
}

/* MGET's answer: each record found goes into the local copy (even after
 * the deadline: the next request finds it there). */
static void shared_on_ask(void *ud, redisReply *r)
{
    shared_call *c = ud;
    shared_redis *sr = c->sr;
    if (sr->closing) { /* shutting down: nobody goes on */
        shared_deadline_cancel(&c->dl);
    } else if (r && r->type == REDIS_REPLY_ARRAY) {
        gateway *gw = sr->base.gw;
        double now = gateway_now();
        for (size_t i = 0; i < r->elements && i < c->ask->n; i++) {
            const redisReply *v = r->element[i];
            char name[256];
            if (v->type != REDIS_REPLY_STRING || !v->len || v->len >= sizeof name || memchr(v->str, 0, v->len))
                continue;
            memcpy(name, v->str, v->len);
            name[v->len] = '\0';
            const pool_account *pa = shared_find(sr, name); /* an account this instance does not have: unknown */
            if (!pa)
                continue;
            const char *key = c->ask->key[i];
            if (c->ask->kind[i] == SHARED_ASK_OWNER)
                pool_owner_learn(gw->pool, key, pa->a.id);
            else if (gw->affinity && !affinity_get(gw->affinity, key, now)) /* not if this instance served it since */
                affinity_put(gw->affinity, key, pa->a.id, now);
        }
    }
    if (shared_deadline_answer(&c->dl)) /* the caller goes on (once), unless the deadline came first */
        c->done(c->ud);
    free(c->ask);
    free(c);
}

static shared_call *shared_redis_ask(shared *sh, shared_ask_build_fn build, shared_ask_done_fn done, void *ud)
{
    shared_redis *sr = (shared_redis *)sh;
    if (!redis_link_is_up(sr->link)) /* out of reach: the local copy is all there is */
        return NULL;
    shared_ask *q = malloc(sizeof *q);
    shared_call *c = q ? calloc(1, sizeof *c) : NULL;
    if (!c) {
        free(q);
        return NULL;
    }
    q->n = 0;
    build(ud, q);
    const char *argv[SHARED_ASK_MAX + 1];
    size_t lens[SHARED_ASK_MAX + 1];
    char keys[SHARED_ASK_MAX][SHARED_ASK_KEY + 96];
    argv[0] = "MGET";
    lens[0] = 4;
    size_t n = 0;
    for (size_t i = 0; i < q->n; i++) {
        if (shared_key_buf(sr, q->kind[i] == SHARED_ASK_OWNER ? "owner" : "sess", q->key[i], keys[n], sizeof keys[n]))
            continue;
        if (n != i) { /* keep the records in the order asked */
            q->kind[n] = q->kind[i];
            memcpy(q->key[n], q->key[i], sizeof q->key[n]);
        }
        argv[n + 1] = keys[n];
        lens[n + 1] = strlen(keys[n]);
        n++;
    }
    q->n = n;
    c->sr = sr;
    c->ask = q;
    c->done = done;
    c->ud = ud;
    if (!n || redis_link_command(sr->link, shared_on_ask, c, (int)n + 1, argv, lens) != 0) {
        free(q);
        free(c);
        return NULL;
    }
    shared_deadline_arm(&c->dl, sh->gw->base, sh->gw->cfg.redis_wait_ms, METRICS_REDIS_WAIT_ASK, shared_on_ask_deadline,
                        c);
    return c;
}

/* ---------- slots of max_concurrency ---------- */

static void shared_slot_unlink(shared_redis *sr, shared_slot *sl)
{
    for (shared_slot **pp = &sr->slots; *pp; pp = &(*pp)->next)
        if (*pp == sl) {
            *pp = sl->next;
            break;
        }
    free(sl);
}

static void shared_slot_release(shared_redis *sr, shared_slot *sl)
{
    const char *zrem[] = {"ZREM", sl->key, sl->member};
    if (redis_link_is_up(sr->link))
        shared_cmd(sr, NULL, NULL, 3, zrem);
}

static void shared_on_slot_deadline(void *arg)
{
    shared_call *c = arg;
    log_debug("redis: no answer to a slot in time: the local count decides");
    c->slot_fn(c->ud, 1, SHARED_SLOT_LATE);
}

static int shared_slot_send(shared_redis *sr, shared_call *c);

static void shared_on_slot(void *ud, redisReply *r)
{
    shared_call *c = ud;
    shared_redis *sr = c->sr;
    shared_slot *sl = c->slot;
    if (!sl->sent_text && !sr->closing && redis_script_missing(&sr->slot_take, sr->link, r)) {
        /* Redis lost its script cache (a restart, SCRIPT FLUSH, a failover): the text once more,
         * which caches it again for the next EVALSHA */
        log_debug("redis: the slot script is not in Redis's cache; sent again with its text");
        sl->sent_text = 1;
        if (shared_slot_send(sr, c) == 0)
            return;
    }
    int granted = 1, held = SHARED_SLOT_FAILED; /* no answer (the link went down): the local count decides */
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_INTEGER &&
        r->element[1]->type == REDIS_REPLY_INTEGER) {
        granted = r->element[0]->integer == 1;
        held = (int)(r->element[1]->integer > 1000000 ? 1000000 : r->element[1]->integer);
        sl->granted = granted;
    }
    if (sr->closing)
        shared_deadline_cancel(&c->dl);
    if (shared_deadline_answer(&c->dl)) /* a give from within (a refusal) only marks it: handled below */
        c->slot_fn(c->ud, granted, held);
    sl->answered = 1;
    if (sl->given) { /* the attempt ended first (or the call was cancelled) */
        if (sl->granted && !sr->closing)
            shared_slot_release(sr, sl);
        shared_slot_unlink(sr, sl);
    }
    free(c);
}

/* ---------- the balanced rotation ---------- */

static void shared_on_cursor(void *ud, int64_t pos)
{
    shared_call *c = ud;
    shared_cursor_fn fn = c->cursor_fn;
    void *fud = c->ud;
    int closing = c->sr->closing;
    free(c); /* the wait frees itself */
    if (fn && !closing)
        fn(fud, pos);
}

static shared_call *shared_redis_cursor_take(shared *sh, const char *key, const char *model, int64_t *pos,
                                             shared_cursor_fn fn, void *ud)
{
    shared_redis *sr = (shared_redis *)sh;
    shared_call *c = fn ? calloc(1, sizeof *c) : NULL;
    if (c) {
        c->sr = sr;
        c->cursor_fn = fn;
        c->ud = ud;
    }
    shared_rotation_wait *w =
        shared_rotation_take(sr->rot, key, model, pos, c ? shared_on_cursor : NULL, c, (int)sh->gw->cfg.redis_wait_ms);
    if (!w) {
        free(c);
        return NULL;
    }
    c->rot = w;
    return c;
}

static shared_call *shared_redis_slot_take(shared *sh, const pool_account *pa, uint64_t *slot, shared_slot_fn fn,
                                           void *ud)
{
    shared_redis *sr = (shared_redis *)sh;
    if (!redis_link_is_up(sr->link) || !pa->a.name || pa->a.max_concurrency <= 0)
        return NULL; /* the local count decides */
    shared_slot *sl = calloc(1, sizeof *sl);
    shared_call *c = sl ? calloc(1, sizeof *c) : NULL;
    if (!c || shared_key_buf(sr, "inflight", pa->a.name, sl->key, sizeof sl->key) != 0) {
        free(sl);
        free(c);
        return NULL;
    }
    sl->seq = ++sr->slot_seq;
    snprintf(sl->member, sizeof sl->member, "%s:%llu", sr->id, (unsigned long long)sl->seq);
    snprintf(sl->limit, sizeof sl->limit, "%d", pa->a.max_concurrency);
    c->sr = sr;
    c->slot = sl;
    c->slot_fn = fn;
    c->ud = ud;
    if (shared_slot_send(sr, c) != 0) {
        free(sl);
        free(c);
        return NULL;
    }
    sl->next = sr->slots;
    sr->slots = sl;
    *slot = sl->seq;
    shared_deadline_arm(&c->dl, sh->gw->base, sh->gw->cfg.redis_wait_ms, METRICS_REDIS_WAIT_SLOT,
                        shared_on_slot_deadline, c);
    return c;
}

/* The take: EVALSHA, or (after NOSCRIPT) its text. */
static int shared_slot_send(shared_redis *sr, shared_call *c)
{
    shared_slot *sl = c->slot;
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%ld", shared_slot_ttl_s(sr) * 1000);
    const char *keys[] = {sl->key}, *args[] = {sl->member, sl->limit, ttl};
    return redis_script_eval(&sr->slot_take, sr->link, sl->sent_text, shared_on_slot, c, 1, keys, 3, args);
}

/* At every connect: the slot scripts into Redis's cache (a restarted Redis has none). */
static void shared_scripts_load(shared_redis *sr)
{
    redis_script_load(&sr->slot_take, sr->link);
    redis_script_load(&sr->slot_renew, sr->link);
}

/* A renewal's answer: after NOSCRIPT the script is loaded again (the slot
 * lives 30 s, renewed every 10: the next renewal makes it). */
static void shared_on_renewed(void *ud, redisReply *r)
{
    shared_redis *sr = ud;
    if (!sr->closing)
        redis_script_missing(&sr->slot_renew, sr->link, r);
}

static void shared_redis_slot_give(shared *sh, uint64_t seq)
{
    shared_redis *sr = (shared_redis *)sh;
    for (shared_slot *sl = sr->slots; sl; sl = sl->next)
        if (sl->seq == seq) {
            sl->given = 1;
            if (!sl->answered) /* its answer gives it back */
                return;
            if (sl->granted)
                shared_slot_release(sr, sl);
            shared_slot_unlink(sr, sl);
            return;
        }
}

/* Renews the slots held, so a long stream keeps its slot and a dead
 * instance's expire. */
static void shared_slots_renew(shared_redis *sr)
{
    double now = shared_mono();
    if (now - sr->slots_renewed < (double)shared_slot_ttl_s(sr) / 3.0)
        return;
    sr->slots_renewed = now;
    if (!redis_link_is_up(sr->link))
        return;
    for (shared_slot *sl = sr->slots; sl; sl = sl->next)
        if (sl->answered && sl->granted && !sl->given) {
            char ttl[24];
            snprintf(ttl, sizeof ttl, "%ld", shared_slot_ttl_s(sr) * 1000);
            const char *keys[] = {sl->key}, *args[] = {sl->member, ttl};
            redis_script_eval(&sr->slot_renew, sr->link, 0, shared_on_renewed, sr, 1, keys, 2, args);
        }
}

/* ---------- stored conversations (shared_conv.h) ---------- */

static void shared_redis_turn_told(shared *sh, const conv_link *turn)
{
    shared_redis *sr = (shared_redis *)sh;
    const pool_account *pa = pool_find(sh->gw->pool, turn->account_id);
    store_conversation_limits l;
    store_conversation_limits_get(sh->gw->st, &l);
    shared_conv_cmd cmd;
    if (redis_link_is_up(sr->link) && pa && pa->a.name &&
        shared_conv_tell_cmd(&cmd, sr->prefix, turn, pa->a.name, &l) == 0)
        redis_link_command(sr->link, NULL, NULL, cmd.argc, cmd.argv, cmd.lens);
}

static void shared_redis_turn_forgot(shared *sh, const char *response_id)
{
    shared_redis *sr = (shared_redis *)sh;
    shared_conv_cmd cmd;
    if (redis_link_is_up(sr->link) && shared_conv_forget_cmd(&cmd, sr->prefix, response_id) == 0)
        redis_link_command(sr->link, NULL, NULL, cmd.argc, cmd.argv, cmd.lens);
}

static int64_t shared_conv_account(void *ud, const char *name)
{
    const pool_account *pa = shared_find(ud, name);
    return pa ? pa->a.id : 0;
}

static void shared_on_chain_deadline(void *arg)
{
    shared_call *c = arg;
    char err[96];
    snprintf(err, sizeof err, "the other gateways' record did not answer within %d ms", SHARED_CHAIN_MS);
    c->chain_fn(c->ud, NULL, 0, "", err);
}

static void shared_on_chain(void *ud, redisReply *r)
{
    shared_call *c = ud;
    shared_redis *sr = c->sr;
    if (sr->closing)
        shared_deadline_cancel(&c->dl);
    if (shared_deadline_answer(&c->dl)) { /* the caller goes on (once), unless the deadline came first */
        conv_link *v = NULL;
        size_t n = 0;
        char missing[SHARED_CONV_ID], err[256];
        if (!r)
            snprintf(err, sizeof err, "the link to the other gateways went down before they answered");
        else if (r->type == REDIS_REPLY_ERROR)
            snprintf(err, sizeof err, "the pool's record refused the read: %.120s", r->str ? r->str : "");
        if (r && r->type != REDIS_REPLY_ERROR)
            shared_conv_chain_read(r, c->chain_id, c->chain_depth, c->chain_bytes, shared_conv_account, sr, &v, &n,
                                   missing, err, sizeof err);
        c->chain_fn(c->ud, v, n, v ? missing : "", v ? NULL : err);
        shared_conv_chain_free(v, n);
    }
    free(c);
}

static shared_call *shared_redis_chain_get(shared *sh, const char *response_id, size_t max_depth, size_t max_bytes,
                                           shared_chain_fn fn, void *ud)
{
    shared_redis *sr = (shared_redis *)sh;
    shared_conv_cmd cmd;
    if (!redis_link_is_up(sr->link) || shared_conv_chain_cmd(&cmd, sr->prefix, response_id, max_depth, max_bytes))
        return NULL; /* out of reach: the local record is all there is */
    shared_call *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->sr = sr;
    c->chain = 1;
    c->chain_fn = fn;
    c->ud = ud;
    c->chain_depth = max_depth;
    c->chain_bytes = max_bytes;
    snprintf(c->chain_id, sizeof c->chain_id, "%s", response_id);
    if (redis_link_command(sr->link, shared_on_chain, c, cmd.argc, cmd.argv, cmd.lens) != 0) {
        free(c);
        return NULL;
    }
    shared_deadline_arm(&c->dl, sh->gw->base, SHARED_CHAIN_MS, METRICS_REDIS_WAIT_CHAIN, shared_on_chain_deadline, c);
    return c;
}

/* ---------- resync ---------- */

static void shared_seen_clear(shared_redis *sr)
{
    for (size_t i = 0; i < sr->nseen; i++)
        free(sr->seen[i].name);
    sr->nseen = 0;
}

static void shared_seen_add(shared_redis *sr, const char *name, int64_t last)
{
    if (sr->nseen == sr->capseen) {
        size_t cap = sr->capseen ? sr->capseen * 2 : 64;
        shared_seen *n = realloc(sr->seen, cap * sizeof *n);
        if (!n)
            return;
        sr->seen = n;
        sr->capseen = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        return;
    sr->seen[sr->nseen].name = copy;
    sr->seen[sr->nseen++].last_refresh_at = last;
}

/* The scan is over: tell the others what this instance knows better. */
static void shared_resync_done(shared_redis *sr)
{
    double now = gateway_now();
    pool *p = sr->base.gw->pool;
    size_t rests = 0, logins = 0;
    for (size_t i = 0; i < pool_count(p); i++) {
        pool_account *pa = pool_at(p, i);
        pool_rest_mark_take(pa);
        if (shared_rest_ttl_ms(pa, now) > 3600000) { /* resting now: say so again */
            shared_rest_tell(sr, pa);
            rests++;
        }
        if (!pa->a.refresh_token || !pa->a.name)
            continue;
        const shared_seen *s = NULL;
        for (size_t k = 0; k < sr->nseen && !s; k++)
            if (strcmp(sr->seen[k].name, pa->a.name) == 0)
                s = &sr->seen[k];
        if (!s || pa->a.last_refresh_at > s->last_refresh_at) {
            shared_login_tell(sr, pa->a.name, &pa->a);
            logins++;
        }
    }
    shared_seen_clear(sr);
    sr->scanning = 0;
    log_info("redis: resynchronised (told %zu resting accounts, %zu logins)", rests, logins);
}

typedef struct shared_scan_step {
    shared_redis *sr;
    unsigned long gen;
    char cursor[32];
    char **keys;
    size_t nkeys;
} shared_scan_step;

static void shared_scan_next(shared_redis *sr, unsigned long gen, const char *cursor);

static void shared_scan_step_free(shared_scan_step *s)
{
    for (size_t i = 0; i < s->nkeys; i++)
        free(s->keys[i]);
    free(s->keys);
    free(s);
}

/* MGET's answer: each key's value, in the order asked. */
static void shared_on_mget(void *ud, redisReply *r)
{
    shared_scan_step *s = ud;
    shared_redis *sr = s->sr;
    if (!r || sr->closing || s->gen != sr->scan_gen) {
        shared_scan_step_free(s);
        return;
    }
    size_t plen = strlen(sr->prefix);
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements && i < s->nkeys; i++) {
        const redisReply *v = r->element[i];
        const char *key = s->keys[i] + plen;
        if (v->type != REDIS_REPLY_STRING)
            continue;
        if (strncmp(key, "rest:", 5) == 0) {
            json_value *doc = json_parse(v->str, v->len, NULL, 0);
            shared_rest_heard(sr, key + 5, doc);
            json_free(doc);
        } else if (strncmp(key, "login:", 6) == 0) {
            sbuf plain = SBUF_INIT;
            int64_t last = INT64_MAX; /* a login this instance cannot open: never told over */
            if (shared_login_open(sr, key + 6, v->str, v->len, &plain) == 0) {
                json_value *doc = json_parse(plain.p, plain.len, NULL, 0);
                last = 0;
                if (doc)
                    json_get_int64(doc, "last_refresh_at", 0, INT64_C(1) << 40, &last);
                json_free(doc);
            }
            sbuf_secret_wipe(&plain);
            shared_seen_add(sr, key + 6, last);
            shared_login_heard(sr, key + 6, v->str, v->len);
        }
    }
    char cursor[32];
    snprintf(cursor, sizeof cursor, "%s", s->cursor);
    unsigned long gen = s->gen;
    shared_scan_step_free(s);
    if (strcmp(cursor, "0") == 0)
        shared_resync_done(sr);
    else
        shared_scan_next(sr, gen, cursor);
}

static void shared_on_scan(void *ud, redisReply *r)
{
    shared_scan_step *s = ud;
    shared_redis *sr = s->sr;
    if (!r || sr->closing || s->gen != sr->scan_gen || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
        if (r && !sr->closing && s->gen == sr->scan_gen)
            log_warn("redis: the resync's SCAN got an answer it cannot read; it is tried again at the next connect");
        shared_scan_step_free(s);
        return;
    }
    snprintf(s->cursor, sizeof s->cursor, "%.*s", (int)r->element[0]->len, r->element[0]->str);
    const redisReply *keys = r->element[1];
    size_t plen = strlen(sr->prefix);
    s->keys = calloc(keys->elements ? keys->elements : 1, sizeof *s->keys);
    for (size_t i = 0; s->keys && i < keys->elements; i++) {
        const redisReply *k = keys->element[i];
        if (k->type != REDIS_REPLY_STRING || k->len <= plen || k->len > 600 || memchr(k->str, 0, k->len) ||
            (strncmp(k->str + plen, "rest:", 5) != 0 && strncmp(k->str + plen, "login:", 6) != 0))
            continue;
        s->keys[s->nkeys] = malloc(k->len + 1);
        if (!s->keys[s->nkeys])
            break;
        memcpy(s->keys[s->nkeys], k->str, k->len);
        s->keys[s->nkeys++][k->len] = '\0';
    }
    if (!s->nkeys) {
        char cursor[32];
        snprintf(cursor, sizeof cursor, "%s", s->cursor);
        unsigned long gen = s->gen;
        shared_scan_step_free(s);
        if (strcmp(cursor, "0") == 0)
            shared_resync_done(sr);
        else
            shared_scan_next(sr, gen, cursor);
        return;
    }
    const char **argv = malloc((s->nkeys + 1) * sizeof *argv);
    size_t *lens = malloc((s->nkeys + 1) * sizeof *lens);
    int rc = -1;
    if (argv && lens) {
        argv[0] = "MGET";
        lens[0] = 4;
        for (size_t i = 0; i < s->nkeys; i++) {
            argv[i + 1] = s->keys[i];
            lens[i + 1] = strlen(s->keys[i]);
        }
        rc = redis_link_command(sr->link, shared_on_mget, s, (int)s->nkeys + 1, argv, lens);
    }
    free(argv);
    free(lens);
    if (rc != 0)
        shared_scan_step_free(s);
}

static void shared_scan_next(shared_redis *sr, unsigned long gen, const char *cursor)
{
    shared_scan_step *s = calloc(1, sizeof *s);
    if (!s)
        return;
    s->sr = sr;
    s->gen = gen;
    char match[80];
    snprintf(match, sizeof match, "%s*", sr->prefix);
    const char *scan[] = {"SCAN", cursor, "MATCH", match, "COUNT", SHARED_SCAN_COUNT};
    if (shared_cmd(sr, shared_on_scan, s, 6, scan) != 0)
        free(s);
}

/* ---------- the link's hooks ---------- */

static void shared_on_up(void *ud)
{
    metrics_redis_resync(0);
    shared_resync_begin(ud);
}

/* The link's turn: a resync of everything this instance and the pool hold
 * (scripts, rests, logins, and each extension's: config rows, limits, the
 * layout), at a (re)connect or when the pool's data was lost. */
static void shared_resync_begin(shared_redis *sr)
{
    sr->layout_seen = sr->loss_asking = 0;
    sr->gen[0] = '\0';
    char key[96], token[48];
    snprintf(key, sizeof key, "%sgen", sr->prefix);
    snprintf(token, sizeof token, "%s-%lu", sr->id, sr->scan_gen + 1);
    const char *setnx[] = {"SET", key, token, "NX"}; /* the first instance up names the pool's generation */
    shared_cmd(sr, NULL, NULL, 4, setnx);
    sr->scan_gen++;
    sr->scanning = 1;
    shared_scripts_load(sr);
    shared_seen_clear(sr);
    shared_scan_next(sr, sr->scan_gen, "0");
    if (sr->pending)
        shared_pending_flush(sr, 0);
    for (size_t i = 0; i < sr->next; i++)
        if (sr->ext[i].up)
            sr->ext[i].up(sr->ext[i].ud);
}

static void shared_on_down(void *ud)
{
    shared_redis *sr = ud;
    sr->layout_seen = sr->loss_asking = 0;
    sr->scan_gen++; /* a scan in flight is void */
    sr->scanning = 0;
}

static void shared_on_message(void *ud, const char *p, size_t n)
{
    shared_redis *sr = ud;
    shared_message m;
    if (shared_message_read(p, n, &m) != 0) {
        metrics_redis_dropped(METRICS_REDIS_DROP_UNREADABLE);
        log_debug("redis: a message on %s that is not one of ours: ignored", sr->channel);
        return;
    }
    if (strcmp(m.from, sr->id) != 0) {
        if (strcmp(m.type, "rest") == 0)
            shared_rest_heard(sr, m.name, m.body);
        else if (strcmp(m.type, "reset") == 0)
            shared_reset_heard(sr, m.name, m.body);
        else if (strcmp(m.type, "sess") == 0)
            shared_session_heard(sr, m.name, m.body);
        else if (strcmp(m.type, "login") == 0)
            shared_login_fetch(sr, m.name);
        else
            for (size_t i = 0; i < sr->next; i++)
                if (sr->ext[i].type && sr->ext[i].message && strcmp(m.type, sr->ext[i].type) == 0)
                    sr->ext[i].message(sr->ext[i].ud, m.name, m.body);
    }
    json_free(m.doc);
}

/* ---------- the rest of the ops ---------- */

static int shared_redis_degraded(const shared *sh, char *why, size_t n)
{
    const shared_redis *sr = (const shared_redis *)sh;
    if (redis_link_is_up(sr->link)) {
        /* up, but slower than a request waits for it: each wait runs out and
         * the local copy decides (N instances: up to N times a limit), which
         * /health must say (issue 33) */
        struct timeval w = shared_wait(sh);
        double rtt = redis_link_rtt(sr->link), wait_s = (double)w.tv_sec + (double)w.tv_usec / 1e6;
        if (rtt > wait_s) {
            snprintf(why, n,
                     "redis: round trip %.0f ms, over the %.0f ms a request waits for the pool "
                     "(SWITCHYARD_REDIS_WAIT_MS): rate limits, slots and rotation are decided by each instance alone",
                     rtt * 1000, wait_s * 1000);
            return 2;
        }
        if (n)
            why[0] = '\0';
        return 0;
    }
    time_t since = (time_t)redis_link_down_since(sr->link);
    struct tm tm;
    char at[32] = "?";
    if (gmtime_r(&since, &tm))
        strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(why, n, "redis: unreachable since %s (%s); serving on this instance's own state", at,
             redis_link_error(sr->link));
    return 1;
}

static void shared_redis_free(shared *sh)
{
    shared_redis *sr = (shared_redis *)sh;
    sr->closing = 1;
    while (sr->pending) { /* nobody waits for these any more */
        shared_call *c = sr->pending;
        sr->pending = c->next;
        free(c);
    }
    redis_link_free(sr->link); /* the answers still due come back NULL and free their calls */
    shared_rotation_free(sr->rot);
    if (sr->tick)
        event_free(sr->tick);
    shared_seen_clear(sr);
    free(sr->seen);
    while (sr->slots) { /* their keys expire in Redis by themselves */
        shared_slot *sl = sr->slots;
        sr->slots = sl->next;
        free(sl);
    }
    free(sr);
}

static const shared_ops shared_redis_ops = {
    "redis", shared_redis_refresh_begin, shared_redis_refresh_end, shared_redis_call_cancel,
    shared_redis_rest_changed, shared_redis_owner_told, shared_redis_session_told, shared_redis_ask,
    shared_redis_slot_take, shared_redis_slot_give, shared_redis_degraded, shared_redis_free,
    shared_redis_turn_told, shared_redis_turn_forgot, shared_redis_chain_get,
    shared_redis_lease_take, shared_redis_lease_release, shared_redis_usage_told,
    shared_redis_cursor_take,
};

shared *shared_redis_new(gateway *gw, const redis_url *u)
{
    shared_redis *sr = calloc(1, sizeof *sr);
    if (!sr)
        return NULL;
    sr->base.ops = &shared_redis_ops;
    sr->base.gw = gw;
    sr->started = shared_mono();
    redis_script_init(&sr->slot_take, SHARED_SLOT_TAKE_LUA);
    redis_script_init(&sr->slot_renew, SHARED_SLOT_RENEW_LUA);
    snprintf(sr->prefix, sizeof sr->prefix, "sy:{%s}:", u->pool);
    snprintf(sr->channel, sizeof sr->channel, "sy:{%s}:events:%d", u->pool, u->db);
    unsigned char rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) { /* no entropy: time and pid still differ per run */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
        memcpy(rnd, &x, sizeof x);
        memcpy(rnd + 8, &x, sizeof x);
    }
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(sr->id + 2 * i, 3, "%02x", rnd[i]);
    sr->tick = event_new(gw->base, -1, EV_PERSIST, shared_on_tick, sr);
    if (sr->tick) {
        struct timeval tv = {0, 250000};
        event_add(sr->tick, &tv);
    }
    redis_link_hooks h = {shared_on_up, shared_on_down, shared_on_message, sr};
    sr->link = redis_link_new(gw->base, u, sr->channel, &h);
    sr->rot = sr->link ? shared_rotation_new(gw->base, sr->link, sr->prefix) : NULL;
    if (!sr->rot) {
        redis_link_free(sr->link);
        if (sr->tick)
            event_free(sr->tick);
        free(sr);
        return NULL;
    }
    return &sr->base;
}

/* ---------- what shared_config.c shares over the same link ---------- */

int shared_redis_extend(shared *sh, const shared_redis_ext *x)
{
    if (!sh || sh->ops != &shared_redis_ops || !x)
        return -1;
    shared_redis *sr = (shared_redis *)sh;
    if (sr->next == SHARED_REDIS_EXT_MAX)
        return -1;
    sr->ext[sr->next++] = *x;
    return 0;
}

void shared_redis_unextend(shared *sh, void *ud)
{
    if (!sh || sh->ops != &shared_redis_ops)
        return;
    shared_redis *sr = (shared_redis *)sh;
    for (size_t i = 0; i < sr->next;)
        if (sr->ext[i].ud == ud)
            memmove(&sr->ext[i], &sr->ext[i + 1], (--sr->next - i) * sizeof *sr->ext);
        else
            i++;
}

redis_link *shared_redis_link(shared *sh) { return ((shared_redis *)sh)->link; }
const char *shared_redis_prefix(const shared *sh) { return ((const shared_redis *)sh)->prefix; }
const char *shared_redis_channel(const shared *sh) { return ((const shared_redis *)sh)->channel; }
const char *shared_redis_id(const shared *sh) { return ((const shared_redis *)sh)->id; }

/* ---------- sealing (SWITCHYARD_REDIS_KEY) ---------- */

void shared_redis_set_key(shared *sh, const unsigned char key[SEAL_KEY_LEN])
{
    shared_redis *sr = (shared_redis *)sh;
    memcpy(sr->key, key, SEAL_KEY_LEN);
    sr->has_key = 1;
}

int shared_redis_seal(shared *sh, const char *aad, const char *plain, size_t n, sbuf *out)
{
    shared_redis *sr = (shared_redis *)sh;
    if (!sr->has_key) {
        sbuf_append(out, plain, n);
        return 0;
    }
    return seal_seal(sr->key, aad, plain, n, out);
}

int shared_redis_open(shared *sh, const char *aad, const char *p, size_t n, sbuf *out)
{
    shared_redis *sr = (shared_redis *)sh;
    if (!seal_is_sealed(p, n)) { /* plaintext: an older instance's, or one without a key */
        sbuf_append(out, p, n);
        return 0;
    }
    int rc = sr->has_key ? seal_open(sr->key, aad, p, n, out) : -2;
    if (rc == 0)
        return 0;
    sr->seen_sealed = 1;
    if (!sr->has_key && !sr->said_nokey++)
        log_error("redis: the pool's logins and accounts are encrypted and this instance has no key "
                  "(SWITCHYARD_REDIS_KEY): it cannot use them, and serves on its own database's; set the "
                  "pool's key on every instance");
    else if (sr->has_key && !sr->said_badkey++)
        log_error("redis: %s in the pool does not open with this instance's SWITCHYARD_REDIS_KEY (another key, "
                  "a newer format, or changed in Redis): not used; every instance of a pool needs the same key",
                  aad);
    return -1;
}
