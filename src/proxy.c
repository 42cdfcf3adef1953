/* proxy.c: one client request through the pool (see proxy.h).
 *
 * Life of a request: proxy_start builds the route plan, proxy_next takes the
 * next available candidate and starts an upstream transfer. Upstream
 * callbacks feed either the error collector (non-2xx), the preflight (2xx
 * SSE, held back until semantic output or the window ends) or the client
 * directly (2xx plain). A failure before commit is classified by the policy:
 * fail over (cool the account down, proxy_next) or return it as is. Once
 * anything was sent to the client the request is committed: a later upstream
 * failure ends the stream with an explicit error event, never a replay.
 * proxy_finish writes the request log and trace line and frees everything. */
#include "proxy.h"
#include "route/pool.h"
#include "policy/policy.h"
#include "store/store.h"
#include "obs/trace.h"
#include "upstream/upstream.h"
#include "route/affinity.h"
#include "http/conn_limit.h"
#include "route/account_limits.h"
#include "route/breaker.h"
#include "upstream/resume.h"
#include "base/log.h"
#include "obs/metrics.h"
#include "accounts/oauth.h"
#include "route/router.h"
#include "base/scrub.h"
#include "http/server.h"
#include "route/spend.h"
#include "upstream/usage.h"
#include "accounts/usage_poll.h"
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event_struct.h>
#include <event2/http.h>
#include <event2/http_struct.h>
#include <event2/keyvalq_struct.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#define PROXY_ERRBODY_MAX (16u << 10)    /* kept of an upstream error body */
#define PROXY_SNIFF_MAX (1u << 20)       /* kept of a plain 2xx body, to read usage */
#define PROXY_CLIENT_HIGH (4u << 20)     /* pause upstream above this much unsent to the client */
#define PROXY_PLAIN_HOLD (1u << 20)      /* a plain answer is held whole up to this size ... */
#define PROXY_PLAIN_HOLD_ALL (64u << 20) /* ... while all held ones together stay under this */
#define PROXY_MAX_HEADERS 40
#define PROXY_RELAY_MAX (8u << 10)   /* kept of an upstream's x-codex-* response headers */
#define PROXY_EVENT_HOLD_MAX (1u << 20) /* an unfinished event held back from the client, at most */
#define PROXY_OUT_FIRST 2048u /* client bytes of a loop turn: the first allocation (freed when sent) */
#define PROXY_RETRY_MAX 4                /* same-account retries per request, whatever the policy says */
#define PROXY_MAX_REFRESH 8          /* accounts refreshed after a 401 within one request */

typedef enum { MODE_NONE, MODE_ERROR, MODE_PREFLIGHT, MODE_PLAIN } proxy_mode;

typedef struct proxy_req {
    gateway *gw;
    uint64_t id;
    struct evhttp_request *req;
    struct evhttp_connection *evcon;
    request_input in;
    route_ctx rctx;
    route_plan plan;
    char session[128];        /* session-id / session_id ("" none): session affinity */
    size_t next;              /* next plan index to try */
    int attempts;
    sbuf why;                 /* per-candidate failure summary, for the 503 */
    sbuf tried;               /* the attempts record: a JSON array, one object per attempt */
    double t_start;

    /* current attempt */
    upstream_req *up;
    int64_t acct_id;
    int64_t last_acct_id;     /* account of the latest attempt, kept for the log */
    char acct_name[64];
    account_kind acct_kind;
    double t_attempt;
    /* How the current attempt ended, set where that is decided (a free
     * word: "failover", "returned", ...); NULL: proxy_attempt_record
     * derives it from the request's state. */
    const char *att_outcome;
    char att_class[32];
    char att_model[128];      /* the model sent upstream (after the account's model map) */
    sbuf upbody;
    proxy_mode mode;
    int status;
    double retry_after;
    sbuf errbody;
    size_t errbody_total;     /* bytes of the error body the upstream sent (errbody keeps the first 16 KiB) */
    sbuf sniff;
    char resp_ctype[128];
    char resp_request_id[128];
    sbuf relay;               /* the attempt's x-codex-* response headers: name\0value\0... */
    preflight pf;
    int pf_live;
    struct event *pf_timer;   /* the preflight window's time limit: made when armed, gone at commit */

    /* retries and waits (proxy_retry_later, proxy_wait_for_capacity) */
    struct event *retry_timer; /* armed while the request waits to try again; made on first use (most never wait) */
    int64_t retry_acct;       /* account the timer goes back to; 0: plan afresh (capacity wait) */
    int retries_total;        /* same-account retries made for this request */
    int acct_retries;         /* of those, on the current account */
    double waited_s;          /* time spent waiting for capacity */
    int ctx_fallback_used;    /* the request went to a larger-context fallback once already */
    int resumed;              /* the cut stream went on on another account (opt-in; once at most) */
    int resume_pending;       /* that attempt has shown no output yet: any failure ends the stream */
    int committed_status;     /* the status the client got */

    /* client side */
    int committed;            /* reply started: no more failover */
    int reply_held;           /* plain: committed, status line and headers not sent yet (see proxy_commit) */
    size_t held_counted;      /* bytes of out counted in proxy_held_bytes (proxy_plain_hold) */
    int client_gone;
    struct client_watch *watch; /* notices a client that hangs up while we wait (see proxy_watch_client) */
    int client_eof;           /* the client closed its sending side: a half-close or a hang-up */
    int paused;
    int mid_event;            /* the client has part of an event that is not finished */
    scrub scrub;              /* the serving account's secrets, taken out of every client byte */
    sbuf out;                 /* client bytes of this loop turn, sent as one chunk by flush_ev */
    struct event flush_ev;    /* active exactly while out holds bytes */
    size_t unflushed_at;      /* 1 + its index in proxy_unflushed while out holds bytes, else 0 */
    char error_class[32];
    const char *not_answer;   /* this attempt's 2xx is no answer: "content_type", "empty_body", "no_output" */
    long in_tok, out_tok, tot_tok, cached_tok;

    /* login refresh (oauth.c) */
    oauth_waiter *wait;       /* waiting for an account's login refresh */
    int64_t wait_acct;        /* that account */
    int wait_after_401;       /* the wait follows a 401 from it (else the account was busy refreshing) */
    int64_t deferred_acct;    /* first candidate skipped because its login was refreshing */
    uint64_t sent_token_hash; /* of the token the current attempt sent */
    int64_t refreshed[PROXY_MAX_REFRESH]; /* accounts already refreshed after a 401 in this request */
    size_t n_refreshed;
} proxy_req;

/* The upstream request headers of the attempt being started (loop thread
 * only): built by proxy_build_headers and copied by upstream_start (into
 * curl's list) right after, so no request keeps them while its answer
 * streams, for minutes (docs/performance.md, "Long-lived streams"). */
static upstream_header proxy_hdrs[PROXY_MAX_HEADERS];
static size_t proxy_n_hdrs;
static sbuf proxy_hstore; /* storage behind proxy_hdrs */
static sbuf proxy_url;    /* the attempt's URL, the same way (curl copies it) */

/* Finished requests kept for the next ones (loop thread only): a proxy_req
 * is 3 KiB, and glibc serves an allocation that size from its bins (with a
 * malloc_consolidate pass whenever small freed chunks are waiting), which
 * cost about 7 000 instructions per request; a kept one is only zeroed.
 * It keeps the small buffers every request fills (the plain
 * answer read for its usage, the client bytes), emptied, so the next
 * request does not allocate and grow them again; larger ones are freed. */
#define PROXY_SPARE 128
#define PROXY_SPARE_BUF 2048 /* largest buffer a kept request keeps */
static proxy_req *proxy_spare[PROXY_SPARE];
static size_t proxy_n_spare;

static proxy_req *proxy_req_new(void)
{
    if (!proxy_n_spare)
        return calloc(1, sizeof(proxy_req));
    proxy_req *p = proxy_spare[--proxy_n_spare];
    sbuf sniff = p->sniff, out = p->out;
    memset(p, 0, sizeof *p);
    p->sniff = sniff, p->out = out;
    return p;
}


static void proxy_req_release(proxy_req *p)
{
    if (proxy_n_spare < PROXY_SPARE) {
        sbuf_keep(&p->sniff, PROXY_SPARE_BUF);
        sbuf_keep(&p->out, PROXY_SPARE_BUF);
        proxy_spare[proxy_n_spare++] = p;
        return;
    }
    sbuf_free(&p->sniff);
    sbuf_free(&p->out);
    free(p);
}

static void proxy_next(proxy_req *p);
static void proxy_finish(proxy_req *p, int status);
struct client_watch;
static void proxy_watch_drop(struct client_watch *w);
static void proxy_attempt(proxy_req *p, pool_account *pa);

/* ---------- small helpers ---------- */

static pool_account *proxy_account(proxy_req *p) { return pool_find(p->gw->pool, p->acct_id); }

/* Adds "name: reason" to the summary a 503 gives. */
static void proxy_why(proxy_req *p, const char *name, const char *reason)
{
    sbuf_printf(&p->why, "%s%s: %s", p->why.len ? "; " : "", name, reason);
}

/* value_prefix (may be NULL) and value make the header's value. */
static void proxy_header_add2(const char *name, const char *value_prefix, const char *value)
{
    if (proxy_n_hdrs >= PROXY_MAX_HEADERS)
        return;
    /* offsets, resolved once all headers are stored (hstore may move) */
    proxy_hdrs[proxy_n_hdrs].name = (const char *)(uintptr_t)proxy_hstore.len;
    sbuf_append(&proxy_hstore, name, strlen(name) + 1);
    proxy_hdrs[proxy_n_hdrs].value = (const char *)(uintptr_t)proxy_hstore.len;
    if (value_prefix)
        sbuf_puts(&proxy_hstore, value_prefix);
    sbuf_append(&proxy_hstore, value, strlen(value) + 1);
    proxy_n_hdrs++;
}

static void proxy_header_add(proxy_req *p, const char *name, const char *value)
{
    (void)p;
    proxy_header_add2(name, NULL, value);
}

static void proxy_headers_resolve(void)
{
    for (size_t i = 0; i < proxy_n_hdrs; i++) {
        proxy_hdrs[i].name = proxy_hstore.p + (uintptr_t)proxy_hdrs[i].name;
        proxy_hdrs[i].value = proxy_hstore.p + (uintptr_t)proxy_hdrs[i].value;
    }
}

/* Client headers passed upstream as they are: the ones Codex and the SDKs
 * use for features, sticky routing and prompt-cache affinity (Codex 0.171
 * sends session-id, thread-id, x-client-request-id, x-codex-window-id,
 * x-codex-turn-metadata and x-codex-beta-features; later turns add
 * x-codex-turn-state, sub-agents x-openai-subagent and
 * x-codex-parent-thread-id). Auth, hop-by-hop, Accept-Encoding (curl
 * negotiates its own) and per-account headers are never forwarded. */
static const char *const proxy_forward_headers[] = {
    "OpenAI-Beta", "originator", "session_id", "session-id", "conversation_id", "thread-id",
    "x-client-request-id", "version", "User-Agent",
    "x-codex-turn-state", "x-codex-turn-metadata", "x-codex-beta-features", "x-codex-window-id",
    "x-codex-parent-thread-id", "x-openai-subagent",
    "x-stainless-lang", "x-stainless-package-version", "x-stainless-os", "x-stainless-runtime",
};
#define PROXY_N_FORWARD (sizeof proxy_forward_headers / sizeof *proxy_forward_headers)
_Static_assert(PROXY_N_FORWARD <= 32, "proxy_build_headers keeps a 32-bit mask of forwarded headers");

/* The index of a client header in proxy_forward_headers, -1 if it is not
 * forwarded. Most headers a client sends (Host, Authorization,
 * Content-*, Accept*) are turned away by their first letter. */
static int proxy_forward_index(const char *name)
{
    char c = (char)(name[0] | 0x20);
    if (c == 'a' || c == 'h')
        return -1;
    for (size_t i = 0; i < PROXY_N_FORWARD; i++)
        if ((proxy_forward_headers[i][0] | 0x20) == c && strcasecmp(name, proxy_forward_headers[i]) == 0)
            return (int)i;
    return -1;
}

/* Takes h out of q and frees it as evhttp_remove_header would, without
 * looking it up again by name (a case-blind compare per header, a function
 * call per letter in libevent). libevent allocates headers with malloc:
 * the gateway never installs other allocators (event_set_mem_functions). */
