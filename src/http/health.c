/* health.c: /health (see health.h). "degraded" means the gateway still
 * proxies but something needs a look: database writes failing (a full
 * disk; the database file deleted, replaced, made unreadable or
 * truncated under it), no account able to serve, policy hooks falling back to the
 * built-in default. The fields of the first version (status, accounts,
 * active_requests, policy) keep their meaning. */
#include "http/health.h"
#include "route/pool.h"
#include "policy/policy.h"
#include "store/store.h"
#include "http/conn_limit.h"
#include "base/log.h"
#include "obs/trace.h"
#include "route/router.h"
#include "shared/shared.h"
#include "base/sbuf.h"
#include "http/host_check.h"
#include <event2/keyvalq_struct.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>

#define HEALTH_FALLBACK_WINDOW_S 60.0 /* a fallback this recent makes the gateway degraded */

void health_tick(gateway *gw)
{
    uint64_t gen = policy_generation(gw->policy), n = policy_fallbacks(gw->policy);
    if (gen != gw->fb_gen) { /* the first tick or a reload: the new engine counts from 0 */
        gw->fb_gen = gen;
        gw->fb_seen = 0;
    }
    if (n != gw->fb_seen) {
        gw->fb_seen = n;
        gw->fb_at = gateway_now();
    }
}

/* Appends a reason: a JSON string in the reasons array. */
static void health_reason(sbuf *r, const char *text)
{
    if (r->len)
        sbuf_puts(r, ",");
    sbuf_json_str(r, text, strlen(text));
}

static void health_accounts(gateway *gw, sbuf *reasons, size_t *usable_out)
{
    double now = gateway_now(), soonest = 0;
    size_t n = pool_count(gw->pool), usable = 0, disabled = 0, logins = 0, held = 0, resting = 0;
    for (size_t i = 0; i < n; i++) {
        pool_account *pa = pool_at(gw->pool, i);
        double back = router_rest_until(pa, now);
        if (!pa->a.enabled)
            disabled++;
        else if (pa->a.login_error)
            logins++;
        else if (pa->a.hold)
            held++;
        else if (back > now) {
            resting++;
            if (!soonest || back - now < soonest)
                soonest = back - now;
        } else
            usable++;
    }
    *usable_out = usable;
    if (usable)
        return;
    char msg[320];
    if (!n)
        snprintf(msg, sizeof msg, "no account can serve: there are no accounts (add one with 'switchyard account add')");
    else if (disabled == n)
        snprintf(msg, sizeof msg, "no account can serve: all %zu accounts are disabled", n);
    else {
        int k = snprintf(msg, sizeof msg,
                         "no account can serve: %zu disabled, %zu needing a new login, %zu held until an operator "
                         "acts (see switchyard account list), %zu cooling down, with an open breaker or at a local "
                         "rate limit",
                         disabled, logins, held, resting);
        if (resting && k > 0 && (size_t)k < sizeof msg)
            snprintf(msg + k, sizeof msg - (size_t)k, " (the first is back in %.0fs)", soonest);
    }
    health_reason(reasons, msg);
}

