/* upstream.c: upstream HTTP transfers on libcurl's multi interface, driven
 * by the libevent loop (the hiperfifo pattern: CURLMOPT_SOCKETFUNCTION puts
 * curl's sockets on the loop, CURLMOPT_TIMERFUNCTION drives one timer, each
 * transfer is found again through CURLOPT_PRIVATE). DNS uses curl's threaded
 * resolver, so nothing here blocks the loop.
 *
 * libcurl forbids multi calls from inside its own callbacks, and our users
 * (the proxy) start the next attempt or cancel from inside on_data. So while
 * curl is on the stack (u->in_curl), starts and cancels are queued and
 * applied from a zero-delay "kick" event.
 *
 * Connection sockets stay on the loop between transfers. curl drops its
 * interest (CURL_POLL_REMOVE) in a kept-alive connection at the end of every
 * transfer and asks again at the start of the next one; removing and adding
 * the epoll registration each time cost two epoll_ctl calls per request.
 * We open and close those sockets ourselves (CURLOPT_OPENSOCKETFUNCTION,
 * CURLOPT_CLOSESOCKETFUNCTION), so we know their whole life: between
 * transfers a socket is "parked" (still registered, curl not interested);
 * if a parked socket becomes readable (the server closed it) it leaves the
 * loop and curl's own reuse check finds it dead; it is unregistered before
 * it is closed. Other sockets curl shows us (the resolver's) are removed
 * when curl says so, as before.
 *
 * curl polls a kept-alive connection before it reuses it (is the server
 * still there?) and again right after sending a request (is the answer
 * already here?): two poll(2) calls with a zero timeout on every reused
 * connection, a third of the gateway's system calls per request, and curl
 * has no option to skip them. The loop already watches every parked and
 * active connection for readability, so poll() is defined here and answers
 * "nothing to read" for exactly that case: a zero-timeout poll, for input
 * only, of one connection socket of ours that the loop is watching for
 * input and has not reported readable (its event is not active). Such a
 * socket had nothing to read at the last epoll_wait; if the server closed
 * it since, curl's own recovery for a connection that dies on reuse (it
 * retries the request once on a fresh connection) takes over, as it must
 * anyway for a close right after its own poll. Every other call, and every
 * call from another thread, goes to the kernel (ppoll).
 *
 * Over HTTP/2 (https upstreams that offer it, and http:// ones with
 * SWITCHYARD_UPSTREAM_H2C) several transfers share one socket. Both of the
 * above hold for it: curl calls the socket function per socket, not per
 * transfer (it says CURL_POLL_REMOVE only when no transfer on the
 * connection wants it any more, so a socket is parked only when its last
 * stream ended), removing one transfer resets its stream and keeps the
 * connection, and curl's liveness poll is only made on a connection no
 * transfer is using. A parked HTTP/2 connection may get readable without
 * being closed (a PING, a GOAWAY): it leaves the loop all the same and
 * curl's reuse check reads what came. */
#include "upstream/upstream.h"
#include "base/log.h"
#include "base/sbuf.h"
#include <curl/curl.h>
#include <event2/event_struct.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <string.h>
#include <strings.h>

#define UP_MAX_HEADERS 64
#define UP_SPARE_EASY 256
#define UP_STREAM_BUFFER 4096L  /* curl's receive buffer for a stream (why 4 KiB: docs/performance.md) */
#define UP_PLAIN_BUFFER 16384L  /* and for everything else (its default) */
#define UP_CROWD_BUFFER 1024L   /* a stream's while more than UP_CROWD transfers run: curl's minimum */
#define UP_CROWD 256
#define UPSTREAM_USER_AGENT "switchyard/0.1"
#define UP_KEEP_HBUF 2048      /* the largest header buffer a kept transfer keeps */
#define UP_URLS 64              /* parsed URLs kept (one per account and endpoint in use) */

/* A URL parsed once by curl and handed to every transfer to it
 * (CURLOPT_CURLU): curl otherwise parses the URL text again on every
 * transfer and writes it back out through its printf engine, about
 * 10 000 instructions per request. */
typedef struct up_url {
    char *url;     /* NULL: free slot */
    uint64_t hash;
    CURLU *h;
    unsigned refs; /* transfers using h: it is freed only when none is */
    uint64_t origin; /* http:// URLs: a hash of "host:port" (0: another scheme) */
} up_url;

/* An http:// origin (host and port) spoken to in h2c: its one connection
 * (see upstream_h2c_plan). */
enum { UP_H2C_NONE, UP_H2C_OPENING, UP_H2C_OPEN };
typedef struct up_origin {
    uint64_t key;          /* up_url.origin; 0: free slot */
    int state;
    upstream_req *opener;  /* OPENING: the transfer opening the connection */
    upstream_req *waiting; /* OPENING: transfers to start once it is open (linked by wait_next) */
    curl_socket_t fd;      /* OPEN: its socket */
} up_origin;

struct upstream {
    struct event_base *base;
    CURLM *multi;
    struct event *timer;
    struct event *kick;
    upstream_limits lim;
    size_t active;
    int in_curl;
    int due_now;              /* curl asked to be run at once (a zero timeout) */
    void (*after_io)(void *); /* upstream_set_after_io */
    void *after_io_arg;
    upstream_req *pending; /* linked by next: to add or to remove when curl is off the stack */
    upstream_req *settled; /* linked by settled_next: streams whose request headers go (upstream_drop_sent) */
    upstream_req *spare[UP_SPARE_EASY]; /* idle transfers with their easy handles (see upstream_req_take) */
    size_t n_spare;
    struct up_sock **socks;     /* by descriptor: sockets on the loop */
    size_t n_socks;
    uint64_t fd_failures;       /* socket() failed for want of descriptors (EMFILE/ENFILE) */
    upstream *next_live;        /* this thread's upstreams, for poll() */
    int proxy_env;              /* a proxy environment variable is set: curl reads them per transfer */
    char accept_encoding[64];   /* "Accept-Encoding: " + every encoding this libcurl decodes */
    up_url urls[UP_URLS];
    size_t url_next;            /* the next slot to reuse */
    up_origin origins[UP_URLS]; /* h2c origins (SWITCHYARD_UPSTREAM_H2C) */
};

