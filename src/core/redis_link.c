/* redis_link.c: two hiredis async connections on the loop, kept alive
 * (see redis_link.h).
 *
 * hiredis frees a context itself when it fails (after the connect
 * callback with an error, or after the disconnect callback), and a
 * redisAsyncFree inside one of its callbacks is deferred to the end of
 * it. So the link forgets a context (its pointer set to NULL) before it
 * frees it or as hiredis drops it, and every callback first checks that
 * the context is still one of the link's: a late callback of a dropped
 * context changes nothing. One 250 ms timer drives the rest: the connect
 * deadline, the PING that proves the link alive, the next attempt. */
#include "obs/metrics.h"
#include "core/redis_link.h"
#include "core/redis_reply.h"
#include "base/log.h"
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <hiredis/adapters/libevent.h>
#include <arpa/inet.h>
#include <event2/dns.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REDIS_LINK_TICK_MS 250
#define REDIS_LINK_CONNECT_S 2.0  /* connect, AUTH, SELECT and SUBSCRIBE answered within */
#define REDIS_LINK_PING_S 1.5     /* an unanswered PING this old: the link is dead */
#define REDIS_LINK_PING_EVERY_S 1.0
#define REDIS_LINK_BACKOFF_MIN_S 0.1
#define REDIS_LINK_BACKOFF_MAX_S 2.0

struct redis_link {
    struct event_base *base;
    redis_url url;
    char channel[160];
    char desc[400];                /* the address without its password, for the log */
    redis_link_hooks hooks;
    redisAsyncContext *cmd, *sub;
    int cmd_ready, sub_ready, up;
    struct evdns_base *dns;
    struct evdns_getaddrinfo_request *resolving;
    char addr[256];                /* the host resolved (or as given, an address) */
    struct event *tick;
    double attempt_at;             /* monotonic: the attempt in progress started; 0 none */
    double retry_at;               /* monotonic: the next attempt, once down */
    double backoff;
    double ping_sent;              /* monotonic, 0 none outstanding */
    double ping_ok;                /* monotonic: the last PING answered */
    double rtt;                    /* seconds: the last PING's round trip (-1 none yet) */
    double down_since;             /* unix seconds, 0 up */
    int logged_down;               /* the loss (or the first failure) is logged once */
    unsigned long ups;
    char error[256];
    char refused[REDIS_REPLY_NOTE]; /* a reply the readers refused (redis_reply.h): the failure's reason */
    int freeing;
};

typedef struct redis_link_call {
    redis_reply_fn fn;
    void *ud;
} redis_link_call;

static double redis_link_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double redis_link_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Forgets and frees both connections (deferred by hiredis when inside one
 * of its callbacks); pending commands get NULL. */
static void redis_link_drop(redis_link *l)
{
    redisAsyncContext *c = l->cmd, *s = l->sub;
    l->cmd = l->sub = NULL;
    l->cmd_ready = l->sub_ready = 0;
    l->ping_sent = 0;
    l->attempt_at = 0;
    if (l->resolving) {
        struct evdns_getaddrinfo_request *r = l->resolving;
        l->resolving = NULL;
        evdns_getaddrinfo_cancel(r);
    }
    if (c)
        redisAsyncFree(c);
    if (s)
        redisAsyncFree(s);
}

/* The link failed (or an attempt did): drop it, say so once, try again later. */
static void redis_link_fail(redis_link *l, const char *why)
{
    if (l->freeing)
        return;
    int was_up = l->up;
    /* a refused reply fails the reader ("Out of memory") and the pending
     * commands (NULL), whichever reports first: the refusal is the why */
    const char *reason = l->refused[0] ? l->refused : why;
    if (reason != l->error)
        snprintf(l->error, sizeof l->error, "%s", reason);
    why = l->error;
    l->refused[0] = '\0';
    l->up = 0;
    redis_link_drop(l);
    if (!l->down_since)
        l->down_since = redis_link_wall();
    l->retry_at = redis_link_mono() + l->backoff;
    l->backoff = l->backoff * 2 > REDIS_LINK_BACKOFF_MAX_S ? REDIS_LINK_BACKOFF_MAX_S : l->backoff * 2;
    if (!l->logged_down) {
        l->logged_down = 1;
        log_warn("redis: %s %s: %s; serving on this instance's own state until it is back", l->desc,
                 was_up ? "lost" : "unreachable", why);
    } else {
        log_debug("redis: attempt failed: %s", why);
    }
    if (was_up && l->hooks.down)
        l->hooks.down(l->hooks.ud);
}

