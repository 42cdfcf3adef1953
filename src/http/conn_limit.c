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
 * Slow requests: evhttp's timeout is per read, so a client that sends a
 * byte every few seconds holds its connection for ever. Each connection's
 * input buffer has a callback here that notes when the bytes of a request
 * began to arrive; an answer starting on its output buffer (whichever
 * handler writes it: server.c, the admin API, libevent itself) or the
 * request's dispatch (conn_limit_request) clears it. A request not whole
 * within the request timeout gets a 408 written on the socket and the
 * socket shut down; evhttp then sees the end and frees it.
 *
 * Bodies still arriving: the body budget (SWITCHYARD_MAX_BODIES_IN_FLIGHT)
 * is checked when a request is dispatched, but until then libevent holds
 * its bytes, up to its own body cap, for every connection: many slow
 * clients each part-way through a large body would pass the budget
 * unseen. The input callback counts the bytes each connection received
 * since its last request was dispatched (its next request's head and body,
 * and what a client pipelines while its answer is written); dispatch and
 * the start of an answer set the count back to what still waits in the
 * connection's buffer. When the bytes held by requests in progress plus
 * those still arriving pass the budget, the connection whose bytes passed
 * it is answered 503 body_budget_exceeded on the socket (unless nothing
 * else is held: a body alone is always accepted, as at dispatch; nor while
 * it holds CONN_BODY_ALLOWANCE or less: a request head, a GET, a small
 * body whose dispatch decides). One request past max_request (the body
 * limit and its head) is answered 413 the same way. After such an answer
 * the connection lingers (conn_limit_linger) and is closed. If an answer
 * is being written on it (the bytes are pipelined), it stops being read
 * instead (a read watermark, lifted by the sweep once the answer is out):
 * TCP holds the client back.
 *
 * Per address: one client address may hold at most per_ip_cap of the
 * connections (IPv6 counts by /64, what one host is usually given; an
 * IPv4-mapped address as IPv4), so one client cannot take every slot. The
 * address is read (getpeername, once per connection) right after accept:
 * evhttp gives the bufferevent its descriptor only after asking us for it,
 * so new connections wait on a list for a zero-delay event in the same
 * loop turn. A connection over its address's share is answered 503
 * too_many_connections on the socket at once, lingers and is closed,
 * before it sends anything: one that waited for its first request, as
 * connections over the global cap do, would hold its slot while it stayed
 * silent. The gateway's own connections to itself (a WebSocket's loopback
 * connection, http/ws.c) are announced by their local address and port
 * before they are accepted (conn_limit_expect_own) and take no share: they
 * would all come from one address (the gateway's), and the client they
 * serve holds its share with its own connection already. Their bytes are
 * not refused by the body budget either: each carries a WebSocket message
 * admitted with the copy it makes here (http/ws.c). So they are told
 * apart even with no per-address cap: one getsockname per loopback
 * connection, one getpeername per connection accepted while one is
 * announced.
 *
 * Answers: while an answer is written, the client has nothing to say, so
 * the connection's read timeout (evhttp's idle timeout, re-armed by evhttp
 * at every chunk it writes) is lifted from its first byte until evhttp goes
 * back to reading a request (the sweep sees its read callback again). A
 * stream then lives through an upstream pause longer than the idle timeout
 * (a model thinking, a tool running): the upstream idle timeout bounds that
 * pause. The write timeout stays: a client that stops reading is still cut
 * off.
 *
 * Out of descriptors: libevent's listener retries a failing accept() on
 * every loop turn (100 % CPU, a log line each time). The error callback here
 * refuses one waiting client with a spare descriptor kept for that purpose,
 * then pauses accepting for CONN_PAUSE_MS; pending clients wait in the
 * kernel's backlog meanwhile. */
#include "http/conn_limit.h"
#include "base/log.h"
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#define CONN_PAUSE_MS 250
#define CONN_SWEEP_MS 100
#define CONN_BACKLOG 4096
#define CONN_LINGER_S 1.0 /* after a refusal on the socket: what the client still sends is dropped this long */
/* arriving bytes a connection may hold past the body budget: a request's
 * head and a small body, refused at dispatch if at all (a health probe or
 * a GET has no body to refuse) */
