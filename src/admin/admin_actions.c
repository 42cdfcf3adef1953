/* admin_actions.c: the admin API's changes (admin_internal.h): enable,
 * disable or reset an account, a key's preferred account, the strategy and
 * rotation, a policy reload, a test alert. A change applies to the running
 * gateway at once and reaches the database through the store's writer; its
 * answer waits for the commit (200 means written; 202 past 10 s), and a
 * change the writer's queue cannot take yet waits its turn and runs again. */
#include "admin/admin_api.h"
#include "admin/admin_internal.h"
#include "shared/shared.h"
#include "accounts/account_poll.h"
#include "admin/admin_alerts.h"
#include "admin/admin_body.h"
#include "accounts/signin.h"
#include "route/pool.h"
#include "policy/policy.h"
#include "store/store.h"
#include "obs/alert.h"
#include "obs/trace.h"
#include "route/account_limits.h"
#include "route/breaker.h"
#include "route/hold.h"
#include "base/embedded.h"
#include "base/json.h"
#include "base/log.h"
#include "obs/metrics.h"
#include "http/server.h"
#include "http/host_check.h"
#include "http/ws.h"
#include "base/sha256.h"
#include "store/store_admin.h"
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/* ---------- actions ---------- */


/* ---------- answers that wait for the commit ---------- */

/* An acknowledged change is a written one (issue 33: a disable answered
 * 200 and then `kill -9` within 20 ms came back enabled). A change's
 * answer waits until the writer has committed everything queued when it
 * was made (the change and the state it saved), usually the writer's group
 * window, a few ms; the timer looks every ADMIN_DURABLE_POLL_US. Past
 * ADMIN_DURABLE_S (a stalled disk) the answer is 202 with "written":false:
 * the running gateway has the change, the database not yet. */
#define ADMIN_DURABLE_MAX 256
#define ADMIN_DURABLE_S 10.0
#define ADMIN_DURABLE_POLL_US 2000

typedef struct admin_durable_reply {
    struct evhttp_request *req;
    sbuf body;
    uint64_t ticket;
    double deadline;
} admin_durable_reply;

static struct {
    admin_durable_reply q[ADMIN_DURABLE_MAX];
    size_t n;
    struct event timer;
    int timer_ready;
    store *st;
} admin_durable;

static void admin_durable_run(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what, (void)arg;
    uint64_t done = store_writer_committed(admin_durable.st);
    double now = gateway_now();
    size_t keep = 0;
    for (size_t i = 0; i < admin_durable.n; i++) {
        admin_durable_reply *r = &admin_durable.q[i];
        if (done >= r->ticket) {
            admin_send_json(r->req, &r->body);
        } else if (now >= r->deadline) {
            sbuf_free(&r->body);
            static const char late[] =
                "{\"ok\":true,\"written\":false,\"message\":\"applied to the running gateway; not yet written to the "
                "database (its writer is behind): a restart before it is written loses it\"}\n";
            admin_send(r->req, 202, "application/json", late, sizeof late - 1);
        } else {
            admin_durable.q[keep++] = *r;
        }
    }
    admin_durable.n = keep;
    struct timeval tv = {0, ADMIN_DURABLE_POLL_US};
    if (admin_durable.n)
        evtimer_add(&admin_durable.timer, &tv);
}

size_t admin_answers_waiting(void) { return admin_durable.n; }

/* b (a change's 200 answer) sent once what was queued by now is committed. */
static void admin_send_durable(admin_ctx *ctx, struct evhttp_request *req, sbuf *b)
{
    store *st = ctx->gw->st;
    uint64_t ticket = store_writer_queued(st);
    if (!ticket || store_writer_committed(st) >= ticket || admin_durable.n == ADMIN_DURABLE_MAX) {
        admin_send_json(req, b); /* no writer (nothing to wait for), already written, or too many waiting */
        return;
    }
    if (!admin_durable.timer_ready) {
        evtimer_assign(&admin_durable.timer, ctx->gw->base, admin_durable_run, NULL);
        admin_durable.timer_ready = 1;
    }
    admin_durable.st = st;
    admin_durable.q[admin_durable.n++] = (admin_durable_reply){req, *b, ticket, gateway_now() + ADMIN_DURABLE_S};
    *b = (sbuf)SBUF_INIT;
    struct timeval tv = {0, ADMIN_DURABLE_POLL_US};
    if (!evtimer_pending(&admin_durable.timer, NULL))
        evtimer_add(&admin_durable.timer, &tv);
}

