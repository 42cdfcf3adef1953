/* conn_limit.c: client connections as a resource (see conn_limit.h).
 *
 * Counting: evhttp has no hook for "connection closed" that is free to use
 * (the close callback belongs to proxy.c), so the bufferevent of every
 * client connection is made here (evhttp_set_bevcb) and kept with an extra
 * reference. evhttp clears a bufferevent's callbacks when it frees its
 * connection (and shuts the socket down, so the client sees the close at
 * once); a sweep every CONN_SWEEP_MS finds those and drops the reference,
 * which deletes the events and closes the descriptor, in that order. (Made
 * without BEV_OPT_CLOSE_ON_FREE, evhttp would close the descriptor while
 * the kept bufferevent still had a read event on it, and a new connection
 * given the same number would share it.) The count is thus an upper bound
 * between sweeps, and a sweep runs before any decision.
 *
 * Out of descriptors: libevent's listener retries a failing accept() on
 * every loop turn (100 % CPU, a log line each time). The error callback here
 * refuses one waiting client with a spare descriptor kept for that purpose,
 * then pauses accepting for CONN_PAUSE_MS; pending clients wait in the
 * kernel's backlog meanwhile. */
#include "conn_limit.h"
#include "log.h"
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define CONN_PAUSE_MS 250
#define CONN_SWEEP_MS 100

/* libevent hands a listener's error callback the accept callback's
 * argument, which is evhttp's own; the one gateway per process is found here. */
static struct conn_limit *conn_limit_active;

struct conn_limit {
    struct event_base *base;
    struct evconnlistener *lev;
    struct bufferevent **bevs;
    unsigned char *over;  /* accepted beyond the cap: answered with a refusal */
    size_t n, alloc, n_over;
    size_t cap, slack;
    struct event *resume;
    struct event *sweeper;
    int spare_fd;         /* kept open to refuse a client when out of descriptors */
    conn_limit_stats st;
};

long conn_limit_raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return -1;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t want = rl.rlim_max;
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            log_warn("cannot raise the descriptor limit to %llu: %s", (unsigned long long)want, strerror(errno));
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (rlim_t)1 << 30 ? 1L << 30 : (long)rl.rlim_cur;
}

static void conn_limit_drop(conn_limit *cl, size_t i)
{
    bufferevent_decref(cl->bevs[i]);
    if (cl->over[i])
        cl->n_over--;
    cl->n--;
    cl->bevs[i] = cl->bevs[cl->n];
    cl->over[i] = cl->over[cl->n];
}

void conn_limit_sweep(conn_limit *cl)
{
    for (size_t i = 0; i < cl->n;) {
        bufferevent_data_cb r, w;
        bufferevent_event_cb e;
        bufferevent_getcb(cl->bevs[i], &r, &w, &e, NULL);
        if (!r && !w && !e) /* evhttp freed the connection */
            conn_limit_drop(cl, i);
        else
            i++;
    }
    cl->st.open = cl->n;
}

static void conn_limit_pause(conn_limit *cl)
{
    if (cl->st.paused)
        return;
    evconnlistener_disable(cl->lev);
    cl->st.paused = 1;
    cl->st.accept_pauses++;
    struct timeval tv = {0, CONN_PAUSE_MS * 1000};
    evtimer_add(cl->resume, &tv);
}

static void conn_limit_on_resume(evutil_socket_t fd, short what, void *arg)
{
    conn_limit *cl = arg;
    conn_limit_sweep(cl);
    if (cl->n >= cl->cap + cl->slack) {
        struct timeval tv = {0, CONN_PAUSE_MS * 1000};
        evtimer_add(cl->resume, &tv);
        return;
    }
    cl->st.paused = 0;
    evconnlistener_enable(cl->lev);
}

static struct bufferevent *conn_limit_on_new(struct event_base *base, void *arg)
{
    conn_limit *cl = arg;
    if (cl->n >= cl->cap)
        conn_limit_sweep(cl);
    if (cl->n == cl->alloc) {
        size_t na = cl->alloc ? cl->alloc * 2 : 256;
        struct bufferevent **b = realloc(cl->bevs, na * sizeof *b);
        unsigned char *o = b ? realloc(cl->over, na) : NULL;
        if (!b || !o)
            abort(); /* same policy as sbuf */
        cl->bevs = b;
        cl->over = o;
        cl->alloc = na;
    }
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!bev)
        return NULL; /* evhttp makes its own; it goes uncounted */
    bufferevent_incref(bev);
    int over = cl->n >= cl->cap;
    cl->bevs[cl->n] = bev;
    cl->over[cl->n] = (unsigned char)over;
    cl->n++;
    cl->n_over += (size_t)over;
    cl->st.open = cl->n;
    if (over)
        log_warn("client connections: %zu open, the cap is %zu: refusing new ones", cl->n, cl->cap);
    if (cl->n >= cl->cap + cl->slack) {
        log_warn("client connections: %zu open, far over the cap of %zu: pausing accept for %d ms", cl->n, cl->cap,
                 CONN_PAUSE_MS);
        conn_limit_pause(cl);
    }
    return bev;
}

