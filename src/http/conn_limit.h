/* conn_limit.h: the gateway's client connections as a resource. Raises the
 * descriptor limit at start, counts client connections and refuses those
 * beyond a cap, cuts off requests that take too long to arrive, keeps the
 * idle timeout off a client while it reads an answer, and pauses accepting
 * when the process is out of descriptors instead of retrying accept() on
 * every loop turn. */
#ifndef SY_CONN_LIMIT_H
#define SY_CONN_LIMIT_H
#include <stddef.h>
#include <stdint.h>
#include <event2/event.h>
#include <event2/http.h>

typedef struct conn_limit conn_limit;

typedef struct conn_limit_stats {
    size_t open;               /* client connections open (an upper bound between sweeps) */
    size_t cap;                /* the configured cap */
    uint64_t refused;          /* connections answered 503 because of the cap */
    size_t per_ip_cap;         /* connections one client address may hold; 0: no such cap */
    uint64_t refused_per_ip;   /* connections answered 503 because their address had its share */
    uint64_t accept_pauses;    /* times accepting paused: out of descriptors or far over the cap */
    uint64_t fd_refused;       /* connections refused with the spare descriptor while out of descriptors */
    uint64_t slow_requests_closed; /* connections closed with a 408: a request not whole in time */
    size_t bytes_receiving;    /* bytes of requests not yet dispatched (bodies still arriving) */
    uint64_t bodies_refused;   /* connections answered 503: their arriving bytes passed the body budget */
    int paused;                /* accepting is paused right now */
    long nofile;               /* the soft RLIMIT_NOFILE in force */
} conn_limit_stats;

/* Raises the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force. */
long conn_limit_raise_nofile(void);

/* Takes over accepting for http's bound socket (bound must be what
 * evhttp_bind_socket_with_handle returned), counts its connections and
 * closes those whose request is not whole request_timeout_s seconds after
 * its first byte. idle_timeout_s must be what evhttp_set_timeout was given:
 * it is lifted from reading while an answer is written, and put back. */
conn_limit *conn_limit_new(struct event_base *base, struct evhttp *http, struct evhttp_bound_socket *bound,
                           size_t cap, long nofile, double request_timeout_s, int idle_timeout_s);
/* Frees what is left; call after evhttp_free. */
void conn_limit_free(conn_limit *cl);

enum { CONN_OK = 0, CONN_OVER_CAP, CONN_ANSWERED };
/* Notes that req arrived whole (its connection's request clock stops).
 * Returns CONN_OVER_CAP if it came on a connection accepted beyond the cap:
 * the caller answers it with a refusal and closes the connection;
 * CONN_ANSWERED if a refusal was already written on that connection (its
 * bytes had arrived with the ones that passed a limit): the caller serves
 * nothing and closes it. */
int conn_limit_request(conn_limit *cl, struct evhttp_request *req);
/* req's connection leaves HTTP: a WebSocket took it over (http/ws.c). It
 * stays counted (against the cap and its address) until it closes, but no
 * request clock, body accounting, answer timeouts or refusal on the
 * socket apply to it any more, and a stopping gateway does not wait for it. */
void conn_limit_upgrade(conn_limit *cl, struct evhttp_request *req);
/* fd is a socket the gateway is connecting to its own listener (a
 * WebSocket's loopback connection, http/ws.c): when accepted, that
 * connection takes no share of its address's connections (it counts
 * against the cap like any), and the bytes arriving on it are not refused
 * by the body budget (the WebSocket message they carry was admitted with
 * them). Call it right after connect(), before the loop runs again; one
 * announced and not accepted within 10 s is forgotten. */
void conn_limit_expect_own(conn_limit *cl, int fd);
/* 1 when req came on one of the gateway's own connections (announced with
 * conn_limit_expect_own): a WebSocket's turn. */
int conn_limit_own(conn_limit *cl, struct evhttp_request *req);
/* Counts the bytes of requests still arriving against budget, together
 * with *held (the bodies of requests in progress, kept by the caller): a
 * connection whose bytes pass it is answered 503 body_budget_exceeded. A
 * request whose bytes pass max_request (its head and body at most) is
 * answered 413 request_too_large before the rest of it is read. */
void conn_limit_set_body_limits(conn_limit *cl, size_t max_request, size_t budget, const size_t *held);
/* At most cap connections per client address (IPv6: per /64); 0: no
 * such cap. loopback: loopback clients are held to it too. */
void conn_limit_set_per_ip(conn_limit *cl, size_t cap, int loopback);
/* Bytes received for requests not yet dispatched, on every connection. */
size_t conn_limit_receiving(const conn_limit *cl);
/* Resets a client connection (TCP RST) instead of closing it cleanly: for
 * an answer that was cut, which a clean close would let an HTTP/1.0
 * client (whose answers end at the close) take for a whole one. */
void conn_limit_reset(int fd);
/* Resets every client connection with an answer unfinished (being
 * written, or not all sent): before evhttp_free on the way out. */
void conn_limit_reset_unfinished(conn_limit *cl);
/* How many client connections have an answer unfinished in that sense:
 * a stopping gateway waits for them (their proxies may be done already,
 * with megabytes still on their way to a slow client). */
size_t conn_limit_unfinished(const conn_limit *cl);
/* Releases connections libevent has closed (a timer calls it every 100 ms). */
void conn_limit_sweep(conn_limit *cl);
void conn_limit_stats_get(conn_limit *cl, conn_limit_stats *out);

#endif
