/* upstream_transfer.c: one upstream transfer (see upstream.h) on the
 * multi handle that upstream.c drives: an easy handle taken (a kept one
 * when there is one) and set up (the URL parsed once and shared, the
 * request headers built in one block, the receive buffer sized, h2c or
 * not), upstream_start, the transfer's deadlines (connect backstop, first
 * byte, idle), curl's callbacks for its headers, its body and its request
 * going out, and its end (the handle kept for the next transfer). curl is
 * on the stack in those callbacks, so they make no multi calls. */
#include "upstream/upstream_internal.h"
#include "base/text.h"
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define UP_MAX_HEADERS 64
#define UP_STREAM_BUFFER 4096L  /* curl's receive buffer for a stream (why 4 KiB: docs/performance.md) */
#define UP_PLAIN_BUFFER 16384L  /* and for everything else (its default) */
#define UP_CROWD_BUFFER 1024L   /* a stream's while more than UP_CROWD transfers run: curl's minimum */
#define UP_CROWD 256
#define UPSTREAM_USER_AGENT "switchyard/0.1"
#define UP_KEEP_HBUF 2048      /* the largest header buffer a kept transfer keeps */

static void upstream_h2c_leave(upstream_req *r);

/* ---- per-transfer deadlines ---- */

static void upstream_arm(upstream_req *r, long ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(&r->deadline, &tv);
}

/* Milliseconds since r's last data. */
static long upstream_idle_ms(const upstream_req *r)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long)(now.tv_sec - r->last_data.tv_sec) * 1000 + (now.tv_nsec - r->last_data.tv_nsec) / 1000000;
}

/* see upstream.h */
void upstream_set_idle(upstream_req *r, long ms)
{
    if (!r || ms <= 0 || ms == r->idle_ms)
        return;
    r->idle_ms = ms;
    if (!r->headers_done || r->paused)
        return; /* armed with it when the headers come, or the client catches up */
    long idle = upstream_idle_ms(r);
    upstream_arm(r, ms - idle > 1 ? ms - idle : 1); /* sooner or later than the one armed */
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
        return upstream_arm(r, r->idle_ms);
    long idle = r->headers_done ? upstream_idle_ms(r) : 0;
    if (r->headers_done && idle < r->idle_ms)
        return upstream_arm(r, r->idle_ms - (idle > 0 ? idle : 0));
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
    upstream_arm(r, r->idle_ms);
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

/* ---- a transfer's end ---- */

/* Off u->settled, if upstream_headers_complete queued it there for
 * upstream_drop_sent (upstream.c). */
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

void upstream_req_free(upstream_req *r)
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
void upstream_req_destroy(upstream_req *r)
{
    curl_easy_cleanup(r->easy);
    sbuf_free(&r->hbuf);
    free(r);
}

/* ---- a transfer's setup ---- */

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
void upstream_accept_encoding(upstream *u)
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
int upstream_proxy_env(void)
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
void upstream_h2c_wake(up_origin *o)
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
    /* the last line of defence: a value with a CR or LF would end its
     * header line and start one of the sender's choosing (values are
     * checked where they enter: text.h); such a request is not sent */
    for (size_t i = 0; i < spec->n_headers; i++)
        if (!text_header_value_ok(spec->headers[i].value)) {
            log_warn("upstream: refused to send a request: its %s header holds a control character",
                     spec->headers[i].name);
            return NULL;
        }
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
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, spec->method); /* a kept handle forgets the last one: NULL */
    r->first_byte_ms = spec->first_byte_timeout_ms > 0 ? spec->first_byte_timeout_ms : u->lim.first_byte_timeout_ms;
    r->idle_ms = u->lim.idle_timeout_ms;
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