static void proxy_header_unlink(struct evkeyvalq *q, struct evkeyval *h)
{
    if (h->next.tqe_next) /* TAILQ_REMOVE */
        h->next.tqe_next->next.tqe_prev = h->next.tqe_prev;
    else
        q->tqh_last = h->next.tqe_prev;
    *h->next.tqe_prev = h->next.tqe_next;
    free(h->key);
    free(h->value);
    free(h);
}

/* Of the client's request headers, only those proxy_build_headers
 * forwards (on every attempt, a resumed one too) and Connection (libevent
 * reads it when the reply ends) are needed once the request is planned.
 * The rest (Host, Authorization with the platform key, Content-*,
 * Accept, ...) goes: a stream held open for minutes keeps neither their
 * memory nor the key (docs/performance.md, "Long-lived streams"). */
static void proxy_drop_client_headers(struct evhttp_request *req)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    struct evkeyval *h, *next;
    for (h = in->tqh_first; h; h = next) {
        next = h->next.tqe_next;
        char c = (char)(h->key[0] | 0x20);
        int conn = (c == 'c' && strcasecmp(h->key, "Connection") == 0) ||
                   (c == 'p' && strcasecmp(h->key, "Proxy-Connection") == 0);
        if (!conn && proxy_forward_index(h->key) < 0)
            proxy_header_unlink(in, h);
    }
}

static void proxy_build_headers(proxy_req *p, const pool_account *pa)
{
    proxy_n_hdrs = 0;
    sbuf_reset(&proxy_hstore);
    proxy_header_add2("Authorization", "Bearer ", pa->a.token);
    if (!p->in.is_get)
        proxy_header_add(p, "Content-Type", "application/json");
    proxy_header_add(p, "Accept", p->in.stream ? "text/event-stream" : "application/json");
    struct evkeyvalq *in = evhttp_request_get_input_headers(p->req);
    /* one pass over what the client sent; the first of a repeated header wins */
    uint32_t seen = 0;
    for (struct evkeyval *kv = in->tqh_first; kv; kv = kv->next.tqe_next) {
        int i = proxy_forward_index(kv->key);
        if (i < 0 || (seen & (1u << i)))
            continue;
        seen |= 1u << i;
        proxy_header_add(p, proxy_forward_headers[i], kv->value);
    }
    if (pa->a.kind == ACCOUNT_CHATGPT) {
        if (pa->a.chatgpt_account_id && *pa->a.chatgpt_account_id)
            proxy_header_add(p, "ChatGPT-Account-Id", pa->a.chatgpt_account_id);
        if (!evhttp_find_header(in, "OpenAI-Beta"))
            proxy_header_add(p, "OpenAI-Beta", "responses=experimental");
        if (!evhttp_find_header(in, "originator"))
            proxy_header_add(p, "originator", "codex_cli_rs");
    }
    proxy_headers_resolve();
}

/* The model this account would be sent: the client's, or what the
 * account's model map turns it into. Writes it to out; 1 if mapped. */
static int proxy_model_for(const proxy_req *p, const pool_account *pa, char *out, size_t n)
{
    sbuf_copy_cstr(out, n, p->in.model);
    if (!pa->a.model_map || !p->in.model[0])
        return 0;
    json_value *map = json_parse(pa->a.model_map, strlen(pa->a.model_map), NULL, 0);
    const char *to = map ? json_get_str(map, p->in.model) : NULL;
    if (to)
        sbuf_copy_cstr(out, n, to);
    json_free(map);
    return to != NULL;
}

/* The request body for this account: the client's, or with the model
 * rewritten by the account's model map (the only change ever made between
 * attempts: the user's intent is preserved). Only the model's bytes change:
 * the rest of the client's body goes upstream as it came. Returns the body
 * to send. */
static const sbuf *proxy_body_for(proxy_req *p, const pool_account *pa)
{
    char to[128];
    size_t start, end;
    if (!proxy_model_for(p, pa, to, sizeof to) ||
        json_member_span(p->in.body.p, p->in.body.len, "model", &start, &end) != 0)
        return &p->in.body;
    sbuf_copy_cstr(p->att_model, sizeof p->att_model, to);
    sbuf_reset(&p->upbody);
    sbuf_append(&p->upbody, p->in.body.p, start);
    sbuf_json_str(&p->upbody, to, strlen(to));
    sbuf_append(&p->upbody, p->in.body.p + end, p->in.body.len - end);
    return &p->upbody;
}

static void proxy_build_url(proxy_req *p, const pool_account *pa)
{
    const char *base = pa->a.base_url;
    size_t blen = strlen(base);
    while (blen && base[blen - 1] == '/')
        blen--;
    sbuf_reset(&proxy_url);
    sbuf_append(&proxy_url, base, blen);
    sbuf_puts(&proxy_url, p->in.suffix);
}

/* ---------- usage / state bookkeeping ---------- */

static void proxy_record_success(proxy_req *p)
{
    pool_account *pa = proxy_account(p);
    if (!pa)
        return;
    double ms = (gateway_now() - p->t_attempt) * 1000.0;
    breaker_record(p->gw, pa, 1, gateway_now());
    pa->st.success_ema = pa->st.success_ema * 0.9 + 0.1;
    pool_health_record(pa, p->t_attempt + ms / 1000.0, 1, ms);
    pa->st.latency_ema_ms = pa->st.latency_ema_ms > 0 ? pa->st.latency_ema_ms * 0.8 + ms * 0.2 : ms;
    pa->st.updated_at = gateway_now();
    pool_state_save(p->gw->pool, pa);
}

/* Applies a failover verdict to the account: cooldown (from classify, or
 * from the cooldown hook for ladder classes) and health. */
static double proxy_cool_down(proxy_req *p, const policy_verdict *v)
{
    pool_account *pa = proxy_account(p);
    if (!pa)
        return 0;
    double now = gateway_now();
    double secs = v->cooldown;
    if (secs < 0) {
        /* classify left the duration to the ladder: this failure is a step on it */
        policy_state ps = {pa->a.id, pa->st.ladder_step, pa->st.last_429_at, pa->st.cooldown_until, p->retry_after,
                           pa->st.primary_used_pct, pa->st.primary_reset_at, pa->st.secondary_used_pct,
                           pa->st.secondary_reset_at};
        int step = pa->st.ladder_step;
        policy_cooldown(p->gw->policy, &ps, v->cls, now, &secs, &step);
        pa->st.ladder_step = step;
        pa->st.last_429_at = now;
        if (pa->a.kind == ACCOUNT_CHATGPT) /* learn the windows as they are now */
            usage_poll_soon(p->gw->usage, pa->a.id);
    }
    if (secs > 0 && now + secs > pa->st.cooldown_until)
        pa->st.cooldown_until = now + secs;
    sbuf_copy_cstr(pa->st.last_error, sizeof pa->st.last_error, v->cls);
    if (v->drain_bucket)
        account_limits_drain(pa, now);
    breaker_record(p->gw, pa, 0, now);
    pa->st.success_ema = pa->st.success_ema * 0.9;
    pool_health_record(pa, now, 0, 0);
    pa->st.updated_at = now;
    pool_state_save(p->gw->pool, pa);
    return secs;
}

/* ---------- attempt outcomes ---------- */

/* What a decision made of the current attempt: "failover", "returned"
 * (its error went to the client unchanged), "retry" (the same account
 * again), "context_fallback", "resume", "login_refresh" (a 401 that
 * refreshed the login; the same account again). proxy_attempt_record writes it
 * when the attempt ends; attempts that end without a decision get their
 * outcome there (ok, error, client_closed, abandoned). */
static void proxy_attempt_outcome(proxy_req *p, const char *outcome, const char *cls)
{
    p->att_outcome = outcome;
    sbuf_copy_cstr(p->att_class, sizeof p->att_class, cls ? cls : "");
}

/* ---------- attempt teardown ---------- */

/* The one place an attempt's end is recorded: an object appended to the
 * request's attempts record (stored with its log row) and the attempt
 * counters of metrics. */
static void proxy_attempt_record(proxy_req *p)
{
    const char *outcome = p->att_outcome, *cls = p->att_class;
    if (!outcome) {
        if (p->client_gone)
            outcome = "client_closed", cls = "client_closed";
        else if (p->committed)
            outcome = p->error_class[0] ? "error" : "ok", cls = p->error_class;
        else
            outcome = "abandoned";
    }
    double secs = gateway_now() - p->t_attempt;
    sbuf *t = &p->tried;
    if (!t->len)
        sbuf_reserve(t, 256); /* one attempt's record at once, not grown from 64 bytes */
    sbuf_puts(t, t->len ? ",{\"account\":" : "[{\"account\":");
    sbuf_json_str(t, p->acct_name, strlen(p->acct_name));
    sbuf_puts(t, ",\"account_id\":");
    sbuf_put_int(t, p->acct_id);
    sbuf_puts(t, ",\"model\":");
    sbuf_json_str(t, p->att_model, strlen(p->att_model));
    sbuf_puts(t, ",\"outcome\":");
    sbuf_json_str(t, outcome, strlen(outcome));
    sbuf_puts(t, ",\"class\":");
    sbuf_json_str(t, cls, strlen(cls));
    sbuf_puts(t, ",\"status\":");
    sbuf_put_int(t, p->status);
    sbuf_puts(t, ",\"ms\":");
    sbuf_put_int(t, (long long)(secs * 1000.0 + 0.5));
    sbuf_puts(t, "}");
    metrics_attempt(p->acct_id, outcome, cls, secs);
    if (strcmp(outcome, "ok") != 0) /* a served attempt is the request's last: REQUEST_FINAL tells it */
        trace_event(p->gw->trace, "ATTEMPT_END", "req=%llu attempt=%d account=%s model=%s outcome=%s class=%s status=%d ms=%.1f",
                    (unsigned long long)p->id, p->attempts, p->acct_name, p->att_model, outcome, *cls ? cls : "-",
                    p->status, secs * 1000.0);
}

/* Events a long stream does not need after its start are made on use and
 * freed when done, not kept in every proxy_req (docs/performance.md,
 * "Long-lived streams"). */
static void proxy_pf_timer_drop(proxy_req *p)
{
    if (p->pf_timer)
        event_free(p->pf_timer);
    p->pf_timer = NULL;
}

static void proxy_attempt_end(proxy_req *p)
{
    if (p->acct_id)
        proxy_attempt_record(p);
    if (p->up) {
        upstream_cancel(p->up);
        p->up = NULL;
    }
    proxy_pf_timer_drop(p);
    if (p->pf_live) {
        preflight_free(&p->pf);
        p->pf_live = 0;
    }
    pool_account *pa = proxy_account(p);
    if (pa && p->acct_id && pa->inflight > 0)
        pa->inflight--;
    p->acct_id = 0;
    p->mode = MODE_NONE;
}

/* ---------- client output ---------- */

static struct evbuffer *proxy_client_outbuf(proxy_req *p)
{
    struct evhttp_connection *c = evhttp_request_get_connection(p->req);
    struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
    return bev ? bufferevent_get_output(bev) : NULL;
}

static void proxy_on_client_drained(struct evhttp_connection *c, void *arg)
{
    proxy_req *p = arg;
    if (!p->paused || !p->up)
        return;
    struct evbuffer *out = proxy_client_outbuf(p);
    if (!out || evbuffer_get_length(out) < PROXY_CLIENT_HIGH / 2) {
        p->paused = 0;
        upstream_resume(p->up);
    }
}

/* Hands what this loop turn gathered to libevent as one chunk. */
/* Once the status line and headers are written (evhttp_send_reply_start
 * puts them in the connection's buffer), libevent keeps the header list
 * until the request ends and reads only "Connection" from it (whether the
 * connection closes after). A stream held open for minutes keeps only that
 * one: three allocations less per header (docs/performance.md). */
