/* shared_records.c: what the request path asks the pool and waits for,
 * at most SWITCHYARD_REDIS_WAIT_MS (see shared_redis_internal.h): the
 * records of who holds what (a response's owner, a turn state's issuer, a
 * blob's minter, a session's account), a concurrency slot of an account
 * (a lease in a sorted set, taken by a script, renewed while held), the
 * balanced rotation's position, a stored conversation's turns. Each wait
 * is a shared_deadline: answered once, the local copy deciding past it. */
#include "shared/shared_redis_internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long shared_slot_ttl_s(const shared_redis *sr) { return sr->base.gw->cfg.redis_slot_ttl_s; }

/* ---------- who holds what: owners and sessions ---------- */

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

void shared_redis_owner_told(shared *sh, const char *key, int64_t account_id)
{
    shared_record_tell((shared_redis *)sh, "owner", key, account_id, SHARED_OWNER_TTL_S);
}

/* A session is written (for the instances that miss it) and published
 * (for those that know it: a move is a local hit there, which would keep
 * the older account until the entry idles out). */
void shared_redis_session_told(shared *sh, const char *session, int64_t account_id)
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
void shared_session_heard(shared_redis *sr, const char *session, const json_value *body)
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

shared_call *shared_redis_ask(shared *sh, shared_ask_build_fn build, shared_ask_done_fn done, void *ud)
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

/* ---------- the balanced rotation; slots taken, given back, renewed ---------- */

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

shared_call *shared_redis_cursor_take(shared *sh, const char *key, const char *model, int64_t *pos,
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

shared_call *shared_redis_slot_take(shared *sh, const pool_account *pa, uint64_t *slot, shared_slot_fn fn,
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
void shared_scripts_load(shared_redis *sr)
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

void shared_redis_slot_give(shared *sh, uint64_t seq)
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
void shared_slots_renew(shared_redis *sr)
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

void shared_redis_turn_told(shared *sh, const conv_link *turn)
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

void shared_redis_turn_forgot(shared *sh, const char *response_id)
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

shared_call *shared_redis_chain_get(shared *sh, const char *response_id, size_t max_depth, size_t max_bytes,
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
