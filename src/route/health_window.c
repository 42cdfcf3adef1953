/* health_window.c: 60 s sliding success rate and latency (see health_window.h). */
#include "route/health_window.h"
#include <string.h>

/* Drops the seconds that fell out of the window ending at sec. */
static void health_window_slide(health_window *w, int64_t sec)
{
    if (sec <= w->head)
        return;
    if (sec - w->head >= HEALTH_WINDOW_S) {
        memset(w->slot, 0, sizeof w->slot);
        w->ok = w->failed = 0;
        w->latency_ms = 0;
    } else {
        for (int64_t s = w->head + 1; s <= sec; s++) {
            int i = (int)(s % HEALTH_WINDOW_S);
            w->ok -= w->slot[i].ok;
            w->failed -= w->slot[i].failed;
            w->latency_ms -= w->slot[i].latency_ms;
            w->slot[i].ok = w->slot[i].failed = 0;
            w->slot[i].latency_ms = 0;
        }
        if (!w->ok)
            w->latency_ms = 0; /* no drift left behind by the subtractions */
    }
    w->head = sec;
}

void health_window_record(health_window *w, double now, int ok, double latency_ms)
{
    int64_t sec = (int64_t)now;
    health_window_slide(w, sec);
    if (sec < w->head - (HEALTH_WINDOW_S - 1)) {
        /* older than the window: the wall clock stepped back by more than
         * a minute. What the window holds is "the last minute" of a time
         * that is not now any more: start it over here, rather than count
         * nothing until the clock catches up */
        memset(w, 0, sizeof *w);
        w->head = sec;
    }
    int i = (int)(sec % HEALTH_WINDOW_S);
    if (ok) {
        w->slot[i].ok++;
        w->slot[i].latency_ms += latency_ms;
        w->ok++;
        w->latency_ms += latency_ms;
    } else {
        w->slot[i].failed++;
        w->failed++;
    }
}

void health_window_read(const health_window *w, double now, health_figures *out)
{
    int64_t sec = (int64_t)now;
    uint32_t ok = w->ok, failed = w->failed;
    double lat = w->latency_ms;
    if (sec - w->head >= HEALTH_WINDOW_S || sec < w->head - (HEALTH_WINDOW_S - 1)) {
        ok = failed = 0; /* everything it holds is a minute old (or, the clock stepped back, a minute ahead) */
    } else {
        /* leave out the seconds that dropped out since the last record */
        for (int64_t s = w->head - HEALTH_WINDOW_S + 1; s <= sec - HEALTH_WINDOW_S; s++) {
            int i = (int)(s % HEALTH_WINDOW_S);
            ok -= w->slot[i].ok;
            failed -= w->slot[i].failed;
            lat -= w->slot[i].latency_ms;
        }
    }
    out->attempts = (int)(ok + failed);
    out->success_rate = out->attempts ? (double)ok / (double)out->attempts : -1;
    out->latency_ms = ok ? lat / (double)ok : -1;
}