static _Thread_local upstream *up_live; /* the upstreams made on this thread (their loop's) */

struct upstream_req {
    upstream *u;
    CURL *easy;
    struct curl_slist *hdrs;
    up_url *url;             /* the parsed URL it uses, NULL if curl parses the text itself */
    upstream_callbacks cb;
    void *ud;
    struct event deadline;   /* connect backstop, then first-byte (from the request sent), then idle */
    struct timespec last_data; /* the idle limit runs from here (CLOCK_MONOTONIC); see upstream_on_deadline */
    long first_byte_ms;      /* this transfer's first-byte limit */
    int sent;                /* connected; the request is being sent (curl's pre-request callback ran) */
    char errbuf[CURL_ERROR_SIZE];
    sbuf hbuf;               /* header storage: name\0value\0..., emptied once handed on */
    size_t n_headers;
    int status;
    int headers_done;
    int added;               /* in the multi handle */
    uint64_t fd_failures_at_start; /* u->fd_failures when this transfer started */
    int cancelled;           /* no callbacks any more; free when curl is off the stack */
    int paused;
    int on_pending;          /* queued for the kick: the kick owns freeing it */
    upstream_req *next;
    int small_reads;         /* a stream (upstream_spec) */
    int on_settled;          /* queued on u->settled */
    upstream_req *settled_next;
    up_origin *h2c;          /* an h2c transfer: its origin */
    upstream_req *wait_next; /* on h2c->waiting */
};

typedef struct up_sock {
    struct event ev;
    upstream *u;
    short kind;     /* the events ev is registered for; 0: not on the loop */
    int owned;      /* a connection socket we opened: parked, not removed, between transfers */
    int parked;     /* curl is not interested now; still registered */
    up_origin *h2c; /* the connection of an h2c origin */
} up_sock;

static void upstream_check_done(upstream *u);
static void upstream_req_free(upstream_req *r);
static void upstream_req_destroy(upstream_req *r);
static void upstream_end(upstream_req *r, up_result res, const char *msg);
static void upstream_accept_encoding(upstream *u);
static int upstream_proxy_env(void);

/* ---- loop <-> curl glue ---- */

/* Frees a request's header list: one block (upstream_build_headers). */
static void upstream_headers_free(struct curl_slist *h) { free(h); }

/* A stream whose answer has begun no longer needs its request's header
 * list (curl read it when it sent the request), and holds it for as long
 * as the answer lasts: ~0.4 KiB in a dozen allocations per held stream
 * (docs/performance.md, "Long-lived streams"). Queued by
 * upstream_headers_complete and freed here, once curl is off the stack. */
static void upstream_drop_sent(upstream *u)
{
    while (u->settled && !u->in_curl) {
        upstream_req *r = u->settled;
        u->settled = r->settled_next;
        r->settled_next = NULL;
        r->on_settled = 0;
        if (r->cancelled || !r->hdrs)
            continue;
        curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, NULL);
        upstream_headers_free(r->hdrs);
        r->hdrs = NULL;
    }
}

static void upstream_settled_remove(upstream_req *r)
{
    if (!r->on_settled)
        return;
    upstream_req **pp = &r->u->settled;
    while (*pp != r)
        pp = &(*pp)->settled_next;
    *pp = r->settled_next;
    r->on_settled = 0;
}

static void upstream_socket_action(upstream *u, curl_socket_t fd, int flags)
{
    int running = 0;
    u->in_curl++;
    curl_multi_socket_action(u->multi, fd, flags, &running);
    u->in_curl--;
    upstream_check_done(u);
}

static void upstream_sock_unregister(up_sock *s)
{
    if (s->kind)
        event_del(&s->ev);
    s->kind = 0;
}

static void upstream_on_sock_event(evutil_socket_t fd, short what, void *arg)
{
    up_sock *s = arg;
    if (s->parked) {
        /* an idle kept-alive connection got readable: the server closed it
         * (or sent junk). Leave the loop; curl's reuse check decides. */
        upstream_sock_unregister(s);
        return;
    }
    int flags = (what & EV_READ ? CURL_CSELECT_IN : 0) | (what & EV_WRITE ? CURL_CSELECT_OUT : 0);
    upstream *u = s->u; /* s may be gone once curl returns */
    upstream_socket_action(u, fd, flags);
    if (u->after_io)
        u->after_io(u->after_io_arg);
}

static void upstream_on_timer(evutil_socket_t fd, short what, void *arg)
{
    upstream *u = arg;
    u->due_now = 0;
    upstream_socket_action(u, CURL_SOCKET_TIMEOUT, 0);
    if (u->after_io)
        u->after_io(u->after_io_arg);
}

static up_sock *upstream_sock_find(const upstream *u, curl_socket_t fd)
{
    return fd >= 0 && (size_t)fd < u->n_socks ? u->socks[fd] : NULL;
}

/* 1 if fd is a connection socket of ours the loop watches for input and
 * has not found readable since the last epoll_wait (see the top). */
static int upstream_quiet(curl_socket_t fd)
{
    for (const upstream *u = up_live; u; u = u->next_live) {
        const up_sock *s = upstream_sock_find(u, fd);
        if (s)
            return s->owned && (s->kind & EV_READ) && !(s->ev.ev_evcallback.evcb_flags & (EVLIST_ACTIVE | EVLIST_ACTIVE_LATER));
    }
    return 0;
}

/* glibc declares poll's array write-only (for its fortify checks); it is read here */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
    if (nfds == 1 && timeout == 0 && up_live && fds[0].fd >= 0 &&
        !(fds[0].events & ~(POLLIN | POLLPRI | POLLRDNORM | POLLRDBAND)) && upstream_quiet(fds[0].fd)) {
        fds[0].revents = 0;
        return 0;
    }
    struct timespec ts = {timeout / 1000, (timeout % 1000) * 1000000L};
    return ppoll(fds, nfds, timeout < 0 ? NULL : &ts, NULL);
}
#pragma GCC diagnostic pop

