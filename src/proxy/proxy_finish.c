/* proxy_finish.c: the end of an attempt and of the request, and their
 * records (the life of a request: proxy.c). An attempt's end goes into the
 * request's attempts record and the metrics; a committed answer's end
 * records the account's success and the usage, sends the last of the
 * reply; proxy_finish, the one way out of every request, writes the
 * request log row and trace line, charges the spend and frees it all. */
#include "proxy/proxy_internal.h"
#include "route/budget_hold.h"
#include "base/json.h"
#include "base/log.h"
#include "http/server.h"
#include "obs/alert.h"
#include "obs/metrics.h"
#include "obs/trace.h"
#include "route/account_limits.h"
#include "route/breaker.h"
#include "route/spend.h"
#include "store/store.h"
#include "upstream/usage.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A budget this charge took past BUDGET_WARN of itself, or over (the
 * budget policy's verdict): an alert, once per crossing and dedup window. */
#define BUDGET_WARN 0.8
static void proxy_budget_alert(gateway *gw, const char *what, const char *name, double usd, const char *period,
                               double before, int was_over, const budget_state *b, double now)
{
    const char *state = b->over && !was_over                                    ? "over"
                        : before < BUDGET_WARN * usd && b->spent >= BUDGET_WARN * usd ? "80%"
                                                                                      : NULL;
    if (!state)
        return;
    char subject[200];
    snprintf(subject, sizeof subject, "%s %s", what, name);
    alert_raise(gw->alerts, gw->policy, "budget", subject, state, now, "%s %s %s its budget: $%.2f spent of $%.2f this %s",
                what, name, strcmp(state, "over") == 0 ? "is over" : "has used 80% of", b->spent, usd, period);
}

/* spend_charge, and an alert for each budget it takes past a threshold. */
static void proxy_spend_charge(gateway *gw, int64_t key_id, int64_t account_id, double usd, double now)
{
    pool_key *pk = NULL;
    for (size_t i = 0; key_id && i < pool_key_count(gw->pool) && !pk; i++)
        if (pool_key_entry(gw->pool, i)->k.id == key_id)
            pk = pool_key_entry(gw->pool, i);
    pool_account *pa = account_id ? pool_find(gw->pool, account_id) : NULL;
    double key_before = pk ? pk->budget.spent : 0, acct_before = pa ? pa->budget.spent : 0;
    int key_over = pk && pk->budget.over, acct_over = pa && pa->budget.over;
    spend_charge(gw->pool, gw->policy, key_id, account_id, usd, now);
    if (!(usd > 0))
        return;
    if (pk && pk->k.budget_usd > 0)
        proxy_budget_alert(gw, "key", pk->k.name, pk->k.budget_usd, pk->k.budget_period, key_before, key_over,
                           &pk->budget, now);
    if (pa && pa->a.budget_usd > 0)
        proxy_budget_alert(gw, "account", pa->a.name, pa->a.budget_usd, pa->a.budget_period, acct_before, acct_over,
                           &pa->budget, now);
}

/* ---------- attempt outcomes ---------- */

/* What a decision made of the current attempt: "failover", "returned"
 * (its error went to the client unchanged), "retry" (the same account
 * again), "context_fallback", "resume", "login_refresh" (a 401 that
 * refreshed the login; the same account again). proxy_attempt_record writes it
 * when the attempt ends; attempts that end without a decision get their
 * outcome there (ok, error, client_closed, abandoned). */
void proxy_attempt_outcome(proxy_req *p, const char *outcome, const char *cls)
{
    p->att_outcome = outcome;
    sbuf_copy_cstr(p->att_class, sizeof p->att_class, cls ? cls : "");
}

/* The attempts' messages in one request's attempts record, at most about
 * this many bytes (the first ones; a request failing over 16 times would
 * otherwise add 16 of them to its row): with the row's own message, a
 * failed request's row grows by at most about 1.7 KB (docs/operating.md). */
#define PROXY_ATTEMPT_MSG_BYTES 1024