#define CONN_BODY_ALLOWANCE 16384
#define CONN_OWN_MAX 256      /* own connections announced and not yet accepted, at most */
#define CONN_OWN_TTL_S 10.0   /* an announced connection not accepted by then is forgotten */

/* libevent hands a listener's error callback the accept callback's
 * argument, which is evhttp's own; the one gateway per process is found here. */
static struct conn_limit *conn_limit_active;

/* One client address (IPv4 as ::ffff:a.b.c.d, IPv6 its /64) and its open connections. */
typedef struct conn_addr {
    unsigned char key[16];
    size_t count;
    struct conn_addr *next;
} conn_addr;

typedef struct conn_entry {
    struct bufferevent *bev;    /* ours: one reference */
    int fd;                     /* -1 until its first bytes arrive */
    int over;                   /* accepted beyond the cap: answered with a refusal */
    int answered;               /* a refusal (408, 413, 503) was written on the socket: no clock, no
                                 * count, and nothing it sent is served */
    int answering;              /* an answer is being written: no read timeout */
    size_t receiving;           /* bytes received since its last request was dispatched */
    double linger_until;        /* refused: shut down for good then (monotonic s); 0: not lingering */
    int throttled;              /* a read watermark holds its pipelined bytes back until the answer is out */
    int discarding;             /* refused: what the client still sends is read and dropped until linger_until */
    int unresolved;             /* on cl->unresolved: its address is not known yet */
    int upgraded;               /* a WebSocket now (conn_limit_upgrade): only counted */
    int own;                    /* the gateway's own (a WebSocket's loopback, conn_limit_expect_own) */
    conn_addr *addr;            /* counted for this address; NULL: not counted */
    double reading_since;       /* a request's first bytes arrived then (monotonic s); 0: none pending */
    struct conn_limit *cl;
} conn_entry;

struct conn_limit {
    struct event_base *base;
    struct evconnlistener *lev;
    conn_entry **conns;
    size_t n, alloc, n_over;
    conn_entry **by_fd;   /* descriptor -> entry, for the request's lookup */
    size_t by_fd_len;
    size_t cap, slack;
    double request_timeout_s;
    struct timeval idle;  /* evhttp's read/write timeout */
    struct event *resume;
    struct event *sweeper;
    int spare_fd;         /* kept open to refuse a client when out of descriptors */
    size_t receiving;     /* the sum of the entries' receiving */
    size_t body_budget;   /* 0: none */
    size_t max_request;   /* one request's head and body at most; 0: no such check */
    const size_t *held;   /* bytes of bodies held by requests in progress (the server's count) */
    size_t per_ip_cap;    /* 0: none */
    int per_ip_loopback;  /* loopback clients are held to it too */
    conn_addr **addrs;    /* hash buckets */
    size_t n_addrs, n_buckets;
    struct {                 /* own connections announced, not accepted yet (oldest first) */
        unsigned char addr[16];
        uint16_t port;
        double at;
    } own[CONN_OWN_MAX];
    size_t n_own;
    conn_entry **unresolved; /* accepted, address not read yet */
    size_t n_unresolved, alloc_unresolved;
    struct event *resolver;
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

static double conn_limit_now(const conn_limit *cl)
{
    struct timeval tv;
    event_base_gettimeofday_cached(cl->base, &tv);
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static void conn_limit_on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg);
static void conn_limit_on_output(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg);
static void conn_limit_note_fd(conn_limit *cl, conn_entry *e);
void conn_limit_sweep(conn_limit *cl);

static size_t conn_addr_hash(const unsigned char key[16])
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (int i = 0; i < 16; i++)
        h = (h ^ key[i]) * 1099511628211ull;
    return (size_t)(h ^ (h >> 32));
}

static void conn_addr_release(conn_limit *cl, conn_addr *a)
{
    if (--a->count)
        return;
    conn_addr **pp = &cl->addrs[conn_addr_hash(a->key) & (cl->n_buckets - 1)];
    while (*pp != a)
        pp = &(*pp)->next;
    *pp = a->next;
    free(a);
    cl->n_addrs--;
}