/* ---------- changes that wait for the writer ---------- */

/* A change the writer's queue cannot take now (STORE_OPS_MAX changes
 * already waiting for a commit: many dashboards or scripts saving at once)
 * waits here instead of an immediate 503, and its handler runs again from
 * the start, in arrival order, after the writer's next commits. Nothing is
 * applied before the queue takes a request's changes, so running a handler
 * again is safe. 503 writer_busy only past ADMIN_WAIT_MAX waiting requests
 * or ADMIN_WAIT_S of waiting. A request whose client went away meanwhile is
 * answered into the void (libevent frees it). */
#define ADMIN_WAIT_MAX 256
#define ADMIN_WAIT_S 10.0
#define ADMIN_WAIT_POLL_US 5000

typedef struct admin_waiter {
    admin_ctx *ctx;
    struct evhttp_request *req;
    admin_handler fn;
    double deadline;
} admin_waiter;

static struct {
    admin_waiter q[ADMIN_WAIT_MAX]; /* a ring, oldest at head */
    size_t head, n;
    struct event timer;
    int timer_ready;
    admin_handler running; /* the handler being run, to run it again */
    int retry;             /* running a waiter again: a full queue keeps it in its place */
    int still_full;
} admin_wait;

size_t admin_changes_waiting(void) { return admin_wait.n; }

static void admin_busy(struct evhttp_request *req)
{
    server_send_error(req, 503, "server_error", "writer_busy", "too many changes are waiting to be written; retry");
}

static void admin_wait_run(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what, (void)arg;
    double now = gateway_now();
    while (admin_wait.n) {
        admin_waiter w = admin_wait.q[admin_wait.head];
        if (now < w.deadline) {
            admin_wait.retry = 1;
            admin_wait.still_full = 0;
            admin_wait.running = w.fn;
            w.fn(w.ctx, w.req);
            admin_wait.retry = 0;
            admin_wait.running = NULL;
            if (admin_wait.still_full)
                break;
        } else {
            admin_busy(w.req);
        }
        admin_wait.head = (admin_wait.head + 1) % ADMIN_WAIT_MAX;
        admin_wait.n--;
    }
    struct timeval tv = {0, ADMIN_WAIT_POLL_US};
    if (admin_wait.n)
        evtimer_add(&admin_wait.timer, &tv);
}

/* Queues ops[0..n) all or none: 1 queued (the caller applies them to the
 * running gateway now); 0 not (the request waits, or was answered 503). */
static int admin_queue(admin_ctx *ctx, struct evhttp_request *req, const store_admin_op *ops, size_t n)
{
    gateway *gw = ctx->gw;
    if (admin_wait.retry) {
        if (store_writer_put_admin_ops(gw->st, ops, n) == 0)
            return 1;
        admin_wait.still_full = 1;
        return 0;
    }
    /* behind earlier waiters, never ahead of them: the last change sent is the last applied */
    if (!admin_wait.n && store_writer_put_admin_ops(gw->st, ops, n) == 0)
        return 1;
    if (!admin_wait.running || admin_wait.n == ADMIN_WAIT_MAX) {
        admin_busy(req);
        return 0;
    }
    if (!admin_wait.timer_ready) {
        evtimer_assign(&admin_wait.timer, gw->base, admin_wait_run, NULL);
        admin_wait.timer_ready = 1;
    }
    admin_wait.q[(admin_wait.head + admin_wait.n++) % ADMIN_WAIT_MAX] =
        (admin_waiter){ctx, req, admin_wait.running, gateway_now() + ADMIN_WAIT_S};
    struct timeval tv = {0, ADMIN_WAIT_POLL_US};
    if (!evtimer_pending(&admin_wait.timer, NULL))
        evtimer_add(&admin_wait.timer, &tv);
    return 0;
}