static void proxy_drop_sent_headers(struct evhttp_request *req)
{
    struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
    struct evkeyval *h, *next, *conn = NULL;
    int conns = 0;
    for (h = oh->tqh_first; h; h = h->next.tqe_next)
        if (strcasecmp(h->key, "Connection") == 0) {
            conn = h;
            conns++;
        }
    if (conns > 1) { /* unusual: each removed by name (the first of that name is h itself) */
        for (h = oh->tqh_first; h; h = next) {
            next = h->next.tqe_next;
            if (strcasecmp(h->key, "Connection") != 0)
                evhttp_remove_header(oh, h->key);
        }
        return;
    }
    /* the usual: the whole list at once (a removal by name walks the list
     * comparing names: most of the cost), then Connection again if there was one */
    char *keep = conn ? sbuf_strdup_nonempty(conn->value) : NULL;
    int had = conn != NULL;
    evhttp_clear_headers(oh);
    if (had)
        evhttp_add_header(oh, "Connection", keep ? keep : "");
    free(keep);
}

/* Requests whose client bytes wait for this turn's flush, so that
 * proxy_flush_pending can send them as soon as curl has returned from the
 * socket read that brought them (flush_ev, which runs after the rest of
 * the turn, stays as the fallback for bytes made elsewhere). */
static proxy_req **proxy_unflushed;
static size_t proxy_n_unflushed, proxy_alloc_unflushed;

static void proxy_unflushed_add(proxy_req *p)
{
    if (p->unflushed_at)
        return;
    if (proxy_n_unflushed == proxy_alloc_unflushed) {
        size_t n = proxy_alloc_unflushed ? proxy_alloc_unflushed * 2 : 64;
        proxy_req **v = realloc(proxy_unflushed, n * sizeof *v);
        if (!v)
            return; /* flush_ev sends it */
        proxy_unflushed = v;
        proxy_alloc_unflushed = n;
    }
    proxy_unflushed[proxy_n_unflushed++] = p;
    p->unflushed_at = proxy_n_unflushed;
}

static void proxy_unflushed_remove(proxy_req *p)
{
    if (!p->unflushed_at)
        return;
    proxy_req *last = proxy_unflushed[--proxy_n_unflushed];
    proxy_unflushed[p->unflushed_at - 1] = last;
    last->unflushed_at = p->unflushed_at;
    p->unflushed_at = 0;
}

/* A plain answer is held until it is complete (up to PROXY_PLAIN_HOLD,
 * with all held answers under PROXY_PLAIN_HOLD_ALL): its client waits for
 * the whole of it anyway, it then goes out with a Content-Length, and an
 * upstream that cuts it midway has told the client nothing, so the request
 * can still go to another account (proxy_plain_cut_unseen) instead of the
 * client getting a cut answer. A larger one is relayed as it comes. */
static size_t proxy_held_bytes;

static void proxy_hold_release(proxy_req *p)
{
    proxy_held_bytes -= p->held_counted;
    p->held_counted = 0;
}

static int proxy_plain_hold(proxy_req *p)
{
    if (!p->reply_held || p->mode != MODE_PLAIN || p->out.len > PROXY_PLAIN_HOLD ||
        proxy_held_bytes - p->held_counted + p->out.len > PROXY_PLAIN_HOLD_ALL) {
        proxy_hold_release(p);
        return 0;
    }
    proxy_held_bytes += p->out.len - p->held_counted;
    p->held_counted = p->out.len;
    return 1;
}

static void proxy_client_flush(proxy_req *p)
{
    proxy_unflushed_remove(p);
    if (!p->out.len)
        return;
    event_del(&p->flush_ev);
    if (p->client_gone || !p->req) {
        proxy_hold_release(p);
        sbuf_reset(&p->out);
        return;
    }
    if (proxy_plain_hold(p))
        return;
    if (p->reply_held) {
        p->reply_held = 0;
        evhttp_send_reply_start(p->req, p->committed_status, NULL);
        proxy_drop_sent_headers(p->req);
    }
    struct evbuffer *chunk = p->gw->chunk; /* libevent moves its contents out */
    evbuffer_add(chunk, p->out.p, p->out.len);
    server_reply_chunk(p->req, chunk, proxy_on_client_drained, p);
    evbuffer_drain(chunk, evbuffer_get_length(chunk)); /* in case libevent refused it */
    /* freed, not kept: a held-open stream sends a small chunk now and then,
     * and thousands of them each keeping a buffer between events add up
     * (docs/performance.md, "Long-lived streams") */
    sbuf_free(&p->out);
}

static void proxy_on_flush(evutil_socket_t fd, short what, void *arg) { proxy_client_flush(arg); }

void proxy_flush_pending(void)
{
    while (proxy_n_unflushed)
        proxy_client_flush(proxy_unflushed[proxy_n_unflushed - 1]);
}

/* Queues bytes for the client; returns 1 when the upstream should pause.
 * curl hands a stream over in pieces (one per HTTP chunk, often one per
 * event), several per socket read: they go out as one chunk once curl has
 * returned, in the same loop turn, instead of one chunk (and its framing
 * and bookkeeping) each. */
static int proxy_client_send(proxy_req *p, const char *buf, size_t n)
{
    if (!n || p->client_gone)
        return 0;
    size_t before = p->out.len;
    if (!p->out.cap) /* one allocation for what a loop turn usually gathers, not a doubling per event */
        sbuf_reserve(&p->out, n > PROXY_OUT_FIRST ? n : PROXY_OUT_FIRST);
    scrub_feed(&p->scrub, buf, n, &p->out);
    if (p->out.len && (!before || !p->unflushed_at)) { /* a held plain answer is looked at again */
        event_active(&p->flush_ev, EV_TIMEOUT, 1);
        proxy_unflushed_add(p);
    }
    struct evbuffer *out = proxy_client_outbuf(p);
    if (out && evbuffer_get_length(out) + p->out.len > PROXY_CLIENT_HIGH) {
        p->paused = 1;
        return 1;
    }
    return 0;
}

/* The serving account's x-codex-* headers (rate-limit windows, credits,
 * turn state) go back to the client: Codex shows them and sends the turn
 * state back on its next request, which must then reach this account. */
static void proxy_relay_headers(proxy_req *p, struct evkeyvalq *oh)
{
    for (size_t off = 0; off < p->relay.len;) {
        const char *name = p->relay.p + off;
        const char *value = name + strlen(name) + 1;
        evhttp_add_header(oh, name, value);
        if (strcasecmp(name, "x-codex-turn-state") == 0 && p->status >= 200 && p->status < 300)
            router_turn_state_owner_set(p->gw, value, p->acct_id); /* the next turn comes back here */
        off = (size_t)(value - p->relay.p) + strlen(value) + 1;
    }
}

/* The session now belongs to the account that answered its turn; the trace
 * says when that is a different account than last time. */
static void proxy_affinity_note(proxy_req *p)
{
    if (!p->session[0])
        return;
    affinity_put(p->gw->affinity, p->session, p->acct_id, gateway_now());
    if (p->plan.pinned_owner || p->plan.affinity_prev == p->acct_id)
        return;
    pool_account *prev = p->plan.affinity_prev ? pool_find(p->gw->pool, p->plan.affinity_prev) : NULL;
    trace_event(p->gw->trace, "AFFINITY", "req=%llu session=%s account=%s previous=%s reason=%s",
                (unsigned long long)p->id, p->session, p->acct_name,
                prev ? prev->a.name : "-", p->plan.affinity_prev ? "moved" : "new_session");
}

/* v in decimal, at the end of buf[24]; returns its start (no printf on the request path). */
static const char *proxy_utoa(char buf[24], size_t v)
{
    char *e = buf + 23;
    *e = '\0';
    do
        *--e = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    return e;
}

static void proxy_commit(proxy_req *p)
{
    if (p->committed)
        return;
    p->committed = 1;
    proxy_pf_timer_drop(p); /* its callback ignores a committed request */
    proxy_affinity_note(p);
    p->error_class[0] = '\0'; /* failures before commit are history (trace, why); report what follows */
    struct evkeyvalq *oh = evhttp_request_get_output_headers(p->req);
    evhttp_add_header(oh, "Content-Type", p->resp_ctype[0] ? p->resp_ctype : "application/json");
    if (p->resp_request_id[0])
        evhttp_add_header(oh, "x-request-id", p->resp_request_id);
    if (p->mode == MODE_PREFLIGHT)
        evhttp_add_header(oh, "Cache-Control", "no-cache");
    proxy_relay_headers(p, oh);
    evhttp_add_header(oh, "x-switchyard-account", p->acct_name);
    char n[24];
    evhttp_add_header(oh, "x-switchyard-attempts", proxy_utoa(n, (size_t)(p->attempts > 0 ? p->attempts : 0)));
    server_date_header(oh);
    if (p->req->major < 1 || (p->req->major == 1 && p->req->minor < 1)) {
        /* HTTP/1.0 (and 0.9) has no chunked encoding and the length is unknown: the
         * body runs to the connection's close. libevent decides keep-alive
         * (and would then announce "Content-Length: 0") from the request's
         * Connection header, so that header goes. */
        evhttp_remove_header(evhttp_request_get_input_headers(p->req), "Connection");
        evhttp_add_header(oh, "Connection", "close");
    }
    p->committed_status = p->status;
    if (p->mode == MODE_PLAIN) {
        /* committed now, but the status line waits: a plain answer is held
         * whole up to PROXY_PLAIN_HOLD and then goes out with a
         * Content-Length (proxy_done_committed); a larger one goes out as a
         * chunked reply as it comes (proxy_client_flush, proxy_plain_hold) */
        p->reply_held = 1;
        return;
    }
    evhttp_send_reply_start(p->req, p->status, NULL);
    proxy_drop_sent_headers(p->req);
}

/* The held plain answer, complete: one reply with a Content-Length instead
 * of a chunked one (no chunk framing to write, or for the client to read). */
static void proxy_reply_whole(proxy_req *p)
{
    p->reply_held = 0;
    event_del(&p->flush_ev);
    proxy_unflushed_remove(p);
    proxy_hold_release(p);
    char len[24];
    evhttp_add_header(evhttp_request_get_output_headers(p->req), "Content-Length", proxy_utoa(len, p->out.len));
    struct evbuffer *body = p->gw->chunk;
    evbuffer_add(body, p->out.p, p->out.len);
    server_reply(p->req, p->committed_status, body);
    evbuffer_drain(body, evbuffer_get_length(body));
    sbuf_reset(&p->out);
}

/* Sends what preflight holds, up to the end of its last complete event:
 * the rest of an event waits for its blank line, so a stream that dies in
 * the middle of an event never leaves the client with half of one (an
 * unfinished event longer than PROXY_EVENT_HOLD_MAX goes out as it comes).
 * all: send everything, e.g. before relaying the rest unparsed. Returns 1
 * when the upstream should pause. */
static int proxy_flush_held(proxy_req *p, int all)
{
    size_t open = preflight_open_bytes(&p->pf);
    int everything = all || open > PROXY_EVENT_HOLD_MAX;
    size_t n = everything ? p->pf.held.len : p->pf.held.len - open;
    if (!n)
        return 0;
    int pause = proxy_client_send(p, p->pf.held.p, n);
    p->mid_event = everything && open > 0;
    sbuf_consume(&p->pf.held, n);
    if (!p->pf.held.len)
        sbuf_free(&p->pf.held); /* nothing waits: no buffer kept between events (as out above) */
    return pause;
}

/* A committed stream with nothing held: what curl just handed over goes
 * out from its buffer instead of through pf->held (a copy, an allocation
 * and a free less per event); only an unfinished event's bytes are held.
 * The same outcome as holding buf and proxy_flush_held(p, 0). */
static int proxy_relay_committed(proxy_req *p, const char *buf, size_t n)
{
    size_t open = preflight_pass(&p->pf, buf, n);
    int everything = open > PROXY_EVENT_HOLD_MAX;
    size_t send = everything ? n : n - open;
    int pause = 0;
    if (send) {
        pause = proxy_client_send(p, buf, send);
        p->mid_event = everything && open > 0;
    }
    if (send < n)
        sbuf_append(&p->pf.held, buf + send, n - send);
    return pause;
}

/* Closes the client connection (and with it the request) without a final
 * chunk; our close callback is removed first so it cannot run on the way.
 * reset: the answer was cut, so the close must not look like its end. An
 * HTTP/1.0 answer (no Content-Length, no chunks) ends at the close, and
 * evhttp_connection_free shuts the socket down with a FIN first, which the
 * client reads as a complete body. So a TCP reset goes out instead
 * (conn_limit_reset): the client reads what arrived, then ECONNRESET. */
