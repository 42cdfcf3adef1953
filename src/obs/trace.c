/* trace.c: the gateway-trace.log writer and its rotation (see trace.h). */
#include "obs/trace.h"
#include "base/log.h"
#include "base/sbuf.h"
#include "base/text.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TRACE_GATHER_MS 10      /* a trace line reaches the file at most this late... */
#define TRACE_GATHER_BUSY_MS 50 /* ...or this late while windows bring TRACE_BUSY_LINES or more */
#define TRACE_BUSY_LINES 32     /* (about 1 000 requests a second): one write per 50 ms, not 10 */

struct trace {
    int fd;
    char *path;
    long long size;      /* of the live file; trace thread only (after open) */
    long long max_bytes; /* rotate past this (trace_rotation; under mu) */
    int files;           /* rotated files kept: path.1 .. path.<files> */
    long long rotated;   /* bytes in the rotated files, summed at the last rotation (trace thread) */
    long long on_disk;   /* size + rotated as of the last write (under mu: trace_bytes) */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sbuf queue;   /* records (see trace_event) waiting for the thread */
    int stop;
    int idle;     /* the thread waits for a first record: trace_event must wake it */
    time_t stamp_sec; /* the second stamp[] shows; touched by the trace thread only */
    char stamp[24];   /* "YYYY-MM-DDTHH:MM:SS" */
    size_t stamp_len;
    sbuf scratch;     /* the rare number printf formats; trace thread only */
};

static size_t trace_render(trace *t, const sbuf *q, sbuf *out);

/* Sleeps ms without the lock (held on entry and on return), unless
 * stopping. A sleep, not a timed wait on the condition: records queued
 * meanwhile need not wake anyone, and a thread that returns from a
 * condition wait makes its next unlock a futex call. */
static void trace_gather(trace *t, long ms)
{
    if (t->stop)
        return;
    pthread_mutex_unlock(&t->mu);
    struct timespec gather = {0, ms * 1000000L};
    nanosleep(&gather, NULL);
    pthread_mutex_lock(&t->mu);
}

/* The live file has grown past max_bytes: path.<files-1> becomes
 * path.<files> (the oldest is replaced), ..., path becomes path.1, and a new
 * path is opened. On the trace thread, so the loop never waits on these
 * renames. A failure keeps writing to the file it has. */
static void trace_rotate(trace *t, int files)
{
    size_t n = strlen(t->path) + 16;
    char *from = malloc(n), *to = malloc(n);
    if (!from || !to)
        abort();
    for (int i = files; i >= 1; i--) {
        if (i == 1)
            snprintf(from, n, "%s", t->path);
        else
            snprintf(from, n, "%s.%d", t->path, i - 1);
        snprintf(to, n, "%s.%d", t->path, i);
        if (rename(from, to) != 0 && errno != ENOENT)
            log_warn("trace: cannot rotate %s to %s: %s", from, to, strerror(errno));
    }
    t->rotated = 0;
    for (int i = 1; i <= files; i++) {
        struct stat sb;
        snprintf(to, n, "%s.%d", t->path, i);
        if (stat(to, &sb) == 0)
            t->rotated += (long long)sb.st_size;
    }
    int fd = open(t->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) {
        log_warn("trace: cannot open %s after rotating: %s; writing on to %s.1", t->path, strerror(errno), t->path);
    } else {
        close(t->fd);
        t->fd = fd;
        t->size = 0;
    }
    free(from);
    free(to);
}

/* Takes what is queued, renders it and writes it in one write (lock held
 * on entry and on return); returns the number of lines. */
static size_t trace_flush(trace *t, sbuf *recs, sbuf *out)
{
    sbuf tmp = *recs;
    *recs = t->queue;
    t->queue = tmp;
    sbuf_reset(&t->queue);
    long long max_bytes = t->max_bytes;
    int files = t->files;
    pthread_mutex_unlock(&t->mu);
    size_t lines = trace_render(t, recs, out);
    sbuf_reset(recs);
    if (max_bytes > 0 && t->size > 0 && t->size + (long long)out->len > max_bytes)
        trace_rotate(t, files);
    for (size_t off = 0; off < out->len;) {
        ssize_t w = write(t->fd, out->p + off, out->len - off);
        if (w <= 0) {
            log_warn("trace: write failed; %zu bytes of trace dropped", out->len - off);
            break;
        }
        off += (size_t)w;
        t->size += w;
    }
    sbuf_reset(out);
    pthread_mutex_lock(&t->mu);
    t->on_disk = t->size + t->rotated;
    return lines;
}

