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
#include "shared/shared_redis_internal.h"
#include <sys/random.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void shared_resync_begin(shared_redis *sr);
static void shared_on_down(void *ud);

double shared_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

pool_account *shared_find(shared_redis *sr, const char *name)
{
    pool *p = sr->base.gw->pool;
    for (size_t i = 0; i < pool_count(p); i++) {
        pool_account *pa = pool_at(p, i);
        if (pa->a.name && strcmp(pa->a.name, name) == 0)
            return pa;
    }
    return NULL;
}

void shared_key(const shared_redis *sr, const char *kind, const char *name, sbuf *out)
{
    out->len = 0;
    sbuf_printf(out, "%s%s:%s", sr->prefix, kind, name);
}

/* A command of C strings; the answer ignored (fire and forget). */
int shared_cmd(shared_redis *sr, redis_reply_fn fn, void *ud, int argc, const char **argv)
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

/* ---------- calls cancelled, the pool's data lost, the tick ---------- */

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

/* "sy:{POOL}:kind:key" into buf (n bytes): 0, or -1 when it does not fit. */
int shared_key_buf(const shared_redis *sr, const char *kind, const char *key, char *buf, size_t n)
{
    int w = snprintf(buf, n, "%s%s:%s", sr->prefix, kind, key);
    return w < 0 || (size_t)w >= n ? -1 : 0;
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

/* The step is done: the next SCAN from its cursor, or the resync's end. */
static void shared_scan_step_next(shared_scan_step *s)
{
    shared_redis *sr = s->sr;
    char cursor[32];
    snprintf(cursor, sizeof cursor, "%s", s->cursor);
    unsigned long gen = s->gen;
    shared_scan_step_free(s);
    if (strcmp(cursor, "0") == 0)
        shared_resync_done(sr);
    else
        shared_scan_next(sr, gen, cursor);
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
    shared_scan_step_next(s);
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
        shared_scan_step_next(s);
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
            int closed = strcmp(sh->gw->cfg.shared_limits_fail, "closed") == 0;
            snprintf(why, n,
                     "redis: round trip %.0f ms, over the %.0f ms a request waits for the pool "
                     "(SWITCHYARD_REDIS_WAIT_MS): %s",
                     rtt * 1000, wait_s * 1000,
                     closed ? "requests under a rate or concurrency limit are refused (shared_limits_fail is closed); "
                              "rotation is decided by each instance alone"
                            : "rate limits, slots and rotation are decided by each instance alone");
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
