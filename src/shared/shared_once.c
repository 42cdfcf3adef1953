/* shared_once.c: jobs done once per pool over Redis (see shared_once.h):
 * the usage numbers one instance polled, taken by the others, and the
 * migration of the pool's key layout under a lease.
 *
 *   sy:{POOL}:usage:NAME           an account's last polled usage numbers (shared_state.h), EX 7 days
 *   sy:{POOL}:schema               the layout's version (an integer)
 *   sy:{POOL}:lease:migrate:schema who migrates it now: an instance id, PX 30 s
 *   channel                        {"t":"usage","from","name","body":USAGE} */
#include "shared/shared_once.h"
#include "shared/shared.h"
#include "shared/shared_redis.h"
#include "shared/shared_state.h"
#include "base/log.h"
#include "base/sbuf.h"
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SO_TICK_MS 1000
#define SO_MIGRATE_LEASE_MS 30000
#define SO_MGET_MAX 256 /* usage keys read per MGET at a (re)connect */
/* Sets the version only over an older one (or none): two instances that
 * both migrated can never write it backwards. {1} written, {0, current}. */
#define SO_SCHEMA_SET_LUA                                                         \
    "local cur = tonumber(redis.call('GET', KEYS[1]) or '0') or 0 "              \
    "if cur < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) return {1, cur} end " \
    "return {0, cur}"

typedef struct so_pending so_pending; /* a command awaiting its answer */

struct shared_once {
    gateway *gw;
    shared *sh;
    char schema_key[96];
    int schema_done;    /* the pool's layout is known to be ours (or newer) since the link came up */
    int schema_asking;  /* a GET, a lease or a migration in flight */
    int said_newer;
    shared_call *lease;
    struct event *tick;
    so_pending *pending;
};

struct so_pending {
    so_pending *next;
    shared_once *so; /* NULL once so is gone */
    char **names;    /* an MGET of usage keys: the accounts, in order */
    size_t n;
};

static so_pending *so_pending_new(shared_once *so)
{
    so_pending *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->so = so;
    p->next = so->pending;
    so->pending = p;
    return p;
}

static void so_pending_drop(so_pending *p)
{
    if (p->so)
        for (so_pending **pp = &p->so->pending; *pp; pp = &(*pp)->next)
            if (*pp == p) {
                *pp = p->next;
                break;
            }
    for (size_t i = 0; i < p->n; i++)
        free(p->names[i]);
    free(p->names);
    free(p);
}

static int so_cmd(shared_once *so, redis_reply_fn fn, void *ud, int argc, const char **argv)
{
    size_t lens[8];
    for (int i = 0; i < argc && i < 8; i++)
        lens[i] = strlen(argv[i]);
    return redis_link_command(shared_redis_link(so->sh), fn, ud, argc, argv, lens);
}

/* ---------- usage numbers ---------- */

static pool_account *so_find(shared_once *so, const char *name)
{
    pool *p = so->gw->pool;
    for (size_t i = 0; i < pool_count(p); i++) {
        pool_account *pa = pool_at(p, i);
        if (pa->a.name && strcmp(pa->a.name, name) == 0)
            return pa;
    }
    return NULL;
}

static void so_usage_heard(shared_once *so, const char *name, const json_value *body)
{
    pool_account *pa = so_find(so, name);
    if (!pa || pa->a.kind != ACCOUNT_CHATGPT)
        return;
    int rc = shared_usage_merge(&pa->st, body, gateway_now());
    if (rc == 1) {
        pool_state_save(so->gw->pool, pa);
        log_debug("redis: account %s: usage numbers from another gateway (primary %.0f%%, secondary %.0f%%)", name,
                  pa->st.primary_used_pct, pa->st.secondary_used_pct);
    } else if (rc < 0) {
        log_debug("redis: account %s: usage numbers from the pool that do not read; ignored", name);
    }
}

