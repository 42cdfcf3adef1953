/* shared_deadline.c: a wait for the pool's word, answered once (see
 * shared_deadline.h). */
#include "shared/shared_deadline.h"
#include "obs/metrics.h"
#include <stddef.h>

static void shared_deadline_end(shared_deadline *d)
{
    d->open = 0;
    if (d->timer)
        event_free(d->timer);
    d->timer = NULL;
}

static void shared_deadline_on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    shared_deadline *d = arg;
    if (!d->open)
        return;
    shared_deadline_end(d);
    metrics_redis_wait_expired(d->kind);
    d->expire(d->ud); /* may free the call d lives in: d is not touched after */
}

void shared_deadline_arm(shared_deadline *d, struct event_base *base, long ms, int kind, void (*expire)(void *ud),
                         void *ud)
{
    shared_deadline_end(d);
    d->expire = expire;
    d->ud = ud;
    d->kind = kind;
    d->open = 1;
    d->timer = base ? evtimer_new(base, shared_deadline_on_timer, d) : NULL;
    if (d->timer) {
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
        evtimer_add(d->timer, &tv);
    }
}

int shared_deadline_answer(shared_deadline *d)
{
    int was = d->open;
    shared_deadline_end(d);
    return was;
}

void shared_deadline_cancel(shared_deadline *d) { shared_deadline_end(d); }

int shared_deadline_open(const shared_deadline *d) { return d->open; }
