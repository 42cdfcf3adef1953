/* health_window.h: an account's success rate and latency over the last 60
 * seconds, as a ring of one-second slots with running totals: recording
 * and reading cost O(1) (plus one step per second that passed since the
 * last record, at most 60). The exponential averages in account_state
 * remember long; this window forgets after a minute, which is what `order`
 * and `account list` want to see "now". Plain state: callers pass now
 * (unix seconds). */
#ifndef SY_HEALTH_WINDOW_H
#define SY_HEALTH_WINDOW_H
#include <stdint.h>

#define HEALTH_WINDOW_S 60

typedef struct health_window {
    struct {
        uint32_t ok, failed;
        double latency_ms;    /* sum over the ok attempts */
    } slot[HEALTH_WINDOW_S];  /* second s lives in slot s % 60 */
    int64_t head;             /* the newest second the slots hold, 0 never used */
    uint32_t ok, failed;      /* totals over the slots */
    double latency_ms;
} health_window;

typedef struct health_figures {
    double success_rate;      /* ok / attempts, -1 when there were none */
    double latency_ms;        /* mean over the ok attempts, -1 none */
    int attempts;
} health_figures;

/* One finished attempt: ok (with its latency) or failed. */
void health_window_record(health_window *w, double now, int ok, double latency_ms);
/* The figures of the 60 s up to now (the window itself moves on only when
 * an attempt is recorded). */
void health_window_read(const health_window *w, double now, health_figures *out);

#endif