/* The up_sock for fd, created on first use; NULL when out of memory. */
static up_sock *upstream_sock_get(upstream *u, curl_socket_t fd)
{
    if (fd < 0)
        return NULL;
    if ((size_t)fd >= u->n_socks) {
        size_t n = u->n_socks ? u->n_socks : 64;
        while (n <= (size_t)fd)
            n *= 2;
        up_sock **socks = realloc(u->socks, n * sizeof *socks);
        if (!socks)
            return NULL;
        memset(socks + u->n_socks, 0, (n - u->n_socks) * sizeof *socks);
        u->socks = socks;
        u->n_socks = n;
    }
    if (!u->socks[fd]) {
        up_sock *s = calloc(1, sizeof *s);
        if (!s)
            return NULL;
        s->u = u;
        u->socks[fd] = s;
    }
    return u->socks[fd];
}

static void upstream_sock_drop(upstream *u, curl_socket_t fd)
{
    up_sock *s = upstream_sock_find(u, fd);
    if (!s)
        return;
    if (s->h2c && s->h2c->fd == fd) { /* the origin's connection is gone: the next transfer opens one */
        s->h2c->state = UP_H2C_NONE;
        s->h2c->fd = CURL_SOCKET_BAD;
    }
    upstream_sock_unregister(s);
    free(s);
    u->socks[fd] = NULL;
}

static int upstream_sock_cb(CURL *easy, curl_socket_t fd, int what, void *uarg, void *sockp)
{
    upstream *u = uarg;
    if (what == CURL_POLL_REMOVE) {
        up_sock *s = upstream_sock_find(u, fd);
        if (s && s->owned)
            s->parked = 1; /* stays registered until the next transfer or its close */
        else
            upstream_sock_drop(u, fd);
        return 0;
    }
    up_sock *s = upstream_sock_get(u, fd);
    if (!s)
        return -1;
    s->parked = 0;
    short kind = EV_PERSIST | (what & CURL_POLL_IN ? EV_READ : 0) | (what & CURL_POLL_OUT ? EV_WRITE : 0);
    if (s->kind == kind)
        return 0; /* nothing changed: no epoll_ctl */
    upstream_sock_unregister(s);
    event_assign(&s->ev, u->base, fd, kind, upstream_on_sock_event, s);
    if (event_add(&s->ev, NULL) != 0)
        return -1;
    s->kind = kind;
    return 0;
}

static void upstream_h2c_wake(up_origin *o);

/* curl opens its connection sockets here (for the transfer uarg), so we
 * know which ones we may park, and when an h2c origin's connection opens. */
static curl_socket_t upstream_open_socket(void *uarg, curlsocktype purpose, struct curl_sockaddr *a)
{
    upstream_req *r = uarg;
    upstream *u = r->u;
    curl_socket_t fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    if (fd == CURL_SOCKET_BAD && (errno == EMFILE || errno == ENFILE))
        u->fd_failures++;
    if (fd == CURL_SOCKET_BAD || purpose != CURLSOCKTYPE_IPCXN)
        return fd;
    /* a descriptor number is reused: whatever we knew of an earlier socket
     * with this number is stale (curl always says REMOVE before closing one,
     * so this is a safety net) */
    upstream_sock_drop(u, fd);
    up_sock *s = upstream_sock_get(u, fd);
    if (s)
        s->owned = 1;
    up_origin *o = r->h2c;
    if (s && o && o->opener == r) {
        o->state = UP_H2C_OPEN;
        o->opener = NULL;
        o->fd = fd;
        s->h2c = o;
        upstream_h2c_wake(o);
    }
    return fd;
}

/* ... and closes them here (after its last CURL_POLL_REMOVE): off the loop first. */
static int upstream_close_socket(void *uarg, curl_socket_t fd)
{
    upstream_sock_drop(uarg, fd);
    return close(fd);
}

static int upstream_timer_cb(CURLM *multi, long timeout_ms, void *uarg)
{
    upstream *u = uarg;
    u->due_now = timeout_ms == 0;
    if (timeout_ms <= 0) {
        evtimer_del(u->timer);
        /* "now" (a transfer just added, say): in this loop turn, after the
         * current callback (or sooner: upstream_run_due), instead of a zero
         * timeout that costs a trip through epoll_wait first */
        if (timeout_ms == 0)
            event_active(u->timer, EV_TIMEOUT, 1);
        return 0;
    }
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    evtimer_add(u->timer, &tv);
    return 0;
}

/* ---- deferred starts and cancels ---- */

/* Hands r to curl; 0 when it refused (r is then not in the multi handle). */
static int upstream_add_now(upstream_req *r)
{
    if (curl_multi_add_handle(r->u->multi, r->easy) != CURLM_OK) {
        log_warn("upstream: libcurl refused a transfer (curl_multi_add_handle failed)");
        return -1;
    }
    r->added = 1;
    return 0;
}

/* Frees r unless the kick still holds it (it frees cancelled ones itself). */
static void upstream_release(upstream_req *r)
{
    if (!r->on_pending)
        upstream_req_free(r);
}

static void upstream_on_kick(evutil_socket_t fd, short what, void *arg)
{
    upstream *u = arg;
    upstream_req *list = u->pending;
    u->pending = NULL;
    while (list) {
        upstream_req *r = list;
        list = r->next;
        r->next = NULL;
        r->on_pending = 0;
        if (r->cancelled)
            upstream_req_free(r);
        else if (upstream_add_now(r) < 0) /* its start returned already: it hears it the usual way */
            upstream_end(r, UP_INTERNAL, "the gateway could not start the upstream request (libcurl refused it)");
    }
}

