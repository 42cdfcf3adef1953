/* health.h: the /health answer: ok or degraded, with the reasons and the
 * counters behind them (database writes, accounts, policies, connections,
 * request bodies). */
#ifndef SY_HEALTH_H
#define SY_HEALTH_H
#include <event2/http.h>
#include "core/gateway.h"

/* Replies 200 with the JSON document described in docs/architecture.md. */
void health_reply(struct evhttp_request *req, gateway *gw);
/* Notes policy fallbacks as they happen (the 1 s tick calls it), so /health
 * can say whether the built-in default decided recently. */
void health_tick(gateway *gw);

#endif