static int redis_link_ours(const redis_link *l, const redisAsyncContext *ac)
{
    return ac && (ac == l->cmd || ac == l->sub);
}

static void redis_link_check_up(redis_link *l)
{
    if (l->up || !l->cmd_ready || !l->sub_ready)
        return;
    l->up = 1;
    l->attempt_at = 0;
    l->backoff = REDIS_LINK_BACKOFF_MIN_S;
    l->error[0] = '\0';
    l->ups++;
    if (l->logged_down)
        log_info("redis: %s answers again after %.1fs; resynchronising", l->desc, redis_link_wall() - l->down_since);
    else
        log_info("redis: connected to %s", l->desc);
    l->logged_down = 0;
    l->down_since = 0;
    if (l->hooks.up)
        l->hooks.up(l->hooks.ud);
}

/* ---------- the handshake ---------- */

/* AUTH and SELECT: an error answer fails the attempt (a wrong password is
 * said in the log and /health, and tried again with backoff). */
static void redis_link_on_setup(redisAsyncContext *ac, void *reply, void *priv)
{
    redis_link *l = ac->data;
    redisReply *r = reply;
    if (!l || !redis_link_ours(l, ac))
        return;
    if (!r) {
        redis_link_fail(l, "the connection closed during AUTH/SELECT");
        return;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        char why[256];
        snprintf(why, sizeof why, "%s refused: %.180s", (const char *)priv, r->str ? r->str : "");
        redis_link_fail(l, why);
    }
}

static void redis_link_on_ping(redisAsyncContext *ac, void *reply, void *priv)
{
    redis_link *l = ac->data;
    redisReply *r = reply;
    if (!l || !redis_link_ours(l, ac) || !r)
        return; /* a lost link is the disconnect callback's */
    if (r->type == REDIS_REPLY_ERROR) {
        char why[256];
        snprintf(why, sizeof why, "PING answered: %.200s", r->str ? r->str : "");
        redis_link_fail(l, why);
        return;
    }
    double now = redis_link_mono();
    if (l->ping_sent > 0) {
        l->rtt = now - l->ping_sent;
        metrics_redis_rtt(l->rtt);
    }
    l->ping_sent = 0;
    l->ping_ok = now;
    if (!l->cmd_ready) {
        l->cmd_ready = 1;
        redis_link_check_up(l);
    }
}

static void redis_link_on_message(redisAsyncContext *ac, void *reply, void *priv)
{
    redis_link *l = ac->data;
    redisReply *r = reply;
    if (!l || !redis_link_ours(l, ac) || !r)
        return;
    if (r->type == REDIS_REPLY_ERROR) {
        char why[256];
        snprintf(why, sizeof why, "SUBSCRIBE refused: %.180s", r->str ? r->str : "");
        redis_link_fail(l, why);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 || !r->element[0]->str)
        return;
    if (strcmp(r->element[0]->str, "subscribe") == 0) {
        l->sub_ready = 1;
        redis_link_check_up(l);
    } else if (strcmp(r->element[0]->str, "message") == 0 && r->element[2]->type == REDIS_REPLY_STRING &&
               l->up && l->hooks.message) {
        l->hooks.message(l->hooks.ud, r->element[2]->str, r->element[2]->len);
    }
}

static void redis_link_on_connect(const redisAsyncContext *ac, int status)
{
    redis_link *l = ac->data;
    if (!l || !redis_link_ours(l, ac))
        return;
    if (status != REDIS_OK) {
        /* hiredis frees this context after the callback: forget it first */
        if (ac == l->cmd)
            l->cmd = NULL;
        else
            l->sub = NULL;
        char why[256];
        snprintf(why, sizeof why, "%s", ac->errstr[0] ? ac->errstr : "connect failed");
        redis_link_fail(l, why);
    }
}

