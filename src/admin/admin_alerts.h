/* admin_alerts.h: the alerts document of /admin/api/alerts (and of the
 * answer to POST /admin/api/alerts/test): the events the gateway listed
 * (obs/alert.h), newest first, with what became of each, the sender's
 * counters and whether a webhook is set. Read by the dashboard's Alerts
 * card and `switchyard alerts`. */
#ifndef SY_ADMIN_ALERTS_H
#define SY_ADMIN_ALERTS_H
#include "base/sbuf.h"
#include "obs/alert.h"
#include <stdint.h>

#define ADMIN_ALERTS_DEFAULT 100

/* Appends {"webhook", "dedup_s", "stats", "alerts": [...]} to b: at most
 * limit events (1..ALERT_LOG_MAX), or id alone when id is not 0. */
void admin_alerts_json(alert_sender *as, double dedup_s, size_t limit, uint64_t id, sbuf *b);

#endif