/* The entry for key, made on first use (NULL when out of memory). */
static conn_addr *conn_addr_get(conn_limit *cl, const unsigned char key[16])
{
    if (cl->n_addrs >= cl->n_buckets) {
        size_t nb = cl->n_buckets ? cl->n_buckets * 2 : 256;
        conn_addr **b = calloc(nb, sizeof *b);
        if (!b && !cl->n_buckets)
            return NULL;
        if (b) {
            for (size_t i = 0; i < cl->n_buckets; i++)
                for (conn_addr *a = cl->addrs[i], *next; a; a = next) {
                    next = a->next;
                    conn_addr **head = &b[conn_addr_hash(a->key) & (nb - 1)];
                    a->next = *head;
                    *head = a;
                }
            free(cl->addrs);
            cl->addrs = b;
            cl->n_buckets = nb;
        }
    }
    conn_addr **head = &cl->addrs[conn_addr_hash(key) & (cl->n_buckets - 1)];
    for (conn_addr *a = *head; a; a = a->next)
        if (!memcmp(a->key, key, 16))
            return a;
    conn_addr *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    memcpy(a->key, key, 16);
    a->next = *head;
    *head = a;
    cl->n_addrs++;
    return a;
}

static void conn_limit_drop(conn_limit *cl, size_t i)
{
    conn_entry *e = cl->conns[i];
    if (e->unresolved)
        for (size_t k = 0; k < cl->n_unresolved; k++)
            if (cl->unresolved[k] == e) {
                cl->unresolved[k] = cl->unresolved[--cl->n_unresolved];
                break;
            }
    if (e->addr)
        conn_addr_release(cl, e->addr);
    if (e->fd >= 0 && (size_t)e->fd < cl->by_fd_len && cl->by_fd[e->fd] == e)
        cl->by_fd[e->fd] = NULL;
    evbuffer_remove_cb(bufferevent_get_input(e->bev), conn_limit_on_input, e);
    evbuffer_remove_cb(bufferevent_get_output(e->bev), conn_limit_on_output, e);
    cl->receiving -= e->receiving;
    bufferevent_decref(e->bev);
    if (e->over)
        cl->n_over--;
    free(e);
    cl->conns[i] = cl->conns[--cl->n];
}

/* A whole answer written on the socket itself, for refusals made where no
 * evhttp request exists to answer (before or while one arrives): the JSON
 * error with Connection: close (and Retry-After: 1 with a 503). message,
 * type and code are fixed texts that need no JSON escaping. */