static void upstream_defer(upstream_req *r)
{
    if (r->on_pending)
        return;
    r->on_pending = 1;
    r->next = r->u->pending;
    r->u->pending = r;
    event_active(r->u->kick, EV_TIMEOUT, 1);
}

/* ---- per-transfer deadlines ---- */

static void upstream_arm(upstream_req *r, long ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(&r->deadline, &tv);
}

/* Detaches r from the multi, tells the user how it ended (once) and frees it. */
static void upstream_end(upstream_req *r, up_result res, const char *msg)
{
    if (r->added) {
        curl_multi_remove_handle(r->u->multi, r->easy);
        r->added = 0;
    }
    int notify = !r->cancelled && r->cb.on_done;
    r->cancelled = 1;
    if (notify)
        r->cb.on_done(r->ud, res, msg);
    upstream_release(r);
}

/* Milliseconds since r's last data. */
static long upstream_idle_ms(const upstream_req *r)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long)(now.tv_sec - r->last_data.tv_sec) * 1000 + (now.tv_nsec - r->last_data.tv_nsec) / 1000000;
}

/* Once the headers are in, the deadline is the idle limit. Data does not
 * move it (an evtimer_add per piece of a stream was a tenth of the cost of
 * relaying it): it only notes its time, and when the deadline comes the
 * limit is measured from the last data, the timer set again for what is
 * left of it if data came meanwhile. */
static void upstream_on_deadline(evutil_socket_t fd, short what, void *arg)
{
    upstream_req *r = arg;
    if (r->paused) /* our client is slow, not the upstream: do not count it */
        return upstream_arm(r, r->u->lim.idle_timeout_ms);
    long idle = r->headers_done ? upstream_idle_ms(r) : 0;
    if (r->headers_done && idle < r->u->lim.idle_timeout_ms)
        return upstream_arm(r, r->u->lim.idle_timeout_ms - (idle > 0 ? idle : 0));
    if (r->headers_done)
        upstream_end(r, UP_TIMEOUT_IDLE, "upstream idle timeout");
    else if (r->sent)
        upstream_end(r, UP_TIMEOUT_FIRST_BYTE, "upstream first-byte timeout");
    else
        upstream_end(r, UP_TIMEOUT_CONNECT, "upstream connect timeout");
}

/* curl is connected and about to send the request (also on a reused
 * connection): the first-byte limit starts now, so connecting never eats
 * into it and it never adds to the connect limit. */
static int upstream_prereq_cb(void *arg, char *primary_ip, char *local_ip, int primary_port, int local_port)
{
    (void)primary_ip, (void)local_ip, (void)primary_port, (void)local_port;
    upstream_req *r = arg;
    if (!r->cancelled && !r->sent) {
        r->sent = 1;
        upstream_arm(r, r->first_byte_ms);
    }
    return CURL_PREREQFUNC_OK;
}

/* ---- curl callbacks (curl is on the stack: no multi calls here) ---- */

static void upstream_header_store(upstream_req *r, const char *line, size_t n)
{
    const char *colon = memchr(line, ':', n);
    if (!colon || r->n_headers >= UP_MAX_HEADERS)
        return;
    size_t nlen = (size_t)(colon - line);
    const char *v = colon + 1;
    const char *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
        end--;
    /* each cut at a NUL (a hostile upstream's), as a C string reads it, so
     * that upstream_headers_complete finds the pairs by walking hbuf */
    size_t kl = strnlen(line, nlen), vl = strnlen(v, (size_t)(end - v));
    size_t need = kl + vl + 2;
    sbuf_reserve(&r->hbuf, r->hbuf.cap || need > 1024 ? need : 1024); /* a first one: room for a usual set */
    char *o = r->hbuf.p + r->hbuf.len;
    memcpy(o, line, kl);
    o[kl] = '\0';
    memcpy(o + kl + 1, v, vl);
    o[kl + 1 + vl] = '\0';
    r->hbuf.len += kl + vl + 2;
    r->hbuf.p[r->hbuf.len] = '\0';
    r->n_headers++;
}

static int upstream_headers_complete(upstream_req *r)
{
    upstream_header h[UP_MAX_HEADERS];
    const char *q = r->hbuf.p;
    for (size_t i = 0; i < r->n_headers; i++) {
        h[i].name = q;
        q += strlen(q) + 1;
        h[i].value = q;
        q += strlen(q) + 1;
    }
    r->headers_done = 1;
    clock_gettime(CLOCK_MONOTONIC, &r->last_data);
    upstream_arm(r, r->u->lim.idle_timeout_ms);
    if (r->small_reads && r->hdrs && !r->on_settled) {
        r->on_settled = 1;
        r->settled_next = r->u->settled;
        r->u->settled = r;
    }
    if (r->cb.on_headers && r->cb.on_headers(r->ud, r->status, h, r->n_headers) < 0)
        r->cancelled = 1;
    /* the callback took what it needs: a stream held open for minutes
     * keeps no copy of its response headers; any other transfer keeps the
     * (small) buffer for the next one on its handle */
    sbuf_keep(&r->hbuf, r->small_reads ? 0 : UP_KEEP_HBUF);
    r->n_headers = 0;
    return r->cancelled ? -1 : 0;
}

static size_t upstream_header_cb(char *p, size_t size, size_t nitems, void *arg)
{
    upstream_req *r = arg;
    size_t n = size * nitems;
    if (r->cancelled)
        return 0;
    if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {
        /* a new status line (also after 1xx): start over */
        const char *sp = memchr(p, ' ', n);
        r->status = sp ? atoi(sp + 1) : 0;
        r->n_headers = 0;
        sbuf_reset(&r->hbuf);
        return n;
    }
    if ((n == 2 && p[0] == '\r') || (n == 1 && p[0] == '\n')) {
        if (r->status >= 200 && !r->headers_done && upstream_headers_complete(r) < 0)
            return 0;
        return n;
    }
    upstream_header_store(r, p, n);
    return n;
}

