/* stream_client.c: the load generator for long-lived streams
 * (bench/streams_long.sh). Holds N streamed chat completions open at once
 * against a gateway (or directly against bench/fast_upstream), each asking
 * the upstream for a token event every --interval-ms for --hold-ms
 * ("bench_hold_ms", "bench_interval_ms"), and measures what arrives.
 *
 * Python's asyncio tops out far below 10 000 streams x 20 events/s on two
 * cores, so this is C on one libevent loop with raw non-blocking sockets:
 * per stream a connect, one request write, then reads decoded as HTTP/1.1
 * chunked transfer and split into SSE events. No per-event allocation.
 *
 * Figures (one clock: CLOCK_MONOTONIC, shared with fast_upstream on the
 * same host):
 * All of them are taken over the window (below) only.
 *   delay   per token event: the time it was read here minus the "bench_t"
 *           the upstream stamped it with when it wrote it. Through a gateway
 *           this is upstream write -> gateway -> this client; directly it
 *           is upstream write -> this client: the difference of the two
 *           runs is what the gateway adds.
 *   gap     per stream: the largest time between two consecutive token
 *           events read here (both in the window); the upstream's own
 *           largest gap (from the stamps) is reported beside it.
 *   stretch per stream: the largest (gap read here - gap between the two
 *           events' stamps): how much longer than the upstream made it a
 *           gap became on the way, the upstream's own lateness taken out.
 *   window  from the moment all streams are open (each has its first
 *           event) to the moment the first one ends: every stream is open
 *           throughout. CPU of the measured processes (--pid, utime+stime
 *           from /proc/PID/stat, all threads) and of this process, and the
 *           token events read, are taken over the window; so is the busy
 *           time of the whole machine less those processes ("other_cores":
 *           well above 0 means other work disturbed the run).
 * --pid PID is sampled every 100 ms for VmRSS (peak), and at the window's
 * start (right after the ramp: the loop may still hold what the ramp left
 * in flight) and end (all open all along, the ramp long over).
 *
 * Prints "STREAMCLIENT key=value ..." on stdout; errors are counted, never
 * fatal. Exit 0 if every stream ended with "data: [DONE]", 1 otherwise. */
#include <event2/event.h>
#include <event2/event_struct.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SC_BUF 4096        /* bytes of one stream not yet decoded (an event is ~250) */
#define SC_HIST_US 100     /* delay histogram bucket */
#define SC_HIST_N 200000   /* 100 us x 200 000 = 20 s */

enum { ST_CONNECTING, ST_HEAD, ST_CHUNK_SIZE, ST_CHUNK_DATA, ST_CHUNK_CRLF, ST_DONE, ST_FAILED };

typedef struct sc_conn {
    struct event ev;
    int fd;
    int state;
    int opened;          /* its first event arrived */
    int done_seen;       /* data: [DONE] */
    size_t chunk_left;
    int64_t last_recv;   /* us: the previous token event read */
    int64_t last_stamp;  /* its bench_t */
    int64_t max_gap;     /* largest gap between token events read here */
    int64_t max_send_gap;/* largest gap between their stamps */
    int64_t max_added;   /* largest (gap read here - gap between the stamps) */
    size_t raw_len;      /* undecoded bytes (head, chunk framing) */
    size_t sse_len;      /* decoded body bytes not yet a whole event */
    char raw[SC_BUF];
    char sse[SC_BUF];
} sc_conn;