static void conn_limit_answer_raw(int fd, int status, const char *type, const char *code, const char *message)
{
    char body[320], answer[576];
    int bn = snprintf(body, sizeof body, "{\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"code\":\"%s\"}}\n",
                      message, type, code);
    if (bn < 0 || (size_t)bn >= sizeof body)
        return;
    int n = snprintf(answer, sizeof answer,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s"
                     "Connection: close\r\n\r\n%s",
                     status,
                     status == 503   ? "Service Unavailable"
                     : status == 413 ? "Payload Too Large"
                                     : "Request Timeout",
                     bn, status == 503 ? "Retry-After: 1\r\n" : "", body);
    if (n > 0 && (size_t)n < sizeof answer) /* head and body in one segment: one system call */
        send(fd, answer, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* After a refusal written on the socket: the end of the answer (FIN), and
 * what the client still sends (the rest of its request, in one write or
 * several) is read and dropped, never buffered or served, so the client
 * is not reset before it reads the answer. The sweep shuts it down for
 * good after CONN_LINGER_S: a client that never stops does not keep it. */
static void conn_limit_linger(conn_limit *cl, conn_entry *e)
{
    e->answered = 1;
    e->discarding = 1;
    cl->receiving -= e->receiving;
    e->receiving = 0;
    struct evbuffer *in = bufferevent_get_input(e->bev);
    evbuffer_drain(in, evbuffer_get_length(in));
    shutdown(e->fd, SHUT_WR);
    e->linger_until = conn_limit_now(cl) + CONN_LINGER_S;
}

/* A request that is not whole in time: answered 408 on the socket (nothing
 * else writes to it while a request is being read) and shut down. */
static void conn_limit_time_out(conn_limit *cl, conn_entry *e)
{
    e->answered = 1;
    cl->st.slow_requests_closed++;
    log_warn("client connection: a request still incomplete after %.0f s; answering 408 and closing",
             cl->request_timeout_s);
    conn_limit_answer_raw(e->fd, 408, "invalid_request_error", "request_timeout",
                          "the request did not arrive whole in time");
    shutdown(e->fd, SHUT_RDWR);
}

/* What arrived before this point belongs to a request that is dispatched
 * or answered: only the bytes still in the connection's buffer (the start
 * of a pipelined next request) count from here on. */
static void conn_limit_receiving_reset(conn_entry *e)
{
    size_t now = evbuffer_get_length(bufferevent_get_input(e->bev));
    e->cl->receiving = e->cl->receiving - e->receiving + now;
    e->receiving = now;
}

/* 1 while evhttp waits for the client's request on e: its read callback
 * is set (not while an answer is written: then reading only watches for a
 * close), reading is on (off while the request waits for its answer) and
 * nothing waits to be written. Only then may a refusal be written on the
 * socket: nothing else is being said on it. */
static int conn_limit_reading(const conn_entry *e)
{
    bufferevent_data_cb r;
    bufferevent_getcb(e->bev, &r, NULL, NULL, NULL);
    return r && (bufferevent_get_enabled(e->bev) & EV_READ) && !evbuffer_get_length(bufferevent_get_output(e->bev));
}

/* The bytes arriving on e passed a limit: status (413: one request too
 * large; 503: the body budget) if e is reading a request (as for a slow
 * request: on the socket, then shut down), else no more reading until
 * evhttp reads its next request (which then passes the same checks). */
static void conn_limit_refuse_body(conn_limit *cl, conn_entry *e, int status)
{
    if (!conn_limit_reading(e)) {
        /* not bufferevent_disable: evhttp enables reading again with every
         * chunk it writes (to see a close). A read watermark at what is
         * held stops reading; the sweep lifts it once evhttp reads
         * requests again (evhttp only looks at what waits in the buffer
         * when more arrives). */
        size_t held = evbuffer_get_length(bufferevent_get_input(e->bev));
        bufferevent_setwatermark(e->bev, EV_READ, 0, held ? held : 1);
        e->throttled = 1;
        return;
    }
    if (status == 413) {
        char msg[160];
        snprintf(msg, sizeof msg, "request is over %zu bytes, more than a request may be (its body limit and headers)",
                 cl->max_request);
        log_warn("client connection: a request still arriving is over %zu bytes; answering 413 and closing",
                 cl->max_request);
        conn_limit_answer_raw(e->fd, 413, "invalid_request_error", "request_too_large", msg);
        conn_limit_linger(cl, e);
        return;
    }
    log_warn("client connection: %zu bytes of a request still arriving would pass the body budget of %zu bytes "
             "(%zu held, %zu arriving in all); answering 503 and closing",
             e->receiving, cl->body_budget, *cl->held, cl->receiving);
    cl->st.bodies_refused++;
    conn_limit_answer_raw(e->fd, 503, "server_error", "body_budget_exceeded",
                          "the gateway holds as many bytes of request bodies as its budget allows; retry shortly");
    conn_limit_linger(cl, e);
}

/* An address and port as 16 bytes (IPv4 as ::ffff:a.b.c.d) and a port; -1 if not IP. */
static int conn_limit_full_addr(const struct sockaddr_storage *ss, unsigned char addr[16], uint16_t *port)
{
    memset(addr, 0, 16);
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
        addr[10] = addr[11] = 0xff;
        memcpy(addr + 12, &in->sin_addr, 4);
        *port = in->sin_port;
        return 0;
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
        memcpy(addr, &in6->sin6_addr, 16);
        *port = in6->sin6_port;
        return 0;
    }
    return -1;
}

/* Forgets the announced connections older than CONN_OWN_TTL_S (their
 * connect failed, or the listener refused them). */
static void conn_limit_own_expire(conn_limit *cl, double now)
{
    size_t k = 0;
    while (k < cl->n_own && now - cl->own[k].at > CONN_OWN_TTL_S)
        k++;
    if (k) {
        memmove(cl->own, cl->own + k, (cl->n_own - k) * sizeof cl->own[0]);
        cl->n_own -= k;
    }
}

void conn_limit_expect_own(conn_limit *cl, int fd)
{
    if (!cl)
        return;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    unsigned char addr[16];
    uint16_t port;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0 || conn_limit_full_addr(&ss, addr, &port) != 0)
        return;
    double now = conn_limit_now(cl);
    conn_limit_own_expire(cl, now);
    if (cl->n_own == CONN_OWN_MAX) { /* a burst: the oldest is counted against its address after all */
        memmove(cl->own, cl->own + 1, (CONN_OWN_MAX - 1) * sizeof cl->own[0]);
        cl->n_own--;
    }
    memcpy(cl->own[cl->n_own].addr, addr, 16);
    cl->own[cl->n_own].port = port;
    cl->own[cl->n_own].at = now;
    cl->n_own++;
}

