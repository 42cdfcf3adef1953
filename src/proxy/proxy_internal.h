/* proxy_internal.h: what the stages of one client request share, and
 * nothing else includes. The life of a request (see proxy.c) is cut into
 * stages, a file each:
 *
 *   proxy.c          the entry (proxy_start), the request's memory and the
 *                    client's connection (the hang-up watch, the close)
 *   proxy_attempt.c  choose a candidate and start an attempt on it
 *   proxy_relay.c    hold, commit and relay the answer to the client (and
 *                    proxy_flush_pending of proxy.h, by the list it empties)
 *   proxy_recover.c  a failed attempt: retry, wait, fail over, resume
 *   proxy_finish.c   the end of an attempt and of the request: its records
 *   proxy_move.c     what travels with a conversation that changes accounts
 *
 * The stages call each other in a loop (an attempt fails, recovery starts
 * the next attempt), so they share this one header instead of a header each
 * (two headers that include each other would be a module cycle). It holds
 * the per-request struct and the functions one stage calls in another; each
 * is described where it is defined. The public face stays proxy.h. */
#ifndef SY_PROXY_INTERNAL_H
#define SY_PROXY_INTERNAL_H
#include "proxy/proxy.h"
#include "accounts/oauth.h"
#include "base/sbuf.h"
#include "base/scrub.h"
#include "dialect/dialect.h"
#include "policy/policy.h"
#include "route/pool.h"
#include "route/router.h"
#include "shared/shared.h"
#include "upstream/blobs.h"
#include "upstream/preflight.h"
#include "upstream/overlap.h"
#include "upstream/resume.h"
#include "upstream/upstream.h"
#include "upstream/usage.h"
#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/http.h>
#include <stddef.h>
#include <stdint.h>