/* The account the body's "account" names (a name, or an id as a number). */
static pool_account *admin_body_account(gateway *gw, struct evhttp_request *req, const admin_ref *r)
{
    pool_account *pa = NULL;
    if (r->invalid || r->kind == ADMIN_REF_NULL) {
        server_send_error(req, 400, "invalid_request_error", "invalid_value", ADMIN_BODY_ACCOUNT_MSG);
        return NULL;
    }
    if (r->kind == ADMIN_REF_NAME) {
        for (size_t i = 0; i < pool_count(gw->pool) && !pa; i++)
            if (strcmp(pool_at(gw->pool, i)->a.name, r->name) == 0)
                pa = pool_at(gw->pool, i);
    } else if (r->kind == ADMIN_REF_ID) {
        pa = pool_find(gw->pool, r->id);
    }
    if (!pa)
        server_send_error(req, 404, "invalid_request_error", "unknown_account", "no such account");
    return pa;
}

typedef enum { ADMIN_ENABLE, ADMIN_DISABLE, ADMIN_RESET } admin_account_action;

static void admin_post_account(admin_ctx *ctx, struct evhttp_request *req, admin_account_action act)
{
    gateway *gw = ctx->gw;
    admin_body body;
    pool_account *pa = admin_body_read(req, ADMIN_BODY_ACCOUNT, &body) == 0 ? admin_body_account(gw, req, &body.account)
                                                                             : NULL;
    admin_body_free(&body);
    if (!pa)
        return;
    if (act == ADMIN_RESET) {
        if (pa->a.hold) { /* written as `account reset` does: a reload, a restart find it cleared */
            store_admin_op op = {.kind = STORE_OP_ACCOUNT_UNHOLD, .id = pa->a.id};
            if (!admin_queue(ctx, req, &op, 1))
                return;
            free(pa->a.hold);
            free(pa->a.hold_detail);
            pa->a.hold = pa->a.hold_detail = NULL;
            pa->a.hold_since = 0;
        }
        pool_account_reset(pa);
        pa->st.updated_at = gateway_now();
        pool_state_save(gw->pool, pa);
        admin_audit(gw, req, "reset_cooldown", pa->a.name);
    } else {
        store_admin_op op = {.kind = STORE_OP_ACCOUNT_ENABLED, .id = pa->a.id, .value = act == ADMIN_ENABLE};
        if (!admin_queue(ctx, req, &op, 1))
            return;
        pa->a.enabled = act == ADMIN_ENABLE;
        admin_audit(gw, req, act == ADMIN_ENABLE ? "enable" : "disable", pa->a.name);
    }
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"ok\":true,\"account\":");
    admin_account_json(&b, pa, gateway_now());
    sbuf_puts(&b, "}");
    admin_send_durable(ctx, req, &b);
}

void admin_post_enable(admin_ctx *ctx, struct evhttp_request *req) { admin_post_account(ctx, req, ADMIN_ENABLE); }
void admin_post_disable(admin_ctx *ctx, struct evhttp_request *req) { admin_post_account(ctx, req, ADMIN_DISABLE); }
void admin_post_reset(admin_ctx *ctx, struct evhttp_request *req) { admin_post_account(ctx, req, ADMIN_RESET); }

/* {"key": id, "account": name | id | null}: null clears the preference. */
void admin_post_prefer(admin_ctx *ctx, struct evhttp_request *req)
{
    gateway *gw = ctx->gw;
    admin_body body;
    if (admin_body_read(req, ADMIN_BODY_PREFER, &body) != 0) {
        admin_body_free(&body);
        return;
    }
    const admin_ref *kr = &body.key; /* an id too large for one names no key */
    platform_key *key = NULL;
    for (size_t i = 0; kr->kind != ADMIN_REF_NONE && i < pool_key_count(gw->pool); i++) {
        platform_key *k = pool_key_at(gw->pool, i);
        if ((kr->kind == ADMIN_REF_ID && k->id == kr->id) || (kr->kind == ADMIN_REF_NAME && strcmp(k->name, kr->name) == 0)) {
            key = k;
            break;
        }
    }
    pool_account *pa = NULL;
    if (!key) {
        server_send_error(req, 404, "invalid_request_error", "unknown_key", "no such platform key ('key': id or name)");
    } else if (body.account.kind != ADMIN_REF_NULL) {
        pa = admin_body_account(gw, req, &body.account);
        if (!pa) {
            admin_body_free(&body);
            return;
        }
    }
    admin_body_free(&body);
    if (!key)
        return;
    store_admin_op op = {.kind = STORE_OP_KEY_PREFERRED, .id = key->id, .value = pa ? pa->a.id : 0};
    if (!admin_queue(ctx, req, &op, 1))
        return;
    key->preferred_account_id = pa ? pa->a.id : 0;
    char target[200];
    snprintf(target, sizeof target, "key %s -> %s", key->name, pa ? pa->a.name : "(none)");
    admin_audit(gw, req, "prefer", target);
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"ok\":true}");
    admin_send_durable(ctx, req, &b);
}

