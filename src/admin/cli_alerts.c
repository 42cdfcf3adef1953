/* cli_alerts.c: `switchyard alerts` (the events the running gateway
 * raised, newest first, with what became of each: unsent for want of a
 * webhook, suppressed, queued, sent, failed, dropped) and `switchyard
 * alerts test` (posts a test event through the alert policy and waits for
 * the webhook's answer). Both ask the gateway serving the database with
 * the admin token (admin/admin_client.h): alerts live in the gateway. */
#include "admin/admin_client.h"
#include "admin/cli_internal.h"
#include "base/json.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CLI_ALERTS_WAIT_S 30   /* `alerts test`: how long it waits for the webhook's answer */
#define CLI_ALERTS_POLL_MS 250

static void cli_alerts_usage(FILE *f)
{
    fputs("usage: switchyard alerts [--db PATH] [--url URL] [--limit N] [--json]\n"
          "       switchyard alerts test [--db PATH] [--url URL] [--wait SECONDS]\n"
          "  alerts: the events the gateway serving this database raised (newest first, the last 200\n"
          "  since it started) and what became of each: sent, failed (and why), queued, suppressed (the\n"
          "  same went out within alert_dedup_s), unsent (no alert_webhook_url was set)\n"
          "  alerts test: posts a test event through the alert policy and waits (default 30 s) for\n"
          "  the webhook's answer; exit 0 only when the webhook took it\n"
          "  Both use $SWITCHYARD_ADMIN_TOKEN or <db>.admin-token (`switchyard admin token`)\n",
          f);
}

/* The client for db: 0, or -1 after saying why (no gateway, no token;
 * c closed then). */
static int cli_alerts_reach(const char *cmd, const char *db, const char *url, admin_client *c)
{
    if (!url && cli_db_missing(cmd, db))
        return -1;
    admin_client_locate(cli_db_path(db), url, c);
    if (!url && !c->found.answering) {
        char why[700];
        gateway_find_describe(&c->found, why, sizeof why);
        fprintf(stderr, "switchyard %s: alerts live in the running gateway, and %s\n", cmd, why);
        admin_client_close(c);
        return -1;
    }
    if (!c->token[0]) {
        fprintf(stderr,
                "switchyard %s: no admin token ($SWITCHYARD_ADMIN_TOKEN is not set, no %s.admin-token: "
                "`switchyard admin token`)\n",
                cmd, cli_db_path(db));
        admin_client_close(c);
        return -1;
    }
    return 0;
}

static void cli_alerts_when(double at, char *out, size_t n)
{
    time_t t = (time_t)at;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, n, "%Y-%m-%d %H:%M:%S", &tm);
}

static void cli_alerts_line(const json_value *e)
{
    char when[32];
    cli_alerts_when(json_get_num(e, "at", 0), when, sizeof when);
    const char *kind = json_get_str(e, "kind"), *subject = json_get_str(e, "subject"),
               *state = json_get_str(e, "state"), *outcome = json_get_str(e, "outcome"),
               *msg = json_get_str(e, "message"), *detail = json_get_str(e, "detail");
    double count = json_get_num(e, "count", 1);
    char times[48] = "";
    if (count > 1) {
        char last[32];
        cli_alerts_when(json_get_num(e, "last_at", 0), last, sizeof last);
        snprintf(times, sizeof times, " (x%.0f, last %s)", count, last + 11);
    }
    cli_line("%s  %-10s %s (%s%s%s)%s: %s%s%s%s", when, outcome ? outcome : "?", kind ? kind : "?",
             subject ? subject : "", state && *state ? ", " : "", state ? state : "", times, msg ? msg : "",
             detail && *detail ? " [" : "", detail && *detail ? detail : "", detail && *detail ? "]" : "");
}