/* Idle, the thread waits for a record (trace_event wakes it), then writes
 * once per window for as long as windows bring records: a busy gateway
 * costs one sleep and one write per window, and the loop no wake-up at
 * all. Windows are TRACE_GATHER_MS, and TRACE_GATHER_BUSY_MS after one
 * that brought TRACE_BUSY_LINES lines. */
static void *trace_main(void *arg)
{
    trace *t = arg;
    sbuf out = SBUF_INIT, recs = SBUF_INIT;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        t->idle = 1;
        while (!t->queue.len && !t->stop)
            pthread_cond_wait(&t->cv, &t->mu);
        t->idle = 0;
        if (!t->queue.len)
            break; /* stopping, and everything is written */
        for (size_t lines = 0;;) {
            trace_gather(t, lines >= TRACE_BUSY_LINES ? TRACE_GATHER_BUSY_MS : TRACE_GATHER_MS);
            if (!t->queue.len)
                break;
            lines = trace_flush(t, &recs, &out);
        }
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
    if (!t)
        abort(); /* as sbuf: no useful work without memory */
    t->fd = fd;
    struct stat sb;
    t->size = t->on_disk = fstat(fd, &sb) == 0 ? (long long)sb.st_size : 0;
    t->path = strdup(path);
    if (!t->path)
        abort();
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    if (pthread_create(&t->thread, NULL, trace_main, t) != 0) {
        close(fd);
        free(t->path);
        free(t);
        return NULL;
    }
    return t;
}

long long trace_bytes(trace *t)
{
    if (!t)
        return -1;
    pthread_mutex_lock(&t->mu);
    long long n = t->on_disk;
    pthread_mutex_unlock(&t->mu);
    return n;
}

void trace_rotation(trace *t, long long max_bytes, int files)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->max_bytes = max_bytes;
    t->files = files < 1 ? 1 : files;
    pthread_mutex_unlock(&t->mu);
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
    free(t->path);
    sbuf_free(&t->queue);
    sbuf_free(&t->scratch);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

/* Writes "YYYY-MM-DDTHH:MM:SS.mmmZ " for when to out (at least 25 bytes);
 * the calendar part is formatted once a second, not once a line. Trace
 * thread only. */