static void proxy_drop_client(proxy_req *p, int reset)
{
    struct evhttp_connection *c = p->req ? evhttp_request_get_connection(p->req) : NULL;
    p->client_gone = 1;
    p->req = NULL;
    struct bufferevent *bev = c && reset ? evhttp_connection_get_bufferevent(c) : NULL;
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    if (fd >= 0)
        conn_limit_reset(fd);
    if (c) {
        evhttp_connection_set_closecb(c, NULL, NULL);
        proxy_watch_drop(p->watch);
        p->watch = NULL;
        evhttp_connection_free(c); /* frees the request too */
    }
}

/* The stream broke after commit: say so in the stream's own format, as an
 * event of its own. The unfinished event the upstream left is dropped (a
 * client's SSE parser would discard it too); if part of it already went
 * out, a blank line ends it first, so the error is never glued onto it. */
static void proxy_stream_interrupted(proxy_req *p, const char *why)
{
    sbuf ev = SBUF_INIT, msg = SBUF_INIT;
    sbuf_reset(&p->pf.held);
    if (p->mid_event)
        sbuf_puts(&ev, "\n\n");
    p->mid_event = 0;
    sbuf_printf(&msg, "upstream stream from account %s ended before completion: %s", p->acct_name, why);
    if (p->in.api == API_RESPONSES) {
        sbuf_puts(&ev, "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":");
        sbuf_json_str(&ev, p->pf.response_id, strlen(p->pf.response_id));
        sbuf_puts(&ev, ",\"status\":\"failed\",\"error\":{\"code\":\"upstream_stream_interrupted\",\"message\":");
        sbuf_json_str(&ev, msg.p, msg.len);
        sbuf_puts(&ev, "}}}\n\n");
    } else {
        sbuf_puts(&ev, "data: {\"error\":{\"message\":");
        sbuf_json_str(&ev, msg.p, msg.len);
        sbuf_puts(&ev, ",\"type\":\"upstream_error\",\"code\":\"upstream_stream_interrupted\"}}\n\n");
    }
    proxy_client_send(p, ev.p, ev.len);
    sbuf_free(&ev);
    sbuf_free(&msg);
    snprintf(p->error_class, sizeof p->error_class, "stream_interrupted");
}

/* ---------- failure handling ---------- */

static void proxy_error_fields(const char *body, size_t len, json_value **doc, const char **type,
                               const char **code, const char **message)
{
    *doc = body && len ? json_parse(body, len, NULL, 0) : NULL;
    *type = *code = *message = NULL;
    json_value *err = *doc ? json_get(*doc, "error") : NULL;
    if (err && err->type == JSON_STRING) {
        *message = err->str;
        return;
    }
    json_value *src = err ? err : *doc;
    if (!src)
        return;
    *type = json_get_str(src, "type");
    *code = json_get_str(src, "code");
    *message = json_get_str(src, "message");
    if (!err && *doc) { /* responses API response.failed: {"response":{"error":{...}}} */
        json_value *resp = json_get(*doc, "response");
        json_value *rerr = resp ? json_get(resp, "error") : NULL;
        if (rerr) {
            *code = json_get_str(rerr, "code");
            *message = json_get_str(rerr, "message");
        }
    }
}

/* ChatGPT's usage-limit errors say when the window resets
 * (error.resets_in_seconds); it serves as a Retry-After hint. */
static void proxy_note_resets_in(proxy_req *p, const json_value *doc)
{
    double r = usage_resets_in(doc);
    if (r > p->retry_after)
        p->retry_after = r;
}

/* ---------- retries on the same account ---------- */

/* Remaining candidates of the plan that could serve now; with same_model,
 * only those that would be sent the same model as the current account (a
 * model map changes the user's intent: such a candidate is no equivalent). */
static int proxy_candidates_left(proxy_req *p, int same_model)
{
    char cur[128], m[128], why[160];
    pool_account *self = proxy_account(p);
    if (self)
        proxy_model_for(p, self, cur, sizeof cur);
    else
        sbuf_copy_cstr(cur, sizeof cur, p->in.model);
    double now = gateway_now();
    int n = 0;
    for (size_t i = p->next; i < p->plan.n; i++) {
        pool_account *pa = pool_find(p->gw->pool, p->plan.ids[i]);
        if (!pa || pa->a.id == p->acct_id || !router_available(pa, &p->rctx, now, why, sizeof why))
            continue;
        if (same_model)
            proxy_model_for(p, pa, m, sizeof m);
        n += !same_model || strcmp(m, cur) == 0;
    }
    return n;
}

static void proxy_on_retry_timer(evutil_socket_t fd, short what, void *arg)
{
    proxy_req *p = arg;
    if (!p->retry_acct) { /* the end of a wait for capacity: plan afresh */
        trace_event(p->gw->trace, "CANDIDATE_POOL_AGAIN", "req=%llu waited_ms=%.0f", (unsigned long long)p->id,
                    p->waited_s * 1000.0);
        router_plan_free(&p->plan);
        /* the request is still the client's (a hang-up ends the wait): its
         * turn state pins this plan as it pinned the first */
        p->rctx.turn_state = p->req ? evhttp_find_header(evhttp_request_get_input_headers(p->req), "x-codex-turn-state")
                                    : NULL;
        router_plan(p->gw, &p->rctx, &p->plan);
        p->rctx.turn_state = NULL;
        p->next = 0;
        sbuf_reset(&p->why);
        proxy_next(p);
        return;
    }
    pool_account *pa = pool_find(p->gw->pool, p->retry_acct);
    p->retry_acct = 0;
    /* still a candidate? The wait gave its limits (concurrency, rpm, the
     * breaker's one probe) to others, and other requests may have cooled it */
    char why[160];
    if (pa && router_available(pa, &p->rctx, gateway_now(), why, sizeof why)) {
        proxy_attempt(p, pa);
        return;
    }
    if (pa) {
        proxy_why(p, pa->a.name, why);
        trace_event(p->gw->trace, "CANDIDATE_SKIP", "req=%llu account=%s reason=\"%s\"", (unsigned long long)p->id,
                    pa->a.name, why);
    }
    proxy_next(p); /* the account was removed, disabled or is no candidate now: go on */
}

/* Starts the wait before proxy_on_retry_timer, in seconds. */
static void proxy_retry_arm(proxy_req *p, double secs)
{
    if (!p->retry_timer && !(p->retry_timer = evtimer_new(p->gw->base, proxy_on_retry_timer, p)))
        abort();
    long ms = (long)(secs * 1000.0 + 0.5);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(p->retry_timer, &tv);
}

/* Every candidate is resting. When the soonest is back within what is left
 * of the wait budget (SWITCHYARD_CAPACITY_WAIT_MS), hold the request and
 * plan again then; a client that hangs up meanwhile ends it (proxy_finish
 * removes the timer). Returns 1 if waiting, else 0 with *back set to the
 * soonest return (0: none is resting). */
static int proxy_wait_for_capacity(proxy_req *p, double *back)
{
    char name[64] = "";
    double now = gateway_now();
    *back = router_soonest_return(p->gw, &p->rctx, p->plan.pinned_owner, now, name, sizeof name);
    if (!*back || p->client_gone || p->client_eof)
        return 0;
    double wait = *back - now + 0.01; /* just past the end of the cooldown */
    if (wait > p->gw->cfg.capacity_wait_ms / 1000.0 - p->waited_s)
        return 0;
    p->waited_s += wait;
    metrics_wait(wait);
    trace_event(p->gw->trace, "CANDIDATE_WAIT", "req=%llu account=%s wait_ms=%.0f", (unsigned long long)p->id, name,
                wait * 1000.0);
    p->retry_acct = 0;
    proxy_retry_arm(p, wait);
    return 1;
}

/* A retry verdict: end this attempt without cooling the account down and
 * start it again on the same account after v->after seconds. The body is
 * sent again as it was. A client that hangs up meanwhile ends the request
 * (proxy_finish removes the timer). */
static void proxy_retry_later(proxy_req *p, const policy_verdict *v, int status)
{
    int64_t acct = p->acct_id;
    p->retries_total++;
    p->acct_retries++;
    metrics_retry(acct);
    trace_event(p->gw->trace, "CANDIDATE_RETRY", "req=%llu account=%s class=%s status=%d after_ms=%.0f retry=%d",
                (unsigned long long)p->id, p->acct_name, v->cls, status, v->after * 1000.0, p->acct_retries);
    proxy_attempt_end(p);
    p->retry_acct = acct;
    proxy_retry_arm(p, v->after);
}

/* The first remaining candidate declared as a larger-context fallback that
 * could serve now: its plan index, or -1. */
static long proxy_context_fallback_at(proxy_req *p)
{
    char why[160];
    double now = gateway_now();
    for (size_t i = p->next; i < p->plan.n; i++) {
        pool_account *pa = pool_find(p->gw->pool, p->plan.ids[i]);
        if (pa && pa->a.context_fallback && pa->a.id != p->acct_id &&
            router_available(pa, &p->rctx, now, why, sizeof why))
            return (long)i;
    }
    return -1;
}

/* A context_fallback verdict: the request was too long for this account.
 * It goes once to the next larger-context fallback, skipping equivalent
 * candidates (they would refuse it too); this account is not cooled down or
 * blamed. Returns 1 if it moved on, 0 if none is left (the error is returned). */
static int proxy_go_context_fallback(proxy_req *p, const policy_verdict *v)
{
    long at = proxy_context_fallback_at(p);
    if (at < 0)
        return 0;
    pool_account *to = pool_find(p->gw->pool, p->plan.ids[at]);
    trace_event(p->gw->trace, "CANDIDATE_SKIP", "req=%llu account=%s reason=context_fallback class=%s status=%d to=%s",
                (unsigned long long)p->id, p->acct_name, v->cls, p->status, to ? to->a.name : "-");
    proxy_attempt_outcome(p, "context_fallback", v->cls);
    proxy_why(p, p->acct_name, "the request is longer than its context window");
    p->ctx_fallback_used = 1;
    proxy_attempt_end(p);
    p->next = (size_t)at;
    proxy_next(p);
    return 1;
}

/* Classifies the current attempt's failure. Returns 1 if the request moved
 * on (a retry of the same account, or the next candidate), 0 if the failure
 * should reach the client. */
static int proxy_classify_and_route(proxy_req *p, policy_event *ev, const char *summary)
{
    policy_verdict v;
    ev->account_kind = account_kind_name(p->acct_kind);
    ev->endpoint = p->in.endpoint;
    ev->retry_after = p->retry_after;
    ev->retries = p->acct_retries;
    ev->alternatives = proxy_candidates_left(p, 1);
    ev->random = (double)random() / ((double)RAND_MAX + 1.0);
    ev->context_fallbacks = !p->ctx_fallback_used && proxy_context_fallback_at(p) >= 0;
    policy_classify(p->gw->policy, ev, &v);
    sbuf_copy_cstr(p->error_class, sizeof p->error_class, v.cls);
    if (v.action == VERDICT_CONTEXT_FALLBACK) {
        if (!p->ctx_fallback_used && proxy_go_context_fallback(p, &v))
            return 1;
        proxy_attempt_outcome(p, "returned", v.cls); /* none left: the error goes to the client */
        return 0;
    }
    if (v.action == VERDICT_RETRY && p->retries_total < PROXY_RETRY_MAX && !p->client_eof) {
        proxy_attempt_outcome(p, "retry", v.cls);
        proxy_retry_later(p, &v, ev->status);
        return 1;
    }
    if (v.action == VERDICT_RETRY) { /* out of retries (or see proxy_on_client_readable): fail over,
                                       * resting as the cooldown hook says */
        v.action = VERDICT_FAILOVER;
        v.failover = 1;
        v.cooldown = -1;
    }
    proxy_attempt_outcome(p, v.failover ? "failover" : "returned", v.cls);
    if (!v.failover)
        return 0;
    double secs = proxy_cool_down(p, &v);
    char detail[256];
    snprintf(detail, sizeof detail, "%s, class %s, cooling down %.0fs", summary, v.cls, secs);
    scrub_cstr(&p->scrub, detail, sizeof detail); /* the summary may quote the upstream's error code */
    proxy_why(p, p->acct_name, detail);
    trace_event(p->gw->trace, "CANDIDATE_SKIP", "req=%llu account=%s reason=failover class=%s status=%d cooldown_s=%.0f",
                (unsigned long long)p->id, p->acct_name, v.cls, ev->status, secs);
    proxy_attempt_end(p);
    proxy_next(p);
    return 1;
}

/* The upstream's error goes to the client as it came, status included,
 * when it is JSON. One too large to keep whole (it would arrive cut,
 * invalid JSON) or not JSON at all (an HTML error page, an empty body) is
 * replaced by an OpenAI-shaped error that says so, with the same status. */
static void proxy_reply_upstream_error(proxy_req *p, int is_json)
{
    int too_large = p->errbody_total > p->errbody.len;
    if (too_large || !is_json) {
        sbuf msg = SBUF_INIT, text = SBUF_INIT;
        if (too_large) {
            sbuf_printf(&msg, "account %s answered HTTP %d with an error body of %zu bytes, too large to relay "
                        "(the gateway keeps %u)", p->acct_name, p->status, p->errbody_total, PROXY_ERRBODY_MAX);
        } else {
            /* a printable excerpt of what came, secrets out */
            scrub_text(&p->scrub, p->errbody.p, p->errbody.len < 512 ? p->errbody.len : 512, &text);
            for (size_t i = 0; i < text.len; i++)
                if ((unsigned char)text.p[i] < 0x20 || (unsigned char)text.p[i] > 0x7e)
                    text.p[i] = ' ';
            sbuf_printf(&msg, "account %s answered HTTP %d with a body that is not JSON%s%.*s", p->acct_name,
                        p->status, text.len ? ": " : " (empty)", (int)(text.len < 200 ? text.len : 200),
                        text.len ? text.p : "");
        }
        evhttp_add_header(evhttp_request_get_output_headers(p->req), "x-switchyard-account", p->acct_name);
        server_send_error(p->req, p->status, "upstream_error",
                          too_large ? "upstream_error_too_large" : "upstream_error_not_json", msg.p);
        sbuf_free(&msg);
        sbuf_free(&text);
        proxy_finish(p, p->status);
        return;
    }
    struct evkeyvalq *oh = evhttp_request_get_output_headers(p->req);
    evhttp_add_header(oh, "Content-Type", p->resp_ctype[0] ? p->resp_ctype : "application/json");
    proxy_relay_headers(p, oh);
    evhttp_add_header(oh, "x-switchyard-account", p->acct_name);
    sbuf body = SBUF_INIT;
    scrub_text(&p->scrub, p->errbody.p, p->errbody.len, &body);
    struct evbuffer *b = evbuffer_new();
    evbuffer_add(b, body.p ? body.p : "", body.len);
    server_reply(p->req, p->status, b);
    evbuffer_free(b);
    sbuf_free(&body);
    proxy_finish(p, p->status);
}

static void proxy_on_stream_error(proxy_req *p)
{
    policy_event ev = {0};
    ev.status = p->status;
    ev.in_stream = 1;
    ev.body = p->pf.error_body.p;
    ev.body_len = p->pf.error_body.len;
    ev.error_type = p->pf.error_type[0] ? p->pf.error_type : NULL;
    ev.error_code = p->pf.error_code[0] ? p->pf.error_code : NULL;
    ev.error_message = p->pf.error_message.len ? p->pf.error_message.p : NULL;
    char summary[160], what[64];
    sbuf_copy_cstr(what, sizeof what, ev.error_code ? ev.error_code : (ev.error_type ? ev.error_type : "error"));
    scrub_cstr(&p->scrub, what, sizeof what); /* it may end in a token cut short by the 63-byte field */
    snprintf(summary, sizeof summary, "error event in the 200 stream (%s)", what);
    if (proxy_classify_and_route(p, &ev, summary)) {
        metrics_preflight_switch();
        return;
    }
    /* the policy returns it: the client gets the stream as upstream sent it */
    proxy_commit(p);
    proxy_flush_held(p, 1); /* the rest is relayed unparsed */
}

/* ---------- upstream callbacks ---------- */

/* The time-to-first-token limit: a stream that showed no semantic event by
 * then fails over before anything reached the client (classified as a
 * timeout). With no other candidate left it is committed instead: a slow
 * answer beats none, and the idle limit still guards it. */
static void proxy_on_pf_timer(evutil_socket_t fd, short what, void *arg)
{
    proxy_req *p = arg;
    if (p->mode != MODE_PREFLIGHT || p->committed || !p->pf_live)
        return;
    if (proxy_candidates_left(p, 0) > 0) {
        policy_event ev = {0};
        ev.status = p->status;
        ev.timeout = 1;
        ev.in_stream = 1;
        ev.error_message = "no output within the time-to-first-token limit";
        if (proxy_classify_and_route(p, &ev, ev.error_message))
            return;
        proxy_attempt_outcome(p, NULL, NULL); /* the slow stream is served after all: its end tells */
    }
    preflight_commit(&p->pf);
    proxy_commit(p);
    proxy_flush_held(p, 0);
}

/* An upstream header value the client will see: scrubbed whole, then cut
 * to fit (cutting first could leave the start of a token). */
static void proxy_copy_scrubbed(proxy_req *p, char *dst, size_t cap, const char *value)
{
    sbuf v = SBUF_INIT;
    scrub_text(&p->scrub, value, strlen(value), &v);
    sbuf_copy_cstr(dst, cap, v.len ? v.p : "");
    sbuf_free(&v);
}

/* An x-codex-* response header: kept for the client (bounded, only what
 * is safe in a header value, never one echoing the account's token) and
 * read for usage. */
static void proxy_note_codex_header(proxy_req *p, pool_account *pa, const char *name, const char *value, double now)
{
    size_t nl = strlen(name), vl = strlen(value);
    sbuf scrubbed = SBUF_INIT; /* any change: it holds the token (or the start of it) */
    scrub_text(&p->scrub, value, vl, &scrubbed);
    int secret = scrubbed.len != vl || (vl && memcmp(scrubbed.p, value, vl) != 0);
    sbuf_free(&scrubbed);
    if (p->relay.len + nl + vl + 2 <= PROXY_RELAY_MAX && !strpbrk(value, "\r\n") && !secret) {
        sbuf_append(&p->relay, name, nl + 1);
        sbuf_append(&p->relay, value, vl + 1);
    }
    if (pa)
        usage_header_apply(&pa->st, name, value, now);
}

/* Is a 2xx with this Content-Type an answer of the API? JSON or an event
 * stream; an HTML or text page (a proxy's or CDN's challenge, a captive
 * portal) is not. A missing Content-Type is given the benefit of the doubt. */
static int proxy_ctype_is_answer(const char *ctype)
{
    if (!ctype[0])
        return 1;
    return strncasecmp(ctype, "text/event-stream", 17) == 0 || strncasecmp(ctype, "application/json", 16) == 0 ||
           strcasestr(ctype, "+json") != NULL;
}

static int proxy_up_headers(void *ud, int status, const upstream_header *h, size_t n)
{
    proxy_req *p = ud;
    pool_account *pa = proxy_account(p);
    double now = gateway_now();
    metrics_ttfb(now - p->t_attempt);
    p->status = status;
    p->retry_after = -1;
    for (size_t i = 0; i < n; i++) {
        /* by first letter: a real upstream sends twenty-odd headers, most
         * of them none of these */
        char c = (char)(h[i].name[0] | 0x20);
        if (c == 'c' && strcasecmp(h[i].name, "Content-Type") == 0)
            proxy_copy_scrubbed(p, p->resp_ctype, sizeof p->resp_ctype, h[i].value);
        else if (c == 'x' && strcasecmp(h[i].name, "x-request-id") == 0)
            proxy_copy_scrubbed(p, p->resp_request_id, sizeof p->resp_request_id, h[i].value);
        else if (c == 'r' && strcasecmp(h[i].name, "Retry-After") == 0 && p->retry_after < 0)
            p->retry_after = usage_header_seconds(h[i].value);
        else if (c == 'r' && strcasecmp(h[i].name, "retry-after-ms") == 0) { /* finer, so it wins */
            double ms = usage_header_seconds(h[i].value);
            if (ms >= 0)
                p->retry_after = ms / 1000.0;
        }
        else if (c == 'x' && strncasecmp(h[i].name, "x-codex-", 8) == 0)
            proxy_note_codex_header(p, pa, h[i].name, h[i].value, now);
    }
    if (status >= 200 && status < 300 && !proxy_ctype_is_answer(p->resp_ctype))
        p->not_answer = "content_type"; /* e.g. a text/html challenge page: collected like an error */
    if (status < 200 || status >= 300 || p->not_answer) {
        p->mode = MODE_ERROR;
        return 0;
    }
    int sse = strncasecmp(p->resp_ctype, "text/event-stream", 17) == 0;
    if (sse && !p->in.is_get) {
        p->mode = MODE_PREFLIGHT;
        preflight_init(&p->pf, p->in.api, p->gw->cfg.preflight_bytes);
        p->pf_live = 1;
        /* the delivered text is kept only when the policy could resume this stream */
        p->pf.keep_text = p->in.api == API_CHAT && p->in.stream && !p->resumed && policy_may_resume(p->gw->policy);
        long left = p->gw->cfg.ttft_ms - (long)((gateway_now() - p->t_attempt) * 1000.0);
        if (left < 1)
            left = 1;
        struct timeval tv = {left / 1000, (left % 1000) * 1000};
        if (!p->pf_timer && !(p->pf_timer = evtimer_new(p->gw->base, proxy_on_pf_timer, p)))
            abort();
        evtimer_add(p->pf_timer, &tv);
        return 0;
    }
    if (p->resume_pending) { /* a resumed stream must go on as a stream */
        p->mode = MODE_ERROR;
        return 0;
    }
    /* plain 2xx: committed with its first byte (proxy_up_data), so a body
     * that fails before any byte arrives (e.g. an encoding curl cannot
     * decode) still fails over, and an empty body is no answer; once bytes
     * flow nothing can fail over */
    p->mode = MODE_PLAIN;
    return 0;
}

static int proxy_up_data(void *ud, const char *buf, size_t n)
{
    proxy_req *p = ud;
    switch (p->mode) {
    case MODE_ERROR:
        p->errbody_total += n;
        if (p->errbody.len < PROXY_ERRBODY_MAX)
            sbuf_append(&p->errbody, buf, n < PROXY_ERRBODY_MAX - p->errbody.len ? n : PROXY_ERRBODY_MAX - p->errbody.len);
        return 0;
    case MODE_PLAIN:
        if (n)
            proxy_commit(p);
        if (p->sniff.len < PROXY_SNIFF_MAX)
            sbuf_append(&p->sniff, buf, n);
        return proxy_client_send(p, buf, n);
    case MODE_PREFLIGHT: {
        if (p->pf.state == PF_COMMIT && p->committed && !p->resume_pending && !p->pf.held.len)
            return proxy_relay_committed(p, buf, n);
        pf_state st = preflight_feed(&p->pf, buf, n);
        if (st == PF_ERROR && p->resume_pending) /* the resumed stream was refused: ends as interrupted */
            return 0;
        if (st == PF_ERROR && p->committed) /* an error stream the policy returned: relay the rest */
            return proxy_client_send(p, buf, n);
        if (st == PF_ERROR) {
            proxy_on_stream_error(p);
            return 0;
        }
        if (st == PF_COMMIT) {
            p->resume_pending = 0; /* a resumed stream goes on */
            proxy_commit(p);
            return proxy_flush_held(p, 0);
        }
        return 0;
    }
    default:
        return 0;
    }
}

/* Reads the plain answer's usage (and id); returns 1 when the body is an
 * error object instead ({"error":{...}} with HTTP 200, as some relays answer
 * quota and rate limits; a Responses object's own "error" is null). */
static int proxy_read_plain_usage(proxy_req *p)
{
    /* depth 3: usage.input_tokens_details.cached_tokens; of the rest of
     * the answer (its text) nothing is built */
    static const char *const wanted[] = {"usage", "id", "error"};
    json_value *doc = json_parse_members(p->sniff.p, p->sniff.len, 3, wanted, 3);
    const json_value *err = doc ? json_get(doc, "error") : NULL;
    int is_error = err && err->type == JSON_OBJECT;
    usage_tokens t = {p->in_tok, p->out_tok, p->tot_tok, p->cached_tok};
    usage_tokens_read(doc ? json_get(doc, "usage") : NULL, &t);
    p->in_tok = t.in;
    p->out_tok = t.out;
    p->tot_tok = t.total;
    p->cached_tok = t.cached;
    const char *id = doc && p->in.api == API_RESPONSES && !is_error ? json_get_str(doc, "id") : NULL;
    if (id)
        pool_owner_set(p->gw->pool, id, p->acct_id);
    json_free(doc);
    return is_error;
}

/* Ends a started reply and the request. The request is finished first:
 * evhttp_send_reply_end closes a connection that is not kept alive at once
 * when everything was written already (an HTTP/1.0 stream), and the close
 * callback would otherwise finish the request a second time. */
static void proxy_finish_reply(proxy_req *p, int status)
{
    struct evhttp_request *req = p->client_gone ? NULL : p->req;
    proxy_finish(p, status);
    if (req)
        server_reply_end(req);
}

/* ---------- opt-in stream resume (chat completions) ---------- */

/* The resumed attempt failed before any output of its own (refused the
 * prefill, errored, or nothing was left to try): the client gets the
 * explicit interrupted error, never a masked one. */
static void proxy_resume_failed(proxy_req *p, const char *why)
{
    trace_event(p->gw->trace, "STREAM_RESUME_FAILED", "req=%llu account=%s why=\"%s\"", (unsigned long long)p->id,
                p->acct_id ? p->acct_name : "-", why);
    p->resume_pending = 0;
    proxy_stream_interrupted(p, why);
    proxy_client_flush(p);
    proxy_finish_reply(p, p->committed_status);
}

/* A chat stream was cut after text (no tool call) reached the client. When
 * the policy says resume, the request goes on on the next candidate with the
 * delivered text as an assistant prefill; only the continuation is relayed
 * in the same client stream. Returns 1 if it went on. */
static int proxy_try_resume(proxy_req *p, up_result r, const char *errmsg)
{
    if (!p->pf.keep_text || p->resumed || p->client_gone || p->pf.text_overflow || !p->pf.text.len ||
        p->mid_event || !proxy_candidates_left(p, 0))
        return 0; /* (mid_event: half an over-long event went out; nothing can follow it cleanly) */
    policy_event ev = {0};
    ev.status = p->status;
    ev.in_stream = 1;
    ev.after_output = 1;
    ev.delivered_chars = (long)p->pf.text.len;
    ev.tool_call = p->pf.saw_tool_call;
    ev.network_error = r == UP_NETWORK || r == UP_OK;
    ev.timeout = r != UP_OK && r != UP_NETWORK;
    ev.error_message = errmsg ? errmsg : "the upstream closed the stream early";
    ev.retry_after = -1;
    ev.account_kind = account_kind_name(p->acct_kind);
    ev.endpoint = p->in.endpoint;
    policy_verdict v;
    policy_classify(p->gw->policy, &ev, &v);
    if (v.action != VERDICT_RESUME)
        return 0;
    /* the client's doc is shallow (request.c); the continuation needs the
     * messages whole, so the body is parsed in full here, on this rare path */
    sbuf body = SBUF_INIT;
    json_value *full = json_parse(p->in.body.p, p->in.body.len, NULL, 0), *doc = NULL;
    /* the prefill goes to another account: the cut account's secrets are
     * taken out of it as out of every byte the client got */
    sbuf text = SBUF_INIT;
    scrub_text(&p->scrub, p->pf.text.p, p->pf.text.len, &text);
    int built = full && resume_body_build(full, text.p ? text.p : "", text.len, &body) == 0;
    sbuf_free(&text);
    json_free(full);
    if (!built || !(doc = json_parse_shallow(body.p, body.len, 1, NULL, 0))) {
        sbuf_free(&body);
        return 0;
    }
    json_free(p->in.doc); /* the continuation request replaces the client's for the next attempts */
    p->in.doc = doc;
    p->gw->body_bytes += body.len - p->in.body.len; /* held in its place (proxy_finish gives back body.len) */
    sbuf_free(&p->in.body);
    p->in.body = body;
    if (v.cooldown != 0)
        proxy_cool_down(p, &v);
    trace_event(p->gw->trace, "STREAM_RESUME", "req=%llu account=%s delivered_chars=%zu class=%s",
                (unsigned long long)p->id, p->acct_name, p->pf.text.len, v.cls);
    proxy_attempt_outcome(p, "resume", v.cls);
    p->resumed = 1;
    p->resume_pending = 1;
    sbuf_reset(&p->pf.held); /* an unfinished event of the cut stream never reaches the client */
    proxy_client_flush(p);
    proxy_attempt_end(p);
    proxy_next(p);
    return 1;
}

/* Takes back the commit of a plain answer held whole (nothing of it was
 * sent): its bytes, its reply headers, its place in the flush lists. */
static void proxy_uncommit_held(proxy_req *p)
{
    p->committed = 0;
    p->reply_held = 0;
    event_del(&p->flush_ev);
    proxy_unflushed_remove(p);
    proxy_hold_release(p);
    sbuf_reset(&p->out);
    evhttp_clear_headers(evhttp_request_get_output_headers(p->req)); /* proxy_commit's */
}

/* A plain answer cut by the upstream (or timed out) before any of it
 * reached the client: its status line is still held (proxy_commit) and
 * what came of its body is only in p->out, so the client has been told
 * nothing. Not a cut answer then, but an attempt that failed before
 * output: the policy decides as for a network error (another account, a
 * retry), else the client gets a JSON 502/504 instead of a reset. */
static void proxy_plain_cut_unseen(proxy_req *p, up_result r, const char *errmsg)
{
    char what[256];
    snprintf(what, sizeof what, "the upstream %s its answer before any of it was relayed (%s)",
             r == UP_NETWORK ? "cut" : "timed out in", errmsg ? errmsg : "error");
    proxy_uncommit_held(p);
    policy_event ev = {0};
    ev.network_error = r == UP_NETWORK;
    ev.timeout = r != UP_NETWORK;
    ev.error_message = errmsg;
    if (proxy_classify_and_route(p, &ev, what))
        return;
    if (!p->error_class[0] || strcmp(p->error_class, "network") == 0)
        snprintf(p->error_class, sizeof p->error_class, "body_interrupted");
    server_send_error(p->req, r == UP_NETWORK ? 502 : 504, "upstream_error",
                      r == UP_NETWORK ? "upstream_interrupted" : "upstream_timeout", what);
    proxy_finish(p, r == UP_NETWORK ? 502 : 504);
}

/* A 2xx plain answer whose body is an error object, held whole and not
 * relayed yet: classified as an error inside a 2xx answer (in_stream, as
 * for a quota or rate-limit event inside a 200 stream: the policy fails
 * over on those). Returned by the policy, it goes to the client as it
 * came, status included. */
static void proxy_plain_error_unseen(proxy_req *p)
{
    sbuf_reset(&p->errbody);
    sbuf_append(&p->errbody, p->sniff.p, p->sniff.len < PROXY_ERRBODY_MAX ? p->sniff.len : PROXY_ERRBODY_MAX);
    p->errbody_total = p->sniff.len;
    proxy_uncommit_held(p);
    p->mode = MODE_ERROR;
    json_value *doc;
    policy_event ev = {0};
    ev.status = p->status;
    ev.in_stream = 1;
    ev.body = p->errbody.p;
    ev.body_len = p->errbody.len;
    proxy_error_fields(p->errbody.p, p->errbody.len, &doc, &ev.error_type, &ev.error_code, &ev.error_message);
    proxy_note_resets_in(p, doc);
    char summary[64];
    snprintf(summary, sizeof summary, "HTTP %d with an error body", p->status);
    int moved = proxy_classify_and_route(p, &ev, summary);
    json_free(doc);
    if (!moved)
        proxy_reply_upstream_error(p, 1);
}

static void proxy_done_committed(proxy_req *p, up_result r, const char *errmsg)
{
    if (p->mode == MODE_PREFLIGHT) {
        p->in_tok = p->pf.input_tokens;
        p->out_tok = p->pf.output_tokens;
        p->tot_tok = p->pf.total_tokens;
        p->cached_tok = p->pf.cached_tokens;
        if (p->pf.response_id[0])
            pool_owner_set(p->gw->pool, p->pf.response_id, p->acct_id);
        if (p->pf.state == PF_ERROR || (p->pf.late_error && r == UP_OK)) { /* it carries its own error event */
            sbuf_copy_cstr(p->error_class, sizeof p->error_class, p->pf.late_error ? "late_error" : "stream_error");
            proxy_flush_held(p, 1);
        } else if (r != UP_OK || !p->pf.saw_terminal) {
            if (proxy_try_resume(p, r, errmsg))
                return;
            proxy_stream_interrupted(p, r != UP_OK ? errmsg : "the upstream closed the stream early");
        } else {
            proxy_flush_held(p, 1);
            proxy_record_success(p);
        }
    } else {
        if (r != UP_OK && p->reply_held && !p->client_gone && p->req)
            return proxy_plain_cut_unseen(p, r, errmsg);
        if (proxy_read_plain_usage(p) && r == UP_OK && p->reply_held && !p->client_gone && p->req)
            return proxy_plain_error_unseen(p);
        if (r != UP_OK) {
            /* a truncated plain body must not look complete: reset the connection */
            log_warn("req %llu: upstream failed mid-body (%s); closing the client connection",
                     (unsigned long long)p->id, errmsg ? errmsg : "error");
            snprintf(p->error_class, sizeof p->error_class, "body_interrupted");
            proxy_drop_client(p, 1);
            proxy_finish(p, 502); /* the client got a cut body: a failure, whatever the status line said */
            return;
        }
        proxy_record_success(p);
    }
    scrub_flush(&p->scrub, &p->out); /* what was held back as the possible start of a secret */
    if (p->reply_held && !p->client_gone && p->req) {
        proxy_reply_whole(p);
        proxy_finish(p, p->status);
        return;
    }
    proxy_client_flush(p);
    proxy_finish_reply(p, p->status);
}

/* Classifies a clean 2xx end that carried no answer. Returns 1 if the
 * request moved on; else the client gets a 502 (never the empty success). */
static int proxy_not_an_answer(proxy_req *p, const char *why)
{
    policy_event ev = {0};
    ev.status = p->status;
    ev.not_answer = why;
    ev.in_stream = p->mode == MODE_PREFLIGHT;
    p->not_answer = why;
    char summary[96];
    snprintf(summary, sizeof summary, "HTTP %d but %s", p->status,
             strcmp(why, "empty_body") == 0 ? "an empty body" : "a stream with no output and no end");
    if (proxy_classify_and_route(p, &ev, summary))
        return 1;
    snprintf(p->error_class, sizeof p->error_class, "bad_answer");
    server_send_error(p->req, 502, "upstream_error", "upstream_empty_answer", summary);
    proxy_finish(p, 502);
    return 1;
}

/* ---------- login refresh ---------- */

/* only to notice that the token changed */
static uint64_t proxy_token_hash(const char *s) { return sbuf_hash(s); }

static void proxy_attempt(proxy_req *p, pool_account *pa);

/* The refresh this request waited for ended: try the account again when it
 * now holds a fresh login, else go on with the next candidate. */
static void proxy_on_login_refreshed(void *ud, int ok, const char *why)
{
    proxy_req *p = ud;
    p->wait = NULL;
    pool_account *pa = pool_find(p->gw->pool, p->wait_acct);
    char reason[200];
    if (ok && pa && router_available(pa, &p->rctx, gateway_now(), reason, sizeof reason)) {
        proxy_attempt(p, pa);
        return;
    }
    if (pa) {
        if (!ok)
            snprintf(reason, sizeof reason, "%slogin refresh failed: %.150s", p->wait_after_401 ? "HTTP 401; " : "",
                     why ? why : "error");
        proxy_why(p, pa->a.name, reason);
        trace_event(p->gw->trace, "CANDIDATE_SKIP", "req=%llu account=%s reason=\"%s\"", (unsigned long long)p->id,
                    pa->a.name, reason);
    }
    proxy_next(p);
}

/* 1 if this request already refreshed the account after a 401 (or has
 * done so for as many accounts as it may); else records it and returns 0. */
static int proxy_refreshed_before(proxy_req *p, int64_t id)
{
    for (size_t i = 0; i < p->n_refreshed; i++)
        if (p->refreshed[i] == id)
            return 1;
    if (p->n_refreshed == PROXY_MAX_REFRESH)
        return 1;
    p->refreshed[p->n_refreshed++] = id;
    return 0;
}

/* A 401 from a chatgpt account usually means its access token expired or
 * was revoked: refresh the login once and send the same request to the
 * same account again, so the client never sees the 401. Returns 1 when the
 * request waits for the refresh (or retried at once because the token was
 * replaced meanwhile), 0 when the 401 goes to the classify policy. */
static int proxy_refresh_on_401(proxy_req *p)
{
    pool_account *pa = proxy_account(p);
    if (p->status != 401 || !pa || pa->a.kind != ACCOUNT_CHATGPT || proxy_refreshed_before(p, pa->a.id))
        return 0;
    proxy_attempt_outcome(p, "login_refresh", "auth"); /* this 401 led to a refresh and a retry */
    if (proxy_token_hash(pa->a.token) != p->sent_token_hash) { /* another request refreshed it already */
        proxy_attempt_end(p);
        proxy_attempt(p, pa);
        return 1;
    }
    char why[200];
    oauth_waiter *w = oauth_wait(p->gw->oauth, pa, "upstream_401", proxy_on_login_refreshed, p, why, sizeof why);
    if (!w) {
        proxy_attempt_outcome(p, NULL, NULL); /* classify decides and records it */
        return 0;
    }
    trace_event(p->gw->trace, "CANDIDATE_SKIP", "req=%llu account=%s reason=refreshing_login status=401",
                (unsigned long long)p->id, pa->a.name);
    p->wait = w;
    p->wait_acct = pa->a.id;
    p->wait_after_401 = 1;
    proxy_attempt_end(p);
    return 1;
}

/* Every other candidate failed or was skipped: wait for the first one that
 * was only skipped because its login was refreshing. 1 if waiting. */
static int proxy_wait_deferred(proxy_req *p)
{
    pool_account *pa = p->deferred_acct ? pool_find(p->gw->pool, p->deferred_acct) : NULL;
    p->deferred_acct = 0;
    char why[200];
    if (!pa || !pa->refreshing)
        return 0;
    oauth_waiter *w = oauth_wait(p->gw->oauth, pa, "request_waiting", proxy_on_login_refreshed, p, why, sizeof why);
    if (!w)
        return 0;
    p->wait = w;
    p->wait_acct = pa->a.id;
    p->wait_after_401 = 0;
    return 1;
}

static void proxy_up_done(void *ud, up_result r, const char *errmsg)
{
    proxy_req *p = ud;
    p->up = NULL; /* freed by upstream right after this returns */
    if (p->resume_pending) /* the resumed attempt ended before any output of its own */
        return proxy_resume_failed(p, r != UP_OK && errmsg ? errmsg : "the next account refused to continue the answer");
    if (p->committed)
        return proxy_done_committed(p, r, errmsg);
    if (r == UP_LOCAL || r == UP_INTERNAL) { /* our shortage, not the account's: no cooldown, no next candidate */
        snprintf(p->error_class, sizeof p->error_class, "%s",
                 r == UP_LOCAL ? "gateway_out_of_descriptors" : "gateway_internal");
        evhttp_add_header(evhttp_request_get_output_headers(p->req), "Retry-After", "1");
        server_send_error(p->req, 503, "server_error", "gateway_overloaded", errmsg ? errmsg : "gateway overloaded");
        return proxy_finish(p, 503);
    }
    if (r != UP_OK) {
        policy_event ev = {0};
        ev.network_error = r == UP_NETWORK;
        ev.timeout = r != UP_NETWORK;
        ev.error_message = errmsg;
        if (proxy_classify_and_route(p, &ev, errmsg ? errmsg : "network error"))
            return;
        server_send_error(p->req, r == UP_NETWORK ? 502 : 504, "upstream_error",
                          r == UP_NETWORK ? "upstream_unreachable" : "upstream_timeout", errmsg ? errmsg : "upstream failed");
        return proxy_finish(p, r == UP_NETWORK ? 502 : 504);
    }
    if (p->mode == MODE_ERROR) {
        if (proxy_refresh_on_401(p))
            return;
        json_value *doc;
        policy_event ev = {0};
        ev.status = p->status;
        ev.body = p->errbody.p;
        ev.body_len = p->errbody.len;
        ev.not_answer = p->not_answer;
        proxy_error_fields(p->errbody.p, p->errbody.len, &doc, &ev.error_type, &ev.error_code, &ev.error_message);
        proxy_note_resets_in(p, doc);
        char summary[224];
        if (p->not_answer)
            snprintf(summary, sizeof summary, "HTTP %d with Content-Type %s, not an answer", p->status,
                     p->resp_ctype[0] ? p->resp_ctype : "-");
        else
            snprintf(summary, sizeof summary, "HTTP %d", p->status);
        int is_json = doc != NULL;
        int moved = proxy_classify_and_route(p, &ev, summary);
        json_free(doc);
        if (!moved)
            proxy_reply_upstream_error(p, is_json);
        return;
    }
    /* a 2xx that ended cleanly without being an answer: an empty body, or a
     * stream with no semantic and no terminal event. Never a success. */
    if ((p->mode == MODE_PLAIN && !p->committed) ||
        (p->mode == MODE_PREFLIGHT && p->pf_live && !p->pf.saw_semantic && !p->pf.saw_terminal)) {
        if (proxy_not_an_answer(p, p->mode == MODE_PLAIN ? "empty_body" : "no_output"))
            return;
    }
    /* 2xx SSE that ended inside the preflight window */
    if (p->mode == MODE_PREFLIGHT && p->pf_live) {
        preflight_commit(&p->pf);
        proxy_commit(p);
        proxy_flush_held(p, 0);
    }
    proxy_done_committed(p, r, errmsg);
}

static const upstream_callbacks proxy_up_cb = {proxy_up_headers, proxy_up_data, proxy_up_done};

/* ---------- candidates ---------- */

static void proxy_attempt(proxy_req *p, pool_account *pa)
{
    p->attempts++;
    if (pa->a.id != p->last_acct_id)
        p->acct_retries = 0;
    p->acct_id = p->last_acct_id = pa->a.id;
    p->acct_kind = pa->a.kind;
    sbuf_copy_cstr(p->acct_name, sizeof p->acct_name, pa->a.name);
    p->t_attempt = gateway_now();
    p->att_outcome = NULL;
    p->att_class[0] = '\0';
    sbuf_copy_cstr(p->att_model, sizeof p->att_model, p->in.model);
    p->status = 0;
    p->retry_after = -1;
    p->not_answer = NULL;
    p->mode = MODE_NONE;
    p->resp_ctype[0] = p->resp_request_id[0] = '\0';
    sbuf_reset(&p->relay);
    sbuf_reset(&p->errbody);
    p->errbody_total = 0;
    sbuf_reset(&p->sniff);
    pa->inflight++;
    scrub_reset(&p->scrub);
    scrub_add(&p->scrub, pa->a.token); /* copied: the pool may rebuild the account meanwhile */
    p->sent_token_hash = proxy_token_hash(pa->a.token);
    account_limits_start(pa, p->t_attempt);
    /* balanced rotates sessions: a turn kept on its session's account by
     * affinity does not move the cursor that new sessions start from */
    if (!(p->plan.affinity_first && pa->a.id == p->plan.affinity_prev))
        pool_cursor_set(p->gw->pool, p->in.key_id, p->in.model, pa->a.id);
    proxy_build_url(p, pa);
    proxy_build_headers(p, pa);
    const sbuf *body = p->in.is_get ? NULL : proxy_body_for(p, pa);
    trace_event(p->gw->trace, "CANDIDATE_START", "req=%llu attempt=%d account=%s kind=%s",
                (unsigned long long)p->id, p->attempts, pa->a.name, account_kind_name(pa->a.kind));
    upstream_spec spec = {proxy_url.p, body ? body->p : NULL, body ? body->len : 0, proxy_hdrs, proxy_n_hdrs,
                          p->in.stream || p->in.is_get ? 0 : p->gw->cfg.response_timeout_ms, p->in.stream};
    p->up = upstream_start(p->gw->up, &spec, &proxy_up_cb, p);
    if (!p->up) /* out of memory, or libcurl refused it: no callback will come, so end it here */
        proxy_up_done(p, UP_INTERNAL, "the gateway could not start the upstream request (out of memory or a libcurl "
                                      "failure); retry shortly");
}

static void proxy_exhausted(proxy_req *p)
{
    if (p->committed) /* a resumed stream with nobody left to finish it */
        return proxy_resume_failed(p, "no account was left to finish the answer");
    double back;
    if (proxy_wait_for_capacity(p, &back))
        return;
    for (size_t i = 0; i < p->plan.nskips; i++)
        proxy_why(p, p->plan.skips[i].name, p->plan.skips[i].reason);
    sbuf msg = SBUF_INIT;
    if (!pool_count(p->gw->pool))
        sbuf_puts(&msg, "no upstream accounts are configured (add one with 'switchyard account add')");
    else if (p->plan.pinned_owner && !p->plan.n && !p->attempts)
        sbuf_printf(&msg, "%s belongs to an account that cannot serve now: %s", p->plan.pinned_by, p->why.p);
    else
        sbuf_printf(&msg, "all upstream accounts are unavailable: %s", p->why.len ? p->why.p : "none eligible");
    snprintf(p->error_class, sizeof p->error_class, "exhausted");
    if (back) { /* when to come back: the soonest account's return */
        char ra[32];
        snprintf(ra, sizeof ra, "%.0f", ceil(back - gateway_now()) > 1 ? ceil(back - gateway_now()) : 1);
        evhttp_add_header(evhttp_request_get_output_headers(p->req), "Retry-After", ra);
    }
    server_send_error(p->req, 503, "server_error", "no_available_account", msg.p);
    sbuf_free(&msg);
    proxy_finish(p, 503);
}

static void proxy_next(proxy_req *p)
{
    char why[160];
    double now = gateway_now();
    while (p->next < p->plan.n) {
        pool_account *pa = pool_find(p->gw->pool, p->plan.ids[p->next++]);
        if (!pa)
            continue;
        if (!router_available(pa, &p->rctx, now, why, sizeof why)) {
            router_skip_add(&p->plan, pa, why);
            trace_event(p->gw->trace, "CANDIDATE_SKIP", "req=%llu account=%s reason=\"%s\"",
                        (unsigned long long)p->id, pa->a.name, why);
            continue;
        }
        if (pa->refreshing) { /* its refresh token is in use: others first, else wait for it */
            if (!p->deferred_acct)
                p->deferred_acct = pa->a.id;
            trace_event(p->gw->trace, "CANDIDATE_SKIP", "req=%llu account=%s reason=\"refreshing its login\"",
                        (unsigned long long)p->id, pa->a.name);
            continue;
        }
        proxy_attempt(p, pa);
        return;
    }
    if (proxy_wait_deferred(p))
        return;
    proxy_exhausted(p);
}

/* ---------- lifecycle ---------- */

/* libevent stops reading a connection while its request is being served, so
 * a client hanging up goes unnoticed until we write. Watch the socket: EOF
 * means the client is gone and the upstream transfer must stop now.
 *
 * The watch belongs to the connection, not the request: it stays on the
 * loop between the requests of a kept-alive connection. evhttp turns its own
 * read event off when a request has arrived (and on again to write the
 * answer); a watch added only then made that an epoll_ctl of its own every
 * request (libevent's changelist turns the DEL and ADD of one loop turn into
 * a MOD, not into nothing), one already there keeps the descriptor's
 * registration as it is. Between requests the watch does nothing (evhttp
 * reads); the connection's close callback, ours from the first request on,
 * takes the watch off the loop before the descriptor can be closed. */
typedef struct client_watch {
    struct event ev;
    struct evhttp_connection *evcon;
    proxy_req *p;             /* the request it watches for; NULL between requests */
    int on;                   /* ev is on the loop */
    int stale;                /* ev was already active when the request arrived: that wake-up was for its bytes */
} client_watch;

static client_watch **proxy_watches; /* by descriptor (loop thread only) */
static size_t proxy_n_watches;

static void proxy_watch_drop(client_watch *w)
{
    if (!w)
        return;
    if (w->on)
        event_del(&w->ev);
    evutil_socket_t fd = event_get_fd(&w->ev);
    if (fd >= 0 && (size_t)fd < proxy_n_watches && proxy_watches[fd] == w)
        proxy_watches[fd] = NULL;
    free(w);
}

/* evhttp frees a connection between its requests. */
static void proxy_watch_closed(struct evhttp_connection *c, void *arg)
{
    (void)c;
    proxy_watch_drop(arg);
}

static void proxy_on_client_readable(evutil_socket_t fd, short what, void *arg)
{
    client_watch *w = arg;
    proxy_req *p = w->p;
    if (w->stale) { /* woken by the request's own bytes, which evhttp has read meanwhile */
        w->stale = 0;
        return;
    }
    if (!p) {
        /* between requests evhttp reads (this fired with its read event);
         * if it does not (another kind of request is being served), bytes
         * or an EOF would wake this every turn: step aside until the next
         * request of ours */
        struct bufferevent *bev = evhttp_connection_get_bufferevent(w->evcon);
        if (!bev || !(bufferevent_get_enabled(bev) & EV_READ)) {
            event_del(&w->ev);
            w->on = 0;
        }
        return;
    }
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) {
        event_del(&w->ev); /* pipelined bytes: not a hang-up, stop watching */
        w->on = 0;
        return;
    }
    if (n == 0) {
        /* EOF: the client is done sending. A half-close (shutdown(SHUT_WR)
         * after the request) says only that, and the client may still read;
         * a hang-up (close()) looks the same until something is written to
         * it. While the request runs it is answered: if the client is gone
         * the first write fails and libevent's close callback ends the
         * request then. But a request is never held waiting (a retry's
         * delay, a wait for capacity or for a login refresh) for a client
         * that may be gone: a wait in progress ends here, and none starts
         * later (the retry becomes a failover, the wait a 503). */
        event_del(&w->ev);
        w->on = 0;
        p->client_eof = 1;
        if (!(p->retry_timer && evtimer_pending(p->retry_timer, NULL)) && !p->wait) {
            log_debug("req %llu: client closed its sending side; answering anyway", (unsigned long long)p->id);
            return;
        }
    }
    log_debug("req %llu: client hung up", (unsigned long long)p->id);
    snprintf(p->error_class, sizeof p->error_class, "client_closed");
    proxy_drop_client(p, 0);
    proxy_finish(p, 499);
}