static void so_on_usage_all(void *ud, redisReply *r)
{
    so_pending *p = ud;
    shared_once *so = p->so;
    for (size_t i = 0; so && r && r->type == REDIS_REPLY_ARRAY && i < r->elements && i < p->n; i++) {
        const redisReply *v = r->element[i];
        if (v->type != REDIS_REPLY_STRING)
            continue;
        json_value *doc = json_parse(v->str, v->len, NULL, 0);
        so_usage_heard(so, p->names[i], doc);
        json_free(doc);
    }
    so_pending_drop(p);
}

/* At a (re)connect: the numbers polled by others meanwhile (or before this
 * instance started), one MGET per SO_MGET_MAX accounts. */
static void so_usage_fetch(shared_once *so)
{
    pool *pl = so->gw->pool;
    const char *prefix = shared_redis_prefix(so->sh);
    for (size_t i = 0; i < pool_count(pl);) {
        so_pending *p = so_pending_new(so);
        if (!p || !(p->names = calloc(SO_MGET_MAX, sizeof *p->names))) {
            if (p)
                so_pending_drop(p);
            return;
        }
        for (; i < pool_count(pl) && p->n < SO_MGET_MAX; i++) {
            const pool_account *pa = pool_at(pl, i);
            if (pa->a.kind == ACCOUNT_CHATGPT && pa->a.name && (p->names[p->n] = strdup(pa->a.name)))
                p->n++;
        }
        const char *argv[SO_MGET_MAX + 1];
        size_t lens[SO_MGET_MAX + 1];
        sbuf keys[SO_MGET_MAX];
        argv[0] = "MGET";
        lens[0] = 4;
        for (size_t k = 0; k < p->n; k++) {
            keys[k] = (sbuf)SBUF_INIT;
            sbuf_printf(&keys[k], "%susage:%s", prefix, p->names[k]);
            argv[k + 1] = keys[k].p;
            lens[k + 1] = keys[k].len;
        }
        int rc = p->n ? redis_link_command(shared_redis_link(so->sh), so_on_usage_all, p, (int)p->n + 1, argv, lens)
                      : -1;
        for (size_t k = 0; k < p->n; k++)
            sbuf_free(&keys[k]);
        if (rc != 0)
            so_pending_drop(p);
    }
}

/* ---------- the layout's version ---------- */

static void so_on_schema_set(void *ud, redisReply *r)
{
    so_pending *p = ud;
    shared_once *so = p->so;
    so_pending_drop(p);
    if (!so)
        return;
    so->schema_asking = 0;
    shared_lease_release(so->sh, "migrate", "schema");
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[1]->type != REDIS_REPLY_INTEGER) {
        if (r)
            log_warn("redis: the pool's layout version could not be set (%s); tried again",
                     r->type == REDIS_REPLY_ERROR ? r->str : "an answer it cannot read");
        return;
    }
    so->schema_done = 1;
    if (r->element[0]->integer == 1)
        log_info("redis: the pool's shared state migrated from layout %lld to %d", (long long)r->element[1]->integer,
                 SHARED_SCHEMA);
}

/* The steps from one layout to the next would run here, in order, each
 * its own commands; layout 1 is the first written down, so from none to
 * 1 there is nothing to rewrite: the version is recorded. */
static void so_migrate(shared_once *so, long long from)
{
    so_pending *p = so_pending_new(so);
    if (!p) {
        so->schema_asking = 0;
        return;
    }
    char to[16];
    snprintf(to, sizeof to, "%d", SHARED_SCHEMA);
    (void)from;
    const char *eval[] = {"EVAL", SO_SCHEMA_SET_LUA, "1", so->schema_key, to};
    if (so_cmd(so, so_on_schema_set, p, 5, eval) != 0) {
        so_pending_drop(p);
        so->schema_asking = 0;
        shared_lease_release(so->sh, "migrate", "schema");
    }
}

static void so_on_migrate_lease(void *ud, int granted)
{
    shared_once *so = ud;
    so->lease = NULL;
    if (!granted || !redis_link_is_up(shared_redis_link(so->sh))) {
        so->schema_asking = 0; /* another instance migrates: looked at again next tick */
        return;
    }
    so_migrate(so, 0);
}

