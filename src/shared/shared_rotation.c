/* shared_rotation.c: the balanced rotation's positions, counted for the
 * pool over Redis (see shared_rotation.h).
 *
 *   sy:{POOL}:cursor:KEY:MODEL   the counter (INCR), EX a day, renewed every 1000 picks
 *
 * A bounded table (ROT_ENTRIES key + model pairs, the least recently used
 * giving way) holds each pair's reserved positions, oldest first. */
#include "obs/metrics.h"
#include "shared/shared_rotation.h"
#include "shared/shared_deadline.h"
#include "base/sbuf.h"
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROT_ENTRIES 128
#define ROT_RESERVE 4     /* positions kept ahead per pair: a burst on one gateway grows it to this */
#define ROT_NAME 192      /* KEY:MODEL; a longer model has no shared rotation (the local cursor decides) */
#define ROT_TTL_S "86400" /* a counter unused for a day goes (and starts again at 1: harmless) */
#define ROT_TTL_EVERY 1000

typedef struct rot_entry {
    uint64_t h;               /* sbuf_hash of name; 0 with name "": free */
    char name[ROT_NAME];
    int64_t reserve[ROT_RESERVE];
    int n;
    unsigned long used;
} rot_entry;

struct shared_rotation {
    struct event_base *base;
    redis_link *link;
    char prefix[64];
    rot_entry e[ROT_ENTRIES];
    unsigned long tick;
};

struct shared_rotation_wait {
    shared_rotation_fn fn;
    void *ud;
    shared_deadline dl; /* not open: answered at the deadline, or cancelled */
};

/* One INCR on its way. */
typedef struct rot_incr {
    shared_rotation *r;
    uint64_t h;
    char name[ROT_NAME];
    shared_rotation_wait *w; /* the pick waiting for this answer, NULL: it is reserved */
} rot_incr;

shared_rotation *shared_rotation_new(struct event_base *base, redis_link *link, const char *prefix)
{
    shared_rotation *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->base = base;
    r->link = link;
    snprintf(r->prefix, sizeof r->prefix, "%s", prefix);
    return r;
}

void shared_rotation_free(shared_rotation *r) { free(r); }

static rot_entry *rot_find(shared_rotation *r, uint64_t h, const char *name)
{
    for (size_t i = 0; i < ROT_ENTRIES; i++)
        if (r->e[i].h == h && r->e[i].name[0] && strcmp(r->e[i].name, name) == 0)
            return &r->e[i];
    return NULL;
}

static rot_entry *rot_make(shared_rotation *r, uint64_t h, const char *name)
{
    rot_entry *e = rot_find(r, h, name);
    if (!e) {
        e = &r->e[0];
        for (size_t i = 1; i < ROT_ENTRIES && e->name[0]; i++)
            if (!r->e[i].name[0] || r->e[i].used < e->used)
                e = &r->e[i];
        memset(e, 0, sizeof *e);
        e->h = h;
        snprintf(e->name, sizeof e->name, "%s", name);
    }
    e->used = ++r->tick;
    return e;
}

static void rot_on_deadline(void *arg)
{
    shared_rotation_wait *w = arg;
    w->fn(w->ud, 0); /* the local cursor decides this pick; the answer, when it comes, is reserved */
}

static int rot_key(const shared_rotation *r, const char *name, char *buf, size_t n)
{
    int w = snprintf(buf, n, "%scursor:%s", r->prefix, name);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

static void rot_on_incr(void *ud, redisReply *rep)
{
    rot_incr *x = ud;
    shared_rotation *r = x->r;
    int64_t pos = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer > 0 ? (int64_t)rep->integer : 0;
    if (pos % ROT_TTL_EVERY == 1) { /* a new counter (or every thousandth pick): it lives a day from now */
        char key[ROT_NAME + 96];
        if (rot_key(r, x->name, key, sizeof key) == 0) {
            const char *argv[] = {"EXPIRE", key, ROT_TTL_S};
            size_t lens[] = {6, strlen(key), strlen(ROT_TTL_S)};
            redis_link_command(r->link, NULL, NULL, 3, argv, lens);
        }
    }
    shared_rotation_wait *w = x->w;
    if (w && shared_deadline_answer(&w->dl)) {
        w->fn(w->ud, pos);
    } else if (pos) {
        rot_entry *e = rot_find(r, x->h, x->name);
        if (e && e->n < ROT_RESERVE)
            e->reserve[e->n++] = pos;
    }
    free(w);
    free(x);
}

/* An INCR of e's counter; its answer goes to w, or to e's reserve. */
static int rot_send(shared_rotation *r, const rot_entry *e, shared_rotation_wait *w)
{
    rot_incr *x = malloc(sizeof *x);
    char key[ROT_NAME + 96];
    if (!x || rot_key(r, e->name, key, sizeof key) != 0) {
        free(x);
        return -1;
    }
    x->r = r;
    x->h = e->h;
    memcpy(x->name, e->name, sizeof x->name);
    x->w = w;
    const char *argv[] = {"INCR", key};
    size_t lens[] = {4, strlen(key)};
    if (redis_link_command(r->link, rot_on_incr, x, 2, argv, lens) != 0) {
        free(x);
        return -1;
    }
    return 0;
}

shared_rotation_wait *shared_rotation_take(shared_rotation *r, const char *key, const char *model, int64_t *pos,
                                           shared_rotation_fn fn, void *ud, int wait_ms)
{
    *pos = 0;
    char name[ROT_NAME];
    int n = snprintf(name, sizeof name, "%s:%s", key, model);
    if (n < 0 || (size_t)n >= sizeof name)
        return NULL;
    int up = redis_link_is_up(r->link);
    uint64_t h = sbuf_hash(name);
    rot_entry *e = up ? rot_make(r, h, name) : rot_find(r, h, name);
    if (!e)
        return NULL;
    if (e->n) { /* reserved: used now, the next one asked for */
        *pos = e->reserve[0];
        memmove(e->reserve, e->reserve + 1, (size_t)--e->n * sizeof *e->reserve);
        if (up)
            rot_send(r, e, NULL);
        return NULL;
    }
    if (!up)
        return NULL;
    shared_rotation_wait *w = fn ? calloc(1, sizeof *w) : NULL;
    if (!w) {
        rot_send(r, e, NULL);
        return NULL;
    }
    w->fn = fn;
    w->ud = ud;
    if (rot_send(r, e, w) != 0) {
        free(w);
        return NULL;
    }
    rot_send(r, e, NULL); /* and one for the next pick */
    shared_deadline_arm(&w->dl, r->base, wait_ms, METRICS_REDIS_WAIT_ROTATION, rot_on_deadline, w);
    return w;
}

void shared_rotation_cancel(shared_rotation_wait *w)
{
    if (w)
        shared_deadline_cancel(&w->dl); /* freed with its answer */
}