/* see proxy_internal.h */
void proxy_error_note(proxy_req *p, const char *code, const char *msg)
{
    sbuf raw = SBUF_INIT, clean = SBUF_INIT;
    size_t mlen = msg ? strlen(msg) : 0;
    if (mlen > LOG_MESSAGE_IN)
        mlen = LOG_MESSAGE_IN;
    if (code && *code) {
        sbuf_puts(&raw, code);
        if (mlen)
            sbuf_puts(&raw, ": ");
    }
    sbuf_append(&raw, msg ? msg : "", mlen);
    scrub_text(&p->scrub, raw.p ? raw.p : "", raw.len, &clean); /* the account's own token, whatever it looks like */
    sbuf_reset(&p->errmsg);
    sbuf_reserve(&p->errmsg, STORE_LOG_MESSAGE_MAX + 1);
    p->errmsg.len = log_redact_message(p->errmsg.p, STORE_LOG_MESSAGE_MAX + 1, clean.p ? clean.p : "", clean.len);
    sbuf_free(&raw);
    sbuf_free(&clean);
}

void proxy_send_error_param(proxy_req *p, int status, const char *type, const char *code, const char *param,
                            const char *msg)
{
    proxy_error_note(p, code, msg);
    server_send_error_param(p->req, status, type, code, param, msg);
}

void proxy_send_error(proxy_req *p, int status, const char *type, const char *code, const char *msg)
{
    proxy_error_note(p, code, msg);
    server_send_error(p->req, status, type, code, msg);
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
    if (p->xstep == DIALECT_TRANSLATE) { /* the translation it used (docs/clients.md) */
        const char *pair = dialect_pair_name(p->in.api, p->up_api);
        sbuf_puts(t, ",\"dialect\":");
        sbuf_json_str(t, pair, strlen(pair));
    } else if (p->xstep == DIALECT_ADAPT) {
        sbuf_puts(t, ",\"adapted\":true");
    }
    /* what this attempt's upstream said (failed attempts only), while the
     * request's attempts have used less than PROXY_ATTEMPT_MSG_BYTES on it */
    if (p->att_msg && p->errmsg.len && p->att_msg_bytes + p->errmsg.len <= PROXY_ATTEMPT_MSG_BYTES) {
        size_t at = t->len;
        sbuf_puts(t, ",\"message\":");
        sbuf_json_str(t, p->errmsg.p, p->errmsg.len);
        p->att_msg_bytes += t->len - at;
    }
    p->att_msg = 0;
    sbuf_puts(t, "}");
    metrics_attempt(p->acct_id, outcome, cls, secs);
    if (strcmp(outcome, "ok") != 0) /* a served attempt is the request's last: REQUEST_FINAL tells it */
        trace_event(p->gw->trace, "ATTEMPT_END", "req=%llu attempt=%d account=%s model=%s outcome=%s class=%s status=%d ms=%.1f",
                    (unsigned long long)p->id, p->attempts, p->acct_name, p->att_model, outcome, *cls ? cls : "-",
                    p->status, secs * 1000.0);
}

void proxy_attempt_end(proxy_req *p)
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
    dialect_stream_free(p->xs);
    p->xs = NULL;
    sbuf_free(&p->xwhole);
    sbuf_free(&p->late_held);
    pool_account *pa = proxy_account(p);
    int freed = pa && p->acct_id && pa->inflight > 0 && pa->a.max_concurrency > 0;
    if (pa && p->acct_id && pa->inflight > 0)
        pa->inflight--;
    shared_slot_give(p->gw->shared, p->slot);
    p->slot = 0;
    if (freed) /* a request waiting for this slot goes now */
        proxy_slot_freed();
    p->acct_id = 0;
    p->mode = MODE_NONE;
}

/* ---------- the end of a committed answer ---------- */

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
    if (p->up_api == API_MESSAGES) /* an anthropic account's own answer */
        usage_tokens_read_anthropic(doc ? json_get(doc, "usage") : NULL, &t);
    else
        usage_tokens_read(doc ? json_get(doc, "usage") : NULL, &t);
    p->in_tok = t.in;
    p->out_tok = t.out;
    p->tot_tok = t.total;
    p->cached_tok = t.cached;
    /* the client's answer is this body unless it was translated (then
     * proxy_whole_done records the translated one) */
    int own = p->xstep != DIALECT_TRANSLATE;
    const char *id = own && doc && p->in.api == API_RESPONSES && !is_error ? json_get_str(doc, "id") : NULL;
    if (id)
        pool_owner_set(p->gw->pool, id, p->acct_id);
    json_free(doc);
    if (!is_error) {
        proxy_blobs_minted(p, p->sniff.p, p->sniff.len);
        if (own && p->in.api == API_RESPONSES && !p->in.is_get && !p->in.store_off)
            proxy_turn_record(p, p->sniff.p, p->sniff.len);
    }
    return is_error;
}

