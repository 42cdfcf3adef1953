/* rate_event.c: codex.rate_limits events in the pool's numbers (see
 * rate_event.h). */
#include "route/rate_event.h"
#include "base/json.h"
#include "base/sse.h"
#include "upstream/usage.h"
#include <math.h>
#include <string.h>

#define RATE_EVENT_TYPE "codex.rate_limits"

/* 1 when the event is about the main limit: Codex takes the limit from
 * metered_limit_name, else limit_name (absent or null: "codex"), spelled as
 * usage_family_name spells it. Anything else (a family, a name that is no
 * limit id, a value of another type, which Codex refuses) is not. */
static int rate_event_main_limit(const json_value *doc)
{
    const char *keys[] = {"metered_limit_name", "limit_name"};
    for (size_t i = 0; i < 2; i++) {
        const json_value *v = json_get(doc, keys[i]);
        if (!v || v->type == JSON_NULL)
            continue;
        char fam[32];
        return v->type == JSON_STRING && usage_family_name(v->str, v->str_len, fam, sizeof fam) &&
               strcmp(fam, "codex") == 0;
    }
    return 1;
}

/* One window as the event spells it; the figures rounded as the
 * x-codex-<which>-* headers round them (proxy_relay.c). */
static void rate_event_window(sbuf *out, const pool_window *w, double now)
{
    if (!w->known) {
        sbuf_puts(out, "null");
        return;
    }
    sbuf_printf(out, "{\"used_percent\":%.0f", floor(w->used_pct + 0.5));
    if (w->window_s > 0)
        sbuf_printf(out, ",\"window_minutes\":%.0f", floor(w->window_s / 60 + 0.5));
    if (w->reset_at > now)
        sbuf_printf(out, ",\"reset_after_seconds\":%.0f,\"reset_at\":%.0f", ceil(w->reset_at - now),
                    ceil(w->reset_at));
    sbuf_puts(out, "}");
}

int rate_event_rewrite(const char *data, size_t len, const pool_usage *u, double now, sbuf *out)
{
    if (!u || (!u->primary.known && !u->secondary.known) || !memmem(data, len, RATE_EVENT_TYPE, 17))
        return 0;
    static const char *const keys[] = {"type", "metered_limit_name", "limit_name"};
    json_value *doc = json_parse_members(data, len, 1, keys, 3);
    size_t start, end;
    int ok = doc && doc->type == JSON_OBJECT && json_get_str(doc, "type") &&
             strcmp(json_get_str(doc, "type"), RATE_EVENT_TYPE) == 0 && rate_event_main_limit(doc) &&
             json_member_span(data, len, "rate_limits", &start, &end) == 0;
    json_free(doc);
    if (!ok)
        return 0;
    int spent = pool_usage_spent(u);
    sbuf_append(out, data, start);
    sbuf_printf(out, "{\"allowed\":%s,\"limit_reached\":%s,\"primary\":", spent ? "false" : "true",
                spent ? "true" : "false");
    rate_event_window(out, &u->primary, now);
    sbuf_puts(out, ",\"secondary\":");
    rate_event_window(out, &u->secondary, now);
    sbuf_puts(out, "}");
    sbuf_append(out, data + end, len - end);
    return 1;
}

typedef struct rate_event_ctx {
    const pool_usage *u;
    double now;
} rate_event_ctx;

static int rate_event_one(void *ud, const char *data, size_t len, sbuf *ev)
{
    const rate_event_ctx *c = ud;
    return rate_event_rewrite(data, len, c->u, c->now, ev);
}

int rate_event_rewrite_sse(const char *buf, size_t n, const pool_usage *u, double now, sbuf *out)
{
    rate_event_ctx c = {u, now};
    return sse_rewrite_data(buf, n, rate_event_one, &c, out);
}
