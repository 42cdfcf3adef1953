/* shared_config.c: accounts, platform keys and settings shared over Redis
 * (see shared_config.h; the key layout is docs/scale-out.md's "Keys and
 * channels").
 *
 *   sy:{POOL}:config      hash: field (account:NAME, key:HASH, setting:KEY)
 *                         -> {"v":N,"from":ID,"body":TEXT} or {"v":N,"from":ID,"gone":true}
 *   sy:{POOL}:config:seq  the versions' counter (INCR)
 *   channel               {"t":"config","from":ID,"name":FIELD}
 *
 * Three versions meet per field: the row in this database (its text), the
 * record (the version this database holds and the digest of the text it
 * had then) and the pool's (in the hash). The pool's newer than the
 * record: apply it. The row's digest not the record's: changed here, told
 * with the record's version as the base (the script refuses it when the
 * pool moved meanwhile: the pool's then wins, and the conflict is logged).
 * A field whose apply or record is still on its way to the database (a
 * writer ticket) waits for the next turn. */
#include "shared/shared_config.h"
#include "shared/shared_redis.h"
#include "shared/shared_state.h"
#include "store/store_shared.h"
#include "base/log.h"
#include "base/sbuf.h"
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SC_TICK_MS 200
/* KEYS: the hash, the counter; ARGV: field, base version, the value after
 * its version, the channel, the message. {N, value} written, {0, current}
 * refused (the pool holds a newer version than base). */
#define SC_PUBLISH_LUA                                                                   \
    "local cur = redis.call('HGET', KEYS[1], ARGV[1]) "                                  \
    "local curv = 0 "                                                                    \
    "if cur then "                                                                       \
    "  local ok, d = pcall(cjson.decode, cur) "                                          \
    "  if ok and type(d) == 'table' and type(d.v) == 'number' then curv = d.v end "      \
    "  if curv > tonumber(ARGV[2]) then return {0, cur} end "                            \
    "end "                                                                               \
    "local v = redis.call('INCR', KEYS[2]) "                                             \
    "local floor = math.max(curv, tonumber(ARGV[2])) + 1 "                               \
    "if v < floor then v = floor redis.call('SET', KEYS[2], v) end "                     \
    "local val = '{\"v\":' .. string.format('%d', v) .. ARGV[3] "                        \
    "redis.call('HSET', KEYS[1], ARGV[1], val) "                                         \
    "redis.call('PUBLISH', ARGV[4], ARGV[5]) "                                           \
    "return {v, val}"

/* What this database holds of a field (the shared_sync table, kept here). */
typedef struct sc_entry {
    char *field;
    int64_t version;
    char digest[65];
    uint64_t ticket;  /* its apply or record queued, not committed yet: 0 none */
    int inflight;     /* a publish of it awaits its answer */
} sc_entry;

/* A field as a reconcile sees it. */
typedef struct sc_item {
    const char *field;
    const char *local;  /* this database's text; NULL: no such row */
    int remote_known;   /* the pool's version was read (a resync) */
    int64_t remote_v;   /* 0: the pool has none */
    char *remote;       /* the pool's text (NULL: gone or none) */
    int skip;           /* the pool's is sealed with a key this instance lacks: left alone */
} sc_item;

typedef struct sc_pending sc_pending; /* a command awaiting its answer */

struct shared_config {
    gateway *gw;
    shared *sh;
    char hash_key[96], seq_key[112];
    sc_entry *e;
    size_t n, cap;
    int64_t seen_version; /* config_version at the last look at the rows */
    int synced;           /* a resync was done since the link came up */
    int fetch_due, fetching, dirty;
    struct event *tick;
    sc_pending *pending;
};

struct sc_pending {
    sc_pending *next;
    shared_config *sc; /* NULL once sc is gone */
    char *field;       /* a publish: its field and text (NULL: gone) */
    char *body;
};

/* ---------- the records ---------- */

