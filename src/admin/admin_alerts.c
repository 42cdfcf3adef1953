/* admin_alerts.c: the alerts document (see admin_alerts.h). One event:
 * {id, at, last_at, count, kind, subject, state, message, outcome, detail,
 * posts}; the members are names and one line of text, never a secret
 * (alert texts hold names only; a failed webhook is named by its origin). */
#include "admin/admin_alerts.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void admin_alerts_str(sbuf *b, const char *key, const char *v)
{
    sbuf_printf(b, "\"%s\":", key);
    sbuf_json_str(b, v, strlen(v));
}

static void admin_alerts_entry(sbuf *b, const alert_entry *e)
{
    sbuf_printf(b, "{\"id\":%llu,\"at\":", (unsigned long long)e->id);
    sbuf_put_fixed(b, e->at, 3);
    sbuf_puts(b, ",\"last_at\":");
    sbuf_put_fixed(b, e->last_at, 3);
    sbuf_printf(b, ",\"count\":%u,", e->count);
    admin_alerts_str(b, "kind", e->kind);
    sbuf_puts(b, ",");
    admin_alerts_str(b, "subject", e->subject);
    sbuf_puts(b, ",");
    admin_alerts_str(b, "state", e->state);
    sbuf_puts(b, ",");
    admin_alerts_str(b, "message", e->text);
    sbuf_puts(b, ",");
    admin_alerts_str(b, "outcome", alert_outcome_name(e->outcome));
    sbuf_puts(b, ",");
    admin_alerts_str(b, "detail", e->detail);
    sbuf_printf(b, ",\"posts\":%d}", e->posts);
}

void admin_alerts_json(alert_sender *as, double dedup_s, size_t limit, uint64_t id, sbuf *b)
{
    if (limit < 1 || limit > ALERT_LOG_MAX)
        limit = ALERT_LOG_MAX;
    alert_entry *list = calloc(limit, sizeof *list);
    size_t n = list ? alert_list(as, list, limit, id) : 0;
    alert_stats st;
    alert_stats_get(as, &st);
    sbuf_printf(b, "{\"webhook\":%s,\"dedup_s\":", alert_has_webhook(as) ? "true" : "false");
    sbuf_put_fixed(b, isfinite(dedup_s) ? dedup_s : 0, 0);
    sbuf_printf(b,
                ",\"stats\":{\"raised\":%llu,\"suppressed\":%llu,\"unsent\":%llu,\"sent\":%llu,\"retried\":%llu,"
                "\"failed\":%llu,\"dropped\":%llu,\"queued\":%zu},\"alerts\":[",
                (unsigned long long)st.raised, (unsigned long long)st.suppressed, (unsigned long long)st.unsent,
                (unsigned long long)st.sent, (unsigned long long)st.retried, (unsigned long long)st.failed,
                (unsigned long long)st.dropped, st.queued);
    for (size_t i = 0; i < n; i++) {
        if (i)
            sbuf_puts(b, ",");
        admin_alerts_entry(b, &list[i]);
    }
    sbuf_puts(b, "]}");
    free(list);
}