/* {"strategy": "...", "rotation": "..."} (either or both). */
void admin_post_settings(admin_ctx *ctx, struct evhttp_request *req)
{
    gateway *gw = ctx->gw;
    admin_body body;
    if (admin_body_read(req, ADMIN_BODY_SETTINGS, &body) != 0) {
        admin_body_free(&body);
        return;
    }
    const char *canon = body.strategy, *rotation = body.rotation;
    store_admin_op ops[2];
    size_t n = 0;
    if (canon) {
        ops[n] = (store_admin_op){.kind = STORE_OP_SETTING};
        snprintf(ops[n].key, sizeof ops[n].key, "route_strategy");
        snprintf(ops[n].text, sizeof ops[n].text, "%s", canon);
        n++;
    }
    if (rotation) {
        ops[n] = (store_admin_op){.kind = STORE_OP_SETTING};
        snprintf(ops[n].key, sizeof ops[n].key, "rotation");
        snprintf(ops[n].text, sizeof ops[n].text, "%s", rotation);
        n++;
    }
    /* all or nothing: both settings go in one writer transaction, or neither
     * is queued; the running gateway follows once the queue took them */
    if (!admin_queue(ctx, req, ops, n)) {
        admin_body_free(&body);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char target[128];
        snprintf(target, sizeof target, "%s=%s", ops[i].key, ops[i].text);
        admin_audit(gw, req, "set", target);
    }
    /* the running gateway follows at once, pinned or not; a flag or
     * environment variable wins again at the next start (the reply says so) */
    if (canon)
        snprintf(gw->cfg.route_strategy, sizeof gw->cfg.route_strategy, "%s", canon);
    if (rotation)
        snprintf(gw->cfg.rotation, sizeof gw->cfg.rotation, "%s", rotation);
    admin_body_free(&body);
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"ok\":true,\"strategy\":");
    admin_str(&b, gw->cfg.route_strategy);
    sbuf_puts(&b, ",\"rotation\":");
    admin_str(&b, gw->cfg.rotation);
    sbuf_printf(&b, ",\"strategy_pinned\":%s,\"rotation_pinned\":%s}", gw->cfg.strategy_pinned ? "true" : "false",
                gw->cfg.rotation_pinned ? "true" : "false");
    admin_send_durable(ctx, req, &b);
}

void admin_post_reload(admin_ctx *ctx, struct evhttp_request *req)
{
    gateway *gw = ctx->gw;
    admin_audit(gw, req, "reload_policies", policy_source(gw->policy));
    if (gw->reload_policies(gw, "admin") != 0) {
        char msg[700];
        snprintf(msg, sizeof msg, "policy reload refused, the previous policy keeps serving: %s", gw->policy_reload_error);
        return server_send_error(req, 422, "invalid_request_error", "policy_reload_failed", msg);
    }
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "{\"ok\":true,\"source\":");
    admin_str(&b, policy_source(gw->policy));
    sbuf_puts(&b, "}");
    admin_send_json(req, &b);
}

/* POST /admin/api/alerts/test: raises a test event (never deduplicated)
 * and answers the document of it alone; its outcome is "queued" until
 * the webhook answers (GET ?id= to follow), "unsent" with no webhook. */
void admin_post_alert_test(admin_ctx *ctx, struct evhttp_request *req)
{
    gateway *gw = ctx->gw;
    if (!gw->alerts)
        return server_send_error(req, 503, "server_error", "alerts_unavailable", "the alert sender is not running");
    admin_audit(gw, req, "alert_test", "operator");
    uint64_t id = alert_test(gw->alerts, gw->policy, gateway_now());
    sbuf b = SBUF_INIT;
    admin_alerts_json(gw->alerts, (double)gw->cfg.alert_dedup_s, 1, id, &b);
    admin_send_json(req, &b);
}

void admin_actions_run(admin_handler fn, admin_ctx *ctx, struct evhttp_request *req)
{
    admin_wait.running = fn; /* a change that must wait runs this handler again */
    fn(ctx, req);
    admin_wait.running = NULL;
}
