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
 * curl's reuse check reads what came.
 *
 * This file is the multi handle on the loop (the socket and timer
 * functions, the kick, completion, upstream_new and upstream_free); one
 * transfer's setup, deadlines, callbacks and end are upstream_transfer.c. */
#include "upstream/upstream_internal.h"
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>
#include <string.h>

static _Thread_local upstream *up_live; /* the upstreams made on this thread (their loop's) */

typedef struct up_sock {
    struct event ev;
    upstream *u;
    short kind;     /* the events ev is registered for; 0: not on the loop */
    int owned;      /* a connection socket we opened: parked, not removed, between transfers */
    int parked;     /* curl is not interested now; still registered */
    up_origin *h2c; /* the connection of an h2c origin */
} up_sock;

static void upstream_check_done(upstream *u);

/* ---- loop <-> curl glue ---- */

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

/* glibc declares poll's array write-only (for its fortify checks); it is
 * read here. GCC's warning only: clang has no -Wmaybe-uninitialized. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
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
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

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

/* curl opens its connection sockets here (for the transfer uarg), so we
 * know which ones we may park, and when an h2c origin's connection opens. */
curl_socket_t upstream_open_socket(void *uarg, curlsocktype purpose, struct curl_sockaddr *a)
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
int upstream_close_socket(void *uarg, curl_socket_t fd)
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

/* (upstream_add_now and upstream_defer, which upstream_start calls too, are
 * in upstream_internal.h.) */

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

/* ---- completion ---- */

/* Detaches r from the multi, tells the user how it ended (once) and frees it. */
void upstream_end(upstream_req *r, up_result res, const char *msg)
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

/* 1 if a failed transfer failed on what the upstream sent: curl answers a
 * response header line or a header block larger than it takes (100 KiB in
 * libcurl 7.88) with CURLE_OUT_OF_MEMORY ("Rejected N bytes header"), and
 * later versions with CURLE_TOO_LARGE. Once the upstream has begun its
 * answer (its status line came), an out-of-memory is taken as that: the
 * account's fault, failed over like a network error, where a real
 * shortage of ours would end the request with a 503 and no failover. */
static int upstream_answer_too_large(const upstream_req *r, CURLcode code)
{
#if LIBCURL_VERSION_NUM >= 0x080600
    if (code == CURLE_TOO_LARGE)
        return 1;
#endif
    return code == CURLE_OUT_OF_MEMORY && r->status > 0;
}

static void upstream_finish(upstream_req *r, CURLcode code)
{
    if (code != CURLE_OK && upstream_failed_locally(r, code))
        upstream_end(r, UP_LOCAL, "the gateway is out of file descriptors");
    else if (code != CURLE_OK && upstream_answer_too_large(r, code))
        upstream_end(r, UP_NETWORK, "the upstream's response headers are larger than the gateway takes");
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
