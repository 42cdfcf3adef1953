/* proxy_attempt.c: choosing and starting an attempt, the first stage of
 * each try of a request (the life of a request: proxy.c). proxy_next takes
 * the next candidate of the route plan that can serve now (or, with none
 * left, waits for a resting account or answers 503); proxy_attempt builds
 * that account's upstream request (URL, headers, the body with its model
 * map) and starts the transfer, whose answer proxy_relay.c takes in. */
#include "proxy/proxy_internal.h"
#include "base/json.h"
#include "base/text.h"
#include "http/server.h"
#include "obs/alert.h"
#include "obs/metrics.h"
#include "obs/trace.h"
#include "route/account_limits.h"
#include "shared/limits_fail.h"
#include "route/budget_hold.h"
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define PROXY_MAX_HEADERS 40

/* ---------- the upstream request ---------- */

/* The upstream request headers of the attempt being started (loop thread
 * only): built by proxy_build_headers and copied by upstream_start (into
 * curl's list) right after, so no request keeps them while its answer
 * streams, for minutes (docs/performance.md, "Long-lived streams"). */
static upstream_header proxy_hdrs[PROXY_MAX_HEADERS];
static size_t proxy_n_hdrs;
static sbuf proxy_hstore; /* storage behind proxy_hdrs */
static sbuf proxy_url;    /* the attempt's URL, the same way (curl copies it) */

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
    "anthropic-version", "anthropic-beta", /* to an anthropic account only (proxy_build_headers) */
};
#define PROXY_N_FORWARD (sizeof proxy_forward_headers / sizeof *proxy_forward_headers)
_Static_assert(PROXY_N_FORWARD <= 32, "proxy_build_headers keeps a 32-bit mask of forwarded headers");

/* The index of a client header in proxy_forward_headers, -1 if it is not
 * forwarded. Most headers a client sends (Host, Authorization,
 * Content-*, Accept*) are turned away by their first letter. */
int proxy_forward_index(const char *name)
{
    char c = (char)(name[0] | 0x20);
    if ((c == 'a' && strncasecmp(name, "anthropic-", 10) != 0) || c == 'h')
        return -1;
    for (size_t i = 0; i < PROXY_N_FORWARD; i++)
        if ((proxy_forward_headers[i][0] | 0x20) == c && strcasecmp(name, proxy_forward_headers[i]) == 0)
            return (int)i;
    return -1;
}