static struct {
    const char *host, *path, *key;
    int port, n, hold_ms, interval_ms, ramp_per_s;
    int pid, pid2;
    double timeout_s;
    struct event_base *base;
    struct sockaddr_in addr;
    char req[1024];
    size_t req_len;
    sc_conn *c;
    int started, opened, finished, ok, never_opened;
    int err_connect, err_status, err_truncated, err_other;
    char first_error[160];
    int64_t t0, t_all_open, t_first_end;
    uint64_t events, events_at_open, events_at_end;
    uint32_t *hist;
    uint64_t hist_n, hist_over;
    int64_t delay_max;
    long rss_kib_open, rss_kib_peak, rss_kib_end;
    double cpu_open[4], cpu_end[4]; /* pid, pid2, self, the whole machine busy (s) */
    struct event *ramp, *sample, *deadline;
} g;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static double proc_cpu_s(int pid)
{
    if (pid <= 0)
        return 0;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    unsigned long ut = 0, st = 0;
    /* after the name: state(3) ... utime(14) stime(15) */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static long proc_rss_kib(int pid)
{
    if (pid <= 0)
        return 0;
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    long kib = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = atol(line + 6);
    fclose(f);
    return kib;
}

/* Busy time of the whole machine (all CPUs, /proc/stat): what is not ours
 * of it is other work that disturbed the run. */
static double machine_busy_s(void)
{
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = {0};
    if (!f)
        return 0;
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                   &v[7]);
    fclose(f);
    if (n < 8)
        return 0;
    /* user nice system [idle iowait] irq softirq steal */
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

static void cpu_snap(double out[4])
{
    out[0] = proc_cpu_s(g.pid);
    out[1] = proc_cpu_s(g.pid2);
    out[2] = self_cpu_s();
    out[3] = machine_busy_s();
}

static void note_error(int *counter, const char *what)
{
    (*counter)++;
    if (!g.first_error[0])
        snprintf(g.first_error, sizeof g.first_error, "%s", what);
}

static void on_all_open(void);

static void conn_end(sc_conn *c, int ok)
{
    if (c->state == ST_DONE || c->state == ST_FAILED)
        return;
    if (!c->opened && ++g.never_opened + g.opened == g.n && g.opened)
        on_all_open(); /* every stream that will open is open */
    event_del(&c->ev);
    close(c->fd);
    c->fd = -1;
    c->state = ok ? ST_DONE : ST_FAILED;
    g.finished++;
    g.ok += ok;
    if (!g.t_first_end) {
        g.t_first_end = now_us();
        g.events_at_end = g.events;
        cpu_snap(g.cpu_end);
        g.rss_kib_end = proc_rss_kib(g.pid);
    }
    if (g.finished == g.started && g.started == g.n)
        event_base_loopbreak(g.base);
}

static void on_all_open(void)
{
    if (g.t_all_open)
        return;
    g.t_all_open = now_us();
    g.events_at_open = g.events;
    cpu_snap(g.cpu_open);
    g.rss_kib_open = proc_rss_kib(g.pid);
}

static void conn_opened(sc_conn *c)
{
    if (c->opened)
        return;
    c->opened = 1;
    if (++g.opened + g.never_opened == g.n)
        on_all_open();
}

/* One whole SSE event (without its blank line). */
static void on_event(sc_conn *c, const char *e, size_t len, int64_t t)
{
    conn_opened(c);
    if (len >= 12 && memmem(e, len, "data: [DONE]", 12)) {
        c->done_seen = 1;
        return;
    }
    const char *s = memmem(e, len, "\"bench_t\":", 10);
    if (!s)
        return; /* the head event, the first delta, the terminal event */
    int64_t stamp = 0;
    for (s += 10; s < e + len && *s >= '0' && *s <= '9'; s++)
        stamp = stamp * 10 + (*s - '0');
    g.events++;
    /* the figures are of the window in which every stream is open: not
     * the ramp (the gateway is busy opening streams) nor the tail */
    if (!g.t_all_open || g.t_first_end) {
        c->last_recv = 0;
        return;
    }
    int64_t d = t - stamp;
    if (d < 0)
        d = 0;
    if (d > g.delay_max)
        g.delay_max = d;
    if (d / SC_HIST_US < SC_HIST_N)
        g.hist[d / SC_HIST_US]++;
    else
        g.hist_over++;
    g.hist_n++;
    if (c->last_recv) {
        if (t - c->last_recv > c->max_gap)
            c->max_gap = t - c->last_recv;
        if (stamp - c->last_stamp > c->max_send_gap)
            c->max_send_gap = stamp - c->last_stamp;
        if ((t - c->last_recv) - (stamp - c->last_stamp) > c->max_added)
            c->max_added = (t - c->last_recv) - (stamp - c->last_stamp);
    }
    c->last_recv = t;
    c->last_stamp = stamp;
}

/* Decoded body bytes: split into events at blank lines. */
static int on_body(sc_conn *c, const char *p, size_t n, int64_t t)
{
    if (c->sse_len + n > sizeof c->sse)
        return -1;
    memcpy(c->sse + c->sse_len, p, n);
    c->sse_len += n;
    size_t start = 0;
    for (;;) {
        char *end = memmem(c->sse + start, c->sse_len - start, "\n\n", 2);
        if (!end)
            break;
        on_event(c, c->sse + start, (size_t)(end - (c->sse + start)), t);
        start = (size_t)(end - c->sse) + 2;
    }
    if (start) {
        memmove(c->sse, c->sse + start, c->sse_len - start);
        c->sse_len -= start;
    }
    return 0;
}

/* Decodes what is in c->raw: the response head, then chunked framing.
 * Returns 1 at the end of the body, -1 on a protocol error, 0 for more. */
static int decode(sc_conn *c, int64_t t)
{
    size_t i = 0;
    while (i < c->raw_len) {
        char *r = c->raw + i;
        size_t left = c->raw_len - i;
        if (c->state == ST_HEAD) {
            char *end = memmem(r, left, "\r\n\r\n", 4);
            if (!end)
                break;
            if (left < 12 || memcmp(r + 8, " 200", 4) != 0) {
                char msg[64];
                snprintf(msg, sizeof msg, "status: %.12s", r);
                note_error(&g.err_status, msg);
                return -2;
            }
            if (!memmem(r, (size_t)(end - r), "chunked", 7)) {
                note_error(&g.err_other, "answer not chunked");
                return -2;
            }
            i += (size_t)(end - r) + 4;
            c->state = ST_CHUNK_SIZE;
        } else if (c->state == ST_CHUNK_SIZE) {
            char *end = memmem(r, left, "\r\n", 2);
            if (!end)
                break;
            c->chunk_left = strtoul(r, NULL, 16);
            i += (size_t)(end - r) + 2;
            if (!c->chunk_left)
                return 1;
            c->state = ST_CHUNK_DATA;
        } else if (c->state == ST_CHUNK_DATA) {
            size_t take = left < c->chunk_left ? left : c->chunk_left;
            if (on_body(c, r, take, t) < 0)
                return -1;
            c->chunk_left -= take;
            i += take;
            if (!c->chunk_left)
                c->state = ST_CHUNK_CRLF;
        } else { /* ST_CHUNK_CRLF */
            if (left < 2)
                break;
            i += 2;
            c->state = ST_CHUNK_SIZE;
        }
    }
    memmove(c->raw, c->raw + i, c->raw_len - i);
    c->raw_len -= i;
    return 0;
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    sc_conn *c = arg;
    for (;;) {
        if (c->raw_len == sizeof c->raw) {
            note_error(&g.err_other, "undecodable answer");
            conn_end(c, 0);
            return;
        }
        ssize_t n = recv(fd, c->raw + c->raw_len, sizeof c->raw - c->raw_len, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) {
            note_error(&g.err_truncated, n == 0 ? "closed before the end" : strerror(errno));
            conn_end(c, 0);
            return;
        }
        c->raw_len += (size_t)n;
        int r = decode(c, now_us());
        if (r == 1) {
            if (!c->done_seen)
                note_error(&g.err_truncated, "ended without [DONE]");
            conn_end(c, c->done_seen);
            return;
        }
        if (r < 0) {
            if (r == -1)
                note_error(&g.err_other, "event too large");
            conn_end(c, 0);
            return;
        }
        if ((size_t)n < sizeof c->raw / 2)
            return; /* drained (a short read); epoll says when there is more */
    }
}

static void on_connected(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    sc_conn *c = arg;
    int err = 0;
    socklen_t el = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err) {
        note_error(&g.err_connect, strerror(err));
        conn_end(c, 0);
        return;
    }
    if (send(fd, g.req, g.req_len, MSG_NOSIGNAL) != (ssize_t)g.req_len) {
        note_error(&g.err_connect, "request not sent whole");
        conn_end(c, 0);
        return;
    }
    c->state = ST_HEAD;
    event_assign(&c->ev, g.base, fd, EV_READ | EV_PERSIST, on_readable, c);
    event_add(&c->ev, NULL);
}

