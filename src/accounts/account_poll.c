/* account_poll.c: the per-account poller (see account_poll.h). The
 * accounts' schedules live in an array sorted by account id, rebuilt from
 * the pool when it reloads (the state of accounts that stay is carried
 * over); a poll in flight is a ticket that names its account by id, since
 * a reload moves accounts, and finds its schedule again by binary search
 * when it ends. */
#include "accounts/account_poll.h"
#include "accounts/account_get.h"
#include "accounts/model_poll.h"
#include "accounts/poll_kind.h"
#include "accounts/usage_poll.h"
#include "base/log.h"
#include "shared/shared.h"
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

enum { POLL_USAGE, POLL_MODELS, POLL_KINDS };

static const poll_kind *const poll_kinds[POLL_KINDS] = {&usage_poll_kind, &model_poll_kind};

typedef struct poll_entry {
    int64_t id;
    double next_at[POLL_KINDS]; /* next scheduled poll, unix seconds; 0: at once */
    double soon_at;             /* a usage poll asked for this time (account_poll_soon), 0 none */
    double last_soon;           /* when the last one went out */
    uint8_t busy;               /* a ticket of kind k in flight: bit k */
} poll_entry;

typedef struct poll_ticket {
    account_poll *owner;
    int64_t id;
    int kind;
    upstream_req *up;     /* the GET in flight, NULL none */
    shared_call *lease;   /* the pool's lease asked for, NULL none */
    int leasing;
    int status, too_large;
    sbuf body;
    struct poll_ticket *prev, *next;
} poll_ticket;

struct account_poll {
    gateway *gw;
    poll_entry *e;        /* by id ascending */
    size_t n;
    uint64_t gen;         /* pool_generation mirrored; the first tick builds */
    int built;
    size_t cursor;        /* the next entry a tick looks at */
    poll_ticket *flight;  /* tickets in flight */
    int64_t *soon;        /* accounts whose soon_at is set, in the order asked */
    size_t nsoon, soon_cap;
    int backlog;          /* the last run left due polls for want of room */
    poll_ticket *taking;  /* the ticket whose lease is being asked now (its answer may come at once) */
    struct event *resume; /* a run soon after a poll ends while there is a backlog */
    int resume_armed, closing;
    account_poll_stats st;
};

#define ACCOUNT_POLL_RESUME_MS 20 /* a burst of polls ending together: one run after it */

static void poll_on_resume(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    account_poll *ap = arg;
    ap->resume_armed = 0;
    account_poll_tick(ap, gateway_now());
}

account_poll *account_poll_new(gateway *gw)
{
    account_poll *ap = calloc(1, sizeof *ap);
    if (!ap)
        return NULL;
    ap->gw = gw;
    ap->resume = evtimer_new(gw->base, poll_on_resume, ap);
    return ap;
}

static void poll_ticket_free(poll_ticket *t)
{
    account_poll *ap = t->owner;
    if (t->prev)
        t->prev->next = t->next;
    else
        ap->flight = t->next;
    if (t->next)
        t->next->prev = t->prev;
    ap->st.in_flight--;
    if (ap->taking == t)
        ap->taking = NULL; /* ended within shared_lease_take: poll_start must not touch it */
    sbuf_free(&t->body);
    free(t);
    /* room again, with polls waiting: the next run need not wait for the
     * serve tick (a slow upstream would hold the pool to 32 polls a second) */
    if (ap->backlog && !ap->resume_armed && !ap->closing && ap->resume) {
        struct timeval tv = {0, ACCOUNT_POLL_RESUME_MS * 1000};
        evtimer_add(ap->resume, &tv);
        ap->resume_armed = 1;
    }
}

void account_poll_free(account_poll *ap)
{
    if (!ap)
        return;
    ap->closing = 1;
    if (ap->resume)
        event_free(ap->resume);
    while (ap->flight) {
        poll_ticket *t = ap->flight;
        shared_call_cancel(ap->gw->shared, t->lease);
        if (t->up)
            upstream_cancel(t->up);
        poll_ticket_free(t);
    }
    free(ap->e);
    free(ap->soon);
    free(ap);
}