static int sc_cmp_entry(const void *a, const void *b)
{
    return strcmp(((const sc_entry *)a)->field, ((const sc_entry *)b)->field);
}

static sc_entry *sc_find(shared_config *sc, const char *field)
{
    sc_entry key = {.field = (char *)field};
    return sc->n ? bsearch(&key, sc->e, sc->n, sizeof *sc->e, sc_cmp_entry) : NULL;
}

static sc_entry *sc_get(shared_config *sc, const char *field)
{
    sc_entry *e = sc_find(sc, field);
    if (e)
        return e;
    if (sc->n == sc->cap) {
        size_t cap = sc->cap ? sc->cap * 2 : 64;
        sc_entry *ne = realloc(sc->e, cap * sizeof *ne);
        if (!ne)
            return NULL;
        sc->e = ne;
        sc->cap = cap;
    }
    char *copy = strdup(field);
    if (!copy)
        return NULL;
    size_t i = 0;
    while (i < sc->n && strcmp(sc->e[i].field, field) < 0)
        i++;
    memmove(&sc->e[i + 1], &sc->e[i], (sc->n - i) * sizeof *sc->e);
    memset(&sc->e[i], 0, sizeof sc->e[i]);
    sc->e[i].field = copy;
    sc->n++;
    return &sc->e[i];
}

static void sc_on_record(void *ud, const char *field, int64_t version, const char *digest)
{
    shared_config *sc = ud;
    sc_entry *e = sc_get(sc, field);
    if (e) {
        e->version = version;
        snprintf(e->digest, sizeof e->digest, "%s", digest);
    }
}

/* The record of field is now (version, body's digest): applied (apply 1)
 * or only recorded, through the writer. */
static void sc_record(shared_config *sc, const char *field, int64_t version, const char *body, int apply)
{
    sc_entry *e = sc_get(sc, field);
    if (!e)
        return;
    e->version = version;
    store_shared_digest(body, e->digest);
    e->ticket = store_shared_put(sc->gw->st, field, version, body, apply);
    if (!e->ticket) {
        log_warn("redis: cannot queue the shared %s for the database; tried again at the next resync", field);
        e->version = 0; /* so the next resync takes it again */
        sc->fetch_due = 1;
    }
}

/* ---------- telling a change ---------- */

static sc_pending *sc_pending_new(shared_config *sc)
{
    sc_pending *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->sc = sc;
    p->next = sc->pending;
    sc->pending = p;
    return p;
}

static void sc_pending_drop(sc_pending *p)
{
    if (p->sc)
        for (sc_pending **pp = &p->sc->pending; *pp; pp = &(*pp)->next)
            if (*pp == p) {
                *pp = p->next;
                break;
            }
    sbuf_secret_free(p->body);
    free(p->field);
    free(p);
}

static void sc_decide(shared_config *sc, const sc_item *it);

/* A stored value {"v":N,...,"body":TEXT}, {...,"sealed":"sy1:..."} (the
 * text sealed with the pool's key, its field the additional data) or
 * {...,"gone":true}: its version and text (heap, NULL for gone). 0; -1
 * when it is not such a value; -2 when sealed and this instance cannot
 * open it (shared_redis_open said so). */