/* Out of descriptors: answer one waiting client with the spare descriptor
 * so it hears why, instead of waiting in the backlog. */
static void conn_limit_refuse_one(conn_limit *cl)
{
    static const char body[] = "{\"error\":{\"message\":\"the gateway is out of file descriptors; retry shortly\","
                               "\"type\":\"server_error\",\"code\":\"too_many_connections\"}}\n";
    if (cl->spare_fd < 0)
        return;
    close(cl->spare_fd);
    cl->spare_fd = -1;
    int fd = accept4(evconnlistener_get_fd(cl->lev), NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
        char head[256], junk[4096];
        int hn = snprintf(head, sizeof head,
                          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                          "Content-Length: %zu\r\nRetry-After: 1\r\nConnection: close\r\n\r\n",
                          sizeof body - 1);
        while (recv(fd, junk, sizeof junk, MSG_DONTWAIT) > 0) {
        }
        if (send(fd, head, (size_t)hn, MSG_NOSIGNAL | MSG_DONTWAIT) == hn)
            send(fd, body, sizeof body - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        shutdown(fd, SHUT_WR);
        close(fd);
        cl->st.fd_refused++;
    }
    cl->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void conn_limit_on_sweep(evutil_socket_t fd, short what, void *arg) { conn_limit_sweep(arg); }

static void conn_limit_on_accept_error(struct evconnlistener *lev, void *arg)
{
    conn_limit *cl = conn_limit_active;
    if (!cl || cl->lev != lev)
        return;
    int err = EVUTIL_SOCKET_ERROR();
    conn_limit_sweep(cl); /* descriptors of connections closed since the last sweep */
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        conn_limit_refuse_one(cl);
        log_warn("accept(): %s (%zu client connections open, descriptor limit %ld): pausing new connections for %d ms",
                 strerror(err), cl->n, cl->st.nofile, CONN_PAUSE_MS);
    } else {
        log_warn("accept(): %s: pausing new connections for %d ms", strerror(err), CONN_PAUSE_MS);
    }
    conn_limit_pause(cl);
}

conn_limit *conn_limit_new(struct event_base *base, struct evhttp *http, struct evhttp_bound_socket *bound,
                           size_t cap, long nofile)
{
    conn_limit *cl = calloc(1, sizeof *cl);
    if (!cl)
        return NULL;
    cl->base = base;
    cl->lev = evhttp_bound_socket_get_listener(bound);
    cl->cap = cap;
    cl->slack = cap / 8 + 16;
    cl->st.cap = cap;
    cl->st.nofile = nofile;
    cl->resume = evtimer_new(base, conn_limit_on_resume, cl);
    cl->sweeper = event_new(base, -1, EV_PERSIST, conn_limit_on_sweep, cl);
    struct timeval every = {0, CONN_SWEEP_MS * 1000};
    event_add(cl->sweeper, &every);
    cl->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    conn_limit_active = cl;
    evconnlistener_set_error_cb(cl->lev, conn_limit_on_accept_error);
    evhttp_set_bevcb(http, conn_limit_on_new, cl);
    return cl;
}

void conn_limit_free(conn_limit *cl)
{
    if (!cl)
        return;
    if (conn_limit_active == cl)
        conn_limit_active = NULL;
    while (cl->n)
        conn_limit_drop(cl, cl->n - 1);
    free(cl->bevs);
    free(cl->over);
    if (cl->resume)
        event_free(cl->resume);
    if (cl->sweeper)
        event_free(cl->sweeper);
    if (cl->spare_fd >= 0)
        close(cl->spare_fd);
    free(cl);
}

int conn_limit_refused(conn_limit *cl, struct evhttp_request *req)
{
    if (!cl || !cl->n_over)
        return 0;
    struct evhttp_connection *c = evhttp_request_get_connection(req);
    struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
    for (size_t i = 0; bev && i < cl->n; i++)
        if (cl->bevs[i] == bev) {
            if (cl->over[i])
                cl->st.refused++;
            return cl->over[i];
        }
    return 0;
}

void conn_limit_stats_get(conn_limit *cl, conn_limit_stats *out)
{
    if (!cl) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = cl->st;
    out->open = cl->n;
}