/* 1 when the peer ss is an own connection announced (it is taken off the list). */
static int conn_limit_is_own(conn_limit *cl, const struct sockaddr_storage *ss)
{
    unsigned char addr[16];
    uint16_t port;
    if (!cl->n_own || conn_limit_full_addr(ss, addr, &port) != 0)
        return 0;
    for (size_t i = 0; i < cl->n_own; i++)
        if (cl->own[i].port == port && memcmp(cl->own[i].addr, addr, 16) == 0) {
            memmove(cl->own + i, cl->own + i + 1, (cl->n_own - i - 1) * sizeof cl->own[0]);
            cl->n_own--;
            return 1;
        }
    return 0;
}

/* The client address of e's socket as a key; 0 if it is not counted
 * (unknown, not IP, loopback when loopback clients are exempt, or one of
 * the gateway's own connections). */
static int conn_limit_addr_key(conn_limit *cl, conn_entry *e, int fd, unsigned char key[16])
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    if (conn_limit_is_own(cl, &ss)) {
        e->own = 1;
        return 0;
    }
    if (!cl->per_ip_cap)
        return 0;
    memset(key, 0, 16);
    int loopback;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &in->sin_addr, 4);
        loopback = key[12] == 127;
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            memcpy(key, &in6->sin6_addr, 16);
            loopback = key[12] == 127;
        } else {
            memcpy(key, &in6->sin6_addr, 8); /* the /64 */
            loopback = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
        }
    } else {
        return 0;
    }
    return !loopback || cl->per_ip_loopback;
}

/* e is one connection too many for its address: a 503 on the socket
 * before it says anything (as when out of descriptors), then closed. */
static void conn_limit_refuse_addr(conn_limit *cl, conn_entry *e, int fd)
{
    cl->st.refused_per_ip++;
    if (cl->st.refused_per_ip == 1 || cl->st.refused_per_ip % 1000 == 0)
        log_warn("client connections: an address has %zu open, the cap per address is %zu: refusing more "
                 "(%llu refused so far)",
                 e->addr->count, cl->per_ip_cap, (unsigned long long)cl->st.refused_per_ip);
    conn_limit_answer_raw(fd, 503, "server_error", "too_many_connections",
                          "this client address has as many connections open as the gateway allows one address; "
                          "close some or retry shortly");
    conn_limit_linger(cl, e);
}

/* Connections accepted since the last run: their addresses are known now.
 * Before one is refused, the connections its address already closed are
 * released (a sweep, at most once a run): the count lags up to a sweep
 * period behind, and a client that reconnects at once must not pay for it.
 * Entries are taken off the front of the list one at a time, so a sweep
 * that drops one still waiting there leaves nothing dangling. */
static void conn_limit_on_resolve(evutil_socket_t unused, short what, void *arg)
{
    conn_limit *cl = arg;
    int swept = 0;
    while (cl->n_unresolved) { /* in the order of accept: the latest is the one too many */
        conn_entry *e = cl->unresolved[0];
        memmove(cl->unresolved, cl->unresolved + 1, --cl->n_unresolved * sizeof *cl->unresolved);
        e->unresolved = 0;
        int fd = bufferevent_getfd(e->bev);
        unsigned char key[16];
        if (fd < 0 || !conn_limit_addr_key(cl, e, fd, key) || !(e->addr = conn_addr_get(cl, key)))
            continue;
        if (++e->addr->count <= cl->per_ip_cap)
            continue;
        bufferevent_data_cb r, w;
        bufferevent_event_cb ev;
        bufferevent_getcb(e->bev, &r, &w, &ev, NULL);
        if (!r && !w && !ev)
            continue; /* evhttp let it go already: the sweep drops it */
        if (!swept) {
            swept = 1;
            conn_limit_sweep(cl); /* e is live, so it stays */
            if (e->addr->count <= cl->per_ip_cap)
                continue;
        }
        if (e->fd < 0)
            conn_limit_note_fd(cl, e);
        conn_limit_refuse_addr(cl, e, fd);
    }
}