static int sc_value_read(shared_config *sc, const char *field, const char *p, size_t n, int64_t *v, char **body)
{
    *v = 0;
    *body = NULL;
    if (n > STORE_SHARED_BODY_MAX + 1024)
        return -1;
    json_value *doc = json_parse(p, n, NULL, 0);
    int rc = -1;
    size_t start, end;
    if (doc && doc->type == JSON_OBJECT && json_get_int64(doc, "v", 1, INT64_C(1) << 53, v) == 0) {
        const json_value *b = json_get(doc, "body");
        const json_value *sealed = json_get(doc, "sealed");
        if (b && b->type == JSON_OBJECT && json_member_span(p, n, "body", &start, &end) == 0 && end > start) {
            *body = strndup(p + start, end - start);
            rc = *body ? 0 : -1;
        } else if (sealed && sealed->type == JSON_STRING) {
            sbuf plain = SBUF_INIT;
            char aad[STORE_SHARED_FIELD_MAX + 16];
            snprintf(aad, sizeof aad, "config:%s", field);
            rc = shared_redis_open(sc->sh, aad, sealed->str, sealed->str_len, &plain) == 0 ? 0 : -2;
            if (rc == 0) { /* a sealed text is checked as a plain one would be: a JSON object */
                json_value *inner = json_parse(plain.p ? plain.p : "", plain.len, NULL, 0);
                rc = inner && inner->type == JSON_OBJECT && !memchr(plain.p, 0, plain.len) ? 0 : -1;
                json_free(inner);
                *body = rc == 0 ? strndup(plain.p, plain.len) : NULL;
                if (rc == 0 && !*body)
                    rc = -1;
            }
            sbuf_secret_wipe(&plain);
        } else if (json_get_bool(doc, "gone", 0)) {
            rc = 0;
        }
    }
    json_free(doc);
    return rc;
}

static void sc_on_published(void *ud, redisReply *r)
{
    sc_pending *p = ud;
    shared_config *sc = p->sc;
    if (!sc) {
        sc_pending_drop(p);
        return;
    }
    sc_entry *e = sc_find(sc, p->field);
    if (e)
        e->inflight = 0;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[1]->type != REDIS_REPLY_STRING) {
        if (r)
            log_warn("redis: the pool refused the shared %s (%s); told again at the next resync", p->field,
                     r->type == REDIS_REPLY_ERROR ? r->str : "an answer it cannot read");
        sc->fetch_due = 1;
        sc_pending_drop(p);
        return;
    }
    if (r->element[0]->integer > 0) { /* written: this is the version this database holds */
        sc_record(sc, p->field, r->element[0]->integer, p->body, 0);
        log_debug("redis: told the pool %s (version %lld)", p->field, (long long)r->element[0]->integer);
    } else { /* the pool moved since this instance last saw it: the pool's wins */
        sc_item it = {.field = p->field, .local = p->body, .remote_known = 1};
        if (sc_value_read(sc, p->field, r->element[1]->str, r->element[1]->len, &it.remote_v, &it.remote) == 0)
            sc_decide(sc, &it);
        sbuf_secret_free(it.remote);
    }
    sc_pending_drop(p);
}

static void sc_publish(shared_config *sc, sc_entry *e, const char *field, const char *body, int64_t base)
{
    const char *id = shared_redis_id(sc->sh);
    sc_pending *p = sc_pending_new(sc);
    if (!p)
        return;
    p->field = strdup(field);
    p->body = body ? strdup(body) : NULL;
    if (!p->field || (body && !p->body)) {
        sc_pending_drop(p);
        return;
    }
    sbuf val = SBUF_INIT, msg = SBUF_INIT;
    sbuf_puts(&val, ",\"from\":");
    sbuf_json_str(&val, id, strlen(id));
    sbuf sealed = SBUF_INIT;
    char aad[STORE_SHARED_FIELD_MAX + 16];
    snprintf(aad, sizeof aad, "config:%s", field);
    if (body && (shared_redis_seal(sc->sh, aad, body, strlen(body), &sealed) != 0)) {
        sbuf_free(&val);
        sc_pending_drop(p);
        return;
    }
    if (body && sealed.len && seal_is_sealed(sealed.p, sealed.len)) {
        sbuf_puts(&val, ",\"sealed\":");
        sbuf_json_str(&val, sealed.p, sealed.len);
        sbuf_puts(&val, "}");
    } else if (body) {
        sbuf_puts(&val, ",\"body\":");
        sbuf_puts(&val, body);
        sbuf_puts(&val, "}");
    } else {
        sbuf_puts(&val, ",\"gone\":true}");
    }
    shared_message_write(&msg, "config", id, field, NULL);
    char basev[32];
    snprintf(basev, sizeof basev, "%lld", (long long)base);
    const char *argv[] = {"EVAL", SC_PUBLISH_LUA, "2", sc->hash_key, sc->seq_key, field, basev,
                          val.p, shared_redis_channel(sc->sh), msg.p};
    size_t lens[10];
    for (int i = 0; i < 10; i++)
        lens[i] = strlen(argv[i]);
    if (redis_link_command(shared_redis_link(sc->sh), sc_on_published, p, 10, argv, lens) == 0) {
        if (!e)
            e = sc_get(sc, field); /* version 0, no digest: as unrecorded */
        if (e)
            e->inflight = 1;
    } else {
        sc_pending_drop(p);
        sc->dirty = 1;
    }
    sbuf_secret_wipe(&val);
    sbuf_secret_wipe(&sealed);
    sbuf_free(&msg);
}

