/* proxy_recover.c: an attempt that failed before the client was told
 * anything, and what the request does next (the life of a request:
 * proxy.c). The policy classifies the failure; the request then retries
 * the same account later, refreshes its login after a 401, goes to a
 * larger-context fallback, cools the account down and fails over to the
 * next candidate, waits for a resting account, or returns the error as it
 * came. After commit there is no replay, with one exception: a cut chat
 * stream may resume on another account (opt-in). */
#include "proxy/proxy_internal.h"
#include "accounts/account_poll.h"
#include "base/json.h"
#include "http/server.h"
#include "obs/alert.h"
#include "obs/metrics.h"
#include "obs/trace.h"
#include "route/account_limits.h"
#include "route/breaker.h"
#include "route/hold.h"
#include "base/log.h"
#include "upstream/resume.h"
#include "upstream/usage.h"
#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROXY_RETRY_MAX 4                /* same-account retries per request, whatever the policy says */

/* ---------- the account's side of a failure ---------- */

/* A usage limit of one limit family of the account (store.h,
 * account_family): the answer named the family (x-codex-active-limit), or
 * the request's model is known to be metered in one. Only that family
 * rests: no account cooldown, no breaker or health mark (the account is
 * fine for every other model). Returns the seconds it rests. */
static double proxy_cool_family(proxy_req *p, pool_account *pa, const policy_verdict *v, const char *family)
{
    double now = gateway_now(), secs = v->cooldown;
    account_family *f = pool_family_slot(pa, family);
    if (strlen(p->in.model) < sizeof f->model)
        memcpy(f->model, p->in.model, strlen(p->in.model) + 1);
    if (p->limit_family[0]) { /* this answer's figures of the family */
        f->primary_used_pct = p->family_w.primary_used_pct;
        f->secondary_used_pct = p->family_w.secondary_used_pct;
        f->primary_reset_at = p->family_w.primary_reset_at;
        f->secondary_reset_at = p->family_w.secondary_reset_at;
    }
    if (secs < 0) { /* the ladder, the family's own */
        policy_state ps = {.account_id = pa->a.id, .ladder_step = f->ladder_step, .last_429_at = f->last_429_at,
                           .cooldown_until = f->until, .retry_after = p->retry_after,
                           .primary_used_pct = f->primary_used_pct, .primary_reset_at = f->primary_reset_at,
                           .secondary_used_pct = f->secondary_used_pct, .secondary_reset_at = f->secondary_reset_at,
                           .family = family};
        int step = f->ladder_step;
        policy_cooldown(p->gw->policy, &ps, v->cls, now, &secs, &step);
        f->ladder_step = step;
        f->last_429_at = now;
    }
    if (secs > 0 && now + secs > f->until)
        f->until = now + secs;
    snprintf(p->rctx.family, sizeof p->rctx.family, "%s", family); /* the next candidates are judged by it */
    sbuf_copy_cstr(pa->st.last_error, sizeof pa->st.last_error, v->cls);
    pa->st.updated_at = now;
    pool_state_save(p->gw->pool, pa);
    trace_event(p->gw->trace, "FAMILY_COOLDOWN", "req=%llu account=%s family=%s model=%s cooldown_s=%.0f",
                (unsigned long long)p->id, pa->a.name, family, p->in.model, secs);
    return secs;
}

/* The family a limit of one model on the account rests (classify's scope
 * "model": the API's per-model rate limits): "model:NAME", or for a name
 * too long for the slot "model:#" and its hash (the slot also keeps the
 * model, which is what the router matches). */
static void proxy_model_family(const char *model, char family[ACCOUNT_FAMILY_MAX])
{
    size_t n = strlen(model);
    if (n + 7 <= ACCOUNT_FAMILY_MAX) {
        memcpy(family, "model:", 6);
        memcpy(family + 6, model, n + 1);
        return;
    }
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)model[i]) * 16777619u;
    snprintf(family, ACCOUNT_FAMILY_MAX, "model:#%08x", h);
}

/* Applies a failover verdict to the account: cooldown (from classify, or
 * from the cooldown hook for ladder classes) and health; a usage limit of
 * one limit family cools only that family (proxy_cool_family). */
