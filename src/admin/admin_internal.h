/* admin_internal.h: what the admin surface's three files share: the
 * listener's context, the handler type, the reply and query helpers
 * (admin_api.c), the reads (admin_reads.c) and the changes
 * (admin_actions.c) that admin_api.c's route table names. Included by
 * those three only; the rest of the tree sees admin_api.h. */
#ifndef SY_ADMIN_INTERNAL_H
#define SY_ADMIN_INTERNAL_H
#include "admin/admin_body.h"
#include "base/sbuf.h"
#include "core/gateway.h"
#include "store/store_admin.h"
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stddef.h>
#include <stdint.h>

/* One per listener: the gateway's (loopback only) or --admin-listen. */
typedef struct admin_ctx {
    gateway *gw;
    int dedicated;
} admin_ctx;

typedef void (*admin_handler)(admin_ctx *ctx, struct evhttp_request *req);

/* --- admin_api.c: replies and small JSON helpers --- */
void admin_send(struct evhttp_request *req, int status, const char *ctype, const char *body, size_t len);
void admin_send_json(struct evhttp_request *req, sbuf *b); /* 200, b freed */
void admin_str(sbuf *b, const char *s);                    /* a JSON string, or null */
void admin_num(sbuf *b, double v);                         /* a JSON number; non-finite: null */
/* 1 when the request's method is want, else answers 405 and returns 0. */
int admin_method(struct evhttp_request *req, enum evhttp_cmd_type want);
void admin_query(struct evhttp_request *req, struct evkeyvalq *q); /* the query string's parameters (caller clears q) */
double admin_qnum(struct evkeyvalq *q, const char *name, double dflt);
int64_t admin_qint(struct evkeyvalq *q, const char *name, int64_t dflt, int64_t lo, int64_t hi);
/* The POST body read for kind; replies 400 and returns -1 if it is refused. The caller frees b either way. */
int admin_body_read(struct evhttp_request *req, admin_body_kind kind, admin_body *b);
/* Logs an admin change (gateway log and trace): who, what, on what. */
void admin_audit(gateway *gw, struct evhttp_request *req, const char *action, const char *target);

/* --- admin_reads.c: GET handlers, and the figures seeded at start --- */
void admin_get_overview(admin_ctx *ctx, struct evhttp_request *req);
void admin_get_accounts(admin_ctx *ctx, struct evhttp_request *req);
void admin_get_keys(admin_ctx *ctx, struct evhttp_request *req);
void admin_get_requests(admin_ctx *ctx, struct evhttp_request *req);
void admin_get_request(admin_ctx *ctx, struct evhttp_request *req);
void admin_get_spend(admin_ctx *ctx, struct evhttp_request *req);
void admin_get_stats(admin_ctx *ctx, struct evhttp_request *req);
void admin_get_timeline(admin_ctx *ctx, struct evhttp_request *req);
void admin_get_policy(admin_ctx *ctx, struct evhttp_request *req);
void admin_get_alerts(admin_ctx *ctx, struct evhttp_request *req);
/* one account as the accounts document lists it (a change answers with it) */
struct pool_account;
void admin_account_json(sbuf *b, const struct pool_account *pa, double now);
/* the chart's last hour and today's spend, read from the request log once at start */
void admin_seed_minute(void *ud, double t, int64_t requests, int64_t failovers, int64_t failed);
void admin_seed_usage(void *ud, const store_usage_group *u);

/* --- admin_actions.c: POST handlers --- */
void admin_post_enable(admin_ctx *ctx, struct evhttp_request *req);
void admin_post_disable(admin_ctx *ctx, struct evhttp_request *req);
void admin_post_reset(admin_ctx *ctx, struct evhttp_request *req);
void admin_post_prefer(admin_ctx *ctx, struct evhttp_request *req);
void admin_post_settings(admin_ctx *ctx, struct evhttp_request *req);
void admin_post_reload(admin_ctx *ctx, struct evhttp_request *req);
void admin_post_alert_test(admin_ctx *ctx, struct evhttp_request *req);
/* Runs a route's handler; a change the writer cannot take yet runs it again later. */
void admin_actions_run(admin_handler fn, admin_ctx *ctx, struct evhttp_request *req);
size_t admin_changes_waiting(void); /* changes waiting for room in the writer's queue */
size_t admin_answers_waiting(void); /* changes made, their answers waiting for the commit */

#endif