static void redis_link_on_disconnect(const redisAsyncContext *ac, int status)
{
    redis_link *l = ac->data;
    if (!l || !redis_link_ours(l, ac))
        return;
    if (ac == l->cmd)
        l->cmd = NULL;
    else
        l->sub = NULL;
    char why[256];
    snprintf(why, sizeof why, "connection closed%s%s", ac->errstr[0] ? ": " : "", ac->errstr);
    redis_link_fail(l, why);
}

/* One connection, with AUTH and SELECT queued first (hiredis writes them
 * once the non-blocking connect completes). */
static redisAsyncContext *redis_link_open(redis_link *l, int subscriber)
{
    redisAsyncContext *ac = l->url.is_unix ? redisAsyncConnectUnix(l->url.path)
                                           : redisAsyncConnect(l->addr, l->url.port);
    if (!ac)
        return NULL;
    if (ac->err) {
        char why[256];
        snprintf(why, sizeof why, "%s", ac->errstr);
        redisAsyncFree(ac);
        snprintf(l->error, sizeof l->error, "%s", why);
        return NULL;
    }
    ac->data = l;
    redis_reply_bound(ac->c.reader, l->refused);
    if (redisLibeventAttach(ac, l->base) != REDIS_OK) {
        redisAsyncFree(ac);
        return NULL;
    }
    redisAsyncSetConnectCallback(ac, redis_link_on_connect);
    redisAsyncSetDisconnectCallback(ac, redis_link_on_disconnect);
    if (l->url.pass[0]) {
        if (l->url.user[0])
            redisAsyncCommand(ac, redis_link_on_setup, "AUTH", "AUTH %s %s", l->url.user, l->url.pass);
        else
            redisAsyncCommand(ac, redis_link_on_setup, "AUTH", "AUTH %s", l->url.pass);
    }
    if (subscriber) {
        redisAsyncCommand(ac, redis_link_on_message, NULL, "SUBSCRIBE %s", l->channel);
    } else {
        if (l->url.db)
            redisAsyncCommand(ac, redis_link_on_setup, "SELECT", "SELECT %d", l->url.db);
        l->ping_sent = redis_link_mono();
        redisAsyncCommand(ac, redis_link_on_ping, NULL, "PING");
    }
    return ac;
}

static void redis_link_connect(redis_link *l)
{
    l->attempt_at = redis_link_mono();
    l->cmd = redis_link_open(l, 0);
    l->sub = l->cmd ? redis_link_open(l, 1) : NULL;
    if (!l->cmd || !l->sub)
        redis_link_fail(l, l->error[0] ? l->error : "could not start a connection");
}

static void redis_link_on_resolved(int result, struct evutil_addrinfo *res, void *arg)
{
    redis_link *l = arg;
    if (result == EVUTIL_EAI_CANCEL)
        return;
    l->resolving = NULL;
    const void *a = NULL;
    if (result == 0 && res) {
        if (res->ai_family == AF_INET)
            a = &((struct sockaddr_in *)res->ai_addr)->sin_addr;
        else if (res->ai_family == AF_INET6)
            a = &((struct sockaddr_in6 *)res->ai_addr)->sin6_addr;
    }
    if (a && inet_ntop(res->ai_family, a, l->addr, sizeof l->addr))
        redis_link_connect(l);
    else {
        char why[300];
        snprintf(why, sizeof why, "cannot resolve %.200s: %s", l->url.host,
                 result ? evutil_gai_strerror(result) : "no address");
        redis_link_fail(l, why);
    }
    if (res)
        evutil_freeaddrinfo(res);
}

/* A new attempt: a host name is resolved on the loop (evdns), an address
 * or a socket path connects at once. */