/* ---------- deciding, field by field ---------- */

static void sc_decide(shared_config *sc, const sc_item *it)
{
    sc_entry *e = sc_find(sc, it->field);
    if (e && (e->ticket || e->inflight)) { /* on its way: look again next turn */
        if (it->remote_known)
            sc->fetch_due = 1;
        else
            sc->dirty = 1;
        return;
    }
    int64_t have_v = e ? e->version : 0;
    char local_digest[65];
    store_shared_digest(it->local, local_digest);
    int changed_here = e ? strcmp(local_digest, e->digest) != 0 : it->local != NULL;
    if (it->remote_known && it->remote_v > have_v) { /* the pool's is newer */
        char err[256] = "";
        if (store_shared_check(sc->gw->st, it->field, it->remote, err, sizeof err) != 0) {
            log_warn("redis: the pool's %s (version %lld) is not applied: %s", it->field, (long long)it->remote_v,
                     err);
            return;
        }
        if (changed_here && e && e->version)
            log_warn("redis: %s was changed here and in the pool while apart; the pool's version is kept",
                     it->field);
        else if (changed_here)
            log_info("redis: %s as the pool has it replaces this database's own (never shared before)", it->field);
        int same = (it->remote && it->local && strcmp(it->remote, it->local) == 0) || (!it->remote && !it->local);
        sc_record(sc, it->field, it->remote_v, it->remote, !same);
        if (!same)
            log_info("redis: %s %s (from another gateway)", it->remote ? "applied" : "removed", it->field);
        return;
    }
    int stale_pool = it->remote_known && it->remote_v < have_v; /* a pool restarted empty, for one */
    if (changed_here || (stale_pool && (it->local || e)))
        sc_publish(sc, e, it->field, it->local, have_v);
}

/* ---------- reconciling ---------- */

typedef struct sc_list {
    sc_item *it;
    size_t n, cap;
    char **owned; /* the local texts and fields */
    size_t nowned, capowned;
} sc_list;

static char *sc_keep(sc_list *l, const char *s, size_t n)
{
    if (l->nowned == l->capowned) {
        size_t cap = l->capowned ? l->capowned * 2 : 64;
        char **no = realloc(l->owned, cap * sizeof *no);
        if (!no)
            return NULL;
        l->owned = no;
        l->capowned = cap;
    }
    char *c = strndup(s, n);
    if (c)
        l->owned[l->nowned++] = c;
    return c;
}

static sc_item *sc_add(sc_list *l)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        sc_item *ni = realloc(l->it, cap * sizeof *ni);
        if (!ni)
            return NULL;
        l->it = ni;
        l->cap = cap;
    }
    memset(&l->it[l->n], 0, sizeof l->it[l->n]);
    return &l->it[l->n++];
}

static void sc_list_free(sc_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        sbuf_secret_free(l->it[i].remote);
    for (size_t i = 0; i < l->nowned; i++)
        sbuf_secret_free(l->owned[i]);
    free(l->it);
    free(l->owned);
}