static size_t upstream_write_cb(char *p, size_t size, size_t nitems, void *arg)
{
    upstream_req *r = arg;
    size_t n = size * nitems;
    if (r->cancelled)
        return 0; /* aborts the transfer */
    if (!r->headers_done && upstream_headers_complete(r) < 0)
        return 0;
    clock_gettime(CLOCK_MONOTONIC, &r->last_data); /* the idle deadline is not moved: upstream_on_deadline */
    int want_pause = r->cb.on_data ? r->cb.on_data(r->ud, p, n) : 0;
    if (r->cancelled)
        return 0;
    if (want_pause == 1 && !r->paused) {
        r->paused = 1;
        curl_easy_pause(r->easy, CURLPAUSE_RECV);
    }
    return n;
}

/* ---- completion ---- */

/* 1 if a failed transfer failed for want of descriptors here, not because
 * of the upstream: a socket() of ours failed meanwhile, or the process has
 * none to spare right now. (Resolver threads and curl's own pipes fail in
 * ways that do not say why.) */
static int upstream_failed_locally(const upstream_req *r, CURLcode code)
{
    if (code != CURLE_COULDNT_CONNECT && code != CURLE_COULDNT_RESOLVE_HOST && code != CURLE_OUT_OF_MEMORY &&
        code != CURLE_FAILED_INIT)
        return 0;
    if (r->u->fd_failures != r->fd_failures_at_start)
        return 1;
    int fd = dup(STDERR_FILENO);
    if (fd < 0)
        return errno == EMFILE || errno == ENFILE;
    close(fd);
    return 0;
}

static void upstream_finish(upstream_req *r, CURLcode code)
{
    if (code != CURLE_OK && upstream_failed_locally(r, code))
        upstream_end(r, UP_LOCAL, "the gateway is out of file descriptors");
    else if (code == CURLE_OUT_OF_MEMORY)
        upstream_end(r, UP_INTERNAL, "the gateway ran out of memory for the upstream request");
    else if (code == CURLE_OPERATION_TIMEDOUT && !r->headers_done)
        upstream_end(r, UP_TIMEOUT_CONNECT, "upstream connect timeout");
    else if (code != CURLE_OK)
        upstream_end(r, UP_NETWORK, r->errbuf[0] ? r->errbuf : curl_easy_strerror(code));
    else if (!r->headers_done)
        upstream_end(r, UP_NETWORK, "upstream sent no response");
    else
        upstream_end(r, UP_OK, NULL);
}

static void upstream_check_done(upstream *u)
{
    upstream_drop_sent(u);
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(u->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        upstream_req *r = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        if (r)
            upstream_finish(r, m->data.result);
    }
}

static void upstream_h2c_leave(upstream_req *r);

static void upstream_req_free(upstream_req *r)
{
    upstream_h2c_leave(r);
    if (r->added && !r->u->in_curl) {
        curl_multi_remove_handle(r->u->multi, r->easy);
        r->added = 0;
    }
    r->u->active--;
    evtimer_del(&r->deadline);
    upstream_settled_remove(r);
    upstream_headers_free(r->hdrs);
    r->hdrs = NULL;
    if (r->url)
        r->url->refs--;
    r->url = NULL;
    if (r->u->n_spare < UP_SPARE_EASY && !r->paused) {
        /* kept with its handle, which points at it (upstream_req_take);
         * the header list it pointed at is gone */
        curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, NULL);
        r->u->spare[r->u->n_spare++] = r;
        return;
    }
    upstream_req_destroy(r);
}

/* Frees a transfer and its handle: a kept one, or one whose start failed. */
static void upstream_req_destroy(upstream_req *r)
{
    curl_easy_cleanup(r->easy);
    sbuf_free(&r->hbuf);
    free(r);
}

/* ---- public API ---- */

upstream *upstream_new(struct event_base *base, const upstream_limits *lim)
{
    upstream *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->base = base;
    u->lim = *lim;
    u->multi = curl_multi_init();
    u->timer = evtimer_new(base, upstream_on_timer, u);
    u->kick = event_new(base, -1, 0, upstream_on_kick, u);
    curl_multi_setopt(u->multi, CURLMOPT_SOCKETFUNCTION, upstream_sock_cb);
    curl_multi_setopt(u->multi, CURLMOPT_SOCKETDATA, u);
    curl_multi_setopt(u->multi, CURLMOPT_TIMERFUNCTION, upstream_timer_cb);
    curl_multi_setopt(u->multi, CURLMOPT_TIMERDATA, u);
    /* the connection cache must hold one connection per concurrent transfer,
     * or curl closes and reopens connections under load; the server sets it
     * to its client connection cap (upstream_set_max_connections) */
    curl_multi_setopt(u->multi, CURLMOPT_MAXCONNECTS, 4096L);
    /* h2c: as many streams on a connection as the server allows (curl's
     * own cap is 100): each origin has one connection (upstream_h2c_plan) */
    if (lim->h2c)
        curl_multi_setopt(u->multi, CURLMOPT_MAX_CONCURRENT_STREAMS, 1000000L);
    u->next_live = up_live;
    up_live = u;
    u->proxy_env = upstream_proxy_env();
    upstream_accept_encoding(u);
    return u;
}

void upstream_free(upstream *u)
{
    if (!u)
        return;
    upstream_on_kick(-1, 0, u);
    for (upstream **p = &up_live; *p; p = &(*p)->next_live)
        if (*p == u) {
            *p = u->next_live;
            break;
        }
    while (u->n_spare)
        upstream_req_destroy(u->spare[--u->n_spare]);
    curl_multi_cleanup(u->multi); /* closes the kept connections through upstream_close_socket */
    for (size_t i = 0; i < UP_URLS; i++) {
        curl_url_cleanup(u->urls[i].h);
        free(u->urls[i].url);
    }
    for (size_t fd = 0; fd < u->n_socks; fd++)
        upstream_sock_drop(u, (curl_socket_t)fd);
    free(u->socks);
    event_free(u->timer);
    event_free(u->kick);
    free(u);
}