static void proxy_build_headers(proxy_req *p, const pool_account *pa)
{
    proxy_n_hdrs = 0;
    sbuf_reset(&proxy_hstore);
    int anthropic = pa->a.kind == ACCOUNT_ANTHROPIC;
    if (anthropic) /* the Anthropic API's key header (a bearer token there is an OAuth token) */
        proxy_header_add2("x-api-key", NULL, pa->a.token);
    else
        proxy_header_add2("Authorization", "Bearer ", pa->a.token);
    if (!p->in.is_get)
        proxy_header_add(p, "Content-Type", "application/json");
    proxy_header_add(p, "Accept", p->up_stream ? "text/event-stream" : "application/json");
    struct evkeyvalq *in = evhttp_request_get_input_headers(p->req);
    /* one pass over what the client sent; the first of a repeated header wins */
    uint32_t seen = 0;
    /* a turn state goes only to the account that issued it (router.h) */
    int foreign_turn = p->plan.turn_owner && p->plan.turn_owner != pa->a.id;
    for (struct evkeyval *kv = in->tqh_first; kv; kv = kv->next.tqe_next) {
        int i = proxy_forward_index(kv->key);
        if (i < 0 || (seen & (1u << i)))
            continue;
        if (foreign_turn && strcasecmp(kv->key, "x-codex-turn-state") == 0)
            continue;
        if (!text_header_value_ok(kv->value)) /* a control character (an ESC, say) is no header value to pass on */
            continue;
        if (!anthropic && (kv->key[0] | 0x20) == 'a') /* anthropic-*: Anthropic's, for its API only */
            continue;
        seen |= 1u << i;
        proxy_header_add(p, proxy_forward_headers[i], kv->value);
    }
    if (anthropic && !evhttp_find_header(in, "anthropic-version")) /* required: the version clients send today */
        proxy_header_add(p, "anthropic-version", "2023-06-01");
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
int proxy_model_for(const proxy_req *p, const pool_account *pa, char *out, size_t n)
{
    return pool_account_model_for(pa, p->in.model, out, n);
}

/* The request body for this account: the client's, without the
 * account-bound blobs this account cannot read (proxy_move.c) and with the
 * model rewritten by the account's model map (the only changes ever made
 * between attempts: the user's intent is preserved). Only those bytes
 * change: the rest of the client's body goes upstream as it came. Returns
 * the body to send. */
static const sbuf *proxy_body_for(proxy_req *p, const pool_account *pa)
{
    char to[128];
    size_t start, end;
    const sbuf *body = proxy_blobs_for(p, pa); /* the client's, or without what this account cannot read */
    if (!proxy_model_for(p, pa, to, sizeof to) || json_member_span(body->p, body->len, "model", &start, &end) != 0)
        return body;
    sbuf_copy_cstr(p->att_model, sizeof p->att_model, to);
    sbuf_reset(&p->upbody);
    sbuf_append(&p->upbody, body->p, start);
    sbuf_json_str(&p->upbody, to, strlen(to));
    sbuf_append(&p->upbody, body->p + end, body->len - end);
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
    /* the endpoint of the dialect the attempt speaks (docs/clients.md) */
    sbuf_puts(&proxy_url, p->in.is_get || p->up_api == p->in.api ? p->in.suffix
                          : p->up_api == API_MESSAGES           ? "/messages"
                          : p->up_api == API_CHAT               ? "/chat/completions"
                                                                : "/responses");
    sbuf_puts(&proxy_url, p->in.response_id); /* GET/DELETE /v1/responses/{id}; "" otherwise */
    if (p->in.input_items)
        sbuf_puts(&proxy_url, "/input_items");
    sbuf_puts(&proxy_url, p->in.query);       /* GET /v1/models?client_version=...; "" otherwise */
}

/* ---------- the dialects of an attempt (docs/clients.md) ---------- */

void proxy_dialect_note(proxy_req *p, const json_value *doc)
{
    /* one pass over the top-level members of the shallow doc: what the
     * plan needs to say passthrough exactly when adapt would change nothing */
    dialect_facts_read(&p->facts, doc);
    p->facts.stream = p->in.stream;
}

/* The attempt's dialect and body: the client's dialect when pa speaks it,
 * else the other one; the upstream kind's rules (policies/dialect.lua)
 * applied. The rules are read here and nowhere later: a reload may free
 * them while the answer streams. 0, or -1 when the request cannot be sent
 * to pa as it is (why says what; the first such refusal is kept for a 400
 * when no candidate takes the request). */
/* POST /v1/messages/count_tokens, gone through the proxy because an
 * anthropic account may count it natively. */
static int proxy_is_count_tokens(const proxy_req *p)
{
    return p->in.api == API_MESSAGES && strcmp(p->in.suffix, "/messages/count_tokens") == 0;
}

static int proxy_dialect_prepare(proxy_req *p, const pool_account *pa, char *why, size_t n)
{
    api_kind client = p->in.api;
    unsigned d = account_dialects(&pa->a, &pa->st);
    /* a Messages client goes to the Responses API where the account speaks
     * it (a tool's images stay in its result), else to Chat Completions */
    p->up_api = (d & DIALECT_BIT(client))                                 ? client
                : client == API_CHAT                                      ? API_RESPONSES
                : client == API_MESSAGES && (d & DIALECT_BIT(API_RESPONSES)) ? API_RESPONSES
                                                                          : API_CHAT;
    if (!p->in.is_get && !(d & DIALECT_BIT(p->up_api)) && (d & DIALECT_BIT(API_MESSAGES)))
        p->up_api = API_MESSAGES; /* an anthropic account, an OpenAI client: translated into the Messages API */
    if (proxy_is_count_tokens(p) && pa->a.kind != ACCOUNT_ANTHROPIC) {
        snprintf(why, n, "only an anthropic account counts tokens (the others' count is the gateway's estimate)");
        return -1;
    }
    sbuf_copy_cstr(p->att_model, sizeof p->att_model, p->in.model);
    sbuf_copy_cstr(p->moved_from, sizeof p->moved_from, p->chain_from); /* what this attempt moves: set below */
    p->up_stream = p->in.stream;
    p->whole = 0;
    if (p->in.is_get) {
        p->xstep = DIALECT_NONE;
        p->up_api = client;
        p->att_body = NULL;
        return 0;
    }
    policy_dialect_ask ask = {account_kind_name(pa->a.kind), dialect_name(client), dialect_name(p->up_api)};
    const policy_dialect *rules = policy_dialect_rules(p->gw->policy, &ask);
    p->xstep = dialect_plan(client, p->up_api, rules, &p->facts);
    const sbuf *body = proxy_body_for(p, pa); /* the client's, without what pa cannot read, its model mapped */
    /* a continuation (stream resume): an assistant prefill only where one is
     * declared taken, else the instruction to continue after the delivered
     * text, which every chat API takes */
    p->att_prefill = p->resume_pending && proxy_takes_prefill(pa);
    if (p->resume_pending && !p->att_prefill) {
        sbuf_reset(&p->contbody);
        if (resume_instruction_add(client == API_RESPONSES, body->p, body->len, &p->contbody) == 0)
            body = &p->contbody;
    }
    if (p->resume_pending && p->trim)
        overlap_reset(p->trim); /* this attempt's continuation is judged from its start */
    p->att_body = body;
    if (p->xstep == DIALECT_NONE)
        return 0;
    /* the raw bytes: adapting needs no tree (dialect.h), translating parses its own */
    dialect_error err;
    memset(&err, 0, sizeof err);
    int rc = dialect_request(client, p->up_api, rules, body->p, body->len, &p->xbody, &p->up_stream, &err);
    if (rc != 0) {
        snprintf(why, n, "cannot take the request in the %s dialect: %.200s", dialect_name(p->up_api), err.message);
        if (!p->xerr_set) {
            p->xerr = err;
            p->xerr_set = 1;
        }
        return -1;
    }
    p->att_body = &p->xbody;
    /* a client that asked no stream from an upstream that streams gets one answer, made whole at the end */
    p->whole = p->up_stream && !p->in.stream;
    return 0;
}

/* the answer goes to proxy_relay.c (its head and bytes) and its end to
 * proxy_recover.c (proxy_up_done: a failure is sorted out there first) */
static const upstream_callbacks proxy_up_cb = {proxy_up_headers, proxy_up_data, proxy_up_done};

/* ---------- candidates ---------- */

static void proxy_exhausted(proxy_req *p);

/* order.lua's bounds on one request (policy_request_bounds): past them no
 * new attempt starts before output has reached the client, and the request
 * ends with what it has. Continuations after output are not bounded here:
 * classify decides those, once per cut. */
static int proxy_out_of_bounds(proxy_req *p)
{
    if (p->committed)
        return 0;
    int max_attempts;
    double max_seconds, spent = gateway_now() - p->t_start;
    policy_request_bounds(p->gw->policy, &max_attempts, &max_seconds);
    if (p->attempts >= max_attempts)
        snprintf(p->bound, sizeof p->bound, "gave up after %d attempts (max_attempts in order.lua)", p->attempts);
    else if (spent >= max_seconds)
        snprintf(p->bound, sizeof p->bound, "gave up after %.0f s and %d attempts (max_seconds in order.lua)", spent,
                 p->attempts);
    else
        return 0;
    return 1;
}

double proxy_time_left(proxy_req *p)
{
    int max_attempts;
    double max_seconds;
    policy_request_bounds(p->gw->policy, &max_attempts, &max_seconds);
    return p->t_start + max_seconds - gateway_now();
}

static void proxy_attempt_go(proxy_req *p, pool_account *pa);

void proxy_hold_release_account(proxy_req *p)
{
    pool_account *pa = p->acct_held_id ? pool_find(p->gw->pool, p->acct_held_id) : NULL;
    if (pa)
        budget_hold_release(&pa->budget, p->acct_held);
    p->acct_held = 0;
    p->acct_held_id = 0;
}

/* An account with a budget: the attempt reserves its typical request cost
 * (route/budget_hold.h), the previous attempt's reservation given back
 * first; one whose reservation would cross the budget is skipped as over
 * it. -1: skipped (the request went on to the next account). */
static int proxy_account_hold(proxy_req *p, pool_account *pa)
{
    proxy_hold_release_account(p);
    if (!(pa->a.budget_usd > 0))
        return 0;
    char why[ROUTER_WHY_MAX], detail[200];
    budget_hold_owner o = {"account", pa->a.name, pa->a.budget_usd, pa->a.budget_period};
    if (budget_hold_take(p->gw->policy, &o, &pa->budget, gateway_now(), &p->acct_held, detail, sizeof detail)) {
        p->acct_held_id = pa->a.id;
        return 0;
    }
    snprintf(why, sizeof why, "over_budget: %s", detail);
    router_skip_add(&p->plan, pa, why);
    trace_event(p->gw->trace, "CANDIDATE_SKIP", "req=%llu account=%s reason=\"%s\"", (unsigned long long)p->id,
                pa->a.name, why);
    proxy_next(p);
    return -1;
}

/* shared_limits_fail is closed and the pool's word on pa's rate or
 * concurrency limits cannot be had (shared/limits_fail.h): pa is skipped as
 * a limit refusal would skip it; the request goes on to the next account. */
static void proxy_account_unchecked(proxy_req *p, pool_account *pa, limits_unseen cause)
{
    char why[ROUTER_WHY_MAX], reason[96];
    limits_fail_why(p->gw, cause, reason, sizeof reason);
    snprintf(why, sizeof why, "limits_unavailable: its rate or concurrency limits cannot be checked: %s "
                              "(shared_limits_fail is closed)", reason);
    metrics_redis_limits_refused(METRICS_LIMITS_REFUSED_ACCOUNT);
    router_skip_add(&p->plan, pa, why);
    trace_event(p->gw->trace, "CANDIDATE_SKIP", "req=%llu account=%s reason=\"%s\"", (unsigned long long)p->id,
                pa->a.name, why);
    proxy_next(p);
}

/* The slot and the buckets asked for before an attempt are both in
 * (shared/shared.h): the attempt starts, or the account is skipped. */
static void proxy_attempt_ready(proxy_req *p)
{
    if (p->slot_wait || p->acct_bucket)
        return;
    pool_account *pa = pool_find(p->gw->pool, p->slot_acct);
    char why[ROUTER_WHY_MAX];
    /* still a candidate after the wait (the local state may have moved)? */
    int unchecked = pa && p->acct_unseen && limits_fail_account_strict(p->gw, &pa->a);
    if (pa && p->slot_granted && p->acct_verdict != SHARED_BUCKET_EMPTY && !unchecked &&
        router_available(pa, &p->rctx, gateway_now(), why, sizeof why)) {
        proxy_attempt_go(p, pa);
        return;
    }
    shared_slot_give(p->gw->shared, p->slot);
    p->slot = 0;
    if (pa && p->acct_bucket_unused == pa->a.id) /* the pool's bucket took a request no attempt makes */
        shared_account_bucket_give(p->gw->shared, pa);
    p->acct_bucket_unused = 0;
    if (pa && unchecked) {
        proxy_account_unchecked(p, pa, (limits_unseen)p->acct_unseen);
        return;
    }
    if (pa) {
        if (!p->slot_granted) {
            snprintf(why, sizeof why, "at its concurrency limit across the gateways (%d in flight)", p->slot_held);
            p->slot_busy_seen = 1; /* a wait for capacity waits for its slot too */
        }
        else if (p->acct_verdict == SHARED_BUCKET_EMPTY)
            snprintf(why, sizeof why, "rate_limited: its requests or tokens per minute are used up across the "
                                      "gateways (next in %.1fs)", p->acct_wait_s);
        router_skip_add(&p->plan, pa, why);
        trace_event(p->gw->trace, "CANDIDATE_SKIP", "req=%llu account=%s reason=\"%s\"", (unsigned long long)p->id,
                    pa->a.name, why);
    }
    proxy_next(p);
}

/* The answer to the slot asked for before an attempt on an account with
 * a max_concurrency (shared/shared.h). */
static void proxy_on_slot(void *ud, int granted, int held)
{
    proxy_req *p = ud;
    p->slot_wait = NULL;
    p->slot_granted = granted;
    p->slot_held = held;
    if (held == SHARED_SLOT_LATE || held == SHARED_SLOT_FAILED)
        p->acct_unseen = held == SHARED_SLOT_LATE ? LIMITS_UNSEEN_LATE : LIMITS_UNSEEN_FAILED;
    proxy_attempt_ready(p);
}

/* The answer of the account's rpm / tpm buckets in the pool. */
static void proxy_on_acct_bucket(void *ud, shared_bucket_verdict v, double wait_s)
{
    proxy_req *p = ud;
    p->acct_bucket = NULL;
    p->acct_verdict = v;
    p->acct_wait_s = wait_s;
    p->acct_bucket_unused = v == SHARED_BUCKET_TAKEN ? p->slot_acct : 0;
    if (v == SHARED_BUCKET_LOCAL || v == SHARED_BUCKET_FAILED)
        p->acct_unseen = v == SHARED_BUCKET_LOCAL ? LIMITS_UNSEEN_LATE : LIMITS_UNSEEN_FAILED;
    proxy_attempt_ready(p);
}

void proxy_attempt(proxy_req *p, pool_account *pa)
{
    if (proxy_out_of_bounds(p)) {
        trace_event(p->gw->trace, "REQUEST_BOUNDED", "req=%llu attempts=%d reason=\"%s\"", (unsigned long long)p->id,
                    p->attempts, p->bound);
        proxy_exhausted(p);
        return;
    }
    char why[ROUTER_WHY_MAX + 64];
    /* an account that keeps no responses (docs/clients.md): a stored
     * response is the gateway's record's, and a chain is rebuilt from it */
    if (p->in.response_id[0] && proxy_stores_nothing(p, pa)) {
        proxy_record_reply(p, 1);
        return;
    }
    if (p->in.previous_response_id[0] && p->rctx.previous_response_id && !p->in.is_get &&
        proxy_stores_nothing(p, pa)) {
        if (proxy_chain_rebuild(p))
            return; /* the request goes on rebuilt, planned again */
        snprintf(why, sizeof why, "keeps no responses, and the gateway's record cannot rebuild the conversation of "
                                  "previous_response_id");
        router_skip_add(&p->plan, pa, why);
        trace_event(p->gw->trace, "CANDIDATE_SKIP", "req=%llu account=%s reason=\"%s\"", (unsigned long long)p->id,
                    pa->a.name, why);
        proxy_next(p);
        return;
    }
    if (proxy_dialect_prepare(p, pa, why, sizeof why) != 0) { /* it cannot take the request as it is */
        router_skip_add(&p->plan, pa, why);
        trace_event(p->gw->trace, "CANDIDATE_SKIP", "req=%llu account=%s reason=\"%s\"", (unsigned long long)p->id,
                    pa->a.name, why);
        proxy_next(p);
        return;
    }
    /* shared_limits_fail closed: an account whose limits the pool cannot
     * be asked about now is not tried on its local copy */
    if (limits_fail_account_strict(p->gw, &pa->a) && limits_fail_reach(p->gw) == LIMITS_UNSEEN_DOWN) {
        proxy_account_unchecked(p, pa, LIMITS_UNSEEN_DOWN);
        return;
    }
    if (proxy_account_hold(p, pa) != 0)
        return;
    p->slot_acct = pa->a.id;
    p->slot_granted = 1;
    p->slot_held = 0;
    p->acct_unseen = LIMITS_SEEN;
    p->acct_verdict = SHARED_BUCKET_LOCAL;
    /* an account with a max_concurrency the local count allows: a slot of
     * it across the gateways first (none asked for by a lone gateway) */
    if (pa->a.max_concurrency > 0) {
        shared_slot_give(p->gw->shared, p->slot); /* none held here: an attempt ends by giving its slot back */
        p->slot_wait = shared_slot_take(p->gw->shared, pa, &p->slot, proxy_on_slot, p);
    }
    /* and its rpm / tpm buckets in the pool, sent behind the slot's
     * script: both answers come in one round trip */
    p->acct_bucket = shared_account_bucket_take(p->gw->shared, pa, proxy_on_acct_bucket, p);
    if (p->slot_wait || p->acct_bucket)
        return;
    proxy_attempt_go(p, pa);
}

static void proxy_attempt_go(proxy_req *p, pool_account *pa)
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
    account_limits_start(pa, p->t_attempt); /* after TAKEN the local bucket is one above the pool's for this */
    p->acct_bucket_unused = 0;
    /* balanced rotates conversations: a turn kept on its account (its stored
     * response's owner, its turn state's issuer, its session's last account)
     * does not move the cursor that new conversations start from */
    if (!(p->plan.kept_first && p->plan.n && pa->a.id == p->plan.ids[0]))
        pool_cursor_set(p->gw->pool, p->in.key_id, p->in.model, pa->a.id);
    proxy_build_url(p, pa);
    proxy_build_headers(p, pa);
    const sbuf *body = p->in.is_get ? NULL : p->att_body;
    const char *pair = p->xstep == DIALECT_TRANSLATE ? dialect_pair_name(p->in.api, p->up_api) : "";
    trace_event(p->gw->trace, "CANDIDATE_START", "req=%llu attempt=%d account=%s kind=%s%s%s%s",
                (unsigned long long)p->id, p->attempts, pa->a.name, account_kind_name(pa->a.kind),
                pair[0] ? " dialect=" : "", pair, p->xstep == DIALECT_ADAPT ? " adapted=1" : "");
    if (pair[0])
        metrics_translation(pair);
    if (p->plan.turn_owner && p->plan.turn_owner != pa->a.id)
        proxy_note_move(p, pa);
    upstream_spec spec = {proxy_url.p, body ? body->p : NULL, body ? body->len : 0, proxy_hdrs, proxy_n_hdrs,
                          p->up_stream || p->in.is_get ? 0 : p->gw->cfg.response_timeout_ms, p->up_stream,
                          p->in.is_delete ? "DELETE" : NULL};
    p->up = upstream_start(p->gw->up, &spec, &proxy_up_cb, p);
    if (!p->up) /* out of memory, libcurl refused it, or a header value upstream_start will not send: no
                 * callback will come, so end it here */
        proxy_up_done(p, UP_INTERNAL, "the gateway could not start the upstream request (out of memory, a libcurl "
                                      "failure or a header value with a control character); retry shortly");
}