#define PROXY_ERRBODY_MAX (16u << 10)    /* kept of an upstream error body */
#define PROXY_LATE_HELD_MAX (256u << 10) /* held back of a stream after an error that came after output */
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
    char moved_from[64];      /* this attempt takes the conversation off that account, "" none */
    char chain_from[64];      /* the owner of previous_response_id the request was rebuilt away from */
    int strip_turn_state;     /* an attempt went without the client's turn state */
    /* account-bound blobs of the request's input (proxy_move.c) */
    int blobs_looked;         /* the quick look (blobs_quick) is done */
    int blobs_unsure;         /* it could not tell: scan whatever the target */
    int64_t *quick_origin;    /* per "encrypted_content" found by the quick look: its minter, 0 unknown */
    shared_ask *quick_ask;    /* while the quick look runs for shared_ask: where its unknown keys go */
    size_t quick_n, quick_cap;
    int blobs_scanned;
    blob_scan blobs;          /* n == 0: none */
    int64_t *blob_origin;     /* per blob: the account that minted it, 0 unknown */
    sbuf blobbody;            /* the body without what the latest attempt stripped */
    int stripped_drop, stripped_text; /* what the latest attempt stripped */
    int strip_retried;        /* the strip_retry verdict was used: at most once per request */
    /* a stored conversation (previous_response_id) rebuilt for another account */
    int chain_tried;          /* the rebuild was tried (once per request) */
    sbuf turn_input;          /* the client's own input items, kept when the body was rebuilt */
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
    /* the attempt's answer named a limit family other than the account's
     * main one (x-codex-active-limit): its name and its windows as the
     * answer gave them; "" none (the answer was about the whole account) */
    char limit_family[ACCOUNT_FAMILY_MAX];
    usage_windows family_w;
    sbuf errbody;
    size_t errbody_total;     /* bytes of the error body the upstream sent (errbody keeps the first 16 KiB) */
    sbuf sniff;
    char resp_ctype[128];
    char resp_request_id[128];
    sbuf relay;               /* the attempt's x-codex-* response headers: name\0value\0... */
    preflight pf;
    int pf_live;
    /* an error event after output (pf.late_error) and all after it are held
     * back until the stream ends and the policy decides (proxy_late_error) */
    size_t relayed;           /* the attempt's stream bytes handed on so far (proxy_relay_events) */
    sbuf late_held;
    int late_released;        /* the held bytes went to the client (or no more are held) */
    long after_output_ms;     /* the first_token policy's silence limit once output flows; 0: the idle limit */
    struct event *pf_timer;   /* the preflight window's time limit: made when armed, gone at commit */

    /* retries and waits (proxy_retry_later, proxy_wait_for_capacity) */
    struct event *retry_timer; /* armed while the request waits to try again; made on first use (most never wait) */
    int64_t retry_acct;       /* account the timer goes back to; 0: plan afresh (capacity wait) */
    int retries_total;        /* same-account retries made for this request */
    int acct_retries;         /* of those, on the current account */
    double waited_s;          /* time spent waiting for capacity */
    /* a wait for a slot of a busy account (at its concurrency limit): the
     * request is on the list of waiters (proxy_recover.c) and wakes when an
     * attempt ends, or at its timer */
    struct proxy_req *slot_prev, *slot_next;
    int slot_waiting;
    double wait_started;
    int slot_busy_seen;       /* the plan met an account at its concurrency limit across the gateways */
    int ctx_fallback_used;    /* the request went to a larger-context fallback once already */
    int resumed;              /* the cut stream went on on another account (opt-in; once at most) */
    int resume_pending;       /* that attempt has shown no output yet: a failure goes to the next
                               * candidate, with none left the cut is the error */
    int att_prefill;          /* this continuation went as an assistant prefill (the account takes one);
                               * else with the instruction to continue after it (resume_instruction_add) */
    sbuf contbody;            /* the attempt's body with that instruction */
    overlap_trim *trim;       /* a resumed stream: the continuation's repeat of the delivered text taken out */
    char cut_account[64];     /* while resume_pending: the account whose stream was cut ... */
    char cut_why[160];        /* ... and how: the error the client gets when nobody can continue */
    resume_splice *splice;    /* a resumed Responses stream: its events made the cut one's; NULL none */
    int committed_status;     /* the status the client got */
    /* the request's reasoning effort, for the first_token hook (proxy_relay.c):
     * REASONING_NONE (nothing said), _SET (effort holds it, "" none named) or
     * _UNREAD (a reasoning object, read from the body when a stream first needs it) */
    enum { REASONING_NONE, REASONING_SET, REASONING_UNREAD } reasoning;
    char effort[32];

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
    /* the request's latest error message, made fit to keep (proxy_error_note):
     * what the client is told when it fails, kept in its log row; att_msg:
     * it is the current attempt's, for its attempts record */
    sbuf errmsg;
    int att_msg;
    size_t att_msg_bytes;     /* of the attempts record, taken by attempts' messages */
    char bound[96];           /* set when order.lua's bounds stopped the request (proxy_out_of_bounds) */
    const char *not_answer;   /* this attempt's 2xx is no answer: "content_type", "empty_body", "no_output" */
    long in_tok, out_tok, tot_tok, cached_tok;

    /* the records the local copy missed, asked of the other gateways (shared/shared.h) */
    shared_call *ask;         /* the request waits for the answer before it is planned */
    shared_call *slot_wait;   /* an attempt waits for a slot of its account's max_concurrency */
    shared_call *chain_wait;  /* a move waits for the other gateways' record of its chain */
    int64_t slot_acct;        /* that account */
    uint64_t slot;            /* the slot the current attempt holds (shared_slot_give at its end), 0 none */
    /* rate limits across the gateways (shared/shared.h): waited for together with the ask and the slot */
    shared_limits_call *key_bucket;  /* the request waits for its key's bucket in the pool */
    shared_limits_call *acct_bucket; /* an attempt waits for its account's buckets in the pool */
    int slot_granted, slot_held;     /* the slot's answer, kept while the buckets' is awaited */
    shared_bucket_verdict acct_verdict;
    double key_held, acct_held;      /* budget reservations of the request and its attempt (route/budget_hold.h) */
    int64_t acct_held_id;            /* the account acct_held is on */
    int acct_unseen;                 /* limits_unseen: the pool's word on the account's limits was not had */
    double acct_wait_s;
    int64_t acct_bucket_unused;      /* the pool's bucket took a request for this account that no attempt used */
    shared_call *cursor_wait; /* balanced: the request waits for the pool's position of its pick */
    int cursor_asked;         /* that position was asked for (once per request) */

    /* the dialects of the current attempt (docs/clients.md; proxy_attempt.c, proxy_dialect_prepare) */
    dialect_req_facts facts;  /* what the client's body says (read at the start) */
    api_kind up_api;          /* the dialect the attempt's upstream request is in */
    dialect_step xstep;       /* DIALECT_NONE: the client's bytes go as they came */
    int up_stream;            /* the upstream request streams (the rules may force it) */
    int whole;                /* the client's answer is made at the end, whole (a client that asked no
                               * stream from a streamed upstream, a translated plain answer): nothing
                               * reaches the client before it, so a failure until then still moves */
    dialect_stream *xs;       /* the attempt's stream translator (or aggregator), NULL none */
    sbuf xbody;               /* the attempt's upstream body when adapted or translated */
    sbuf xwhole;              /* a translated plain answer as it came, until it is whole */
    sbuf turn_items;          /* the items of a stream whose response.completed carries none: "[item,item" */
    int fill_output;          /* ... filled into that event for the client (dialect/fill.h) */
    const sbuf *att_body;     /* the body the attempt sends */
    dialect_error xerr;       /* the first refusal to translate: the 400 when no candidate takes the request */
    int xerr_set;

    /* login refresh (oauth.c) */
    oauth_waiter *wait;       /* waiting for an account's login refresh */
    int64_t wait_acct;        /* that account */
    int wait_after_401;       /* the wait follows a 401 from it (else the account was busy refreshing) */
    int64_t deferred_acct;    /* first candidate skipped because its login was refreshing */
    uint64_t sent_token_hash; /* of the token the current attempt sent */
    int64_t refreshed[PROXY_MAX_REFRESH]; /* accounts already refreshed after a 401 in this request */
    size_t n_refreshed;
} proxy_req;