static int sc_cmp_item(const void *a, const void *b)
{
    return strcmp(((const sc_item *)a)->field, ((const sc_item *)b)->field);
}

static void sc_list_sort(sc_list *l)
{
    if (l->n > 1)
        qsort(l->it, l->n, sizeof *l->it, sc_cmp_item);
}

/* The item of field among l's first n (sorted) items, or NULL. */
static sc_item *sc_list_find(sc_list *l, size_t n, const char *field)
{
    sc_item key = {.field = field};
    return n ? bsearch(&key, l->it, n, sizeof *l->it, sc_cmp_item) : NULL;
}

/* A new item for field (copied), or NULL when out of memory. */
static sc_item *sc_list_add(sc_list *l, const char *field)
{
    char *copy = sc_keep(l, field, strlen(field));
    sc_item *it = copy ? sc_add(l) : NULL;
    if (it)
        it->field = copy;
    return it;
}

static void sc_on_row(void *ud, const char *field, const char *body)
{
    sc_list *l = ud;
    const char *local = sc_keep(l, body, strlen(body));
    sc_item *it = local ? sc_list_add(l, field) : NULL;
    if (it)
        it->local = local;
}

/* The pool's fields (an HGETALL's answer) into l: on the local item of
 * the same field, else a new one at the end. */
static void sc_list_remote(shared_config *sc, sc_list *l, const redisReply *remote)
{
    size_t nlocal = l->n;
    for (size_t i = 0; i + 1 < remote->elements; i += 2) {
        const redisReply *f = remote->element[i], *v = remote->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING || f->len > STORE_SHARED_FIELD_MAX ||
            memchr(f->str, 0, f->len))
            continue;
        char field[STORE_SHARED_FIELD_MAX + 1];
        memcpy(field, f->str, f->len);
        field[f->len] = '\0';
        if (!store_shared_field_ok(field))
            continue;
        int64_t ver;
        char *body;
        int rc = sc_value_read(sc, field, v->str, v->len, &ver, &body);
        sc_item *it = sc_list_find(l, nlocal, field);
        if (rc == -2) { /* sealed, and this instance has no key for it: neither taken nor told over */
            if (!it)
                it = sc_list_add(l, field);
            if (it)
                it->skip = 1;
            continue;
        }
        if (rc != 0) {
            log_warn("redis: the pool's %s is not a value this build reads; left alone", field);
            continue;
        }
        if (!it)
            it = sc_list_add(l, field);
        if (!it) {
            sbuf_secret_free(body);
            continue;
        }
        it->remote_v = ver;
        it->remote = body;
    }
}

/* Every field this database, its records and (remote non-NULL: an
 * HGETALL's answer) the pool know, decided in field order: accounts
 * before the keys that prefer them. */
static void sc_reconcile(shared_config *sc, const redisReply *remote)
{
    sc_list l = {0};
    if (store_shared_rows(sc->gw->st, sc_on_row, &l) != 0) {
        sc_list_free(&l);
        sc->dirty = 1;
        return;
    }
    sc_list_sort(&l); /* sqlite's order already; made sure */
    if (remote)
        sc_list_remote(sc, &l, remote);
    sc_list_sort(&l);
    size_t known = l.n;
    for (size_t i = 0; i < sc->n; i++) /* recorded, in neither: a row removed here (or one the pool lost) */
        if (!sc_list_find(&l, known, sc->e[i].field))
            sc_list_add(&l, sc->e[i].field);
    sc_list_sort(&l);
    for (size_t i = 0; i < l.n; i++) {
        l.it[i].remote_known = remote != NULL; /* a field the pool lacks: its version is 0 */
        if (!l.it[i].skip)
            sc_decide(sc, &l.it[i]);
    }
    sc_list_free(&l);
}