/* The request headers. curl writes each of its own headers through its
 * printf engine twice (once into a string of its own, then into the
 * request) one byte at a time, and each of ours once: so the User-Agent and
 * Accept-Encoding headers it would add are given here, as ours, with the
 * same text (curl leaves out its own when ours are present).
 *
 * The list is built in one allocation, its nodes first and then the
 * "Name: value" lines: curl only reads a CURLOPT_HTTPHEADER list (it never
 * frees or keeps it), and curl_slist_append would make two allocations per
 * header. It is freed with upstream_headers_free, never
 * curl_slist_free_all. */

/* Node k of the n in h: the line "name: value" (or name alone when value
 * is NULL) written at o. Returns where the next line goes. */
static char *upstream_header_line(struct curl_slist *h, size_t n, size_t k, char *o, const char *name,
                                  const char *value)
{
    h[k].data = o;
    h[k].next = k + 1 < n ? &h[k + 1] : NULL;
    size_t l = strlen(name);
    memcpy(o, name, l);
    o += l;
    if (value) {
        *o++ = ':';
        *o++ = ' ';
        l = strlen(value);
        memcpy(o, value, l);
        o += l;
    }
    *o++ = '\0';
    return o;
}

/* NULL when out of memory: a request without all of its headers (its
 * Authorization, say) must not go out. */
static struct curl_slist *upstream_build_headers(const upstream *u, const upstream_spec *spec)
{
    /* "Expect:" (none) stops curl from asking for a 100-continue before a
     * large body; curl never asks for one before a body of 1 KiB or less
     * (1 MiB in later versions), and each header of ours is one more
     * entry it walks for every header name it checks */
    static const char ua[] = "User-Agent: " UPSTREAM_USER_AGENT;
    int expect = spec->body && spec->body_len > 1024;
    int has_ua = 0, has_ae = 0;
    size_t n = (size_t)expect, text = expect ? sizeof "Expect:" : 0;
    for (size_t i = 0; i < spec->n_headers; i++) {
        /* a name is compared in full only when its first letter matches */
        const char *name = spec->headers[i].name;
        char c = (char)(name[0] | 0x20);
        has_ua |= c == 'u' && strcasecmp(name, "User-Agent") == 0;
        has_ae |= c == 'a' && strcasecmp(name, "Accept-Encoding") == 0;
        text += strlen(name) + 2 + strlen(spec->headers[i].value) + 1;
        n++;
    }
    n += !has_ua + !has_ae;
    text += (has_ua ? 0 : sizeof ua) + (has_ae ? 0 : strlen(u->accept_encoding) + 1);
    struct curl_slist *h = malloc(n * sizeof *h + text); /* n >= 1: User-Agent or one of ours */
    if (!h)
        return NULL;
    char *o = (char *)(h + n);
    size_t k = 0;
    if (expect)
        o = upstream_header_line(h, n, k++, o, "Expect:", NULL);
    for (size_t i = 0; i < spec->n_headers; i++)
        o = upstream_header_line(h, n, k++, o, spec->headers[i].name, spec->headers[i].value);
    if (!has_ua)
        o = upstream_header_line(h, n, k++, o, ua, NULL);
    if (!has_ae)
        upstream_header_line(h, n, k++, o, u->accept_encoding, NULL);
    return h;
}

/* What curl sends for CURLOPT_ACCEPT_ENCODING "": the encodings it was
 * built to decode, in its own order, or "identity" when there are none. */
static void upstream_accept_encoding(upstream *u)
{
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    sbuf ae = SBUF_INIT;
    if (v->features & CURL_VERSION_LIBZ)
        sbuf_puts(&ae, "deflate, gzip");
    if (v->features & CURL_VERSION_BROTLI)
        sbuf_puts(&ae, ae.len ? ", br" : "br");
    if (v->features & CURL_VERSION_ZSTD)
        sbuf_puts(&ae, ae.len ? ", zstd" : "zstd");
    snprintf(u->accept_encoding, sizeof u->accept_encoding, "Accept-Encoding: %s", ae.len ? ae.p : "identity");
    sbuf_free(&ae);
}

/* 1 if any variable curl takes a proxy setting from is set. curl looks
 * them up (getenv, a URL parse) on every transfer; when none is set, the
 * handles say "no proxy" explicitly instead, which is the same answer. */
static int upstream_proxy_env(void)
{
    static const char *const vars[] = {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                                       "all_proxy",  "ALL_PROXY",  "no_proxy",    "NO_PROXY"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i]))
            return 1;
    return 0;
}