/* Ends a started reply and the request. The request is finished first:
 * evhttp_send_reply_end closes a connection that is not kept alive at once
 * when everything was written already (an HTTP/1.0 stream), and the close
 * callback would otherwise finish the request a second time. */
void proxy_finish_reply(proxy_req *p, int status)
{
    struct evhttp_request *req = p->client_gone ? NULL : p->req;
    proxy_finish(p, status);
    if (req)
        server_reply_end(req);
}

/* A committed answer's transfer ended (proxy_up_done): its usage and the
 * account's success are recorded and the rest goes out. One cut short ends
 * with an explicit error or a reset, unless proxy_recover.c can still save
 * it (a stream resumed elsewhere, a plain answer nobody saw yet). */
/* A stream's usage and response id, as its events told them. */
static void proxy_stream_usage(proxy_req *p)
{
    p->in_tok = p->pf.input_tokens;
    p->out_tok = p->pf.output_tokens;
    p->tot_tok = p->pf.total_tokens;
    p->cached_tok = p->pf.cached_tokens;
    /* the id the client knows: a translated stream's own (dialect.h) */
    const char *id = p->xs && dialect_stream_response_id(p->xs)[0] ? dialect_stream_response_id(p->xs)
                                                                    : p->pf.response_id;
    if (id[0])
        pool_owner_set(p->gw->pool, id, p->acct_id);
}

/* see proxy_internal.h */
int proxy_client_left_status(proxy_req *p)
{
    if (!p->committed || p->mode != MODE_PREFLIGHT || !p->pf_live || !p->pf.saw_terminal ||
        p->pf.state == PF_ERROR || p->pf.late_error || p->resume_pending || p->out.len || p->error_class[0])
        return 499;
    proxy_stream_usage(p);
    proxy_record_success(p);
    proxy_attempt_outcome(p, "ok", "");
    return p->committed_status;
}