/* The hang-up watch of a client's connection (proxy.c, proxy_watch_client,
 * says why it belongs to the connection and not to the request). */
typedef struct client_watch {
    struct event ev;
    struct evhttp_connection *evcon;
    proxy_req *p;             /* the request it watches for; NULL between requests */
    int on;                   /* ev is on the loop */
    int stale;                /* ev was already active when the request arrived: that wake-up was for its bytes */
} client_watch;

/* ---------- small helpers, inline in every stage ---------- */

static inline pool_account *proxy_account(proxy_req *p) { return pool_find(p->gw->pool, p->acct_id); }

/* Adds "name: reason" to the summary a 503 gives. */
static inline void proxy_why(proxy_req *p, const char *name, const char *reason)
{
    sbuf_printf(&p->why, "%s%s: %s", p->why.len ? "; " : "", name, reason);
}

/* only to notice that the token changed */
static inline uint64_t proxy_token_hash(const char *s) { return sbuf_hash(s); }

/* Events a long stream does not need after its start are made on use and
 * freed when done, not kept in every proxy_req (docs/performance.md,
 * "Long-lived streams"). */
static inline void proxy_pf_timer_drop(proxy_req *p)
{
    if (p->pf_timer)
        event_free(p->pf_timer);
    p->pf_timer = NULL;
}

/* ---------- proxy.c: the entry, the request's memory, the client's connection ---------- */

void proxy_req_release(proxy_req *p);
void proxy_watch_drop(client_watch *w);
void proxy_watch_closed(struct evhttp_connection *c, void *arg);
void proxy_drop_client(proxy_req *p, int reset);

/* ---------- proxy_attempt.c: choose and start an attempt ---------- */