/* An http:// URL's origin, "host:port" hashed (never 0); 0 for any other scheme. */
static uint64_t upstream_url_origin(CURLU *cu)
{
    char *scheme = NULL, *host = NULL, *port = NULL;
    uint64_t h = 0;
    if (curl_url_get(cu, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK && strcasecmp(scheme, "http") == 0 &&
        curl_url_get(cu, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(cu, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
        char key[512];
        snprintf(key, sizeof key, "%s:%s", host, port);
        h = sbuf_hash(key);
        h += !h;
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    return h;
}

/* The parsed form of url, parsed now if it is not kept yet; NULL when curl
 * cannot parse it (the transfer then gets the text, and curl's own error)
 * or every slot is in use. The flags are the ones curl parses a
 * CURLOPT_URL with. */
static up_url *upstream_url(upstream *u, const char *url)
{
    uint64_t h = sbuf_hash(url);
    for (size_t i = 0; i < UP_URLS; i++)
        if (u->urls[i].url && u->urls[i].hash == h && strcmp(u->urls[i].url, url) == 0)
            return &u->urls[i];
    up_url *slot = NULL;
    for (size_t n = 0; n < UP_URLS && !slot; n++) {
        up_url *c = &u->urls[(u->url_next + n) % UP_URLS];
        if (!c->refs) {
            slot = c;
            u->url_next = (u->url_next + n + 1) % UP_URLS;
        }
    }
    if (!slot)
        return NULL;
    CURLU *cu = curl_url();
    char *copy = strdup(url);
    if (!cu || !copy || curl_url_set(cu, CURLUPART_URL, url, CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK) {
        curl_url_cleanup(cu);
        free(copy);
        return NULL;
    }
    curl_url_cleanup(slot->h);
    free(slot->url);
    slot->url = copy;
    slot->hash = h;
    slot->h = cu;
    slot->origin = u->lim.h2c ? upstream_url_origin(cu) : 0;
    return slot;
}

/* A transfer and its easy handle, with the options every transfer shares.
 * A finished transfer is kept with its handle and reused as it is (not
 * reset): curl keeps its buffers, and we skip setting these again, the
 * pointers to the transfer among them; upstream_start sets everything that
 * differs. NULL when out of memory. */
static upstream_req *upstream_req_take(upstream *u)
{
    if (u->n_spare) {
        upstream_req *r = u->spare[--u->n_spare];
        CURL *e = r->easy;
        sbuf hbuf = r->hbuf; /* emptied unless the last transfer ended before its headers did */
        memset(r, 0, sizeof *r);
        r->easy = e;
        r->hbuf = hbuf;
        sbuf_keep(&r->hbuf, UP_KEEP_HBUF);
        return r;
    }
    upstream_req *r = calloc(1, sizeof *r);
    CURL *e = r ? curl_easy_init() : NULL;
    if (!e) {
        free(r);
        return NULL;
    }
    r->easy = e;
    curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)r);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_PREREQDATA, r);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, u->lim.connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, upstream_header_cb);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, upstream_write_cb);
    curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, upstream_prereq_cb);
    if (!u->proxy_env) {
        curl_easy_setopt(e, CURLOPT_PROXY, "");
        curl_easy_setopt(e, CURLOPT_NOPROXY, "");
    }
    /* offer every encoding this libcurl decodes, and decode what comes: the
     * gateway hands on plain bytes whatever the upstream chose (it never
     * relays Content-Encoding or Content-Length); an encoding curl cannot
     * decode fails the transfer instead of reaching a client mislabelled */
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, upstream_open_socket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, r);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, upstream_close_socket);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, u);
    return r;
}

/* curl's receive buffer for a transfer: allocated at its start at this
 * size, freed at its end. A held-open stream owns it for minutes while each
 * read brings one small event, so 16 KiB there is most of what a stream
 * costs; a plain answer, read once and possibly large, keeps curl's default
 * (fewer reads). A stream reads 4 KiB at a time, a burst (a canned answer,
 * a long final event) in one or few reads and one write to the client;
 * but with more than UP_CROWD transfers in flight, memory is what runs out
 * first (10 000 held streams: ~29 MiB for the 3 KiB above curl's 1 KiB
 * minimum), so new streams get that minimum. The first 256 at 4 KiB cost
 * less (0.75 MiB over the minimum) than the first 1 000 at 2 KiB did
 * (docs/performance.md, "Long-lived streams"). */
static long upstream_buffer_size(const upstream *u, const upstream_spec *spec)
{
    if (!spec->small_reads)
        return UP_PLAIN_BUFFER;
    return u->active > UP_CROWD ? UP_CROWD_BUFFER : UP_STREAM_BUFFER;
}

/* ---- h2c: http:// upstreams over HTTP/2 (SWITCHYARD_UPSTREAM_H2C) ----
 *
 * A transfer to an http:// URL speaks HTTP/2 from its first byte (prior
 * knowledge: cleartext has no ALPN to ask with), as one stream of the one
 * connection its origin (host and port) has; every other URL keeps curl's
 * default (HTTP/2 offered over TLS by ALPN, HTTP/1.1 in clear).
 *
 * libcurl 7.88 (Debian 12's) cannot reuse a prior-knowledge connection:
 * a transfer asking for prior knowledge that is given an existing HTTP/2
 * connection layers a second HTTP/2 handler over it, which sends a new
 * connection preface and fails with "Error in the HTTP2 framing layer",
 * killing the connection's other streams (curl issue 10634, fixed in 8.0).
 * So only the transfer that opens an origin's connection asks for prior
 * knowledge, with FRESH_CONNECT so that it never reuses one; every other
 * transfer asks for plain HTTP/2 (CURL_HTTP_VERSION_2_0), which on an
 * existing HTTP/2 connection is just a new stream, with PIPEWAIT so that
 * it waits for a connection still opening instead of opening its own.
 * Transfers that start while the opener has no socket yet wait here and
 * are handed to curl when it has (curl then finds the connection in its
 * cache and waits for it to speak HTTP/2); if the opener ends first, the
 * next of them opens instead. On a fresh connection CURL_HTTP_VERSION_2_0
 * would mean HTTP/1.1 with "Upgrade: h2c", which is why it is never left to
 * open one: the multi handle allows as many streams per connection as the
 * server does (CURLMOPT_MAX_CONCURRENT_STREAMS, upstream_new). */

/* The slot of origin key: its own, or a free one; NULL when all are in use. */
static up_origin *upstream_h2c_origin(upstream *u, uint64_t key)
{
    up_origin *spare = NULL;
    for (size_t i = 0; i < UP_URLS; i++) {
        up_origin *o = &u->origins[i];
        if (o->key == key)
            return o;
        if (!spare && (!o->key || (o->state == UP_H2C_NONE && !o->waiting)))
            spare = o;
    }
    if (spare) {
        memset(spare, 0, sizeof *spare);
        spare->key = key;
        spare->fd = CURL_SOCKET_BAD;
    }
    return spare;
}

/* Sets r's HTTP version for its origin's state: 1 when r may go to curl
 * now, 0 when it waits for the origin's connection to open. */
static int upstream_h2c_plan(upstream_req *r)
{
    up_origin *o = r->h2c;
    if (o->state == UP_H2C_OPENING && o->opener != r) {
        r->wait_next = o->waiting;
        o->waiting = r;
        return 0;
    }
    int open = o->state == UP_H2C_OPEN;
    if (!open) {
        o->state = UP_H2C_OPENING;
        o->opener = r;
    }
    CURL *e = r->easy;
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, open ? (long)CURL_HTTP_VERSION_2_0 : (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, (long)open);
    curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, (long)!open);
    return 1;
}