static size_t trace_stamp(trace *t, const struct timespec *when, char *out)
{
    if (when->tv_sec != t->stamp_sec || !t->stamp_len) {
        struct tm tm;
        gmtime_r(&when->tv_sec, &tm);
        t->stamp_len = strftime(t->stamp, sizeof t->stamp, "%Y-%m-%dT%H:%M:%S", &tm);
        t->stamp_sec = when->tv_sec;
    }
    size_t off = t->stamp_len;
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
 * The loop only copies what a line is made of into the queue (the time,
 * the event name's and the format's pointers: both are literals, and each
 * argument, walked by the conversions its call site parsed once); the
 * trace thread formats it. Trace formats use %s, %d, %llu, %zu and %.Nf
 * only; a format with anything else is formatted by vsnprintf on the
 * caller's side, as a whole line. */

enum { REC_LINE = 0, REC_FIELDS = 1 };
#define TRACE_LINE_MAX 4096

typedef struct rec_head {
    uint32_t len;         /* of the whole record, this head included */
    uint32_t kind;        /* REC_LINE: the text follows; REC_FIELDS: the packed arguments */
    struct timespec when;
    const char *event;    /* literals (trace_event): up to 64 bytes of the name, as the line always took */
    const char *fmt;
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

/* Parses a call site's format once: the conversions that take an
 * argument, or state -1 when the thread could not replay it. */
static void trace_site_parse(trace_site *site, const char *fmt)
{
    site->n = 0;
    site->state = 1;
    for (const char *f = fmt; (f = strchr(f, '%'));) {
        int prec;
        char conv = trace_conv(f + 1, &prec, &f);
        if (!conv || (conv != '%' && site->n == sizeof site->conv)) {
            site->state = -1;
            return;
        }
        if (conv != '%')
            site->conv[site->n++] = conv;
    }
}

/* Packs the arguments the site's format takes from ap into out[0..cap);
 * returns their size, or (size_t)-1 when they do not fit. */
static size_t trace_pack(char *out, size_t cap, const trace_site *site, va_list ap)
{
    size_t n = 0;
    for (unsigned i = 0; i < site->n; i++) {
        union {
            int d;
            unsigned long long u;
            double f;
        } v;
        size_t vlen;
        switch (site->conv[i]) {
        case 's': {
            const char *s = va_arg(ap, const char *);
            uint32_t len = s ? (uint32_t)strnlen(s, TRACE_LINE_MAX) : 6;
            if (cap - n < sizeof len + len)
                return (size_t)-1;
            memcpy(out + n, &len, sizeof len);
            memcpy(out + n + sizeof len, s ? s : "(null)", len);
            n += sizeof len + len;
            continue;
        }
        case 'd':
            v.d = va_arg(ap, int);
            vlen = sizeof v.d;
            break;
        case 'u':
            v.u = va_arg(ap, unsigned long long);
            vlen = sizeof v.u;
            break;
        case 'z': /* packed as %llu's */
            v.u = va_arg(ap, size_t);
            vlen = sizeof v.u;
            break;
        default: /* 'f' */
            v.f = va_arg(ap, double);
            vlen = sizeof v.f;
            break;
        }
        if (cap - n < vlen)
            return (size_t)-1;
        memcpy(out + n, &v, vlen);
        n += vlen;
    }
    return n;
}

/* One line being rendered in place at the end of the output: bytes past
 * TRACE_LINE_MAX - 2 are cut, as the vsnprintf into a line buffer this
 * replaces did. */
typedef struct trace_line {
    char *p;
    size_t n;
} trace_line;

static void trace_put(trace_line *l, const char *s, size_t n)
{
    size_t room = TRACE_LINE_MAX - 2 - l->n;
    if (n > room)
        n = sbuf_utf8_cut(s, n, room);
    memcpy(l->p + l->n, s, n);
    l->n += n;
}

static void trace_put_uint(trace_line *l, unsigned long long u, int neg)
{
    char tmp[24];
    size_t i = sizeof tmp;
    do
        tmp[--i] = (char)('0' + u % 10);
    while (u /= 10);
    if (neg)
        tmp[--i] = '-';
    trace_put(l, tmp + i, sizeof tmp - i);
}

/* A string field: what text_escape makes of it, so that no value can end
 * the line (a forged REQUEST_FINAL after a newline), put an escape
 * sequence on the terminal of whoever reads the file, or close a quoted
 * field early ("\"" as \x22). */
static void trace_put_text(trace_line *l, const char *s, size_t n, sbuf *scratch)
{
    size_t plain = text_plain_prefix(s, n, "\""); /* usually all of it: no copy through scratch */
    trace_put(l, s, plain);
    if (plain == n)
        return;
    sbuf_reset(scratch);
    text_escape(scratch, s + plain, n - plain, "\"");
    trace_put(l, scratch->p, scratch->len);
}

/* Renders the fields of one record (fmt: the format, a: its packed
 * arguments); scratch: for the rare printf-formatted number. */
static void trace_unpack(const char *fmt, const char *a, trace_line *l, sbuf *scratch)
{
    for (const char *f = fmt; *f;) {
        const char *pct = strchr(f, '%');
        trace_put(l, f, pct ? (size_t)(pct - f) : strlen(f));
        if (!pct)
            break;
        int prec;
        switch (trace_conv(pct + 1, &prec, &f)) {
        case 's': { /* outside values (a model, a session id, a name): escaped */
            uint32_t len;
            memcpy(&len, a, sizeof len);
            trace_put_text(l, a + sizeof len, len, scratch);
            a += sizeof len + len;
            break;
        }
        case 'd': {
            int x;
            memcpy(&x, a, sizeof x);
            a += sizeof x;
            trace_put_uint(l, x < 0 ? 0ull - (unsigned long long)x : (unsigned long long)x, x < 0);
            break;
        }
        case 'u':
        case 'z': { /* both packed as unsigned long long */
            unsigned long long x;
            memcpy(&x, a, sizeof x);
            a += sizeof x;
            trace_put_uint(l, x, 0);
            break;
        }
        case 'f': {
            double x;
            memcpy(&x, a, sizeof x);
            a += sizeof x;
            sbuf_reset(scratch);
            sbuf_put_fixed(scratch, x, prec);
            trace_put(l, scratch->p, scratch->len);
            break;
        }
        case '%':
            trace_put(l, "%", 1);
            break;
        default:
            break;
        }
    }
}

/* Turns the records in q into text lines appended to out (trace thread);
 * returns how many. */
static size_t trace_render(trace *t, const sbuf *q, sbuf *out)
{
    size_t lines = 0;
    for (size_t at = 0; at + sizeof(rec_head) <= q->len; lines++) {
        rec_head h;
        memcpy(&h, q->p + at, sizeof h);
        const char *body = q->p + at + sizeof h;
        sbuf_reserve(out, TRACE_LINE_MAX);
        trace_line l = {out->p + out->len, 0};
        l.n = trace_stamp(t, &h.when, l.p);
        trace_put(&l, h.event, strnlen(h.event, 64));
        trace_put(&l, " ", 1);
        if (h.kind == REC_LINE) { /* formatted whole on the caller's side: controls escaped, quotes are the format's */
            sbuf_reset(&t->scratch);
            text_escape(&t->scratch, body, h.len - sizeof h, NULL);
            trace_put(&l, t->scratch.p, t->scratch.len);
        }
        else
            trace_unpack(h.fmt, body, &l, &t->scratch);
        l.p[l.n++] = '\n';
        out->len += l.n;
        out->p[out->len] = '\0';
        at += h.len;
    }
    return lines;
}

void trace_event_at(trace *t, trace_site *site, const char *event, const char *fmt, ...)
{
    if (!t)
        return;
    if (!site->state)
        trace_site_parse(site, fmt);
    /* The record is built here, outside the lock (held only for one copy):
     * the head, then the packed arguments or the formatted text. */
    char rec[2 * TRACE_LINE_MAX];
    rec_head h = {.event = event, .fmt = fmt};
    clock_gettime(CLOCK_REALTIME, &h.when);
    size_t body = (size_t)-1;
    va_list ap;
    if (site->state > 0) {
        va_start(ap, fmt);
        body = trace_pack(rec + sizeof h, sizeof rec - sizeof h, site, ap);
        va_end(ap);
        h.kind = REC_FIELDS;
    }
    if (body == (size_t)-1) { /* a format the thread cannot replay, or too long: formatted here */
        h.kind = REC_LINE;
        va_start(ap, fmt);
        int n = vsnprintf(rec + sizeof h, TRACE_LINE_MAX, fmt, ap);
        va_end(ap);
        body = n < 0 ? 0 : (size_t)n < TRACE_LINE_MAX ? (size_t)n : TRACE_LINE_MAX - 1;
    }
    h.len = (uint32_t)(sizeof h + body);
    memcpy(rec, &h, sizeof h);
    pthread_mutex_lock(&t->mu);
    if (t->queue.len < (8u << 20)) /* the disk is stuck: drop rather than grow without bound */
        sbuf_append(&t->queue, rec, h.len);
    int wake = t->idle; /* else it is gathering or writing, and will look again */
    t->idle = 0;        /* one wake-up per idle spell */
    pthread_mutex_unlock(&t->mu);
    if (wake) /* after the unlock: woken under our lock, the thread would only block on it */
        pthread_cond_signal(&t->cv);
}

void trace_path_for_db(const char *db_path, char *out, unsigned long n)
{
    const char *slash = strrchr(db_path, '/');
    if (!slash)
        snprintf(out, n, "gateway-trace.log");
    else
        snprintf(out, n, "%.*s/gateway-trace.log", (int)(slash - db_path), db_path);
}