void conn_limit_sweep(conn_limit *cl)
{
    double now = conn_limit_now(cl);
    for (size_t i = 0; i < cl->n;) {
        conn_entry *e = cl->conns[i];
        bufferevent_data_cb r, w;
        bufferevent_event_cb ev;
        bufferevent_getcb(e->bev, &r, &w, &ev, NULL);
        if (!r && !w && !ev) { /* evhttp freed the connection */
            conn_limit_drop(cl, i);
            continue;
        }
        if (e->upgraded) {
            i++;
            continue;
        }
        if (e->linger_until && now >= e->linger_until && e->fd >= 0) {
            e->linger_until = 0;
            shutdown(e->fd, SHUT_RDWR);
        }
        if (e->throttled && r && !evbuffer_get_length(bufferevent_get_output(e->bev))) {
            e->throttled = 0; /* the answer is out: the next request may arrive (and is counted) */
            bufferevent_setwatermark(e->bev, EV_READ, 0, 0);
        }
        if (e->answering && r) { /* the answer is out; evhttp reads the next request */
            e->answering = 0;
            bufferevent_set_timeouts(e->bev, &cl->idle, &cl->idle);
        }
        if (!e->reading_since || e->answered || e->fd < 0) {
            i++;
            continue;
        }
        /* the clock runs only while evhttp waits for the client: while a
         * request is served (reading off while it waits for its answer; no
         * read callback while the answer is written, reading then only
         * watches for a close) the bytes of a pipelined next one wait on
         * the server, not the client */
        if (!conn_limit_reading(e))
            e->reading_since = now;
        else if (now - e->reading_since > cl->request_timeout_s)
            conn_limit_time_out(cl, e);
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

/* Bytes of a request arrived: the first ones start its clock. */
static void conn_limit_on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    conn_entry *e = arg;
    conn_limit *cl = e->cl;
    if (!info->n_added)
        return;
    if (e->discarding) { /* refused: nothing it sends is kept */
        evbuffer_drain(buf, evbuffer_get_length(buf));
        return;
    }
    if (!e->reading_since)
        e->reading_since = conn_limit_now(cl);
    if (e->fd < 0)
        conn_limit_note_fd(cl, e);
    if (e->answered || e->fd < 0)
        return;
    e->receiving += info->n_added;
    cl->receiving += info->n_added;
    if (cl->max_request && e->receiving > cl->max_request) {
        conn_limit_refuse_body(cl, e, 413);
        return;
    }
    if (!cl->body_budget || e->own) /* own: a WebSocket message, admitted with this copy (http/ws.c) */
        return;
    size_t total = *cl->held + cl->receiving;
    if (total > cl->body_budget && total > e->receiving && e->receiving > CONN_BODY_ALLOWANCE)
        conn_limit_refuse_body(cl, e, 503);
}

/* The connection's descriptor, known once bytes arrive: for the request's lookup. */
static void conn_limit_note_fd(conn_limit *cl, conn_entry *e)
{
    int fd = bufferevent_getfd(e->bev);
    if (fd < 0)
        return;
    if ((size_t)fd >= cl->by_fd_len) {
        size_t nl = cl->by_fd_len ? cl->by_fd_len : 1024;
        while (nl <= (size_t)fd)
            nl *= 2;
        conn_entry **m = realloc(cl->by_fd, nl * sizeof *m);
        if (!m)
            abort(); /* same policy as sbuf */
        memset(m + cl->by_fd_len, 0, (nl - cl->by_fd_len) * sizeof *m);
        cl->by_fd = m;
        cl->by_fd_len = nl;
    }
    e->fd = fd;
    cl->by_fd[fd] = e;
}

/* An answer is being written: the request it answers arrived whole. */
static void conn_limit_on_output(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    conn_entry *e = arg;
    if (!info->n_added)
        return;
    e->reading_since = 0;
    if (!e->answering)
        conn_limit_receiving_reset(e);
    if (!e->answering && e->cl->idle.tv_sec) {
        e->answering = 1;
        bufferevent_set_timeouts(e->bev, NULL, &e->cl->idle);
    }
}

/* Appends e to a growing array of entries. */
static void conn_limit_push(conn_entry ***v, size_t *n, size_t *alloc, conn_entry *e)
{
    if (*n == *alloc) {
        size_t na = *alloc ? *alloc * 2 : 256;
        conn_entry **m = realloc(*v, na * sizeof *m);
        if (!m)
            abort(); /* same policy as sbuf */
        *v = m;
        *alloc = na;
    }
    (*v)[(*n)++] = e;
}

static struct bufferevent *conn_limit_on_new(struct event_base *base, void *arg)
{
    conn_limit *cl = arg;
    if (cl->n >= cl->cap)
        conn_limit_sweep(cl);
    conn_entry *e = calloc(1, sizeof *e);
    struct bufferevent *bev = e ? bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE) : NULL;
    if (!bev) {
        free(e);
        return NULL; /* evhttp makes its own; it goes uncounted */
    }
    bufferevent_incref(bev);
    e->bev = bev;
    e->fd = -1;
    e->cl = cl;
    e->over = cl->n >= cl->cap;
    evbuffer_add_cb(bufferevent_get_input(bev), conn_limit_on_input, e);
    evbuffer_add_cb(bufferevent_get_output(bev), conn_limit_on_output, e);
    conn_limit_push(&cl->conns, &cl->n, &cl->alloc, e);
    cl->n_over += (size_t)e->over;
    if ((cl->per_ip_cap || cl->n_own) && cl->resolver) { /* its address decides, or it may be our own */
        conn_limit_push(&cl->unresolved, &cl->n_unresolved, &cl->alloc_unresolved, e);
        e->unresolved = 1;
        event_active(cl->resolver, EV_TIMEOUT, 1);
    }
    cl->st.open = cl->n;
    if (e->over)
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
    if (cl->spare_fd < 0)
        return;
    close(cl->spare_fd);
    cl->spare_fd = -1;
    int fd = accept4(evconnlistener_get_fd(cl->lev), NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
        char junk[4096];
        while (recv(fd, junk, sizeof junk, MSG_DONTWAIT) > 0) {
        }
        conn_limit_answer_raw(fd, 503, "server_error", "too_many_connections",
                              "the gateway is out of file descriptors; retry shortly");
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
                           size_t cap, long nofile, double request_timeout_s, int idle_timeout_s)
{
    conn_limit *cl = calloc(1, sizeof *cl);
    if (!cl)
        return NULL;
    cl->base = base;
    cl->lev = evhttp_bound_socket_get_listener(bound);
    /* evhttp listens with a backlog of 128: a burst of new streams (2 000 a
     * second while 10 000 flow) overflows it, the kernel drops handshakes
     * and the clients that waited longest get a reset. Listening again
     * only changes the backlog; the kernel caps it at net.core.somaxconn. */
    if (listen(evconnlistener_get_fd(cl->lev), CONN_BACKLOG) != 0)
        log_warn("cannot raise the listen backlog to %d: %s", CONN_BACKLOG, strerror(errno));
    cl->cap = cap;
    cl->slack = cap / 8 + 16;
    cl->request_timeout_s = request_timeout_s;
    cl->idle.tv_sec = idle_timeout_s > 0 ? idle_timeout_s : 0;
    cl->st.cap = cap;
    cl->st.nofile = nofile;
    cl->resume = evtimer_new(base, conn_limit_on_resume, cl);
    cl->sweeper = event_new(base, -1, EV_PERSIST, conn_limit_on_sweep, cl);
    struct timeval every = {0, CONN_SWEEP_MS * 1000};
    event_add(cl->sweeper, &every);
    cl->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    cl->resolver = event_new(base, -1, 0, conn_limit_on_resolve, cl);
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
    free(cl->conns);
    free(cl->by_fd);
    free(cl->unresolved);
    free(cl->addrs); /* empty: every entry went with its last connection */
    if (cl->resolver)
        event_free(cl->resolver);
    if (cl->resume)
        event_free(cl->resume);
    if (cl->sweeper)
        event_free(cl->sweeper);
    if (cl->spare_fd >= 0)
        close(cl->spare_fd);
    free(cl);
}

int conn_limit_request(conn_limit *cl, struct evhttp_request *req)
{
    struct evhttp_connection *c = cl ? evhttp_request_get_connection(req) : NULL;
    struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    conn_entry *e = fd >= 0 && (size_t)fd < cl->by_fd_len ? cl->by_fd[fd] : NULL;
    if (!e || e->bev != bev)
        return 0;
    if (e->answered)
        return CONN_ANSWERED; /* its bytes were already read when the refusal went out */
    e->reading_since = 0; /* the request is whole; the next one starts its own clock */
    conn_limit_receiving_reset(e); /* its body is the server's to count now */
    if (e->over)
        cl->st.refused++;
    return e->over ? CONN_OVER_CAP : CONN_OK;
}

int conn_limit_own(conn_limit *cl, struct evhttp_request *req)
{
    struct evhttp_connection *c = cl ? evhttp_request_get_connection(req) : NULL;
    struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    conn_entry *e = fd >= 0 && (size_t)fd < cl->by_fd_len ? cl->by_fd[fd] : NULL;
    return e && e->bev == bev && e->own;
}

void conn_limit_upgrade(conn_limit *cl, struct evhttp_request *req)
{
    struct evhttp_connection *c = cl ? evhttp_request_get_connection(req) : NULL;
    struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    conn_entry *e = fd >= 0 && (size_t)fd < cl->by_fd_len ? cl->by_fd[fd] : NULL;
    if (!e || e->bev != bev)
        return;
    e->upgraded = 1;
    evbuffer_remove_cb(bufferevent_get_input(bev), conn_limit_on_input, e);
    evbuffer_remove_cb(bufferevent_get_output(bev), conn_limit_on_output, e);
    cl->receiving -= e->receiving;
    e->receiving = 0;
    e->reading_since = 0;
    e->answering = 0;
    e->throttled = 0;
}

void conn_limit_set_body_limits(conn_limit *cl, size_t max_request, size_t budget, const size_t *held)
{
    cl->max_request = max_request;
    cl->body_budget = held ? budget : 0;
    cl->held = held;
}

void conn_limit_reset(int fd)
{
    /* SO_LINGER 0, then a disconnect (connect to AF_UNSPEC): it resets an
     * established connection at once, before evhttp's own shutdown could
     * send a FIN, and leaves nothing for that shutdown to send */
    struct linger lg = {1, 0};
    struct sockaddr unspec = {.sa_family = AF_UNSPEC};
    if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) != 0 || connect(fd, &unspec, sizeof unspec) != 0)
        log_debug("resetting a client connection: %s", strerror(errno));
}