/* The origin's connection opened (or its opener ended without one): its
 * waiting transfers go to curl through the kick (curl may be on the stack). */
static void upstream_h2c_wake(up_origin *o)
{
    upstream_req *w = o->waiting;
    o->waiting = NULL;
    while (w) {
        upstream_req *next = w->wait_next;
        w->wait_next = NULL;
        if (!w->cancelled && upstream_h2c_plan(w))
            upstream_defer(w);
        w = next;
    }
}

/* r ends: off its origin's waiting list; an opener without a connection
 * hands the opening on. */
static void upstream_h2c_leave(upstream_req *r)
{
    up_origin *o = r->h2c;
    if (!o)
        return;
    r->h2c = NULL;
    for (upstream_req **pp = &o->waiting; *pp; pp = &(*pp)->wait_next)
        if (*pp == r) {
            *pp = r->wait_next;
            break;
        }
    r->wait_next = NULL;
    if (o->opener == r) {
        o->opener = NULL;
        o->state = UP_H2C_NONE;
        upstream_h2c_wake(o);
    }
}

/* Chooses how r is spoken; 0 when it waits for its origin's connection. */
static int upstream_h2c_start(upstream_req *r)
{
    r->h2c = r->url && r->url->origin ? upstream_h2c_origin(r->u, r->url->origin) : NULL;
    if (r->h2c)
        return upstream_h2c_plan(r);
    /* https, or no slot left: curl's default (the handle may be a reused one) */
    curl_easy_setopt(r->easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_NONE);
    curl_easy_setopt(r->easy, CURLOPT_PIPEWAIT, 0L);
    curl_easy_setopt(r->easy, CURLOPT_FRESH_CONNECT, 0L);
    return 1;
}

upstream_req *upstream_start(upstream *u, const upstream_spec *spec, const upstream_callbacks *cb, void *ud)
{
    upstream_req *r = upstream_req_take(u);
    if (!r || !(r->hdrs = upstream_build_headers(u, spec))) {
        log_warn("upstream: cannot start a request: out of memory");
        goto fail;
    }
    r->u = u;
    r->fd_failures_at_start = u->fd_failures;
    r->cb = *cb;
    r->ud = ud;
    evtimer_assign(&r->deadline, u->base, upstream_on_deadline, r);
    CURL *e = r->easy;
    /* the URL: parsed once per URL and shared (upstream_url), or as text
     * when that fails; the text is copied (it can fail): on a reused handle
     * a failure would leave the last transfer's URL in place */
    r->url = upstream_url(u, spec->url);
    if (r->url) {
        r->url->refs++;
        curl_easy_setopt(e, CURLOPT_CURLU, r->url->h);
    } else {
        curl_easy_setopt(e, CURLOPT_CURLU, NULL);
        if (curl_easy_setopt(e, CURLOPT_URL, spec->url) != CURLE_OK) {
            log_warn("upstream: cannot start a request: libcurl refused its URL");
            goto fail;
        }
    }
    int now = u->lim.h2c ? upstream_h2c_start(r) : 1;
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, upstream_buffer_size(u, spec));
    r->small_reads = spec->small_reads;
    if (spec->body) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, spec->body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)spec->body_len);
    } else {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    }
    r->first_byte_ms = spec->first_byte_timeout_ms > 0 ? spec->first_byte_timeout_ms : u->lim.first_byte_timeout_ms;
    if (!now) {
        /* waits for its origin's connection (upstream_h2c_wake) */
    } else if (u->in_curl) {
        upstream_defer(r); /* a refusal then comes through on_done */
    } else if (upstream_add_now(r) < 0) {
        goto fail;
    }
    u->active++;
    /* curl enforces the connect limit itself; this is a backstop until the
     * request is sent, when the first-byte limit takes over */
    upstream_arm(r, u->lim.connect_timeout_ms + 1000);
    return r;
fail:
    if (r) {
        upstream_h2c_leave(r);
        /* the handle goes with it: a refused start is rare, and a handle
         * libcurl refused is not one to keep */
        upstream_headers_free(r->hdrs);
        if (r->url)
            r->url->refs--;
        upstream_req_destroy(r);
    }
    return NULL;
}

void upstream_cancel(upstream_req *r)
{
    if (!r || r->cancelled)
        return;
    r->cancelled = 1;
    evtimer_del(&r->deadline);
    if (!r->u->in_curl) {
        upstream_release(r);
        return;
    }
    /* curl is on the stack: hand the transfer to the kick, which removes
     * and frees it once curl has returned (a DONE reported meanwhile only
     * detaches it, see upstream_release). */
    upstream_defer(r);
}

void upstream_resume(upstream_req *r)
{
    if (!r || r->cancelled || !r->paused)
        return;
    r->paused = 0;
    upstream *u = r->u;
    u->in_curl++;
    curl_easy_pause(r->easy, CURLPAUSE_CONT);
    u->in_curl--;
    upstream_check_done(u);
}

size_t upstream_active(const upstream *u) { return u->active; }

void upstream_run_due(upstream *u)
{
    if (!u || !u->due_now || u->in_curl)
        return;
    u->due_now = 0;
    evtimer_del(u->timer); /* also takes it off the active list */
    upstream_socket_action(u, CURL_SOCKET_TIMEOUT, 0);
}

void upstream_set_after_io(upstream *u, void (*fn)(void *), void *arg)
{
    u->after_io = fn;
    u->after_io_arg = arg;
}

void upstream_set_max_connections(upstream *u, long n)
{
    /* a finished transfer's connection is closed when the cache holds more
     * than this; with 10 000 long streams to one host and 4 096 kept, most
     * streams would start on a fresh connection (a TLS handshake) */
    if (n > 0)
        curl_multi_setopt(u->multi, CURLMOPT_MAXCONNECTS, n);
}