static void proxy_watch_client(proxy_req *p)
{
    struct bufferevent *bev = p->evcon ? evhttp_connection_get_bufferevent(p->evcon) : NULL;
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    if (fd < 0)
        return;
    if ((size_t)fd >= proxy_n_watches) {
        size_t n = proxy_n_watches ? proxy_n_watches : 64;
        while (n <= (size_t)fd)
            n *= 2;
        client_watch **t = realloc(proxy_watches, n * sizeof *t);
        if (!t)
            return;
        memset(t + proxy_n_watches, 0, (n - proxy_n_watches) * sizeof *t);
        proxy_watches = t;
        proxy_n_watches = n;
    }
    client_watch *w = proxy_watches[fd];
    if (w && w->p) /* evhttp serves one request of a connection at a time: not expected */
        w->p->watch = NULL;
    if (w && w->evcon != p->evcon) { /* another connection's (not expected: its close dropped it) */
        proxy_watch_drop(w);
        w = NULL;
    }
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w)
            return;
        w->evcon = p->evcon;
        event_assign(&w->ev, p->gw->base, fd, EV_READ | EV_PERSIST, proxy_on_client_readable, w);
        proxy_watches[fd] = w;
    }
    w->p = p;
    p->watch = w;
    /* the bytes of this request may have woken the watch too, and it runs
     * after evhttp: nothing to look at then (level-triggered, a later
     * byte or EOF wakes it again) */
    w->stale = w->on && (w->ev.ev_evcallback.evcb_flags & (EVLIST_ACTIVE | EVLIST_ACTIVE_LATER));
    if (!w->on)
        w->on = event_add(&w->ev, NULL) == 0;
}

