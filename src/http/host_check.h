/* host_check.h: the Host check against DNS rebinding. A page on another
 * site whose name its owner re-points at 127.0.0.1 reaches the gateway from
 * the user's browser with that name in Host, as the same origin as the
 * page. The admin surface (API and dashboard), /metrics and /health's
 * details answer only a Host that is the gateway's own: an IP literal (a
 * browser sends one only for a page loaded from that very address),
 * localhost, the listen and admin listen hosts, and the names given with
 * --allowed-host (SWITCHYARD_ALLOWED_HOSTS). The proxied API (/v1/...)
 * does not look: clients behind proxies send names of their own, and it
 * takes a platform key a rebinding page does not have. docs/operating.md,
 * "Host check". */
#ifndef SY_HOST_CHECK_H
#define SY_HOST_CHECK_H
#include "core/config.h"
#include <event2/http.h>
#include <stddef.h>

/* 1 if host (the Host header's value; NULL when the request has none: a
 * browser always sends one) names this gateway, else 0. */
int host_check_allowed(const sy_config *c, const char *host);
/* host_check_allowed on req's Host header: 1 allowed; else 0 with the
 * message for the 403 (permission_error, host_not_allowed) the caller
 * sends in msg. */
int host_check_request(const sy_config *c, struct evhttp_request *req, char *msg, size_t n);

#endif