int proxy_forward_index(const char *name);
/* What the client's (shallow) doc says that the dialect plan needs (proxy_attempt.c). */
void proxy_dialect_note(proxy_req *p, const json_value *doc);
int proxy_model_for(const proxy_req *p, const pool_account *pa, char *out, size_t n);
void proxy_attempt(proxy_req *p, pool_account *pa);
void proxy_next(proxy_req *p);
/* Seconds left before order.lua's max_seconds ends the request's failover
 * (negative once past). */
double proxy_time_left(proxy_req *p);

/* ---------- proxy_relay.c: hold, commit and relay ---------- */

int proxy_up_headers(void *ud, int status, const upstream_header *h, size_t n);
int proxy_up_data(void *ud, const char *buf, size_t n);
void proxy_unflushed_remove(proxy_req *p);
void proxy_hold_release(proxy_req *p);
void proxy_client_flush(proxy_req *p);
void proxy_on_flush(evutil_socket_t fd, short what, void *arg);
void proxy_relay_headers(proxy_req *p, struct evkeyvalq *oh);
void proxy_commit(proxy_req *p);
void proxy_uncommit_held(proxy_req *p);
void proxy_reply_whole(proxy_req *p);
void proxy_reply_made(proxy_req *p, int status, const sbuf *body);
/* Bytes of the client's own dialect (a translator's) queued for the client, scrubbed. */
int proxy_client_send_raw(proxy_req *p, const char *buf, size_t n);
/* proxy_finish.c: a translated stream ended well: its closing bytes and record. */
void proxy_translated_end(proxy_req *p);
int proxy_flush_held(proxy_req *p, int all);
void proxy_stream_interrupted(proxy_req *p, const char *why);
/* A resumed stream's end: what the repeat trimmer still holds goes out. */
void proxy_trim_end(proxy_req *p);
/* Ends a committed stream with an error event of code and message, in the
 * client's dialect (a Responses client's response.failed). */
void proxy_stream_fail(proxy_req *p, const char *code, const char *msg);
/* What was held back after a late error goes to the client; 1: pause the upstream. */
int proxy_late_release(proxy_req *p);
void proxy_reasoning_note(proxy_req *p, const json_value *doc);

/* ---------- proxy_recover.c: a failed attempt ---------- */

void proxy_up_done(void *ud, up_result r, const char *errmsg);
int proxy_candidates_left(proxy_req *p, int same_model);
int proxy_classify_and_route(proxy_req *p, policy_event *ev, const char *summary);
int proxy_wait_for_capacity(proxy_req *p, double *back);
/* An attempt ended and gave its account's slot back: the requests waiting
 * for a slot plan again now. */
void proxy_slot_freed(void);
/* Takes p off the list of slot waiters (its end). */
void proxy_slot_unwait(proxy_req *p);
int proxy_wait_deferred(proxy_req *p);
void proxy_on_stream_error(proxy_req *p);
void proxy_resume_failed(proxy_req *p, const char *why);
/* 1 when a continuation goes to pa as an assistant prefill: declared (--prefill
 * yes) and not refused since; every other account gets the instruction form. */
int proxy_takes_prefill(const pool_account *pa);
/* 1 when a candidate is left that could take a continuation now (serves
 * now, has not refused a prefill). */
int proxy_resume_possible(proxy_req *p);
int proxy_try_resume(proxy_req *p, up_result r, const char *errmsg);
/* A committed stream that an error event ended after output (held back
 * since) is over: the policy decides as after_output (classify.lua).
 * Returns 1 when the answer went on elsewhere or the stream ended here (the
 * client is to retry the turn); 0: the client gets the error as it came. */
int proxy_late_error(proxy_req *p, up_result r);
void proxy_plain_cut_unseen(proxy_req *p, up_result r, const char *errmsg);
void proxy_plain_error_unseen(proxy_req *p);
/* A clean 2xx end that carried no answer (why: "empty_body", "no_output", ...) classified: 1 always. */
int proxy_not_an_answer(proxy_req *p, const char *why);