static void sc_on_all(void *ud, redisReply *r)
{
    sc_pending *p = ud;
    shared_config *sc = p->sc;
    sc_pending_drop(p);
    if (!sc)
        return;
    sc->fetching = 0;
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        if (r)
            log_warn("redis: cannot read the pool's accounts, keys and settings (%s); tried again",
                     r->type == REDIS_REPLY_ERROR ? r->str : "an answer it cannot read");
        sc->fetch_due = 1;
        return;
    }
    sc->seen_version = store_config_version(sc->gw->st);
    sc_reconcile(sc, r);
    if (!sc->synced)
        log_info("redis: accounts, keys and settings in step with the pool (%zu shared rows)", r->elements / 2);
    sc->synced = 1;
}

static void sc_fetch(shared_config *sc)
{
    sc_pending *p = sc_pending_new(sc);
    if (!p)
        return;
    const char *argv[] = {"HGETALL", sc->hash_key};
    size_t lens[] = {7, strlen(sc->hash_key)};
    if (redis_link_command(shared_redis_link(sc->sh), sc_on_all, p, 2, argv, lens) == 0) {
        sc->fetching = 1;
        sc->fetch_due = 0;
    } else {
        sc_pending_drop(p);
    }
}

/* ---------- the link's turns and the tick ---------- */

static void sc_on_up(void *ud)
{
    shared_config *sc = ud;
    sc->synced = 0;
    sc->fetch_due = 1;
}

static void sc_on_message(void *ud, const char *name, const json_value *body)
{
    shared_config *sc = ud;
    (void)name;
    (void)body;
    sc->fetch_due = 1; /* one read of the hash for any number of messages in a turn */
}

static void sc_on_tick(evutil_socket_t fd, short what, void *arg)
{
    shared_config *sc = arg;
    (void)fd;
    (void)what;
    if (!redis_link_is_up(shared_redis_link(sc->sh)))
        return;
    uint64_t done = store_writer_committed(sc->gw->st);
    for (size_t i = 0; i < sc->n; i++)
        if (sc->e[i].ticket && sc->e[i].ticket <= done)
            sc->e[i].ticket = 0;
    if (sc->fetching)
        return;
    if (sc->fetch_due || !sc->synced) {
        sc_fetch(sc);
        return;
    }
    int64_t v = store_config_version(sc->gw->st);
    if (v != sc->seen_version || sc->dirty) {
        sc->seen_version = v;
        sc->dirty = 0;
        sc_reconcile(sc, NULL);
    }
}

shared_config *shared_config_new(gateway *gw)
{
    if (!gw->shared || strcmp(shared_kind(gw->shared), "redis") != 0)
        return NULL;
    shared_config *sc = calloc(1, sizeof *sc);
    if (!sc)
        return NULL;
    sc->gw = gw;
    sc->sh = gw->shared;
    snprintf(sc->hash_key, sizeof sc->hash_key, "%sconfig", shared_redis_prefix(sc->sh));
    snprintf(sc->seq_key, sizeof sc->seq_key, "%sconfig:seq", shared_redis_prefix(sc->sh));
    if (store_shared_records(gw->st, sc_on_record, sc) != 0)
        log_warn("redis: cannot read which shared versions this database holds; the pool's are taken");
    sc->tick = event_new(gw->base, -1, EV_PERSIST, sc_on_tick, sc);
    shared_redis_ext x = {"config", sc_on_up, sc_on_message, sc};
    if (!sc->tick || shared_redis_extend(sc->sh, &x) != 0) {
        shared_config_free(sc);
        return NULL;
    }
    struct timeval tv = {0, SC_TICK_MS * 1000};
    event_add(sc->tick, &tv);
    return sc;
}

void shared_config_free(shared_config *sc)
{
    if (!sc)
        return;
    shared_redis_unextend(sc->sh, sc);
    for (sc_pending *p = sc->pending; p; p = p->next)
        p->sc = NULL; /* their answers (NULL, as the link closes) free them */
    if (sc->tick)
        event_free(sc->tick);
    for (size_t i = 0; i < sc->n; i++)
        free(sc->e[i].field);
    free(sc->e);
    free(sc);
}