/* The whole document: the reasons and the counters behind them. */
static void health_details(gateway *gw, sbuf *b, const sbuf *reasons, size_t usable, const store_writer_stats *ws,
                           int shared_down)
{
    conn_limit_stats cs;
    conn_limit_stats_get(gw->conns, &cs);
    sbuf_printf(b, "{\"status\":\"%s\",\"accounts\":%zu,\"active_requests\":%zu,\"policy\":",
                reasons->len ? "degraded" : "ok", pool_count(gw->pool), gw->active);
    const char *src = policy_source(gw->policy);
    sbuf_json_str(b, src, strlen(src));
    sbuf_printf(b, ",\"reasons\":[%s]", reasons->len ? reasons->p : "");
    sbuf_printf(b, ",\"usable_accounts\":%zu", usable);
    sbuf_printf(b, ",\"store\":{\"writes_failing\":%s,\"failed_commits\":%llu,\"pending_logs\":%zu,"
                    "\"dropped_logs\":%llu,\"last_error\":",
                ws->failing ? "true" : "false", (unsigned long long)ws->failed_commits, ws->pending_logs,
                (unsigned long long)ws->dropped_logs);
    sbuf_json_str(b, ws->last_error, strlen(ws->last_error));
    sbuf_puts(b, ",\"file_problem\":");
    sbuf_json_str(b, ws->file_problem, strlen(ws->file_problem));
    sbuf_printf(b, "},\"shared\":{\"kind\":\"%s\",\"reachable\":%s}", shared_kind(gw->shared),
                shared_down ? "false" : "true");
    sbuf_printf(b, ",\"disk\":{\"db_bytes\":%lld,\"wal_bytes\":%lld,\"trace_bytes\":%lld,\"free_bytes\":%lld}",
                ws->db_bytes, ws->wal_bytes, trace_bytes(gw->trace), ws->disk_free_bytes);
    sbuf_printf(b, ",\"policy_fallbacks\":%llu", (unsigned long long)policy_fallbacks(gw->policy));
    sbuf_printf(b, ",\"connections\":{\"open\":%zu,\"cap\":%zu,\"refused\":%llu,\"accept_pauses\":%llu,"
                    "\"refused_out_of_descriptors\":%llu,\"slow_requests_closed\":%llu,\"accepting\":%s,"
                    "\"descriptor_limit\":%ld,\"per_ip_cap\":%zu,\"refused_per_ip\":%llu}",
                cs.open, cs.cap, (unsigned long long)cs.refused, (unsigned long long)cs.accept_pauses,
                (unsigned long long)cs.fd_refused, (unsigned long long)cs.slow_requests_closed,
                cs.paused ? "false" : "true", cs.nofile, cs.per_ip_cap, (unsigned long long)cs.refused_per_ip);
    sbuf_printf(b, ",\"request_bodies\":{\"bytes_in_flight\":%zu,\"bytes_reserved\":%zu,\"bytes_receiving\":%zu,"
                    "\"budget\":%zu,\"refused\":%llu}",
                gw->body_bytes - gw->body_reserved, gw->body_reserved, cs.bytes_receiving,
                gw->cfg.max_bodies_in_flight,
                (unsigned long long)(gw->refused_bodies + cs.bodies_refused));
    sbuf_printf(b, ",\"log_lines_suppressed\":%lu,\"instance\":\"%s\"}\n", log_suppressed(), gw->instance);
}

void health_reply(struct evhttp_request *req, gateway *gw)
{
    sbuf reasons = SBUF_INIT, b = SBUF_INIT;
    store_writer_stats ws;
    store_writer_stats_get(gw->st, &ws);
    if (ws.failing) {
        char msg[256];
        snprintf(msg, sizeof msg, "database writes failing, retried and kept in memory meanwhile: %s", ws.last_error);
        health_reason(&reasons, msg);
    }
    if (ws.file_problem[0]) /* requests still work, but what they write may be lost */
        health_reason(&reasons, ws.file_problem);
    char shared_why[512];
    int shared_state = shared_degraded(gw->shared, shared_why, sizeof shared_why);
    int shared_down = shared_state == 1; /* 2: reachable, but slower than a request waits */
    if (shared_state) /* serving on, on this instance's own state: the others' rests are not heard */
        health_reason(&reasons, shared_why);
    size_t usable;
    health_accounts(gw, &reasons, &usable);
    double since = gw->fb_at ? gateway_now() - gw->fb_at : -1;
    if (since >= 0 && since < HEALTH_FALLBACK_WINDOW_S) {
        char msg[320];
        snprintf(msg, sizeof msg, "policy hooks fell back to the built-in default %.0fs ago (%llu times since the last load): %s",
                 since, (unsigned long long)gw->fb_seen, policy_last_error(gw->policy));
        health_reason(&reasons, msg);
    }
    /* a Host that is not the gateway's own (DNS rebinding, host_check.h)
     * learns whether it is up, nothing about the pool */
    if (host_check_allowed(&gw->cfg, evhttp_find_header(evhttp_request_get_input_headers(req), "Host")))
        health_details(gw, &b, &reasons, usable, &ws, shared_down);
    else
        sbuf_printf(&b, "{\"status\":\"%s\"}\n", reasons.len ? "degraded" : "ok");

    struct evbuffer *out = evbuffer_new();
    evbuffer_add(out, b.p, b.len);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, 200, "OK", out);
    evbuffer_free(out);
    sbuf_free(&b);
    sbuf_free(&reasons);
}