/* ---------- proxy_finish.c: the end of an attempt and of the request ---------- */

void proxy_attempt_outcome(proxy_req *p, const char *outcome, const char *cls);
/* Notes an error message for the request's log row: "code: message"
 * (either may be NULL),
 * the serving account's secrets and anything credential-like taken out,
 * one line of at most STORE_LOG_MESSAGE_MAX bytes (log_redact_message).
 * The last one noted before the request fails is what its row keeps: the
 * upstream's error the client got, or the gateway's own reply. */
void proxy_error_note(proxy_req *p, const char *code, const char *msg);
/* server_send_error, with its code and message noted for the log row. */
void proxy_send_error(proxy_req *p, int status, const char *type, const char *code, const char *msg);
/* ... naming the request field it is about (param). */
void proxy_send_error_param(proxy_req *p, int status, const char *type, const char *code, const char *param,
                            const char *msg);
void proxy_attempt_end(proxy_req *p);
void proxy_done_committed(proxy_req *p, up_result r, const char *errmsg);
/* The upstream ended well an attempt whose answer the client gets whole
 * (p->whole): made now, or the attempt failed unseen and the request moves on. */
void proxy_whole_done(proxy_req *p);
/* The client went away during a stream (its status for the log): 499, or,
 * when the stream's terminal event (Responses response.completed or
 * .incomplete, chat finish_reason / [DONE]) was already handed to the
 * client with no error after it, the committed status, the stream's usage
 * taken and the attempt recorded as served. Clients close as soon as they
 * read [DONE] (httpx before the chunked terminator). */
int proxy_client_left_status(proxy_req *p);
void proxy_finish_reply(proxy_req *p, int status);
void proxy_finish(proxy_req *p, int status);

/* proxy_move.c */
void proxy_note_move(proxy_req *p, const pool_account *pa);
void proxy_blobs_ask(proxy_req *p, shared_ask *q);
void proxy_blobs_asked(proxy_req *p);
const sbuf *proxy_blobs_for(proxy_req *p, const pool_account *pa);
int proxy_strip_retry_possible(const proxy_req *p);
void proxy_blobs_free(proxy_req *p);
void proxy_blobs_minted(proxy_req *p, const char *json, size_t len);
void proxy_item_blobs(void *ud, const char *data, size_t len);
void proxy_moved_header(const proxy_req *p, struct evkeyvalq *oh);
void proxy_turn_completed(void *ud, const char *data, size_t len);
void proxy_item_done(void *ud, const char *data, size_t len);
void proxy_turn_record(proxy_req *p, const char *response_json, size_t len);
/* A Responses answer the gateway made whole (aggregated or translated):
 * the account owns its id, and its turn is recorded when the client asked
 * to store it. */
void proxy_made_response_note(proxy_req *p, const char *json, size_t len);
int proxy_chain_move(proxy_req *p);
/* The request's previous_response_id chain rebuilt from the gateway's
 * record now, whatever the plan (an account that keeps no responses is to
 * serve it): 1 when the request went on (re-planned), 0 when it cannot. */
int proxy_chain_rebuild(proxy_req *p);
/* 1 when pa's upstream keeps no responses: the ChatGPT backend (store is
 * always false there, policies/dialect.lua), an upstream that speaks chat only. */
int proxy_stores_nothing(proxy_req *p, const pool_account *pa);
/* GET /v1/responses/{id} (or its /input_items) and DELETE answered from the
 * gateway's record of the conversations it relayed. 1 when answered (the
 * request is finished); 0 when the record does not hold it, unless
 * or_not_found: then a 404 in OpenAI's shape is the answer. */
int proxy_record_reply(proxy_req *p, int or_not_found);
void proxy_turn_forget(const char *id);

/* The budget reservation of the request's last attempt goes (proxy_attempt.c). */
void proxy_hold_release_account(proxy_req *p);

#endif