void proxy_done_committed(proxy_req *p, up_result r, const char *errmsg)
{
    if (p->mode == MODE_PREFLIGHT) {
        proxy_stream_usage(p);
        if (p->pf.late_error && !p->late_released && proxy_late_error(p, r))
            return; /* the answer went on elsewhere, or the client retries the turn */
        if (p->pf.state == PF_ERROR || p->pf.late_error) { /* it carries its own error event */
            sbuf_copy_cstr(p->error_class, sizeof p->error_class, p->pf.late_error ? "late_error" : "stream_error");
            proxy_error_note(p, p->pf.error_code[0] ? p->pf.error_code : p->pf.error_type[0] ? p->pf.error_type : NULL,
                             p->pf.error_message.len ? p->pf.error_message.p : NULL);
            proxy_flush_held(p, 1);
            proxy_trim_end(p);
            proxy_late_release(p);
        } else if (r != UP_OK || !p->pf.saw_terminal) {
            if (proxy_try_resume(p, r, errmsg))
                return;
            proxy_stream_interrupted(p, r != UP_OK ? errmsg : "the upstream closed the stream early");
        } else {
            proxy_flush_held(p, 1);
            proxy_trim_end(p);
            if (p->xs) /* a translated stream's closing events ([DONE], response.completed) */
                proxy_translated_end(p);
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
            proxy_error_note(p, "upstream_interrupted", errmsg ? errmsg : "the upstream failed mid-body");
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

/* ---------- translated answers (docs/clients.md) ---------- */

/* A translated stream the upstream ended well: what the client still
 * needs (its closing events), and a Responses client's turn recorded from
 * what it got when it asked to store it. */
void proxy_translated_end(proxy_req *p)
{
    sbuf tail = SBUF_INIT;
    dialect_stream_end(p->xs, &tail);
    if (tail.len)
        proxy_client_send_raw(p, tail.p, tail.len);
    sbuf_free(&tail);
    size_t len;
    const char *resp = dialect_stream_response(p->xs, &len);
    if (resp && p->in.api == API_RESPONSES && !p->in.store_off)
        proxy_turn_record(p, resp, len);
}

/* The HTTP status of an error that came inside a stream, for a client that
 * gets one answer: what the error says it is, else 400 (a request error). */
static int proxy_stream_error_status(const preflight *pf)
{
    const char *t = pf->error_code[0] ? pf->error_code : pf->error_type;
    if (strstr(t, "rate_limit") || strstr(t, "quota") || strstr(t, "usage_limit"))
        return 429;
    if (strstr(t, "server") || strstr(t, "overloaded") || strstr(t, "internal"))
        return 500;
    return 400;
}

/* see proxy_internal.h: a stream aggregated, or a plain answer of another
 * dialect translated. Whatever fails now (an error or a cut inside the
 * stream, a body that is no answer) failed before the client saw anything:
 * the policy decides as it does before output. */
void proxy_whole_done(proxy_req *p)
{
    sbuf body = SBUF_INIT;
    int status = p->status;
    if (p->mode == MODE_PLAIN) {
        sbuf_reset(&p->sniff);
        sbuf_append(&p->sniff, p->xwhole.p ? p->xwhole.p : "", p->xwhole.len);
        if (proxy_read_plain_usage(p)) /* an error object with a 2xx: as for a plain one */
            return proxy_plain_error_unseen(p);
        if (dialect_answer(p->up_api, p->in.api, p->xwhole.p, p->xwhole.len, &body) != 0) {
            sbuf_free(&body);
            proxy_not_an_answer(p, "not_translatable");
            return;
        }
    } else {
        int complete = dialect_stream_end(p->xs, &body);
        int failed = dialect_stream_failed(p->xs, &status);
        if (p->pf.state != PF_ERROR && (failed || p->pf.late_error || !complete)) {
            /* an error after output, or a cut: the client has seen none of it */
            policy_event ev = {0};
            ev.status = p->status;
            ev.in_stream = 1;
            ev.network_error = !failed && !p->pf.late_error;
            ev.body = p->pf.error_body.p;
            ev.body_len = p->pf.error_body.len;
            ev.error_type = p->pf.error_type[0] ? p->pf.error_type : NULL;
            ev.error_code = p->pf.error_code[0] ? p->pf.error_code : NULL;
            ev.error_message = p->pf.error_message.len ? p->pf.error_message.p
                               : ev.network_error    ? "the upstream ended the stream before its answer was complete"
                                                     : NULL;
            if (proxy_classify_and_route(p, &ev, ev.network_error ? "the stream ended before its answer was whole"
                                                                  : "an error event in the 200 stream")) {
                sbuf_free(&body);
                return;
            }
        }
        proxy_stream_usage(p);
        if (p->pf.state == PF_ERROR || failed || p->pf.late_error || !complete) {
            if (p->pf.state == PF_ERROR || p->pf.late_error)
                status = proxy_stream_error_status(&p->pf);
            else if (!failed)
                status = 502;
            if (!body.len) { /* the translator had no error object to give: the gateway's own */
                const char *m = p->pf.error_message.len ? p->pf.error_message.p
                                : "the upstream ended the stream before its answer was complete";
                const char *c = p->pf.error_code[0] ? p->pf.error_code : "upstream_interrupted";
                if (p->in.api == API_MESSAGES) {
                    dialect_error_own(API_MESSAGES, status, c, NULL, m, &body);
                } else {
                    sbuf_puts(&body, "{\"error\":{");
                    json_error_members(&body, m, "upstream_error", c);
                    sbuf_puts(&body, "}}");
                }
            }
            snprintf(p->error_class, sizeof p->error_class, "%s", complete ? "stream_error" : "stream_interrupted");
            proxy_error_note(p, p->pf.error_code[0] ? p->pf.error_code : NULL,
                             p->pf.error_message.len ? p->pf.error_message.p : NULL);
            proxy_reply_made(p, status, &body);
            sbuf_free(&body);
            proxy_finish(p, status);
            return;
        }
    }
    proxy_record_success(p);
    /* a Responses client's answer made here: its id is the account's, its
     * stored turn what the client got (proxy_move.c) */
    if (p->in.api == API_RESPONSES && (p->xstep == DIALECT_TRANSLATE || p->mode == MODE_PREFLIGHT))
        proxy_made_response_note(p, body.p, body.len);
    proxy_reply_made(p, p->status, &body);
    sbuf_free(&body);
    proxy_finish(p, p->status);
}

/* ---------- the end of the request ---------- */

void proxy_finish(proxy_req *p, int status)
{
    gateway *gw = p->gw;
    oauth_wait_cancel(gw->oauth, p->wait);
    p->wait = NULL;
    shared_call_cancel(gw->shared, p->ask);
    p->ask = NULL;
    shared_call_cancel(gw->shared, p->slot_wait);
    p->slot_wait = NULL;
    shared_call_cancel(gw->shared, p->chain_wait);
    p->chain_wait = NULL;
    shared_limits_cancel(gw->shared, p->key_bucket);
    p->key_bucket = NULL;
    shared_limits_cancel(gw->shared, p->acct_bucket);
    p->acct_bucket = NULL;
    pool_account *unused = p->acct_bucket_unused ? pool_find(gw->pool, p->acct_bucket_unused) : NULL;
    if (unused) /* taken from the pool's bucket for an attempt that never started */
        shared_account_bucket_give(gw->shared, unused);
    p->acct_bucket_unused = 0;
    shared_call_cancel(gw->shared, p->cursor_wait);
    p->cursor_wait = NULL;
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
    if (p->in.is_delete && status >= 200 && status < 300) { /* the upstream deleted it: so does the record */
        store_conversation_delete(gw->st, p->in.response_id);
        proxy_turn_forget(p->in.response_id);
        shared_turn_forget(gw->shared, p->in.response_id);
    }
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
    /* the reservations go as the real cost comes (route/budget_hold.h) */
    for (size_t i = 0; p->key_held > 0 && i < pool_key_count(gw->pool); i++)
        if (pool_key_entry(gw->pool, i)->k.id == p->in.key_id)
            budget_hold_release(&pool_key_entry(gw->pool, i)->budget, p->key_held);
    p->key_held = 0;
    proxy_hold_release_account(p);
    proxy_spend_charge(gw, p->in.key_id, p->attempts ? p->last_acct_id : 0, rl.cost_usd, rl.ts + ms / 1000.0);
    shared_spend_tell(gw->shared, p->in.key_id, p->attempts ? p->last_acct_id : 0, rl.cost_usd);
    /* tokens and cost by account, key and the model asked for (as `switchyard usage --by model`) */
    metrics_usage(rl.ts + ms / 1000.0, p->attempts ? p->last_acct_id : 0, p->in.key_id, p->in.model, p->in_tok,
                  p->cached_tok, p->out_tok, rl.cost_usd);
    if (p->attempts) {
        sbuf_copy_cstr(rl.account_name, sizeof rl.account_name, p->acct_name);
        rl.account_id = p->last_acct_id;
        pool_account *last = pool_find(gw->pool, p->last_acct_id);
        if (last) {
            account_limits_usage(last, p->tot_tok, p->t_start + ms / 1000.0);
            shared_account_tokens(gw->shared, last, p->tot_tok);
        }
    }
    if (p->tried.len) {
        sbuf_puts(&p->tried, "]");
        rl.attempts_json = p->tried.p; /* the writer takes it over */
        p->tried = (sbuf)SBUF_INIT;
    }
    if (p->errmsg.len && (status < 200 || status >= 300 || p->error_class[0])) { /* a failure: what it said */
        rl.error_message = p->errmsg.p; /* the writer takes it over */
        p->errmsg = (sbuf)SBUF_INIT;
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
    sbuf_free(&p->errmsg);
    sbuf_free(&p->upbody);
    sbuf_free(&p->xbody);
    sbuf_free(&p->turn_items);
    proxy_blobs_free(p);
    sbuf_free(&p->turn_input);
    sbuf_free(&p->errbody);
    sbuf_free(&p->relay);
    proxy_pf_timer_drop(p);
    if (p->splice) {
        resume_splice_free(p->splice);
        free(p->splice);
        p->splice = NULL;
    }
    if (p->trim) {
        overlap_free(p->trim);
        free(p->trim);
        p->trim = NULL;
    }
    sbuf_free(&p->contbody);
    proxy_slot_unwait(p);
    if (p->retry_timer)
        event_free(p->retry_timer);
    event_del(&p->flush_ev);
    proxy_unflushed_remove(p);
    proxy_hold_release(p);
    scrub_free(&p->scrub); /* sniff and out: proxy_req_release */
    gw->active--;
    proxy_req_release(p);
}