static void proxy_on_client_close(struct evhttp_connection *c, void *arg)
{
    proxy_req *p = arg;
    /* libevent closes it before the answer is done (the client stopped
     * reading for the idle timeout, or it hung up): a clean close would end
     * an HTTP/1.0 answer as if whole. This runs before evhttp's shutdown. */
    struct bufferevent *bev = p->committed ? evhttp_connection_get_bufferevent(c) : NULL;
    if (bev && bufferevent_getfd(bev) >= 0)
        conn_limit_reset(bufferevent_getfd(bev));
    p->client_gone = 1;
    proxy_watch_drop(p->watch); /* the connection goes: its descriptor with it */
    p->watch = NULL;
    log_debug("req %llu: client went away", (unsigned long long)p->id);
    snprintf(p->error_class, sizeof p->error_class, "client_closed");
    /* libevent detached the request from the connection; it is ours to free */
    if (p->req && !evhttp_request_get_connection(p->req))
        evhttp_request_free(p->req);
    p->req = NULL;
    proxy_finish(p, 499);
}

static void proxy_finish(proxy_req *p, int status)
{
    gateway *gw = p->gw;
    oauth_wait_cancel(gw->oauth, p->wait);
    p->wait = NULL;
    proxy_attempt_end(p);
    if (p->evcon && !p->client_gone) {
        /* the connection keeps its watch for its next request (see
         * proxy_watch_client); its close now only drops the watch */
        if (p->watch)
            p->watch->p = NULL, p->watch->stale = 0;
        evhttp_connection_set_closecb(p->evcon, p->watch ? proxy_watch_closed : NULL, p->watch);
    } else {
        proxy_watch_drop(p->watch);
    }
    p->watch = NULL;
    double ms = (gateway_now() - p->t_start) * 1000.0;
    request_log rl;
    memset(&rl, 0, sizeof rl);
    rl.ts = p->t_start;
    rl.platform_key_id = p->in.key_id;
    sbuf_copy_cstr(rl.endpoint, sizeof rl.endpoint, p->in.endpoint);
    sbuf_copy_cstr(rl.model, sizeof rl.model, p->in.model);
    rl.stream = p->in.stream;
    if (p->attempts)
        sbuf_copy_cstr(rl.upstream_model, sizeof rl.upstream_model, p->att_model);
    rl.status = status;
    rl.attempts = p->attempts;
    rl.latency_ms = ms;
    sbuf_copy_cstr(rl.route_strategy, sizeof rl.route_strategy, p->plan.strategy);
    sbuf_copy_cstr(rl.error_class, sizeof rl.error_class, status >= 200 && status < 300 && !p->error_class[0] ? "" : p->error_class);
    rl.input_tokens = p->in_tok;
    rl.output_tokens = p->out_tok;
    rl.total_tokens = p->tot_tok;
    rl.resumed = p->resumed;
    rl.cached_tokens = p->cached_tok;
    /* priced as the model the serving account was sent (after its model map) */
    rl.cost_usd = spend_cost(gw->policy, p->attempts ? p->att_model : p->in.model, p->in_tok, p->cached_tok,
                             p->out_tok);
    spend_charge(gw->pool, gw->policy, p->in.key_id, p->attempts ? p->last_acct_id : 0, rl.cost_usd, rl.ts + ms / 1000.0);
    if (p->attempts) {
        sbuf_copy_cstr(rl.account_name, sizeof rl.account_name, p->acct_name);
        rl.account_id = p->last_acct_id;
        pool_account *last = pool_find(gw->pool, p->last_acct_id);
        if (last)
            account_limits_usage(last, p->tot_tok, p->t_start + ms / 1000.0);
    }
    if (p->tried.len) {
        sbuf_puts(&p->tried, "]");
        rl.attempts_json = p->tried.p; /* the writer takes it over */
        p->tried = (sbuf)SBUF_INIT;
    }
    store_writer_put_log(gw->st, &rl);
    metrics_request(p->in.endpoint, status);
    metrics_minute_request(p->t_start, status, p->attempts);
    trace_event(gw->trace, "REQUEST_FINAL", "req=%llu account=%s status=%d attempts=%d latency_ms=%.1f class=%s%s",
                (unsigned long long)p->id, p->attempts ? p->acct_name : "-", status, p->attempts, ms,
                p->error_class[0] ? p->error_class : "-", p->resumed ? " resumed=1" : "");
    router_plan_free(&p->plan);
    json_free(p->in.doc);
    gw->body_bytes -= p->in.body.len;
    if (p->in.body.len >= GATEWAY_TRIM_BODY)
        gw->trim_due = 1;
    sbuf_free(&p->in.body);
    sbuf_free(&p->why);
    sbuf_free(&p->tried);
    sbuf_free(&p->upbody);
    sbuf_free(&p->errbody);
    sbuf_free(&p->relay);
    proxy_pf_timer_drop(p);
    if (p->retry_timer)
        event_free(p->retry_timer);
    event_del(&p->flush_ev);
    proxy_unflushed_remove(p);
    proxy_hold_release(p);
    scrub_free(&p->scrub); /* sniff and out: proxy_req_release */
    gw->active--;
    proxy_req_release(p);
}