static int cli_alerts_list(int argc, char **argv)
{
    const char *cmd = "alerts", *db = NULL, *url = NULL, *limit_s = NULL;
    int help = 0, json = 0, limit = 50;
    const cli_opt opts[] = {{"db", &db, NULL},      {"url", &url, NULL},   {"limit", &limit_s, NULL},
                            {"json", NULL, &json}, {"help", NULL, &help}, {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &help, cli_alerts_usage);
    if (rc >= 0)
        return rc;
    if (limit_s && cli_parse_int(cmd, "--limit", limit_s, 1, &limit) != 0)
        return CLI_EXIT_USAGE;
    admin_client c;
    if (cli_alerts_reach(cmd, db, url, &c) != 0)
        return CLI_EXIT_FAIL;
    char path[64], why[512];
    snprintf(path, sizeof path, "/admin/api/alerts?limit=%d", limit > 200 ? 200 : limit);
    sbuf body = SBUF_INIT;
    rc = admin_client_call(&c, "GET", path, 5000, &body, why, sizeof why);
    json_value *doc = rc == 0 ? json_parse(body.p, body.len, NULL, 0) : NULL;
    int out = CLI_EXIT_FAIL;
    if (rc != 0) {
        fprintf(stderr, "switchyard %s: the gateway at %s: %s\n", cmd, c.base, why);
    } else if (!doc) {
        fprintf(stderr, "switchyard %s: the gateway's answer was not JSON\n", cmd);
    } else if (json) {
        fwrite(body.p, 1, body.len, stdout);
        out = CLI_EXIT_OK;
    } else {
        json_value *st = json_get(doc, "stats"), *list = json_get(doc, "alerts");
        cli_line("gateway %s: %s; since start %.0f raised, %.0f sent, %.0f failed, %.0f suppressed, %.0f unsent, "
                 "%.0f queued",
                 c.base,
                 json_get_bool(doc, "webhook", 0) ? "alerts go to the webhook (alert_webhook_url)"
                                                   : "no webhook set (alert_webhook_url): alerts are listed, not sent",
                 json_get_num(st, "raised", 0), json_get_num(st, "sent", 0), json_get_num(st, "failed", 0),
                 json_get_num(st, "suppressed", 0), json_get_num(st, "unsent", 0), json_get_num(st, "queued", 0));
        size_t n = 0;
        for (json_value *e; (e = json_at(list, n)); n++)
            cli_alerts_line(e);
        if (!n)
            cli_line("no alert raised since the gateway started");
        out = CLI_EXIT_OK;
    }
    json_free(doc);
    sbuf_free(&body);
    admin_client_close(&c);
    return out;
}

static int cli_alerts_test(int argc, char **argv)
{
    const char *cmd = "alerts test", *db = NULL, *url = NULL, *wait_s = NULL;
    int help = 0, wait = CLI_ALERTS_WAIT_S;
    const cli_opt opts[] = {{"db", &db, NULL},       {"url", &url, NULL}, {"wait", &wait_s, NULL},
                            {"help", NULL, &help}, {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc, argv, opts, &help, cli_alerts_usage);
    if (rc >= 0)
        return rc;
    if (wait_s && cli_parse_int(cmd, "--wait", wait_s, 0, &wait) != 0)
        return CLI_EXIT_USAGE;
    admin_client c;
    if (cli_alerts_reach(cmd, db, url, &c) != 0)
        return CLI_EXIT_FAIL;
    char why[512], path[64];
    sbuf body = SBUF_INIT;
    rc = admin_client_call(&c, "POST", "/admin/api/alerts/test", 5000, &body, why, sizeof why);
    json_value *doc = rc == 0 ? json_parse(body.p, body.len, NULL, 0) : NULL;
    json_value *e = json_at(json_get(doc, "alerts"), 0);
    int out = CLI_EXIT_FAIL;
    if (rc != 0 || !e) {
        fprintf(stderr, "switchyard %s: the gateway at %s: %s\n", cmd, c.base, rc ? why : "no test event in its answer");
        goto done;
    }
    double id = json_get_num(e, "id", 0);
    snprintf(path, sizeof path, "/admin/api/alerts?id=%.0f", id);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        const char *outcome = json_get_str(e, "outcome");
        if (!outcome || strcmp(outcome, "queued") != 0)
            break;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 >= wait)
            break;
        usleep(CLI_ALERTS_POLL_MS * 1000);
        json_free(doc);
        sbuf_reset(&body);
        doc = admin_client_call(&c, "GET", path, 5000, &body, why, sizeof why) == 0
                  ? json_parse(body.p, body.len, NULL, 0)
                  : NULL;
        if (!(e = json_at(json_get(doc, "alerts"), 0))) {
            fprintf(stderr, "switchyard %s: lost sight of the test event (%s)\n", cmd, doc ? "no longer listed" : why);
            goto done;
        }
    }
    const char *outcome = json_get_str(e, "outcome"), *detail = json_get_str(e, "detail");
    if (strcmp(outcome, "sent") == 0) {
        cli_line("test alert %.0f sent: the webhook took it (HTTP 2xx)", id);
        out = CLI_EXIT_OK;
    } else if (strcmp(outcome, "unsent") == 0) {
        fprintf(stderr,
                "switchyard %s: test alert %.0f not sent: no webhook is set (`switchyard config set "
                "alert_webhook_url URL`, then SIGHUP or restart), or the alert policy posts this event nowhere\n",
                cmd, id);
    } else if (strcmp(outcome, "queued") == 0) {
        fprintf(stderr, "switchyard %s: test alert %.0f not answered within %d s; still being tried "
                        "(`switchyard alerts` shows how it ends)\n",
                cmd, id, wait);
    } else {
        fprintf(stderr, "switchyard %s: test alert %.0f %s: %s\n", cmd, id, outcome,
                detail && *detail ? detail : "no detail");
    }
done:
    json_free(doc);
    sbuf_free(&body);
    admin_client_close(&c);
    return out;
}

int cli_alerts_main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "test") == 0)
        return cli_alerts_test(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "list") == 0)
        return cli_alerts_list(argc - 2, argv + 2);
    return cli_alerts_list(argc - 1, argv + 1);
}