static poll_entry *poll_entry_find(account_poll *ap, int64_t id)
{
    size_t lo = 0, hi = ap->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ap->e[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ap->n && ap->e[lo].id == id ? &ap->e[lo] : NULL;
}

static int poll_id_cmp(const void *x, const void *y)
{
    int64_t a = ((const poll_entry *)x)->id, b = ((const poll_entry *)y)->id;
    return (a > b) - (a < b);
}

/* The pool reloaded: mirror its accounts, carrying the schedules of those
 * that stay (a merge of two id-sorted arrays), the cursor kept in place. */
static void poll_rebuild(account_poll *ap)
{
    pool *p = ap->gw->pool;
    size_t n = pool_count(p);
    poll_entry *e = calloc(n ? n : 1, sizeof *e);
    if (!e)
        return; /* the old mirror stays; the next tick tries again */
    for (size_t i = 0; i < n; i++)
        e[i].id = pool_at(p, i)->a.id;
    qsort(e, n, sizeof *e, poll_id_cmp);
    int64_t at = ap->cursor < ap->n ? ap->e[ap->cursor].id : 0;
    size_t cursor = 0;
    for (size_t i = 0, j = 0; i < n; i++) {
        while (j < ap->n && ap->e[j].id < e[i].id)
            j++;
        if (j < ap->n && ap->e[j].id == e[i].id)
            e[i] = ap->e[j];
        if (e[i].id < at)
            cursor = i + 1;
    }
    free(ap->e);
    ap->e = e;
    ap->n = n;
    ap->cursor = cursor < n ? cursor : 0;
    ap->gen = pool_generation(p);
    ap->built = 1;
    ap->st.accounts = n;
}

/* ---------- a poll in flight ---------- */

static int poll_on_headers(void *ud, int status, const upstream_header *h, size_t n)
{
    (void)h, (void)n;
    poll_ticket *t = ud;
    t->status = status;
    return 0;
}

static int poll_on_data(void *ud, const char *p, size_t n)
{
    poll_ticket *t = ud;
    if (t->body.len + n <= poll_kinds[t->kind]->body_max)
        sbuf_append(&t->body, p, n);
    else
        t->too_large = 1;
    return 0;
}

static void poll_on_done(void *ud, up_result r, const char *errmsg)
{
    poll_ticket *t = ud;
    account_poll *ap = t->owner;
    t->up = NULL; /* freed by upstream right after this returns */
    poll_entry *e = poll_entry_find(ap, t->id);
    if (e)
        e->busy &= (uint8_t)~(1u << t->kind);
    pool_account *pa = pool_find(ap->gw->pool, t->id);
    if (pa)
        poll_kinds[t->kind]->answer(ap->gw, pa, r, r == UP_OK ? t->status : 0, t->too_large, &t->body, errmsg);
    poll_ticket_free(t);
}

static const upstream_callbacks poll_cb = {poll_on_headers, poll_on_data, poll_on_done};

/* The GET of t's kind for pa; the ticket ends here when it cannot start
 * (logged; the next poll is at the usual time). */
static void poll_send(poll_ticket *t, const pool_account *pa)
{
    account_poll *ap = t->owner;
    const poll_kind *k = poll_kinds[t->kind];
    char url[2048];
    k->url(ap->gw, pa, url, sizeof url);
    t->up = account_get_start(ap->gw->up, pa, url, k->timeout_ms, &poll_cb, t, k->what);
    if (!t->up) {
        poll_entry *e = poll_entry_find(ap, t->id);
        if (e)
            e->busy &= (uint8_t)~(1u << t->kind);
        poll_ticket_free(t);
    }
}

/* The pool's answer to the lease: this instance polls (it holds the lease
 * for two intervals, renewed at each of its polls, or there is no pool),
 * or another one does and its numbers arrive through shared_usage_tell. */
static void poll_on_lease(void *ud, int granted)
{
    poll_ticket *t = ud;
    t->lease = NULL;
    t->leasing = 0;
    pool_account *pa = pool_find(t->owner->gw->pool, t->id);
    if (granted && pa && poll_kinds[t->kind]->wanted(pa)) {
        poll_send(t, pa);
        return;
    }
    poll_entry *e = poll_entry_find(t->owner, t->id);
    if (e)
        e->busy &= (uint8_t)~(1u << t->kind);
    poll_ticket_free(t);
}

/* Starts a poll of kind for pa (the in-flight bound was checked). */
static void poll_start(account_poll *ap, poll_entry *e, int kind, const pool_account *pa, int leased, long every)
{
    poll_ticket *t = calloc(1, sizeof *t);
    if (!t)
        return;
    t->owner = ap;
    t->id = e->id;
    t->kind = kind;
    t->next = ap->flight;
    if (ap->flight)
        ap->flight->prev = t;
    ap->flight = t;
    if (++ap->st.in_flight > ap->st.in_flight_max)
        ap->st.in_flight_max = ap->st.in_flight;
    ap->st.started++;
    e->busy |= (uint8_t)(1u << kind);
    const poll_kind *k = poll_kinds[kind];
    if (!leased || !k->lease_job) {
        poll_send(t, pa);
        return;
    }
    t->leasing = 1;
    ap->taking = t;
    shared_call *c = shared_lease_take(ap->gw->shared, k->lease_job, pa->a.name, 2 * every * 1000L, poll_on_lease, t);
    /* answered at once (no pool: always granted), t may be gone already,
     * its poll sent or ended; else t lives on until the answer */
    if (ap->taking == t && t->leasing)
        t->lease = c;
    ap->taking = NULL;
}

/* ---------- the tick ---------- */

/* 1 when the periodic poll of kind is due for e now; moves its schedule on. */
static int poll_due(poll_entry *e, int kind, long every, double now)
{
    if (e->next_at[kind] > now + (double)every) /* the interval was shortened */
        e->next_at[kind] = now + (double)every;
    if (now < e->next_at[kind])
        return 0;
    e->next_at[kind] = now + (double)every;
    return 1;
}

/* The usage polls asked for soon (account_poll_soon): before the cursor's
 * turn, as the in-flight bound allows; the rest wait in the list. After
 * this instance's own 429 the poll is its own (no lease: the other
 * instances did not see it). */
static void poll_soon_run(account_poll *ap, long every, double now)
{
    size_t keep = 0;
    for (size_t i = 0; i < ap->nsoon; i++) {
        poll_entry *e = poll_entry_find(ap, ap->soon[i]);
        if (!e || !e->soon_at)
            continue;
        pool_account *pa = pool_find(ap->gw->pool, e->id);
        if (!pa || every <= 0 || !poll_kinds[POLL_USAGE]->wanted(pa)) {
            e->soon_at = 0;
            continue;
        }
        if (now < e->soon_at || (e->busy & (1u << POLL_USAGE)) || ap->st.in_flight >= ACCOUNT_POLL_IN_FLIGHT) {
            ap->backlog |= now >= e->soon_at && ap->st.in_flight >= ACCOUNT_POLL_IN_FLIGHT;
            ap->soon[keep++] = ap->soon[i];
            continue;
        }
        e->soon_at = 0;
        e->last_soon = now;
        e->next_at[POLL_USAGE] = now + (double)every;
        poll_start(ap, e, POLL_USAGE, pa, 0, every);
    }
    ap->nsoon = keep;
}

void account_poll_tick(account_poll *ap, double now)
{
    if (!ap)
        return;
    pool *p = ap->gw->pool;
    if (!ap->built || ap->gen != pool_generation(p))
        poll_rebuild(ap);
    long every[POLL_KINDS];
    long shortest = 0;
    for (int k = 0; k < POLL_KINDS; k++) {
        every[k] = poll_kinds[k]->every(ap->gw);
        if (every[k] > 0 && (!shortest || every[k] < shortest))
            shortest = every[k];
    }
    ap->st.scanned = 0;
    ap->backlog = 0;
    poll_soon_run(ap, every[POLL_USAGE], now);
    if (!shortest || !ap->n)
        return;
    /* enough to see each account twice per interval, and at least the minimum */
    size_t scan = ap->n * 2 / (size_t)shortest + 1;
    if (scan < ACCOUNT_POLL_SCAN_MIN)
        scan = ACCOUNT_POLL_SCAN_MIN;
    if (scan > ap->n)
        scan = ap->n;
    for (; ap->st.scanned < scan; ap->st.scanned++) {
        poll_entry *e = &ap->e[ap->cursor];
        pool_account *pa = pool_find(p, e->id);
        for (int k = 0; pa && k < POLL_KINDS; k++) {
            if (every[k] <= 0 || (e->busy & (1u << k)) || !poll_kinds[k]->wanted(pa))
                continue;
            if (ap->st.in_flight >= ACCOUNT_POLL_IN_FLIGHT) {
                if (now >= e->next_at[k]) {
                    ap->st.deferred++;
                    ap->backlog = 1;
                    return; /* the next run resumes at this account */
                }
                continue;
            }
            if (poll_due(e, k, every[k], now))
                poll_start(ap, e, k, pa, 1, every[k]);
        }
        ap->cursor = ap->cursor + 1 < ap->n ? ap->cursor + 1 : 0;
    }
}

void account_poll_soon(account_poll *ap, int64_t account_id)
{
    poll_entry *e = ap ? poll_entry_find(ap, account_id) : NULL;
    if (!e || e->soon_at > 0)
        return;
    double now = gateway_now();
    if (ap->nsoon == ap->soon_cap) {
        size_t cap = ap->soon_cap ? ap->soon_cap * 2 : 16;
        int64_t *grown = realloc(ap->soon, cap * sizeof *grown);
        if (!grown)
            return;
        ap->soon = grown;
        ap->soon_cap = cap;
    }
    double at = e->last_soon + USAGE_POLL_AFTER_ERROR_GAP;
    e->soon_at = at > now ? at : now;
    ap->soon[ap->nsoon++] = account_id;
}

void account_poll_stats_get(const account_poll *ap, account_poll_stats *out)
{
    memset(out, 0, sizeof *out);
    if (ap)
        *out = ap->st;
}
