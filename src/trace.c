/* trace.c: the gateway-trace.log writer (see trace.h). */
#include "trace.h"
#include "log.h"
#include "sbuf.h"
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TRACE_GATHER_MS 10 /* a trace line reaches the file at most this late */

struct trace {
    int fd;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sbuf queue;   /* complete lines waiting for the thread */
    int stop;
    time_t stamp_sec; /* the second stamp[] shows; touched by trace_event's caller only */
    char stamp[24];   /* "YYYY-MM-DDTHH:MM:SS" */
};

static void *trace_main(void *arg)
{
    trace *t = arg;
    sbuf out = SBUF_INIT;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (!t->queue.len && !t->stop)
            pthread_cond_wait(&t->cv, &t->mu);
        if (!t->queue.len && t->stop)
            break;
        if (!t->stop) {
            /* gather for a moment: one write per window instead of one
             * wake-up (futex + write + context switch) per trace line */
            pthread_mutex_unlock(&t->mu);
            struct timespec gather = {0, TRACE_GATHER_MS * 1000000L};
            nanosleep(&gather, NULL);
            pthread_mutex_lock(&t->mu);
        }
        sbuf tmp = out;
        out = t->queue;
        t->queue = tmp;
        sbuf_reset(&t->queue);
        pthread_mutex_unlock(&t->mu);
        for (size_t off = 0; off < out.len;) {
            ssize_t w = write(t->fd, out.p + off, out.len - off);
            if (w <= 0) {
                log_warn("trace: write failed; %zu bytes of trace dropped", out.len - off);
                break;
            }
            off += (size_t)w;
        }
        sbuf_reset(&out);
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    sbuf_free(&out);
    return NULL;
}

trace *trace_open(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) {
        log_error("trace: cannot open %s", path);
        return NULL;
    }
    trace *t = calloc(1, sizeof *t);
    t->fd = fd;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    if (pthread_create(&t->thread, NULL, trace_main, t) != 0) {
        close(fd);
        free(t);
        return NULL;
    }
    return t;
}

void trace_close(trace *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    close(t->fd);
    sbuf_free(&t->queue);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

/* Writes "YYYY-MM-DDTHH:MM:SS.mmmZ " to out (at least 25 bytes); the
 * calendar part is formatted once a second, not once a line. */
static size_t trace_stamp(trace *t, char *out)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (now.tv_sec != t->stamp_sec || !t->stamp[0]) {
        struct tm tm;
        gmtime_r(&now.tv_sec, &tm);
        strftime(t->stamp, sizeof t->stamp, "%Y-%m-%dT%H:%M:%S", &tm);
        t->stamp_sec = now.tv_sec;
    }
    size_t off = strlen(t->stamp);
    memcpy(out, t->stamp, off);
    long ms = now.tv_nsec / 1000000;
    out[off++] = '.';
    out[off++] = (char)('0' + ms / 100);
    out[off++] = (char)('0' + ms / 10 % 10);
    out[off++] = (char)('0' + ms % 10);
    out[off++] = 'Z';
    out[off++] = ' ';
    return off;
}

void trace_event(trace *t, const char *event, const char *fmt, ...)
{
    if (!t)
        return;
    char line[4096];
    size_t off = trace_stamp(t, line);
    size_t elen = strnlen(event, 64);
    memcpy(line + off, event, elen);
    off += elen;
    line[off++] = ' ';
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + off, sizeof line - off, fmt, ap);
    va_end(ap);
    off = n < 0 ? off : (off + (size_t)n < sizeof line - 1 ? off + (size_t)n : sizeof line - 2);
    line[off++] = '\n';
    pthread_mutex_lock(&t->mu);
    int was_empty = t->queue.len == 0; /* the thread only sleeps on an empty queue */
    if (t->queue.len < (8u << 20))    /* the disk is stuck: drop rather than grow without bound */
        sbuf_append(&t->queue, line, off);
    if (was_empty)
        pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

void trace_path_for_db(const char *db_path, char *out, unsigned long n)
{
    const char *slash = strrchr(db_path, '/');
    if (!slash)
        snprintf(out, n, "gateway-trace.log");
    else
        snprintf(out, n, "%.*s/gateway-trace.log", (int)(slash - db_path), db_path);
}