static double proxy_cool_down(proxy_req *p, const policy_verdict *v)
{
    pool_account *pa = proxy_account(p);
    if (!pa)
        return 0;
    if (strcmp(v->cls, "rate_limit") == 0 || strcmp(v->cls, "quota") == 0) {
        char family[ACCOUNT_FAMILY_MAX];
        if (p->limit_family[0])
            memcpy(family, p->limit_family, sizeof family);
        else if (v->scope_model)
            proxy_model_family(p->in.model, family);
        else
            pool_family_of(p->gw->pool, p->in.model, family, sizeof family);
        if (family[0])
            return proxy_cool_family(p, pa, v, family);
    }
    double now = gateway_now();
    double secs = v->cooldown;
    if (secs < 0) {
        /* classify left the duration to the ladder: this failure is a step on it */
        policy_state ps = {.account_id = pa->a.id, .ladder_step = pa->st.ladder_step,
                           .last_429_at = pa->st.last_429_at, .cooldown_until = pa->st.cooldown_until,
                           .retry_after = p->retry_after, .primary_used_pct = pa->st.primary_used_pct,
                           .primary_reset_at = pa->st.primary_reset_at,
                           .secondary_used_pct = pa->st.secondary_used_pct,
                           .secondary_reset_at = pa->st.secondary_reset_at, .family = ""};
        int step = pa->st.ladder_step;
        policy_cooldown(p->gw->policy, &ps, v->cls, now, &secs, &step);
        pa->st.ladder_step = step;
        pa->st.last_429_at = now;
        if (pa->a.kind == ACCOUNT_CHATGPT) /* learn the windows as they are now */
            account_poll_soon(p->gw->polls, pa->a.id);
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

/* A failover verdict with a state: the account leaves the pool until an
 * operator acts (route/hold.h). Only while it holds the login this attempt
 * was sent with: a login changed meanwhile may be the fix (the store
 * checks the same when it writes). Held in memory at once, so the router
 * skips it from now on, and written through the store, so a restart keeps
 * it (a pool reload waits until the write commits: store_writer_put_hold
 * pins it). Returns 1 when the account is held. */
static int proxy_hold(proxy_req *p, const policy_verdict *v, const policy_event *ev, const char *summary)
{
    pool_account *pa = proxy_account(p);
    if (!pa || !v->state[0] || proxy_token_hash(pa->a.token) != p->sent_token_hash)
        return 0;
    if (pa->a.hold) /* another request held it first */
        return 1;
    const char *said = ev->error_code ? ev->error_code : ev->error_type ? ev->error_type : ev->error_message;
    char detail[STORE_HOLD_DETAIL_MAX + 1];
    snprintf(detail, sizeof detail, "%s%s%.120s", summary, said ? " " : "", said ? said : "");
    scrub_cstr(&p->scrub, detail, sizeof detail); /* the upstream's words may quote a secret */
    store_hold h = {pa->a.id, v->state, detail, pa->a.token, pa->a.reset_gen};
    if (!store_writer_put_hold(p->gw->st, &h))
        log_warn("account %s: cannot queue its hold for the store; it is held until the gateway stops", pa->a.name);
    char *state = strdup(v->state), *det = strdup(detail);
    if (!state || !det) {
        free(state);
        free(det);
        return 0;
    }
    pa->a.hold = state;
    free(pa->a.hold_detail);
    pa->a.hold_detail = det;
    pa->a.hold_since = (int64_t)gateway_now();
    char fix[HOLD_TEXT_MAX];
    hold_fix(v->state, pa->a.name, fix, sizeof fix);
    log_warn("account %s: held out of the pool (%s: %s, %s); %s", pa->a.name, v->state, hold_describe(v->state).what,
             detail, fix);
    trace_event(p->gw->trace, "ACCOUNT_HOLD", "req=%llu account=%s state=%s status=%d", (unsigned long long)p->id,
                pa->a.name, v->state, ev->status);
    alert_raise(p->gw->alerts, p->gw->policy, "account_held", pa->a.name, v->state, gateway_now(),
                "account %s is held out of the pool (%s: %s); %s", pa->a.name, v->state, hold_describe(v->state).what,
                fix);
    return 1;
}

/* The upstream refused the request's model for this account (classify's
 * class "model_unsupported"): the account is remembered (in memory) as not
 * serving it, so the router skips it for that model from now on, and the
 * request moves on without cooling the account down: it is fine for every
 * other model. 1 when the request moved on; 0 when no other account could
 * take it: the upstream's refusal goes to the client as it came (a 503
 * "no account" would hide that the model is what is missing). */
static int proxy_model_refused(proxy_req *p, int status)
{
    pool_account *pa = proxy_account(p);
    if (pa)
        pool_account_refuse_model(pa, p->in.model);
    if (!pa || !proxy_candidates_left(p, 0)) {
        proxy_attempt_outcome(p, "returned", "model_unsupported");
        return 0;
    }
    proxy_attempt_outcome(p, "failover", "model_unsupported");
    char detail[256];
    snprintf(detail, sizeof detail, "HTTP %d, class model_unsupported: model %.80s not served on this account",
             status, p->in.model);
    scrub_cstr(&p->scrub, detail, sizeof detail);
    proxy_why(p, p->acct_name, detail);
    log_info("account %s: the upstream refused model %.80s; not sent there again until a reset", pa->a.name,
             p->in.model);
    trace_event(p->gw->trace, "CANDIDATE_SKIP", "req=%llu account=%s reason=model_unsupported status=%d",
                (unsigned long long)p->id, p->acct_name, status);
    proxy_attempt_end(p);
    proxy_next(p);
    return 1;
}

/* The account answered 404/405 to the endpoint of the attempt's dialect
 * (classify: unknown_endpoint): its upstream does not speak it. Learned
 * (kept in its state, shown by `account list`, forgotten by a reset) and
 * the request goes to the same account at once in the dialect it has
 * left, with no cooldown and no mark on its health (docs/clients.md). 1
 * when it did; 0 when the account has no other dialect left to try (a
 * wrong base URL answers 404 everywhere): a failover as any other. */
static int proxy_dialect_refused(proxy_req *p, int status)
{
    pool_account *pa = proxy_account(p);
    if (!pa || p->in.is_get)
        return 0;
    unsigned bit = DIALECT_BIT(p->up_api);
    unsigned before = account_dialects(&pa->a, &pa->st);
    if (!(before & bit) || !(before & ~bit))
        return 0; /* not what it was taken to speak, or nothing else left: no fact about dialects */
    pa->st.dialects_refused |= (int)bit;
    pa->st.updated_at = gateway_now();
    pool_state_save(p->gw->pool, pa);
    proxy_attempt_outcome(p, "dialect", "unknown_endpoint");
    log_info("account %s: answered HTTP %d to the %s endpoint; its upstream is taken to speak %s only from now "
             "(account reset forgets it)", pa->a.name, status, dialect_name(p->up_api),
             dialect_name(p->up_api == API_CHAT ? API_RESPONSES : API_CHAT));
    trace_event(p->gw->trace, "DIALECT_LEARNED", "req=%llu account=%s refused=%s status=%d", (unsigned long long)p->id,
                pa->a.name, dialect_name(p->up_api), status);
    proxy_attempt_end(p);
    proxy_attempt(p, pa); /* the same account, in the other dialect */
    return 1;
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
    /* the ChatGPT backend's own errors: {"detail":{"code":...}} or {"detail":"text"} */
    json_value *detail = !err && *doc ? json_get(*doc, "detail") : NULL;
    if (detail && detail->type == JSON_STRING) {
        *message = detail->str;
        return;
    }
    if (detail && detail->type == JSON_OBJECT)
        err = detail;
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
int proxy_candidates_left(proxy_req *p, int same_model)
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

/* ---------- waiting for a slot of a busy account ---------- */

/* The requests waiting for a slot (loop thread only), oldest first: an
 * attempt's end wakes them all (a waiter that finds the slot taken again
 * waits again, within its budget); their timers bound the wait. */
static proxy_req *proxy_slot_head, *proxy_slot_tail;

void proxy_slot_unwait(proxy_req *p)
{
    if (!p->slot_waiting)
        return;
    if (p->slot_prev)
        p->slot_prev->slot_next = p->slot_next;
    else
        proxy_slot_head = p->slot_next;
    if (p->slot_next)
        p->slot_next->slot_prev = p->slot_prev;
    else
        proxy_slot_tail = p->slot_prev;
    p->slot_prev = p->slot_next = NULL;
    p->slot_waiting = 0;
}

void proxy_slot_freed(void)
{
    for (proxy_req *p = proxy_slot_head; p; p = p->slot_next)
        if (p->retry_timer && evtimer_pending(p->retry_timer, NULL)) {
            evtimer_del(p->retry_timer);
            event_active(p->retry_timer, EV_TIMEOUT, 1);
        }
}

/* 1 when an account that could serve the request is only at its
 * concurrency limit (here, or across the gateways as its slot's answer said). */
static int proxy_busy_exists(proxy_req *p, double now)
{
    if (p->slot_busy_seen)
        return 1;
    for (size_t i = 0; i < pool_count(p->gw->pool); i++) {
        const pool_account *pa = pool_at(p->gw->pool, i);
        if ((!p->plan.pinned_owner || pa->a.id == p->plan.pinned_owner) && router_busy(pa, &p->rctx, now))
            return 1;
    }
    return 0;
}

static void proxy_on_retry_timer(evutil_socket_t fd, short what, void *arg)
{
    proxy_req *p = arg;
    if (p->slot_waiting) { /* a slot came free, or the wait's timer ran out */
        p->waited_s += gateway_now() - p->wait_started;
        proxy_slot_unwait(p);
    }
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
        p->slot_busy_seen = 0;
        sbuf_reset(&p->why);
        proxy_next(p);
        return;
    }
    pool_account *pa = pool_find(p->gw->pool, p->retry_acct);
    p->retry_acct = 0;
    /* still a candidate? The wait gave its limits (concurrency, rpm, the
     * breaker's one probe) to others, and other requests may have cooled it */
    char why[ROUTER_WHY_MAX];
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
int proxy_wait_for_capacity(proxy_req *p, double *back)
{
    char name[64] = "";
    double now = gateway_now(), wait = 0;
    double budget = p->gw->cfg.capacity_wait_ms / 1000.0 - p->waited_s;
    /* a turn state's issuer is only a hint while others can serve; once all
     * rest, wait for it when it is back in time, so the plan after the wait
     * puts it first (waiting for whichever is back soonest would race it) */
    if (!p->plan.pinned_owner && p->plan.turn_owner) {
        *back = router_soonest_return(p->gw, &p->rctx, p->plan.turn_owner, now, name, sizeof name);
        wait = *back ? *back - now + 0.01 : 0;
        if (wait > budget || wait >= proxy_time_left(p))
            *back = 0;
    } else {
        *back = 0;
    }
    if (!*back)
        *back = router_soonest_return(p->gw, &p->rctx, p->plan.pinned_owner, now, name, sizeof name);
    if (p->client_gone || p->client_eof)
        return 0;
    /* an account only at its concurrency limit: its slot frees when one of
     * its attempts ends (a few seconds at most, usually): wait for that, or
     * for the soonest return, whichever comes first, within the budget */
    if (proxy_busy_exists(p, now)) {
        double left = budget < proxy_time_left(p) ? budget : proxy_time_left(p);
        double until_back = *back ? *back - now + 0.01 : left;
        /* another gateway's slot ends without a word to this one: look again often */
        double poll = strcmp(shared_kind(p->gw->shared), "local") != 0 ? 0.25 : left;
        wait = until_back < left ? until_back : left;
        if (wait > poll)
            wait = poll;
        *back = now + 1; /* a client told to come back gets the soonest: a slot */
        if (left < 0.05)
            return 0;
        trace_event(p->gw->trace, "CANDIDATE_WAIT", "req=%llu account=- reason=busy wait_ms=%.0f",
                    (unsigned long long)p->id, wait * 1000.0);
        metrics_wait(0);
        p->retry_acct = 0;
        p->wait_started = now;
        p->slot_waiting = 1;
        p->slot_prev = proxy_slot_tail;
        p->slot_next = NULL;
        if (proxy_slot_tail)
            proxy_slot_tail->slot_next = p;
        else
            proxy_slot_head = p;
        proxy_slot_tail = p;
        proxy_retry_arm(p, wait);
        return 1;
    }
    if (!*back)
        return 0;
    wait = *back - now + 0.01; /* just past the end of the cooldown */
    if (wait > budget || wait >= proxy_time_left(p))
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

/* A strip_retry verdict: the account refused a blob it cannot read. The
 * same account again at once, with every blob not known to be its own
 * left out as the strip policy says (proxy_move.c); once per request, so a
 * second refusal reaches the client. The account is not cooled down. */
static void proxy_strip_retry(proxy_req *p, const policy_verdict *v, int status)
{
    int64_t acct = p->acct_id;
    p->strip_retried = 1;
    metrics_strip_retry();
    trace_event(p->gw->trace, "CANDIDATE_STRIP_RETRY", "req=%llu account=%s class=%s status=%d",
                (unsigned long long)p->id, p->acct_name, v->cls, status);
    proxy_attempt_end(p);
    p->retry_acct = acct;
    proxy_retry_arm(p, 0);
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
int proxy_classify_and_route(proxy_req *p, policy_event *ev, const char *summary)
{
    policy_verdict v;
    ev->account_kind = account_kind_name(p->acct_kind);
    ev->model = p->att_model[0] ? p->att_model : p->in.model;
    ev->endpoint = p->in.endpoint;
    ev->retry_after = p->retry_after;
    ev->retries = p->acct_retries;
    ev->alternatives = proxy_candidates_left(p, 1);
    ev->random = (double)random() / ((double)RAND_MAX + 1.0);
    ev->context_fallbacks = !p->ctx_fallback_used && proxy_context_fallback_at(p) >= 0;
    policy_classify(p->gw->policy, ev, &v);
    sbuf_copy_cstr(p->error_class, sizeof p->error_class, v.cls);
    /* what this attempt's upstream said, for its attempts record and, when
     * the error goes to the client as it came, the log row */
    const char *said = ev->error_code ? ev->error_code : ev->error_type;
    proxy_error_note(p, said, ev->error_message || said ? ev->error_message : summary);
    p->att_msg = 1;
    if (v.action == VERDICT_CONTEXT_FALLBACK) {
        if (!p->ctx_fallback_used && proxy_go_context_fallback(p, &v))
            return 1;
        proxy_attempt_outcome(p, "returned", v.cls); /* none left: the error goes to the client */
        return 0;
    }
    if (v.action == VERDICT_STRIP_RETRY) {
        if (!proxy_strip_retry_possible(p) || p->client_eof) { /* nothing left to strip, or done once */
            proxy_attempt_outcome(p, "returned", v.cls);
            return 0;
        }
        proxy_attempt_outcome(p, "strip_retry", v.cls);
        proxy_strip_retry(p, &v, ev->status);
        return 1;
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
    if (v.failover && strcmp(v.cls, "model_unsupported") == 0 && p->in.model[0])
        return proxy_model_refused(p, ev->status);
    if (v.failover && strcmp(v.cls, "unknown_endpoint") == 0 && proxy_dialect_refused(p, ev->status))
        return 1;
    proxy_attempt_outcome(p, v.failover ? "failover" : "returned", v.cls);
    if (!v.failover)
        return 0;
    double secs = proxy_cool_down(p, &v);
    char detail[256];
    if (v.state[0] && proxy_hold(p, &v, ev, summary))
        snprintf(detail, sizeof detail, "%s, class %s, held out of the pool: %s", summary, v.cls,
                 hold_describe(v.state).what);
    else
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
        proxy_send_error(p, p->status, "upstream_error", too_large ? "upstream_error_too_large" : "upstream_error_not_json",
                         msg.p);
        sbuf_free(&msg);
        sbuf_free(&text);
        proxy_finish(p, p->status);
        return;
    }
    struct evkeyvalq *oh = evhttp_request_get_output_headers(p->req);
    evhttp_add_header(oh, "Content-Type", p->resp_ctype[0] ? p->resp_ctype : "application/json");
    proxy_relay_headers(p, oh);
    evhttp_add_header(oh, "x-switchyard-account", p->acct_name);
    proxy_moved_header(p, oh);
    /* in the ecosystem's shape whatever the upstream's ({"detail": ...} of
     * the ChatGPT backend becomes an OpenAI error object; one already is
     * goes as it came) */
    sbuf shaped = SBUF_INIT, body = SBUF_INIT;
    dialect_error_body_for(p->in.api, p->status, p->errbody.p, p->errbody.len, &shaped);
    scrub_text(&p->scrub, shaped.p, shaped.len, &body);
    sbuf_free(&shaped);
    struct evbuffer *b = evbuffer_new();
    evbuffer_add(b, body.p ? body.p : "", body.len);
    server_reply(p->req, p->status, b);
    evbuffer_free(b);
    sbuf_free(&body);
    proxy_finish(p, p->status);
}

void proxy_on_stream_error(proxy_req *p)
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
    if (p->whole) /* returned to a client that gets one answer: its error, once the stream ends */
        return;
    /* the policy returns it: the client gets the stream as upstream sent it */
    proxy_commit(p);
    proxy_flush_held(p, 1); /* the rest is relayed unparsed */
}

/* ---------- stream resume (text-only chat streams) ---------- */

/* see proxy_internal.h */
int proxy_takes_prefill(const pool_account *pa)
{
    return pa->a.prefill == PREFILL_YES && !pa->prefill_refused;
}

/* see proxy_internal.h */
int proxy_resume_possible(proxy_req *p)
{
    char why[160];
    double now = gateway_now();
    for (size_t i = p->next; i < p->plan.n; i++) {
        pool_account *pa = pool_find(p->gw->pool, p->plan.ids[i]);
        if (pa && pa->a.id != p->acct_id && router_available(pa, &p->rctx, now, why, sizeof why))
            return 1;
    }
    return 0;
}

/* Nobody could finish the cut stream (every candidate refused the prefill,
 * failed before any output of its own, or none was left): the client gets
 * the explicit interrupted error naming the original cut, never the
 * fallback's refusal, which would mask what happened. */
void proxy_resume_failed(proxy_req *p, const char *why)
{
    trace_event(p->gw->trace, "STREAM_RESUME_FAILED", "req=%llu account=%s why=\"%s\"", (unsigned long long)p->id,
                p->acct_id ? p->acct_name : "-", why);
    p->resume_pending = 0;
    proxy_stream_interrupted(p, p->cut_why[0] ? p->cut_why : why);
    p->cut_account[0] = '\0';
    proxy_client_flush(p);
    proxy_finish_reply(p, p->committed_status);
}

/* The resumed attempt ended before any output of its own. A 400 or 422 to
 * a continuation sent as an assistant prefill (only to an account declared
 * to take one, --prefill yes) is the upstream refusing it (the continuation
 * differs from the client's request only by it): the account is remembered
 * as refusing prefills (stored: `refused`, until a reset) and gets the same
 * continuation at once in the form every chat API takes, the delivered
 * text followed by the instruction to continue. Any other failure goes to
 * the next candidate; with none left, proxy_exhausted ends the stream with
 * the original cut. */
static void proxy_resume_next(proxy_req *p, up_result r)
{
    pool_account *pa = proxy_account(p);
    int refused = r == UP_OK && p->mode == MODE_ERROR && p->att_prefill && (p->status == 400 || p->status == 422);
    if (refused && pa && !pa->prefill_refused) {
        pa->prefill_refused = 1;
        store_admin_op op = {.kind = STORE_OP_PREFILL_REFUSED, .id = pa->a.id};
        if (store_writer_put_admin(p->gw->st, &op) != 0)
            log_warn("account %s: the prefill refusal could not be stored now; it holds until a restart",
                     pa->a.name);
        log_info("account %s: refused an assistant prefill (HTTP %d); its continuations go with the instruction "
                 "to continue from now on, until a reset", pa->a.name, p->status);
    }
    trace_event(p->gw->trace, "STREAM_RESUME_FAILED", "req=%llu account=%s why=\"%s\" status=%d",
                (unsigned long long)p->id, p->acct_name,
                refused ? "refused the prefill" : r != UP_OK ? "failed before any output" : "no output", p->status);
    proxy_attempt_outcome(p, refused ? "prefill_refused" : "resume_failed", refused ? "prefill" : "resume");
    proxy_attempt_end(p);
    if (refused && pa) {
        proxy_attempt(p, pa); /* the same account, in the other form */
        return;
    }
    proxy_next(p);
}

/* The splice of a Responses continuation: what the client has of the cut
 * stream (its response, the message being written and the items before
 * it), taken before the attempt's preflight goes. */
static resume_splice *proxy_splice_new(proxy_req *p, const sbuf *text)
{
    resume_splice *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    resume_cut cut = {.response_id = p->pf.response_id, .item_id = p->pf.rsp_item_id,
                      .output_index = p->pf.rsp_output_index, .content_index = p->pf.rsp_content_index,
                      .last_seq = p->pf.rsp_seq, .text = text->p, .text_len = text->len,
                      .done_items = p->pf.rsp_done_items.p, .done_len = p->pf.rsp_done_items.len};
    resume_splice_init(s, &cut);
    return s;
}

/* 1 when what the client got of the stream can be continued on another
 * account: text only (no tool call; for Responses, one message being
 * written and nothing else open), whole events, a candidate left that
 * takes the continuation, and no continuation made before. */
static int proxy_resume_can(proxy_req *p)
{
    int responses = p->in.api == API_RESPONSES;
    return p->pf.keep_text && !p->resumed && !p->client_gone && !p->pf.text_overflow && p->pf.text.len &&
           !p->mid_event && (!responses || preflight_rsp_resumable(&p->pf)) && proxy_resume_possible(p);
    /* (mid_event: half an over-long event went out; nothing can follow it cleanly) */
}

/* The request goes on on the next candidate with the delivered text as an
 * assistant prefill; only the continuation is relayed in the same client
 * stream (a Responses one spliced into the cut response, upstream/resume.h).
 * why: what cut the stream (the client's error if nobody can continue).
 * Returns 1 if it went on. */
static int proxy_resume_go(proxy_req *p, const policy_verdict *v, const char *why)
{
    int responses = p->in.api == API_RESPONSES;
    /* the client's doc is shallow (request.c); the continuation needs the
     * messages whole, so the body is parsed in full here, on this rare path */
    sbuf body = SBUF_INIT;
    json_value *full = json_parse(p->in.body.p, p->in.body.len, NULL, 0), *doc = NULL;
    /* the prefill goes to another account: the cut account's secrets are
     * taken out of it as out of every byte the client got */
    sbuf text = SBUF_INIT;
    scrub_text(&p->scrub, p->pf.text.p, p->pf.text.len, &text);
    int built = full && (responses ? resume_responses_body_build(full, text.p ? text.p : "", text.len, &body)
                                   : resume_body_build(full, text.p ? text.p : "", text.len, &body)) == 0;
    json_free(full);
    resume_splice *splice = built && responses ? proxy_splice_new(p, &text) : NULL;
    overlap_trim *trim = built ? malloc(sizeof *trim) : NULL;
    if (trim)
        overlap_init(trim, p->in.api, text.p ? text.p : "", text.len);
    sbuf_free(&text);
    if (!built || (responses && !splice) || !trim || !(doc = json_parse_shallow(body.p, body.len, 1, NULL, 0))) {
        if (splice)
            resume_splice_free(splice);
        free(splice);
        if (trim)
            overlap_free(trim);
        free(trim);
        sbuf_free(&body);
        return 0;
    }
    p->splice = splice;
    p->trim = trim;
    /* the blobs found in the client's body were found at its offsets */
    proxy_blobs_free(p);
    p->blobs_looked = p->blobs_scanned = p->blobs_unsure = 0;
    p->quick_n = p->quick_cap = 0;
    json_free(p->in.doc); /* the continuation request replaces the client's for the next attempts */
    p->in.doc = doc;
    p->gw->body_bytes += body.len - p->in.body.len; /* held in its place (proxy_finish gives back body.len) */
    sbuf_free(&p->in.body);
    p->in.body = body;
    trace_event(p->gw->trace, "STREAM_RESUME", "req=%llu account=%s delivered_chars=%zu class=%s",
                (unsigned long long)p->id, p->acct_name, p->pf.text.len, v->cls);
    sbuf_copy_cstr(p->cut_account, sizeof p->cut_account, p->acct_name);
    sbuf_copy_cstr(p->cut_why, sizeof p->cut_why, why);
    proxy_attempt_outcome(p, "resume", v->cls);
    p->resumed = 1;
    p->resume_pending = 1;
    sbuf_reset(&p->pf.held); /* an unfinished event of the cut stream never reaches the client */
    sbuf_free(&p->late_held); /* nor the error that cut it */
    p->late_released = 1;
    proxy_client_flush(p);
    proxy_attempt_end(p);
    proxy_next(p);
    return 1;
}

/* A chat or Responses stream was cut (the upstream closed it or went
 * silent) after text reached the client. When the policy says resume, the
 * answer goes on on the next candidate (proxy_resume_go). Returns 1 if it
 * went on. */
int proxy_try_resume(proxy_req *p, up_result r, const char *errmsg)
{
    if (!proxy_resume_can(p))
        return 0;
    policy_event ev = {0};
    ev.status = p->status;
    ev.in_stream = 1;
    ev.after_output = 1;
    ev.continuable = 1;
    ev.delivered_chars = (long)p->pf.text.len;
    ev.tool_call = p->pf.saw_tool_call;
    ev.network_error = r == UP_NETWORK || r == UP_OK;
    ev.timeout = r != UP_OK && r != UP_NETWORK;
    ev.error_message = errmsg ? errmsg : "the upstream closed the stream early";
    ev.retry_after = -1;
    ev.account_kind = account_kind_name(p->acct_kind);
    ev.model = p->att_model[0] ? p->att_model : p->in.model;
    ev.endpoint = p->in.endpoint;
    ev.alternatives = proxy_candidates_left(p, 0);
    policy_verdict v;
    policy_classify(p->gw->policy, &ev, &v);
    if (v.action != VERDICT_RESUME)
        return 0;
    if (v.cooldown != 0)
        proxy_cool_down(p, &v);
    return proxy_resume_go(p, &v, r != UP_OK && errmsg ? errmsg : "the upstream closed the stream early");
}

/* Accounts other than the attempt's that could serve this request now:
 * where a turn the client retries would go. */
static int proxy_others_serving(proxy_req *p)
{
    char why[160];
    double now = gateway_now();
    int n = 0;
    for (size_t i = 0; i < pool_count(p->gw->pool); i++) {
        const pool_account *pa = pool_at(p->gw->pool, i);
        n += pa->a.id != p->acct_id && router_available(pa, &p->rctx, now, why, sizeof why);
    }
    return n;
}

/* The stream of a Responses client ends without its answer, in the shape
 * its client retries (a response.failed whose code is none of the fatal
 * ones: Codex retries the turn, docs/policies.md), when the account hit a
 * limit after output that another account can serve past. */
static void proxy_turn_retry(proxy_req *p, const policy_verdict *v)
{
    sbuf msg = SBUF_INIT;
    sbuf_printf(&msg, "account %s hit a limit (%s) after the answer began; another account can serve: retry the turn",
                p->acct_name, v->cls);
    sbuf_free(&p->late_held); /* the limit's own event is not the client's end */
    p->late_released = 1;
    proxy_stream_fail(p, "upstream_limit_retry", msg.p);
    trace_event(p->gw->trace, "TURN_RETRY", "req=%llu account=%s class=%s", (unsigned long long)p->id, p->acct_name,
                v->cls);
    proxy_attempt_outcome(p, "retry_turn", v->cls);
    sbuf_free(&msg);
    proxy_client_flush(p);
    proxy_finish_reply(p, p->committed_status);
}

/* see proxy_internal.h */
int proxy_late_error(proxy_req *p, up_result r)
{
    (void)r;
    policy_event ev = {0};
    ev.status = p->status;
    ev.in_stream = 1;
    ev.after_output = 1;
    ev.body = p->pf.error_body.p;
    ev.body_len = p->pf.error_body.len;
    ev.error_type = p->pf.error_type[0] ? p->pf.error_type : NULL;
    ev.error_code = p->pf.error_code[0] ? p->pf.error_code : NULL;
    ev.error_message = p->pf.error_message.len ? p->pf.error_message.p : NULL;
    ev.delivered_chars = (long)p->pf.text.len;
    ev.tool_call = p->pf.saw_tool_call || (p->in.api == API_RESPONSES && p->pf.rsp_unsafe);
    ev.continuable = proxy_resume_can(p);
    ev.retry_after = p->retry_after > 0 ? p->retry_after : -1;
    ev.account_kind = account_kind_name(p->acct_kind);
    ev.model = p->att_model[0] ? p->att_model : p->in.model;
    ev.endpoint = p->in.endpoint;
    ev.alternatives = proxy_others_serving(p);
    ev.random = (double)random() / ((double)RAND_MAX + 1.0);
    policy_verdict v;
    policy_classify(p->gw->policy, &ev, &v);
    char secs[32] = "0";
    if (v.cooldown != 0) /* the account's limit: it rests as it would have before output */
        snprintf(secs, sizeof secs, "%.0f", proxy_cool_down(p, &v));
    trace_event(p->gw->trace, "LATE_ERROR", "req=%llu account=%s class=%s code=%s action=%s cooldown_s=%s",
                (unsigned long long)p->id, p->acct_name, v.cls, p->pf.error_code[0] ? p->pf.error_code : "-",
                policy_action_name(v.action), secs);
    if (v.action == VERDICT_RESUME && ev.continuable &&
        proxy_resume_go(p, &v, ev.error_message ? ev.error_message : "an error after output"))
        return 1;
    if (v.action == VERDICT_RETRY_TURN && p->in.api == API_RESPONSES && !p->client_gone) {
        proxy_turn_retry(p, &v);
        return 1;
    }
    return 0;
}

/* ---------- answers that failed before the client saw them ---------- */

/* A plain answer cut by the upstream (or timed out) before any of it
 * reached the client: its status line is still held (proxy_commit) and
 * what came of its body is only in p->out, so the client has been told
 * nothing. Not a cut answer then, but an attempt that failed before
 * output: the policy decides as for a network error (another account, a
 * retry), else the client gets a JSON 502/504 instead of a reset. */
void proxy_plain_cut_unseen(proxy_req *p, up_result r, const char *errmsg)
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
    proxy_send_error(p, r == UP_NETWORK ? 502 : 504, "upstream_error",
                     r == UP_NETWORK ? "upstream_interrupted" : "upstream_timeout", what);
    proxy_finish(p, r == UP_NETWORK ? 502 : 504);
}

/* A 2xx plain answer whose body is an error object, held whole and not
 * relayed yet: classified as an error inside a 2xx answer (in_stream, as
 * for a quota or rate-limit event inside a 200 stream: the policy fails
 * over on those). Returned by the policy, it goes to the client as it
 * came, status included. */
void proxy_plain_error_unseen(proxy_req *p)
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

/* Classifies a clean 2xx end that carried no answer. Returns 1 if the
 * request moved on; else the client gets a 502 (never the empty success). */
int proxy_not_an_answer(proxy_req *p, const char *why)
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
    proxy_send_error(p, 502, "upstream_error", "upstream_empty_answer", summary);
    proxy_finish(p, 502);
    return 1;
}

/* ---------- login refresh ---------- */

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
int proxy_wait_deferred(proxy_req *p)
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

/* ---------- the end of a transfer ---------- */

/* The upstream callback for a transfer's end. A committed answer ends in
 * proxy_finish.c (proxy_done_committed); anything else failed before the
 * client saw it, or carried no answer, and is sorted out here. */
void proxy_up_done(void *ud, up_result r, const char *errmsg)
{
    proxy_req *p = ud;
    p->up = NULL; /* freed by upstream right after this returns */
    if (p->resume_pending) /* the resumed attempt ended before any output of its own */
        return proxy_resume_next(p, r);
    if (p->committed)
        return proxy_done_committed(p, r, errmsg);
    if (r == UP_LOCAL || r == UP_INTERNAL) { /* our shortage, not the account's: no cooldown, no next candidate */
        snprintf(p->error_class, sizeof p->error_class, "%s",
                 r == UP_LOCAL ? "gateway_out_of_descriptors" : "gateway_internal");
        evhttp_add_header(evhttp_request_get_output_headers(p->req), "Retry-After", "1");
        proxy_send_error(p, 503, "server_error", "gateway_overloaded", errmsg ? errmsg : "gateway overloaded");
        return proxy_finish(p, 503);
    }
    if (r != UP_OK) {
        policy_event ev = {0};
        ev.network_error = r == UP_NETWORK;
        ev.timeout = r != UP_NETWORK;
        ev.error_message = errmsg;
        if (proxy_classify_and_route(p, &ev, errmsg ? errmsg : "network error"))
            return;
        proxy_send_error(p, r == UP_NETWORK ? 502 : 504, "upstream_error",
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
        if (moved)
            return;
        /* an upstream without the stored-response calls: the gateway's record answers them */
        if (p->in.response_id[0] && (p->status == 405 || p->status == 501) && proxy_record_reply(p, 0))
            return;
        proxy_reply_upstream_error(p, is_json);
        return;
    }
    if (p->whole && p->mode == MODE_PREFLIGHT && p->pf.state == PF_ERROR) /* the policy returned its error */
        return proxy_whole_done(p);
    /* a 2xx that ended cleanly without being an answer: an empty body, or a
     * stream with no semantic and no terminal event. Never a success. */
    if ((p->mode == MODE_PLAIN && !p->committed && (!p->whole || !p->xwhole.len)) ||
        (p->mode == MODE_PREFLIGHT && p->pf_live && !p->pf.saw_semantic && !p->pf.saw_terminal)) {
        if (proxy_not_an_answer(p, p->mode == MODE_PLAIN ? "empty_body" : "no_output"))
            return;
    }
    if (p->whole) /* the answer the client gets whole: made now */
        return proxy_whole_done(p);
    /* 2xx SSE that ended inside the preflight window */
    if (p->mode == MODE_PREFLIGHT && p->pf_live) {
        preflight_commit(&p->pf);
        proxy_commit(p);
        proxy_flush_held(p, 0);
    }
    proxy_done_committed(p, r, errmsg);
}