static void proxy_trace_pool(proxy_req *p)
{
    static sbuf names; /* loop thread only; kept between requests (trace_event copies what it is given) */
    sbuf_reset(&names);
    for (size_t i = 0; i < p->plan.n; i++) {
        pool_account *pa = pool_find(p->gw->pool, p->plan.ids[i]);
        if (i)
            sbuf_puts(&names, ",");
        sbuf_puts(&names, pa ? pa->a.name : "?");
    }
    /* affinity=<account> when the session's account went first, "-" without a session */
    const pool_account *aff = p->plan.affinity_prev ? pool_find(p->gw->pool, p->plan.affinity_prev) : NULL;
    const char *aff_field = !p->session[0] || p->plan.pinned_owner ? "-"
                           : p->plan.affinity_first && aff       ? aff->a.name
                           : aff                                 ? "unavailable"
                                                                 : "none";
    trace_event(p->gw->trace, "CANDIDATE_POOL",
                "req=%llu endpoint=%s model=%s stream=%d strategy=%s ordered_candidates=%s pinned_by=%s affinity=%s",
                (unsigned long long)p->id, p->in.endpoint, p->in.model[0] ? p->in.model : "-", p->in.stream,
                p->plan.strategy, names.len ? names.p : "-", p->plan.pinned_by ? p->plan.pinned_by : "-", aff_field);
    for (size_t i = 0; i < p->plan.nskips; i++)
        trace_event(p->gw->trace, "CANDIDATE_SKIP", "req=%llu account=%s reason=\"%s\"", (unsigned long long)p->id,
                    p->plan.skips[i].name, p->plan.skips[i].reason);
}