/* Every account that serves this endpoint is out: asks the exhausted
 * policy whether they are all out for their plans' usage, and if so answers
 * as the ChatGPT backend does when a plan is spent (Codex then shows a usage
 * limit and its reset time instead of retrying). 1 when answered. */
/* The exhausted hook sees at most this many accounts (the first in pool
 * order): a pool of thousands would take longer than a hook may run. */
#define PROXY_EXHAUSTED_MAX 256

static int proxy_usage_limit_reply(proxy_req *p)
{
    double now = gateway_now();
    size_t total = pool_count(p->gw->pool), n = 0;
    if (total > PROXY_EXHAUSTED_MAX)
        total = PROXY_EXHAUSTED_MAX;
    policy_out_account *v = calloc(total ? total : 1, sizeof *v);
    char(*why)[160] = calloc(total ? total : 1, sizeof *why);
    if (!v || !why) {
        free(v);
        free(why);
        return 0;
    }
    for (size_t i = 0; i < total; i++) {
        const pool_account *pa = pool_at(p->gw->pool, i);
        if (!pa->a.enabled || pa->a.hold)
            continue; /* not part of this endpoint's pool (a held account waits for its operator, not a reset) */
        why[n][0] = '\0';
        router_available(pa, &p->rctx, now, why[n], sizeof why[n]);
        v[n] = (policy_out_account){pa->a.name, account_kind_name(pa->a.kind), why[n], pa->st.last_error,
                                    router_rest_until(pa, now), pa->st.primary_used_pct, pa->st.secondary_used_pct,
                                    pa->st.primary_reset_at, pa->st.secondary_reset_at, pa->st.plan_type};
        const account_family *fam = pool_family_cooling(pa, p->rctx.model, p->rctx.family, now);
        if (fam && fam->until > v[n].until) { /* out for its limit family's usage: the family's figures */
            v[n].last_class = "rate_limit";
            v[n].until = fam->until;
            v[n].primary_used_pct = fam->primary_used_pct, v[n].secondary_used_pct = fam->secondary_used_pct;
            v[n].primary_reset_at = fam->primary_reset_at, v[n].secondary_reset_at = fam->secondary_reset_at;
        }
        n++;
    }
    policy_exhausted ex = {p->in.endpoint, now, v, n};
    double at = 0;
    char plan[32];
    int limit = policy_exhausted_answer(p->gw->policy, &ex, &at, plan, sizeof plan);
    free(v);
    free(why);
    if (!limit)
        return 0;
    long in = at > now ? (long)ceil(at - now) : 0;
    sbuf msg = SBUF_INIT, body = SBUF_INIT;
    sbuf_puts(&msg, "You've hit your usage limit: every account of this gateway's pool has reached its usage limit.");
    if (in > 0)
        sbuf_printf(&msg, " The first is back in %ld min.", (in + 59) / 60);
    if (p->in.api == API_MESSAGES) { /* Anthropic's rate_limit_error; the wait is in Retry-After */
        dialect_error_own(API_MESSAGES, 429, "usage_limit_reached", NULL, msg.p, &body);
    } else {
        sbuf_puts(&body, "{\"error\":{");
        json_error_members(&body, msg.p, "usage_limit_reached", "usage_limit_reached");
        sbuf_puts(&body, ",\"param\":null");
        if (plan[0]) {
            sbuf_puts(&body, ",\"plan_type\":");
            sbuf_json_str(&body, plan, strlen(plan));
        }
        if (in > 0)
            sbuf_printf(&body, ",\"resets_at\":%.0f,\"resets_in_seconds\":%ld", ceil(at), in);
        sbuf_puts(&body, "}}");
    }
    struct evkeyvalq *oh = evhttp_request_get_output_headers(p->req);
    evhttp_add_header(oh, "Content-Type", "application/json");
    if (in > 0) {
        char ra[32];
        snprintf(ra, sizeof ra, "%ld", in);
        evhttp_add_header(oh, "Retry-After", ra);
    }
    struct evbuffer *b = evbuffer_new();
    if (b)
        evbuffer_add(b, body.p, body.len);
    server_reply(p->req, 429, b);
    if (b)
        evbuffer_free(b);
    proxy_error_note(p, "usage_limit_reached", msg.p);
    snprintf(p->error_class, sizeof p->error_class, "usage_limit");
    trace_event(p->gw->trace, "POOL_USAGE_LIMIT", "req=%llu accounts=%zu resets_in_s=%ld", (unsigned long long)p->id,
                n, in);
    alert_raise(p->gw->alerts, p->gw->policy, "pool_exhausted", "pool", "usage_limit", now,
                "every account of the pool (%zu) has reached its usage limit; clients get usage_limit_reached%s", n,
                in > 0 ? " until the first is back" : "");
    sbuf_free(&msg);
    sbuf_free(&body);
    proxy_finish(p, 429);
    return 1;
}