static void conn_start(sc_conn *c)
{
    g.started++;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        note_error(&g.err_connect, strerror(errno));
        c->state = ST_FAILED;
        g.finished++;
        g.never_opened++;
        return;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->state = ST_CONNECTING;
    if (connect(c->fd, (struct sockaddr *)&g.addr, sizeof g.addr) != 0 && errno != EINPROGRESS) {
        note_error(&g.err_connect, strerror(errno));
        close(c->fd);
        c->fd = -1;
        c->state = ST_FAILED;
        g.finished++;
        g.never_opened++;
        return;
    }
    event_assign(&c->ev, g.base, c->fd, EV_WRITE, on_connected, c);
    event_add(&c->ev, NULL);
}

static void on_ramp(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    /* started so far should be ramp_per_s x elapsed */
    int64_t el = now_us() - g.t0;
    long due = (long)((double)g.ramp_per_s * (double)el / 1e6) + 1;
    while (g.started < g.n && g.started < due)
        conn_start(&g.c[g.started]);
    if (g.started >= g.n)
        event_del(g.ramp);
}

static void on_sample(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    long kib = proc_rss_kib(g.pid);
    if (kib > g.rss_kib_peak)
        g.rss_kib_peak = kib;
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    for (int i = 0; i < g.started; i++)
        if (g.c[i].state != ST_DONE && g.c[i].state != ST_FAILED) {
            note_error(&g.err_other, "still open at the timeout");
            conn_end(&g.c[i], 0);
        }
    event_base_loopbreak(g.base);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static double hist_pct(double q)
{
    uint64_t want = (uint64_t)(q * (double)g.hist_n), acc = 0;
    for (size_t i = 0; i < SC_HIST_N; i++) {
        acc += g.hist[i];
        if (acc > want)
            return (double)(i * SC_HIST_US + SC_HIST_US / 2) / 1000.0;
    }
    return (double)g.delay_max / 1000.0;
}

static double arr_pct(int64_t *v, size_t n, double q)
{
    if (!n)
        return 0;
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return (double)v[i] / 1000.0;
}

static void usage(void)
{
    fprintf(stderr, "usage: stream_client --port N [--host A] [--path P] [--key K] [-n N] [--hold-ms MS]\n"
                    "       [--interval-ms MS] [--ramp-per-s N] [--pid PID] [--pid2 PID] [--timeout S]\n");
}

int main(int argc, char **argv)
{
    g.host = "127.0.0.1";
    g.path = "/v1/chat/completions";
    g.key = "";
    g.n = 1000;
    g.hold_ms = 30000;
    g.interval_ms = 50;
    g.ramp_per_s = 2000;
    g.timeout_s = 0;
    for (int i = 1; i < argc; i += 2) { /* an option and its value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            usage();
            return 2;
        }
        if (!strcmp(a, "--host"))
            g.host = v;
        else if (!strcmp(a, "--port"))
            g.port = atoi(v);
        else if (!strcmp(a, "--path"))
            g.path = v;
        else if (!strcmp(a, "--key"))
            g.key = v;
        else if (!strcmp(a, "-n"))
            g.n = atoi(v);
        else if (!strcmp(a, "--hold-ms"))
            g.hold_ms = atoi(v);
        else if (!strcmp(a, "--interval-ms"))
            g.interval_ms = atoi(v);
        else if (!strcmp(a, "--ramp-per-s"))
            g.ramp_per_s = atoi(v);
        else if (!strcmp(a, "--pid"))
            g.pid = atoi(v);
        else if (!strcmp(a, "--pid2"))
            g.pid2 = atoi(v);
        else if (!strcmp(a, "--timeout"))
            g.timeout_s = atof(v);
        else {
            usage();
            return 2;
        }
    }
    if (g.port <= 0 || g.n <= 0 || g.ramp_per_s <= 0) {
        usage();
        return 2;
    }
    if (g.timeout_s <= 0)
        g.timeout_s = g.hold_ms / 1000.0 + (double)g.n / g.ramp_per_s + 30;

    /* one descriptor per stream: take what the hard limit allows */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    memset(&g.addr, 0, sizeof g.addr);
    g.addr.sin_family = AF_INET;
    g.addr.sin_port = htons((uint16_t)g.port);
    if (inet_pton(AF_INET, g.host, &g.addr.sin_addr) != 1) {
        fprintf(stderr, "stream_client: --host must be an IPv4 address\n");
        return 2;
    }
    char body[512];
    int bn = snprintf(body, sizeof body,
                      "{\"model\":\"gpt-bench\",\"stream\":true,\"bench_hold_ms\":%d,\"bench_interval_ms\":%d,"
                      "\"messages\":[{\"role\":\"user\",\"content\":\"hold this stream open\"}]}",
                      g.hold_ms, g.interval_ms);
    int rn = snprintf(g.req, sizeof g.req,
                      "POST %s HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\n"
                      "Content-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: %d\r\n\r\n%s",
                      g.path, g.host, g.port, g.key, bn, body);
    if (rn <= 0 || (size_t)rn >= sizeof g.req) {
        fprintf(stderr, "stream_client: request too long\n");
        return 2;
    }
    g.req_len = (size_t)rn;
    g.c = calloc((size_t)g.n, sizeof *g.c);
    g.hist = calloc(SC_HIST_N, sizeof *g.hist);
    struct event_config *cfg = event_config_new();
    g.base = cfg ? event_base_new_with_config(cfg) : NULL;
    if (cfg)
        event_config_free(cfg);
    if (!g.c || !g.hist || !g.base) {
        fprintf(stderr, "stream_client: out of memory\n");
        return 1;
    }
    for (int i = 0; i < g.n; i++)
        g.c[i].fd = -1;

    g.t0 = now_us();
    g.ramp = event_new(g.base, -1, EV_PERSIST, on_ramp, NULL);
    g.sample = event_new(g.base, -1, EV_PERSIST, on_sample, NULL);
    g.deadline = evtimer_new(g.base, on_deadline, NULL);
    struct timeval tick = {0, 5000}, every = {0, 100000};
    struct timeval dl = {(time_t)g.timeout_s, (suseconds_t)((g.timeout_s - (double)(time_t)g.timeout_s) * 1e6)};
    event_add(g.ramp, &tick);
    event_add(g.sample, &every);
    evtimer_add(g.deadline, &dl);
    on_ramp(-1, 0, NULL);
    event_base_dispatch(g.base);
    int64_t t_end = now_us();

    /* per-stream largest gaps, over streams that saw at least two token events */
    int64_t *gaps = calloc((size_t)g.n, sizeof *gaps), *sgaps = calloc((size_t)g.n, sizeof *sgaps),
            *added = calloc((size_t)g.n, sizeof *added);
    size_t ng = 0;
    for (int i = 0; i < g.n; i++)
        if (g.c[i].max_gap) {
            gaps[ng] = g.c[i].max_gap;
            added[ng] = g.c[i].max_added;
            sgaps[ng++] = g.c[i].max_send_gap;
        }
    qsort(gaps, ng, sizeof *gaps, cmp_i64);
    qsort(sgaps, ng, sizeof *sgaps, cmp_i64);
    qsort(added, ng, sizeof *added, cmp_i64);
    double win_s = g.t_all_open && g.t_first_end > g.t_all_open ? (double)(g.t_first_end - g.t_all_open) / 1e6 : 0;
    uint64_t win_ev = win_s > 0 ? g.events_at_end - g.events_at_open : 0;
    double us_ev[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++)
        us_ev[k] = win_ev ? (g.cpu_end[k] - g.cpu_open[k]) * 1e6 / (double)win_ev : 0;
    double iv = g.interval_ms;
    printf("STREAMCLIENT n=%d ok=%d failed=%d err_connect=%d err_status=%d err_truncated=%d err_other=%d "
           "open_at_once=%d open_s=%.2f window_s=%.2f window_events=%llu events=%llu events_per_s=%.0f "
           "delay_p50_ms=%.2f delay_p99_ms=%.2f delay_p999_ms=%.2f delay_max_ms=%.2f "
           "gap_p50_ms=%.2f gap_p99_ms=%.2f gap_max_ms=%.2f send_gap_p99_ms=%.2f send_gap_max_ms=%.2f "
           "gap_excess_p99_ms=%.2f send_gap_excess_p99_ms=%.2f gap_added_p50_ms=%.2f gap_added_p99_ms=%.2f "
           "gap_added_max_ms=%.2f "
           "pid_cpu_s=%.2f pid_us_per_event=%.2f pid2_cpu_s=%.2f pid2_us_per_event=%.2f "
           "self_cpu_s=%.2f self_us_per_event=%.2f other_cores=%.2f rss_open_kib=%ld rss_peak_kib=%ld rss_end_kib=%ld total_s=%.1f\n",
           g.n, g.ok, g.n - g.ok, g.err_connect, g.err_status, g.err_truncated, g.err_other,
           g.opened, g.t_all_open ? (double)(g.t_all_open - g.t0) / 1e6 : -1.0, win_s,
           (unsigned long long)win_ev, (unsigned long long)g.events, win_s > 0 ? (double)win_ev / win_s : 0.0,
           hist_pct(0.50), hist_pct(0.99), hist_pct(0.999), (double)g.delay_max / 1000.0, arr_pct(gaps, ng, 0.50),
           arr_pct(gaps, ng, 0.99), ng ? (double)gaps[ng - 1] / 1000.0 : 0.0, arr_pct(sgaps, ng, 0.99),
           ng ? (double)sgaps[ng - 1] / 1000.0 : 0.0, arr_pct(gaps, ng, 0.99) - iv, arr_pct(sgaps, ng, 0.99) - iv,
           arr_pct(added, ng, 0.50), arr_pct(added, ng, 0.99), ng ? (double)added[ng - 1] / 1000.0 : 0.0,
           g.cpu_end[0] - g.cpu_open[0], us_ev[0], g.cpu_end[1] - g.cpu_open[1], us_ev[1],
           g.cpu_end[2] - g.cpu_open[2], us_ev[2],
           win_s > 0 ? ((g.cpu_end[3] - g.cpu_open[3]) - (g.cpu_end[0] - g.cpu_open[0]) - (g.cpu_end[1] - g.cpu_open[1]) -
                        (g.cpu_end[2] - g.cpu_open[2])) / win_s
                     : 0.0,
           g.rss_kib_open, g.rss_kib_peak, g.rss_kib_end, (double)(t_end - g.t0) / 1e6);
    if (g.first_error[0])
        fprintf(stderr, "stream_client: first error: %s\n", g.first_error);
    free(gaps);
    free(sgaps);
    free(added);
    for (int i = 0; i < g.n; i++)
        if (g.c[i].fd >= 0) {
            event_del(&g.c[i].ev);
            close(g.c[i].fd);
        }
    event_free(g.ramp);
    event_free(g.sample);
    event_free(g.deadline);
    event_base_free(g.base);
    free(g.c);
    free(g.hist);
    return g.ok == g.n ? 0 : 1;
}