void proxy_start(gateway *gw, struct evhttp_request *req, request_input *in)
{
    proxy_req *p = proxy_req_new();
    p->gw = gw;
    p->id = ++gw->next_req_id;
    p->req = req;
    p->in = *in;
    /* request.c read what it needed from the parsed body (model, stream,
     * ids) into in; nothing after reads the tree, so a stream held open
     * for minutes does not keep it (docs/performance.md) */
    json_free(p->in.doc);
    p->in.doc = NULL;
    gw->body_bytes += in->body.len;
    p->t_start = gateway_now();
    p->in_tok = p->out_tok = p->tot_tok = p->cached_tok = -1;
    scrub_init(&p->scrub);
    event_assign(&p->flush_ev, gw->base, -1, 0, proxy_on_flush, p);
    gw->active++;
    p->evcon = evhttp_request_get_connection(req);
    if (p->evcon)
        evhttp_connection_set_closecb(p->evcon, proxy_on_client_close, p);
    proxy_watch_client(p);
    struct evkeyvalq *hin = evhttp_request_get_input_headers(req);
    const char *session = evhttp_find_header(hin, "session-id");
    if (!session)
        session = evhttp_find_header(hin, "session_id");
    if (session && strlen(session) < sizeof p->session && !strpbrk(session, " \t\"\r\n"))
        memcpy(p->session, session, strlen(session) + 1);
    p->rctx = (route_ctx){in->endpoint, in->api, in->is_get, p->in.model, in->key_id, in->preferred_account,
                          p->in.previous_response_id, evhttp_find_header(hin, "x-codex-turn-state"),
                          p->session[0] ? p->session : NULL};
    router_plan(gw, &p->rctx, &p->plan);
    p->rctx.turn_state = NULL; /* the client's headers are not ours to keep */
    proxy_drop_client_headers(req);
    proxy_trace_pool(p);
    proxy_next(p);
}
