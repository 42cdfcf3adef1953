/* trace.c: the gateway-trace.log writer (see trace.h). */
#include "trace.h"
#include "log.h"
#include "sbuf.h"
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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
    sbuf queue;   /* records (see trace_event) waiting for the thread */
    int stop;
    time_t stamp_sec; /* the second stamp[] shows; touched by the trace thread only */
    char stamp[24];   /* "YYYY-MM-DDTHH:MM:SS" */
};

static void trace_render(trace *t, const sbuf *q, sbuf *out);

static void *trace_main(void *arg)
{
    trace *t = arg;
    sbuf out = SBUF_INIT, recs = SBUF_INIT;
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
        sbuf tmp = recs;
        recs = t->queue;
        t->queue = tmp;
        sbuf_reset(&t->queue);
        pthread_mutex_unlock(&t->mu);
        trace_render(t, &recs, &out);
        sbuf_reset(&recs);
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
    sbuf_free(&recs);
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

/* Writes "YYYY-MM-DDTHH:MM:SS.mmmZ " for when to out (at least 25 bytes);
 * the calendar part is formatted once a second, not once a line. Trace
 * thread only. */
static size_t trace_stamp(trace *t, const struct timespec *when, char *out)
{
    if (when->tv_sec != t->stamp_sec || !t->stamp[0]) {
        struct tm tm;
        gmtime_r(&when->tv_sec, &tm);
        strftime(t->stamp, sizeof t->stamp, "%Y-%m-%dT%H:%M:%S", &tm);
        t->stamp_sec = when->tv_sec;
    }
    size_t off = strlen(t->stamp);
    memcpy(out, t->stamp, off);
    long ms = when->tv_nsec / 1000000;
    out[off++] = '.';
    out[off++] = (char)('0' + ms / 100);
    out[off++] = (char)('0' + ms / 10 % 10);
    out[off++] = (char)('0' + ms % 10);
    out[off++] = 'Z';
    out[off++] = ' ';
    return off;
}

/* ---- records: a trace line's parts, formatted by the thread ----
 *
 * The loop only copies what a line is made of (the time, the event name,
 * the format, each argument) into the queue; the trace thread formats it.
 * Trace formats use %s, %d, %llu, %zu and %.Nf only; a format with anything
 * else is formatted by vsnprintf on the caller's side, as a whole line. */

enum { REC_LINE = 0, REC_FIELDS = 1 };
#define TRACE_LINE_MAX 4096

typedef struct rec_head {
    uint32_t len;         /* of the whole record, this head included */
    uint32_t kind;        /* REC_LINE: the text follows; REC_FIELDS: see fmt_len */
    struct timespec when;
    uint32_t fmt_len;     /* REC_FIELDS: the format (NUL included) follows, then the arguments */
    char event[65];       /* up to 64 bytes of the name, as the line always took */
} rec_head;

/* The conversion at f ('%' already skipped): sets *prec (-1 none) and
 * returns its letter ('s' 'd' 'u' (llu) 'z' (zu) 'f' '%'), 0 if unsupported;
 * *next: just past it. */
static char trace_conv(const char *f, int *prec, const char **next)
{
    *prec = -1;
    if (f[0] == '.' && f[1] >= '0' && f[1] <= '9' && f[2] == 'f') {
        *prec = f[1] - '0';
        *next = f + 3;
        return 'f';
    }
    *next = f + 1;
    switch (f[0]) {
    case 's': case 'd': case '%':
        return f[0];
    case 'l':
        *next = f + 3;
        return f[1] == 'l' && f[2] == 'u' ? 'u' : 0;
    case 'z':
        *next = f + 2;
        return f[1] == 'u' ? 'z' : 0;
    default:
        return 0;
    }
}

static int trace_fmt_supported(const char *fmt)
{
    for (const char *f = fmt; (f = strchr(f, '%'));) {
        int prec;
        if (!trace_conv(f + 1, &prec, &f))
            return 0;
    }
    return 1;
}

/* Appends the arguments fmt takes from ap to q. */
static void trace_pack(sbuf *q, const char *fmt, va_list ap)
{
    for (const char *f = fmt; (f = strchr(f, '%'));) {
        int prec;
        switch (trace_conv(f + 1, &prec, &f)) {
        case 's': {
            const char *v = va_arg(ap, const char *);
            uint32_t n = v ? (uint32_t)strnlen(v, TRACE_LINE_MAX) : 6;
            sbuf_append(q, &n, sizeof n);
            sbuf_append(q, v ? v : "(null)", n);
            break;
        }
        case 'd': {
            int v = va_arg(ap, int);
            sbuf_append(q, &v, sizeof v);
            break;
        }
        case 'u': {
            unsigned long long v = va_arg(ap, unsigned long long);
            sbuf_append(q, &v, sizeof v);
            break;
        }
        case 'z': {
            size_t v = va_arg(ap, size_t);
            sbuf_append(q, &v, sizeof v);
            break;
        }
        case 'f': {
            double v = va_arg(ap, double);
            sbuf_append(q, &v, sizeof v);
            break;
        }
        default:
            break;
        }
    }
}

/* Appends the fields of one record to out (fmt: the format, a: its packed
 * arguments). */
static void trace_unpack(const char *fmt, const char *a, sbuf *out)
{
    for (const char *f = fmt; *f;) {
        const char *pct = strchr(f, '%');
        size_t lit = pct ? (size_t)(pct - f) : strlen(f);
        sbuf_append(out, f, lit);
        if (!pct)
            break;
        int prec;
        switch (trace_conv(pct + 1, &prec, &f)) {
        case 's': {
            uint32_t len;
            memcpy(&len, a, sizeof len);
            sbuf_append(out, a + sizeof len, len);
            a += sizeof len + len;
            break;
        }
        case 'd': {
            int x;
            memcpy(&x, a, sizeof x);
            a += sizeof x;
            sbuf_put_int(out, x);
            break;
        }
        case 'u':
        case 'z': {
            unsigned long long x;
            if (pct[1] == 'z') {
                size_t z;
                memcpy(&z, a, sizeof z);
                a += sizeof z;
                x = z;
            } else {
                memcpy(&x, a, sizeof x);
                a += sizeof x;
            }
            if (x <= (unsigned long long)LLONG_MAX)
                sbuf_put_int(out, (long long)x);
            else
                sbuf_printf(out, "%llu", x);
            break;
        }
        case 'f': {
            double x;
            memcpy(&x, a, sizeof x);
            a += sizeof x;
            sbuf_printf(out, "%.*f", prec, x);
            break;
        }
        case '%':
            sbuf_append(out, "%", 1);
            break;
        default:
            break;
        }
    }
}

/* Turns the records in q into text lines appended to out (trace thread).
 * A line is cut at TRACE_LINE_MAX - 2 bytes before its newline, as the
 * vsnprintf into a line buffer it replaces did. */
static void trace_render(trace *t, const sbuf *q, sbuf *out)
{
    for (size_t at = 0; at + sizeof(rec_head) <= q->len;) {
        rec_head h;
        memcpy(&h, q->p + at, sizeof h);
        const char *body = q->p + at + sizeof h;
        size_t start = out->len;
        char stamp[32];
        sbuf_append(out, stamp, trace_stamp(t, &h.when, stamp));
        sbuf_append(out, h.event, strnlen(h.event, sizeof h.event));
        sbuf_append(out, " ", 1);
        if (h.kind == REC_LINE)
            sbuf_append(out, body, h.len - sizeof h);
        else
            trace_unpack(body, body + h.fmt_len, out);
        if (out->len - start > TRACE_LINE_MAX - 2)
            out->len = start + TRACE_LINE_MAX - 2;
        sbuf_append(out, "\n", 1);
        at += h.len;
    }
}

void trace_event(trace *t, const char *event, const char *fmt, ...)
{
    if (!t)
        return;
    rec_head h;
    memset(&h, 0, sizeof h);
    clock_gettime(CLOCK_REALTIME, &h.when);
    memcpy(h.event, event, strnlen(event, sizeof h.event - 1));
    char text[TRACE_LINE_MAX];
    size_t tlen = 0;
    int packed = trace_fmt_supported(fmt);
    if (!packed) { /* a format the thread cannot replay: formatted here */
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        tlen = n < 0 ? 0 : (size_t)n < sizeof text ? (size_t)n : sizeof text - 1;
    }
    h.kind = packed ? REC_FIELDS : REC_LINE;
    h.fmt_len = packed ? (uint32_t)strlen(fmt) + 1 : 0;
    pthread_mutex_lock(&t->mu);
    int was_empty = t->queue.len == 0; /* the thread only sleeps on an empty queue */
    if (t->queue.len < (8u << 20)) {  /* the disk is stuck: drop rather than grow without bound */
        size_t at = t->queue.len;
        sbuf_append(&t->queue, &h, sizeof h);
        if (packed) {
            sbuf_append(&t->queue, fmt, h.fmt_len);
            va_list ap;
            va_start(ap, fmt);
            trace_pack(&t->queue, fmt, ap);
            va_end(ap);
        } else {
            sbuf_append(&t->queue, text, tlen);
        }
        uint32_t len = (uint32_t)(t->queue.len - at);
        memcpy(t->queue.p + at + offsetof(rec_head, len), &len, sizeof len);
    }
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