/* e's descriptor while it holds an answer being written (no read callback
 * while evhttp writes one) or whose last bytes are not sent yet, else -1. */
static int conn_limit_unfinished_fd(const conn_entry *e)
{
    bufferevent_data_cb r, w;
    bufferevent_event_cb ev;
    bufferevent_getcb(e->bev, &r, &w, &ev, NULL);
    int fd = bufferevent_getfd(e->bev);
    if (fd < 0 || (!r && !w && !ev) || e->upgraded) /* let go already, or not HTTP any more */
        return -1;
    return (!r && w) || evbuffer_get_length(bufferevent_get_output(e->bev)) ? fd : -1;
}

size_t conn_limit_unfinished(const conn_limit *cl)
{
    size_t n = 0;
    for (size_t i = 0; cl && i < cl->n; i++)
        n += conn_limit_unfinished_fd(cl->conns[i]) >= 0;
    return n;
}

void conn_limit_reset_unfinished(conn_limit *cl)
{
    if (!cl)
        return;
    size_t n = 0;
    for (size_t i = 0; i < cl->n; i++) {
        int fd = conn_limit_unfinished_fd(cl->conns[i]);
        if (fd >= 0) {
            conn_limit_reset(fd);
            n++;
        }
    }
    if (n)
        log_warn("exiting with %zu answer(s) unfinished: their connections are reset, not closed", n);
}

void conn_limit_set_per_ip(conn_limit *cl, size_t cap, int loopback)
{
    cl->per_ip_cap = cap;
    cl->per_ip_loopback = loopback;
    cl->st.per_ip_cap = cap;
}

size_t conn_limit_receiving(const conn_limit *cl) { return cl ? cl->receiving : 0; }

void conn_limit_stats_get(conn_limit *cl, conn_limit_stats *out)
{
    if (!cl) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = cl->st;
    out->open = cl->n;
    out->bytes_receiving = cl->receiving;
}