static void redis_link_attempt(redis_link *l)
{
    l->attempt_at = redis_link_mono();
    unsigned char buf[sizeof(struct in6_addr)];
    if (l->url.is_unix || inet_pton(AF_INET, l->url.host, buf) == 1 || inet_pton(AF_INET6, l->url.host, buf) == 1) {
        snprintf(l->addr, sizeof l->addr, "%s", l->url.host);
        redis_link_connect(l);
        return;
    }
    if (!l->dns)
        l->dns = evdns_base_new(l->base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
    if (!l->dns) {
        redis_link_fail(l, "cannot start the resolver");
        return;
    }
    struct evutil_addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    struct evdns_getaddrinfo_request *r = evdns_getaddrinfo(l->dns, l->url.host, NULL, &hints,
                                                            redis_link_on_resolved, l);
    l->resolving = r; /* NULL: answered at once */
}

static void redis_link_on_tick(evutil_socket_t fd, short what, void *arg)
{
    redis_link *l = arg;
    double now = redis_link_mono();
    if (l->up) {
        if (l->ping_sent && now - l->ping_sent > REDIS_LINK_PING_S) {
            redis_link_fail(l, "no answer to PING within 1.5 s");
        } else if (!l->ping_sent && l->cmd && now - l->ping_ok >= REDIS_LINK_PING_EVERY_S) {
            l->ping_sent = now;
            if (redisAsyncCommand(l->cmd, redis_link_on_ping, NULL, "PING") != REDIS_OK)
                redis_link_fail(l, "cannot send PING");
        }
        return;
    }
    if (l->attempt_at) {
        if (now - l->attempt_at > REDIS_LINK_CONNECT_S)
            redis_link_fail(l, "no connection within 2 s");
        return;
    }
    if (now >= l->retry_at)
        redis_link_attempt(l);
}

/* ---------- API ---------- */

redis_link *redis_link_new(struct event_base *base, const redis_url *u, const char *channel,
                           const redis_link_hooks *h)
{
    redis_link *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->base = base;
    l->url = *u;
    snprintf(l->channel, sizeof l->channel, "%s", channel);
    redis_url_describe(u, l->desc, sizeof l->desc);
    if (h)
        l->hooks = *h;
    l->backoff = REDIS_LINK_BACKOFF_MIN_S;
    l->down_since = redis_link_wall();
    snprintf(l->error, sizeof l->error, "connecting");
    l->tick = event_new(base, -1, EV_PERSIST, redis_link_on_tick, l);
    if (!l->tick) {
        free(l);
        return NULL;
    }
    struct timeval tv = {0, REDIS_LINK_TICK_MS * 1000};
    event_add(l->tick, &tv);
    redis_link_attempt(l);
    return l;
}

void redis_link_free(redis_link *l)
{
    if (!l)
        return;
    l->freeing = 1;
    l->up = 0;
    redis_link_drop(l);
    event_free(l->tick);
    if (l->dns)
        evdns_base_free(l->dns, 0);
    memset(l->url.pass, 0, sizeof l->url.pass);
    free(l);
}

int redis_link_is_up(const redis_link *l) { return l && l->up; }
double redis_link_down_since(const redis_link *l) { return l ? l->down_since : 0; }
double redis_link_rtt(const redis_link *l) { return l && l->rtt > 0 ? l->rtt : -1; }
const char *redis_link_error(const redis_link *l) { return l && !l->up ? l->error : ""; }
unsigned long redis_link_ups(const redis_link *l) { return l ? l->ups : 0; }

static void redis_link_on_reply(redisAsyncContext *ac, void *reply, void *priv)
{
    redis_link_call *c = priv;
    if (!reply)
        metrics_redis_dropped(METRICS_REDIS_DROP_IN_FLIGHT); /* the link went down before its answer */
    if (c->fn)
        c->fn(c->ud, reply);
    free(c);
}

int redis_link_command(redis_link *l, redis_reply_fn fn, void *ud, int argc, const char **argv,
                       const size_t *lens)
{
    if (!l || !l->up || !l->cmd) {
        metrics_redis_dropped(METRICS_REDIS_DROP_LINK_DOWN);
        return -1;
    }
    redis_link_call *c = malloc(sizeof *c);
    if (!c)
        return -1;
    c->fn = fn;
    c->ud = ud;
    if (redisAsyncCommandArgv(l->cmd, redis_link_on_reply, c, argc, argv, lens) != REDIS_OK) {
        free(c);
        return -1;
    }
    return 0;
}