static void so_on_schema(void *ud, redisReply *r)
{
    so_pending *p = ud;
    shared_once *so = p->so;
    so_pending_drop(p);
    if (!so)
        return;
    long long v = -1;
    if (r && r->type == REDIS_REPLY_NIL)
        v = 0;
    else if (r && r->type == REDIS_REPLY_STRING && r->len < 20) {
        char buf[24], *end;
        memcpy(buf, r->str, r->len);
        buf[r->len] = '\0';
        v = strtoll(buf, &end, 10);
        if (end == buf || *end || v < 0)
            v = -1;
    }
    if (v < 0) {
        so->schema_asking = 0;
        if (r)
            log_warn("redis: %s does not hold a layout version; left alone", so->schema_key);
        so->schema_done = r != NULL; /* a value of someone else's: not ours to overwrite */
        return;
    }
    if (v >= SHARED_SCHEMA) {
        so->schema_asking = 0;
        so->schema_done = 1;
        if (v > SHARED_SCHEMA && !so->said_newer++)
            log_warn("redis: the pool's shared state has layout %lld, newer than this build's %d: an instance of a "
                     "later version migrated it; upgrade this one (it goes on with the keys it knows)",
                     v, SHARED_SCHEMA);
        return;
    }
    /* older: one instance migrates, under the lease (asked once more under it: another may have just done it) */
    so->lease = shared_lease_take(so->sh, "migrate", "schema", SO_MIGRATE_LEASE_MS, so_on_migrate_lease, so);
}

static void so_schema_check(shared_once *so)
{
    if (so->schema_done || so->schema_asking)
        return;
    so_pending *p = so_pending_new(so);
    if (!p)
        return;
    const char *get[] = {"GET", so->schema_key};
    so->schema_asking = 1;
    if (so_cmd(so, so_on_schema, p, 2, get) != 0) {
        so_pending_drop(p);
        so->schema_asking = 0;
    }
}

/* ---------- the link's turns and the tick ---------- */

static void so_on_up(void *ud)
{
    shared_once *so = ud;
    so->schema_done = 0;
    so_schema_check(so);
    so_usage_fetch(so);
}

static void so_on_message(void *ud, const char *name, const json_value *body)
{
    so_usage_heard(ud, name, body);
}

static void so_on_tick(evutil_socket_t fd, short what, void *arg)
{
    shared_once *so = arg;
    (void)fd;
    (void)what;
    if (redis_link_is_up(shared_redis_link(so->sh)))
        so_schema_check(so);
}

shared_once *shared_once_new(gateway *gw)
{
    if (!gw->shared || strcmp(shared_kind(gw->shared), "redis") != 0)
        return NULL;
    shared_once *so = calloc(1, sizeof *so);
    if (!so)
        return NULL;
    so->gw = gw;
    so->sh = gw->shared;
    snprintf(so->schema_key, sizeof so->schema_key, "%sschema", shared_redis_prefix(so->sh));
    so->tick = event_new(gw->base, -1, EV_PERSIST, so_on_tick, so);
    shared_redis_ext x = {"usage", so_on_up, so_on_message, so};
    if (!so->tick || shared_redis_extend(so->sh, &x) != 0) {
        shared_once_free(so);
        return NULL;
    }
    struct timeval tv = {SO_TICK_MS / 1000, (SO_TICK_MS % 1000) * 1000};
    event_add(so->tick, &tv);
    return so;
}

void shared_once_free(shared_once *so)
{
    if (!so)
        return;
    shared_redis_unextend(so->sh, so);
    shared_call_cancel(so->sh, so->lease);
    for (so_pending *p = so->pending; p; p = p->next)
        p->so = NULL; /* their answers (NULL, as the link closes) free them */
    if (so->tick)
        event_free(so->tick);
    free(so);
}
