/* shared_deadline.h: the one "send, arm a deadline, answer or fall back"
 * of the request path's waits for the pool's word (an ask for records, a
 * concurrency slot, a stored chain, a rate limit, a rotation position).
 * Each used to carry its own timer, its own "answered once" flag and its
 * own cancel (issue 33); a call now embeds one of these. Whichever comes
 * first answers the caller, once: the command's answer, or the deadline
 * (the wait, SWITCHYARD_REDIS_WAIT_MS, ran out: counted by kind in
 * switchyard_redis_waits_expired_total, and the caller's fallback runs: the
 * local copy decides). After a cancel neither does. A late answer still
 * reaches the call's own answer callback, which asks this whether anyone
 * waits for it (and may keep what it says: a reserved position, a level). */
#ifndef SY_SHARED_DEADLINE_H
#define SY_SHARED_DEADLINE_H
#include <event2/event.h>

typedef struct shared_deadline {
    struct event *timer;
    void (*expire)(void *ud); /* the fallback, at the deadline */
    void *ud;
    int kind;                 /* METRICS_REDIS_WAIT_* */
    int open;                 /* waited for: not answered, expired nor cancelled */
} shared_deadline;

/* Starts the wait of d (zeroed or finished before): expire(ud) runs once
 * after ms unless an answer or a cancel comes first. Without a timer (out
 * of memory) the wait is open until the answer, which the link bounds. */
void shared_deadline_arm(shared_deadline *d, struct event_base *base, long ms, int kind, void (*expire)(void *ud),
                         void *ud);
/* The command's answer is in: 1 when it is still waited for (the caller
 * answers with it now), 0 when it is late (expired or cancelled). The wait
 * ends either way. */
int shared_deadline_answer(shared_deadline *d);
/* Nobody waits any more: neither the answer nor the deadline answers. */
void shared_deadline_cancel(shared_deadline *d);
/* 1 while waited for. */
int shared_deadline_open(const shared_deadline *d);

#endif