static void proxy_exhausted(proxy_req *p)
{
    if (p->committed) /* a resumed stream with nobody left to finish it */
        return proxy_resume_failed(p, "no account was left to finish the answer");
    if (proxy_is_count_tokens(p) && !p->client_gone) { /* no anthropic account counts now: the estimate */
        proxy_finish(p, server_count_tokens_reply(p->req, p->in.body.p, p->in.body.len));
        return;
    }
    if (p->xerr_set && !p->attempts && !p->bound[0]) { /* every candidate left needs a translation it refuses */
        int status = p->xerr.status ? p->xerr.status : 400;
        snprintf(p->error_class, sizeof p->error_class, "untranslatable");
        proxy_send_error_param(p, status, "invalid_request_error",
                               p->xerr.code[0] ? p->xerr.code : "unsupported_parameter", p->xerr.param, p->xerr.message);
        proxy_finish(p, status);
        return;
    }
    double back = 0;
    if (!p->bound[0] && proxy_chain_move(p)) /* its stored response's account cannot serve: rebuilt for another */
        return;
    if (p->in.response_id[0] && proxy_record_reply(p, 0)) /* its account cannot serve: the gateway's record can */
        return;
    if (!p->bound[0] && proxy_wait_for_capacity(p, &back))
        return;
    /* bounded: accounts were left untried, so the pool is not known to be spent */
    if (pool_count(p->gw->pool) && !p->bound[0] && proxy_usage_limit_reply(p))
        return;
    for (size_t i = 0; i < p->plan.nskips; i++)
        proxy_why(p, p->plan.skips[i].name, p->plan.skips[i].reason);
    if (p->plan.skips_more || p->plan.beyond)
        sbuf_printf(&p->why, "%sand %zu more account(s) not tried", p->why.len ? "; " : "",
                    p->plan.skips_more + p->plan.beyond);
    sbuf msg = SBUF_INIT;
    if (p->bound[0])
        sbuf_printf(&msg, "%s: %s", p->bound, p->why.len ? p->why.p : "none eligible");
    else if (!pool_count(p->gw->pool))
        sbuf_puts(&msg, "no upstream accounts are configured (add one with 'switchyard account add')");
    else if (p->plan.pinned_owner && !p->plan.n && !p->attempts && p->in.response_id[0])
        sbuf_printf(&msg, "%s /v1/responses/%s%s: the response belongs to an account that cannot serve now, and the "
                          "gateway holds no record of it: %s", p->in.is_delete ? "DELETE" : "GET", p->in.response_id,
                    p->in.input_items ? "/input_items" : "", p->why.p);
    else if (p->plan.pinned_owner && !p->plan.n && !p->attempts)
        sbuf_printf(&msg, "%s belongs to an account that cannot serve now: %s", p->plan.pinned_by, p->why.p);
    else
        sbuf_printf(&msg, "all upstream accounts are unavailable: %s", p->why.len ? p->why.p : "none eligible");
    if (!p->bound[0] && !(p->plan.pinned_owner && !p->plan.n && !p->attempts)) /* the pool, not one account */
        alert_raise(p->gw->alerts, p->gw->policy, "pool_exhausted", "pool", "no_available_account", gateway_now(),
                    "no account could serve a request to %s (503 no_available_account): %.300s", p->in.endpoint,
                    msg.p);
    snprintf(p->error_class, sizeof p->error_class, "exhausted");
    if (back) { /* when to come back: the soonest account's return */
        char ra[32];
        snprintf(ra, sizeof ra, "%.0f", ceil(back - gateway_now()) > 1 ? ceil(back - gateway_now()) : 1);
        evhttp_add_header(evhttp_request_get_output_headers(p->req), "Retry-After", ra);
    }
    proxy_send_error(p, 503, "server_error", "no_available_account", msg.p);
    sbuf_free(&msg);
    proxy_finish(p, 503);
}

void proxy_next(proxy_req *p)
{
    char why[ROUTER_WHY_MAX];
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
    if (p->plan.beyond && !p->committed && !p->bound[0]) /* the plan stopped at max_attempts accounts */
        snprintf(p->bound, sizeof p->bound, "gave up after %d attempts (max_attempts in order.lua)", p->attempts);
    proxy_exhausted(p);
}
