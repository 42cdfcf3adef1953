/* serve.c: start-up, signals, periodic pool refresh and shutdown of the
 * gateway (see serve.h). */
#include "core/service_notify.h"
#include "serve.h"
#include "codex/codex_attach.h"
#include "core/gateway.h"
#include "obs/alert.h"
#include "obs/metrics.h"
#include "route/pool.h"
#include "policy/policy.h"
#include "store/store.h"
#include "store/store_runfile.h"
#include "store/store_backup.h"
#include "obs/trace.h"
#include "upstream/upstream.h"
#include "route/affinity.h"
#include "http/conn_limit.h"
#include "http/health.h"
#include "base/log.h"
#include "admin/admin_api.h"
#include "accounts/oauth.h"
#include "proxy/proxy.h"
#include "http/server.h"
#include "shared/shared.h"
#include "shared/shared_redis.h"
#include "shared/shared_config.h"
#include "shared/shared_once.h"
#include "base/seal.h"
#include "shared/shared_limits.h"
#include "route/spend.h"
#include "accounts/account_poll.h"
#include <curl/curl.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <arpa/inet.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void serve_usage(FILE *f)
{
    fprintf(f, "usage: switchyard serve [--db PATH] [--listen HOST:PORT] [--policies DIR]\n"
               "                        [--strategy ordered|balanced|weighted] [--rotation MODE] [--log-level LEVEL]\n"
               "                        [--codex-attach [CODEX_HOME]] [--admin-listen HOST:PORT] [--allowed-host NAME]...\n"
               "                        [--redis URL]\n"
               "  --codex-attach points Codex at this gateway once it listens and hands config.toml\n"
               "  back on SIGTERM/SIGINT (the home defaults to $CODEX_HOME, else ~/.codex)\n"
               "  --admin-listen serves the dashboard, admin API and /metrics there instead of on the\n"
               "  gateway listener (where they answer loopback clients only)\n"
               "  --allowed-host NAME is one more name clients may use in Host for the admin surface,\n"
               "  /metrics and /health's details (IP addresses, localhost and the listen hosts always work)\n");
}

/* What serve does with Codex: attach (when set) to codex_home ("" = the default). */
typedef struct serve_codex {
    int attach;
    const char *home;
} serve_codex;

static int serve_parse(sy_config *c, serve_codex *cx, int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},       {"listen", required_argument, 0, 'l'},
        {"policies", required_argument, 0, 'p'}, {"strategy", required_argument, 0, 's'},
        {"rotation", required_argument, 0, 'r'}, {"log-level", required_argument, 0, 'v'},
        {"codex-attach", optional_argument, 0, 'c'},
        {"admin-listen", required_argument, 0, 'a'},
        {"allowed-host", required_argument, 0, 'H'},
        {"redis", required_argument, 0, 'R'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0},
    };
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            cx->attach = 1;
            cx->home = optarg;
            /* --codex-attach DIR as well as --codex-attach=DIR */
            if (!optarg && optind < argc && argv[optind][0] != '-')
                cx->home = argv[optind++];
            break;
        case 'd': snprintf(c->db_path, sizeof c->db_path, "%s", optarg); break;
        case 'a':
            if (config_set_admin_listen(c, optarg) < 0) {
                fprintf(stderr, "switchyard serve: --admin-listen %s: expected HOST:PORT (port not 0)\n", optarg);
                return -1;
            }
            break;
        case 'H':
            if (config_add_allowed_hosts(c, optarg) < 0) {
                fprintf(stderr, "switchyard serve: --allowed-host %s: expected a host name (letters, digits, '-', '.')\n",
                        optarg);
                return -1;
            }
            break;
        case 'p': snprintf(c->policies_dir, sizeof c->policies_dir, "%s", optarg); break;
        case 'R': {
            char err[256];
            if (config_set_redis(c, optarg, err, sizeof err) < 0) {
                fprintf(stderr, "switchyard serve: --redis: %s\n", err); /* not the value: it may hold a password */
                return -1;
            }
            break;
        }
        case 'l':
            if (config_set_listen(c, optarg) < 0) {
                fprintf(stderr, "switchyard serve: --listen %s: expected HOST:PORT\n", optarg);
                return -1;
            }
            break;
        case 's': {
            const char *canon = config_strategy_canonical(optarg);
            if (!canon) {
                fprintf(stderr, "switchyard serve: --strategy %s: expected ordered, balanced or weighted\n", optarg);
                return -1;
            }
            snprintf(c->route_strategy, sizeof c->route_strategy, "%s", canon);
            c->strategy_pinned = 1;
            break;
        }
        case 'r':
            if (!config_rotation_valid(optarg)) {
                fprintf(stderr, "switchyard serve: --rotation %s: unknown mode\n", optarg);
                return -1;
            }
            snprintf(c->rotation, sizeof c->rotation, "%s", optarg);
            c->rotation_pinned = 1;
            break;
        case 'v':
            if ((c->log_level = log_level_parse(optarg)) < 0) {
                fprintf(stderr, "switchyard serve: --log-level %s: expected debug, info, warn or error\n", optarg);
                return -1;
            }
            break;
        case 'h': serve_usage(stdout); exit(0);
        default: serve_usage(stderr); return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "switchyard serve: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return 0;
}

/* gw->reload_policies (core/gateway.h says what it promises): a reload
 * comes from SIGHUP here and from the admin API. */
static int serve_reload_policies(gateway *gw, const char *who)
{
    const char *dir = gw->cfg.policies_dir[0] ? gw->cfg.policies_dir : NULL;
    char err[512];
    policy_engine *fresh = policy_new(dir, err, sizeof err);
    gw->policy_reload_at = gateway_now();
    gw->policy_reload_ok = fresh != NULL;
    metrics_policy_reload(fresh != NULL);
    if (!fresh) {
        snprintf(gw->policy_reload_error, sizeof gw->policy_reload_error, "%s", err);
        log_error("%s: policy reload refused, the previous policy keeps serving: %s", who, err);
        return -1;
    }
    gw->policy_reload_error[0] = '\0';
    gw->policy_fallbacks_retired += policy_fallbacks(gw->policy);
    policy_free(gw->policy);
    gw->policy = fresh;
    gw->policy_loaded_at = gw->policy_reload_at;
    spend_judge_all(gw->pool, gw->policy, gw->policy_reload_at); /* the budget rule may have changed */
    log_info("%s: policies reloaded from %s", who, policy_source(fresh));
    return 0;
}

/* SIGHUP, SIGTERM and SIGINT are held (blocked, so one that comes stays
 * pending) from the first thing serve does until the loop's handlers for
 * them exist, and again from the end of the loop to the exit: a reload in
 * the first milliseconds of start-up must not kill the gateway (the
 * default action of SIGHUP), and a stop signal after the loop must not
 * kill it before the writer has committed every queued request log. The
 * threads started meanwhile (the writer, the trace) inherit the mask, so
 * the signals only ever reach the loop's thread. */
static void serve_hold_signals(int hold)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(hold ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

/* At the very end, with everything committed: the handlers are gone (the
 * loop's events freed), and a late signal is ignored rather than taken by
 * a thread curl started while they were unblocked. */
static void serve_ignore_signals(void)
{
    signal(SIGHUP, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
}

static void serve_on_sighup(evutil_socket_t sig, short what, void *arg)
{
    serve_reload_policies(arg, "SIGHUP");
}

/* Nothing left to wait for before exiting: no request in progress, no
 * login refresh in flight (its answer may be the only copy of a rotated
 * refresh token), no answer still being written to its client. */
static int serve_quiet(gateway *gw)
{
    return gw->active == 0 && !oauth_busy(gw->oauth) && conn_limit_unfinished(gw->conns) == 0;
}

/* The first stop signal drains: no new work, the requests in progress
 * finish. A second one hurries: the loop ends now, the requests still in
 * progress end as their clients' connections close (each with its log
 * row), and the exit still waits for the writer to commit every queued row
 * (serve_close); further signals change nothing (serve_hold_signals). */
static void serve_on_stop(evutil_socket_t sig, short what, void *arg)
{
    gateway *gw = arg;
    if (gw->draining) {
        log_warn("second stop signal: closing the connections in progress now; queued request logs are still "
                 "committed before the exit");
        event_base_loopbreak(gw->base);
        return;
    }
    gw->draining = 1;
    service_notify("STOPPING=1");
    oauth_drain(gw->oauth); /* a refresh in flight gets a short while, not its whole deadline */
    if (serve_quiet(gw)) {
        event_base_loopexit(gw->base, NULL);
        return;
    }
    log_info("stopping: waiting for %zu request(s) in progress and %zu answer(s) being sent", gw->active,
             conn_limit_unfinished(gw->conns));
}

/* Settings changed: the affinity table follows its idle time at once; a
 * new size starts a new table (sessions re-learn their account on their
 * next turn). */
static void serve_settings_changed(gateway *gw)
{
    config_from_store(&gw->cfg, gw->st);
    trace_rotation(gw->trace, gw->cfg.trace_max_bytes, (int)gw->cfg.trace_files);
    alert_set_webhook(gw->alerts, gw->cfg.alert_webhook_url);
    affinity_set_idle(gw->affinity, (double)gw->cfg.affinity_idle_s);
    if ((size_t)gw->cfg.affinity_max != gw->affinity_max) {
        affinity_free(gw->affinity);
        gw->affinity = affinity_new((size_t)gw->cfg.affinity_max, (double)gw->cfg.affinity_idle_s);
        gw->affinity_max = (size_t)gw->cfg.affinity_max;
    }
}

/* Free heap left after the last malloc_trim (loop thread only). */
static size_t serve_free_after_trim;

/* 1 when the heap holds SERVE_TRIM_SLACK more free bytes than after the
 * last trim. A burst (thousands of streams each with an event waiting for
 * its client while the loop catches up, a ramp of new streams) leaves free
 * pages between the live allocations that glibc keeps: with 10 000 streams
 * open that was ~6 MiB of RSS (docs/performance.md, "Long-lived streams").
 * Measured against what the last trim could not give back, so memory in
 * holes smaller than a page does not trim every second. */
#define SERVE_TRIM_SLACK ((size_t)4 << 20)
/* Only looked at while SERVE_TRIM_CROWD requests or more are in flight and
 * for SERVE_TRIM_AFTER ticks after (their end frees the most): mallinfo2
 * walks malloc's free lists, which is nothing once a second but would be
 * counted against every request by bench/instructions.sh, where callgrind
 * makes a second last a few requests. */
#define SERVE_TRIM_CROWD 1000
#define SERVE_TRIM_AFTER 10
static int serve_trim_ticks;
static int serve_heap_slack(const gateway *gw)
{
    if (gw->active >= SERVE_TRIM_CROWD)
        serve_trim_ticks = SERVE_TRIM_AFTER;
    if (!serve_trim_ticks)
        return 0;
    serve_trim_ticks--;
    return mallinfo2().fordblks > serve_free_after_trim + SERVE_TRIM_SLACK;
}

/* The database degraded (writes failing, a problem with its file): an
 * alert when it starts (the writer keeps retrying; /health says it too). */
static void serve_alert_store(gateway *gw)
{
    static int was_failing;
    static char was_problem[192];
    store_writer_stats ws;
    store_writer_stats_get(gw->st, &ws);
    if (ws.failing && !was_failing)
        alert_raise(gw->alerts, gw->policy, "db_degraded", "database", "writes_failing", gateway_now(),
                    "database writes are failing (retried, kept in memory meanwhile): %s", ws.last_error);
    if (ws.file_problem[0] && strcmp(ws.file_problem, was_problem) != 0)
        alert_raise(gw->alerts, gw->policy, "db_degraded", "database", "file_problem", gateway_now(),
                    "the database file: %s", ws.file_problem);
    was_failing = ws.failing;
    snprintf(was_problem, sizeof was_problem, "%s", ws.file_problem);
}

static void serve_on_tick(evutil_socket_t fd, short what, void *arg)
{
    gateway *gw = arg;
    if (pool_refresh(gw->pool)) {
        serve_settings_changed(gw);
        admin_token_load(gw);
        spend_judge_all(gw->pool, gw->policy, gateway_now()); /* a budget may have changed */
    }
    account_poll_tick(gw->polls, gateway_now());
    health_tick(gw);
    serve_alert_store(gw);
    oauth_tick(gw->oauth);
    if (serve_heap_slack(gw) || gw->trim_due) { /* hand freed pages back (a few ms at most, once a second) */
        gw->trim_due = 0;
        malloc_trim(0);
        serve_free_after_trim = mallinfo2().fordblks;
    }
    if (gw->draining && serve_quiet(gw))
        event_base_loopexit(gw->base, NULL);
}

/* libevent's own warnings ("Error from accept() call", ...) go through our
 * log, and so through its rate limit. */
static void serve_on_libevent_log(int severity, const char *msg)
{
    int level = severity == EVENT_LOG_DEBUG ? LOG_DEBUG
                : severity == EVENT_LOG_MSG ? LOG_INFO
                : severity == EVENT_LOG_WARN ? LOG_WARN
                                             : LOG_ERROR;
    log_msg(level, "libevent: %s", msg);
}

/* The run file beside the database (store/store_runfile.h): which gateway
 * serves it, so `status` and `codex attach` find this one. */
static void serve_runfile_write(gateway *gw)
{
    store_runfile r;
    char err[512] = "";
    memset(&r, 0, sizeof r);
    r.pid = (long)getpid();
    codex_gateway_url(gw->cfg.listen_host, gw->cfg.listen_port, r.url, sizeof r.url);
    if (gw->cfg.admin_port)
        codex_gateway_url(gw->cfg.admin_host, gw->cfg.admin_port, r.admin_url, sizeof r.admin_url);
    snprintf(r.instance, sizeof r.instance, "%s", gw->instance);
    r.started_at = gw->started_at;
    if (store_runfile_write(gw->cfg.db_path, &r, err, sizeof err) != 0)
        log_warn("cannot record the listen address beside the database (status and codex attach will not find "
                 "this gateway): %s", err);
}

static void serve_log_listen(gateway *gw)
{
    log_info("switchyard listening on http://%s:%d (db %s, policies %s, strategy %s, %zu accounts)",
             gw->cfg.listen_host, gw->cfg.listen_port, gw->cfg.db_path, policy_source(gw->policy),
             gw->cfg.route_strategy, pool_count(gw->pool));
}

/* After each upstream read: a stream's new bytes and a finished plain
 * answer go to their client now, not after the rest of the loop turn (64
 * answers arriving together no longer each wait for all 64 to be read). */
static void serve_after_upstream_io(void *arg)
{
    proxy_flush_pending();
    server_flush_pending();
}

/* A refreshed login's quota windows, read with the new token. */
static void serve_poll_after_refresh(void *arg, int64_t account_id)
{
    gateway *gw = arg;
    account_poll_soon(gw->polls, account_id);
}

#define SERVE_RESTORE_WAIT_S 30.0 /* a restore copies and checks one file: seconds */

/* What this gateway shares with the others of its pool: through Redis
 * with --redis (connecting in the background: it serves on its own state
 * until the link is up), else nothing (shared/shared.h). */
static shared_config *serve_shared_config;
static shared_once *serve_shared_once;
static shared_limits *serve_shared_limits;
static int serve_shared_open(gateway *gw)
{
    redis_url u;
    char err[512];
    /* --redis, then SWITCHYARD_REDIS (both in cfg.redis already), then the database's setting */
    if (config_redis_from_store(&gw->cfg, gw->st, err, sizeof err) != 0) {
        log_error("%s", err);
        return -1;
    }
    if (gw->cfg.redis[0] && redis_url_parse(gw->cfg.redis, &u, err, sizeof err) != 0) {
        log_error("--redis: %s", err);
        return -1;
    }
    unsigned char key[SEAL_KEY_LEN];
    const char *key_text = getenv("SWITCHYARD_REDIS_KEY");
    int has_key = key_text && *key_text;
    if (has_key && seal_key_parse(key_text, key, err, sizeof err) != 0) {
        log_error("SWITCHYARD_REDIS_KEY: %s", err);
        return -1;
    }
    /* logins sealed by default off this machine: a Redis reached over the
     * network without a key would carry every account's tokens in clear */
    const char *plain = getenv("SWITCHYARD_REDIS_PLAINTEXT");
    if (gw->cfg.redis[0] && !has_key && !redis_url_is_local(&u) && !(plain && strcmp(plain, "1") == 0)) {
        char where[400];
        redis_url_describe(&u, where, sizeof where);
        memset(u.pass, 0, sizeof u.pass);
        log_error("redis: %s is not on this machine, and SWITCHYARD_REDIS_KEY is not set: the pool's logins (access "
                  "and refresh tokens) would cross the network and rest there in clear text. Set "
                  "SWITCHYARD_REDIS_KEY on every instance (`openssl rand -hex 32`), or SWITCHYARD_REDIS_PLAINTEXT=1 "
                  "to accept clear text (a private network you trust); docs/scale-out.md, \"Logins encrypted\"",
                  where);
        return -1;
    }
    gw->shared = gw->cfg.redis[0] ? shared_redis_new(gw, &u) : shared_local_new(gw);
    memset(u.pass, 0, sizeof u.pass);
    if (!gw->shared) {
        log_error("cannot set up the shared state: out of memory");
        return -1;
    }
    if (has_key && gw->cfg.redis[0]) {
        shared_redis_set_key(gw->shared, key);
        log_info("redis: logins and accounts are encrypted in the pool (SWITCHYARD_REDIS_KEY)");
    } else if (has_key) {
        log_info("SWITCHYARD_REDIS_KEY is set but no Redis is: nothing to encrypt");
    }
    explicit_bzero(key, sizeof key);
    shared_attach(gw->shared);
    serve_shared_config = shared_config_new(gw); /* accounts, keys and settings: with Redis only */
    serve_shared_once = shared_once_new(gw);     /* usage numbers and the layout: with Redis only */
    serve_shared_limits = shared_limits_new(gw);  /* rate limits and budgets: with Redis only */
    return 0;
}

static int serve_open(gateway *gw)
{
    char err[512];
    gw->reload_policies = serve_reload_policies;
    if (store_random_base62(gw->instance, sizeof gw->instance - 1) != 0)
        snprintf(gw->instance, sizeof gw->instance, "pid%ld", (long)getpid());
    gw->instance[sizeof gw->instance - 1] = '\0';
    /* held until the process ends: `switchyard restore` refuses while it is,
     * and a restore in progress is waited for before the database opens */
    if (store_serving_lock(gw->cfg.db_path, SERVE_RESTORE_WAIT_S, err, sizeof err) < 0) {
        log_error("%s", err); /* names the database (or its lock file) and the cause */
        return -1;
    }
    gw->st = store_open(gw->cfg.db_path, err, sizeof err);
    if (!gw->st) {
        log_error("%s", err); /* the store's message names the database and the cause */
        return -1;
    }
    if (store_writer_start(gw->st, err, sizeof err) != 0) {
        log_error("cannot start the database writer: %s", err);
        return -1;
    }
    gw->pool = pool_new(gw->st);
    config_from_store(&gw->cfg, gw->st);
    if (serve_shared_open(gw) != 0)
        return -1;
    gw->affinity = affinity_new((size_t)gw->cfg.affinity_max, (double)gw->cfg.affinity_idle_s);
    gw->affinity_max = (size_t)gw->cfg.affinity_max;
    gw->policy = policy_new(gw->cfg.policies_dir[0] ? gw->cfg.policies_dir : NULL, err, sizeof err);
    if (!gw->policy) {
        log_error("cannot load policies: %s", err);
        return -1;
    }
    spend_judge_all(gw->pool, gw->policy, gateway_now()); /* budgets loaded with the pool, judged by this policy */
    char tpath[1100];
    trace_path_for_db(gw->cfg.db_path, tpath, sizeof tpath);
    gw->trace = trace_open(tpath);
    trace_rotation(gw->trace, gw->cfg.trace_max_bytes, (int)gw->cfg.trace_files);
    alert_config acfg = {(double)gw->cfg.alert_dedup_s, gw->cfg.alert_backoff_ms, ALERT_RETRIES, ALERT_TIMEOUT_MS,
                         ALERT_QUEUE_MAX};
    gw->alerts = alert_new(&acfg);
    alert_set_webhook(gw->alerts, gw->cfg.alert_webhook_url);
    upstream_limits lim = {gw->cfg.connect_timeout_ms, gw->cfg.first_byte_timeout_ms, gw->cfg.idle_timeout_ms,
                           (int)gw->cfg.upstream_h2c};
    gw->up = upstream_new(gw->base, &lim);
    if (gw->up)
        upstream_set_after_io(gw->up, serve_after_upstream_io, gw);
    gw->chunk = evbuffer_new();
    gw->polls = account_poll_new(gw);
    gw->oauth = oauth_new(gw);
    oauth_on_refreshed(gw->oauth, serve_poll_after_refresh, gw);
    oauth_tick(gw->oauth); /* logins that expired while the gateway was down refresh now */
    gw->started_at = gw->policy_loaded_at = gateway_now();
    admin_token_load(gw);
    if (server_start(gw, proxy_start) != 0 || admin_start(gw) != 0)
        return -1;
    account_poll_tick(gw->polls, gateway_now()); /* at start: the first polls go out now */
    return 0;
}

/* Logs each line of a codex report. */
static void serve_codex_log(sbuf *report)
{
    char *save = NULL;
    for (char *line = report->p ? strtok_r(report->p, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save))
        log_info("codex: %s", line);
}

/* Finishes or rolls back what a killed attach or detach left, for every
 * Codex home with an unfinished journal (start-up, before the loop). */
static void serve_codex_recover(gateway *gw)
{
    sbuf report = SBUF_INIT;
    if (codex_recover_all(gw->st, &report) != 0)
        log_warn("codex: recovery of an interrupted attach or detach failed");
    serve_codex_log(&report);
    sbuf_free(&report);
}

/* Attaches (attach = 1) or detaches Codex at home; logs the result. */
static int serve_codex_run(gateway *gw, const char *home, int attach)
{
    char err[1024] = "", url[600];
    sbuf report = SBUF_INIT;
    int rc;
    if (attach) {
        codex_gateway_url(gw->cfg.listen_host, gw->cfg.listen_port, url, sizeof url);
        rc = codex_attach(gw->st, home, url, &report, err, sizeof err);
        pool_refresh(gw->pool); /* the attach's platform key is valid from the first request */
    } else {
        rc = codex_detach(gw->st, home, 0, &report, err, sizeof err);
    }
    serve_codex_log(&report);
    if (rc != 0)
        log_error("codex: %s %s: %s", attach ? "attach to" : "detach from", home, err);
    sbuf_free(&report);
    return rc;
}

static void serve_close(gateway *gw)
{
    /* a forced exit (a second stop signal), or answers still being sent:
     * their clients must not take a cut answer for a whole one */
    conn_limit_reset_unfinished(gw->conns);
    server_stop();
    if (gw->http)
        evhttp_free(gw->http);
    oauth_free(gw->oauth);
    alert_free(gw->alerts); /* a webhook POST in flight is aborted; queued alerts are dropped */
    gw->alerts = NULL;
    shared_config_free(serve_shared_config);
    serve_shared_config = NULL;
    shared_once_free(serve_shared_once);
    serve_shared_once = NULL;
    account_poll_free(gw->polls); /* cancels the polls in flight and the leases it asked for */
    gw->polls = NULL;
    shared_limits_free(serve_shared_limits);
    serve_shared_limits = NULL;
    shared_free(gw->shared); /* after oauth (which cancels what it asked), before the pool */
    if (gw->admin_http)
        evhttp_free(gw->admin_http);
    admin_stop(gw);
    conn_limit_free(gw->conns);
    upstream_free(gw->up);
    if (gw->chunk)
        evbuffer_free(gw->chunk);
    trace_close(gw->trace);
    policy_free(gw->policy);
    pool_free(gw->pool);
    affinity_free(gw->affinity);
    store_close(gw->st); /* drains the writer: every queued log is committed */
}

int serve_main(int argc, char **argv)
{
    static gateway gw;
    serve_hold_signals(1); /* first: until the loop's handlers exist */
    serve_codex cx = {0};
    char codex_home[PATH_MAX] = "", err[512] = "";
    config_defaults(&gw.cfg);
    if (config_from_env(&gw.cfg) < 0 || serve_parse(&gw.cfg, &cx, argc, argv) < 0)
        return 2;
    if (cx.attach && codex_home_resolve(cx.home, 1, codex_home, sizeof codex_home, err, sizeof err) != 0) {
        fprintf(stderr, "switchyard serve: --codex-attach: %s\n", err);
        return 2;
    }
    log_set_level(gw.cfg.log_level);
    signal(SIGPIPE, SIG_IGN);
    event_set_log_callback(serve_on_libevent_log);
    /* A fixed threshold: glibc would otherwise raise it to the size of each
     * freed large block, and the next 16 MiB bodies would come from (and stay
     * in) the heap instead of being mapped and unmapped. */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    srandom((unsigned)time(NULL) ^ (unsigned)getpid());
    /* the epoll changelist merges the add/del pairs that evhttp and curl
     * make within one loop turn into at most one epoll_ctl per fd */
    struct event_config *ec = event_config_new();
    event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    gw.base = event_base_new_with_config(ec);
    event_config_free(ec);
    int rc = 1;
    if (serve_open(&gw) == 0 &&
        (serve_codex_recover(&gw), !cx.attach || serve_codex_run(&gw, codex_home, 1) == 0)) {
        struct event *hup = evsignal_new(gw.base, SIGHUP, serve_on_sighup, &gw);
        struct event *term = evsignal_new(gw.base, SIGTERM, serve_on_stop, &gw);
        struct event *intr = evsignal_new(gw.base, SIGINT, serve_on_stop, &gw);
        struct event *tick = event_new(gw.base, -1, EV_PERSIST, serve_on_tick, &gw);
        struct timeval sec = {1, 0};
        evsignal_add(hup, NULL);
        evsignal_add(term, NULL);
        evsignal_add(intr, NULL);
        event_add(tick, &sec);
        serve_runfile_write(&gw);
        serve_log_listen(&gw);
        serve_hold_signals(0); /* one that came during start-up is handled now */
        service_notify("READY=1"); /* systemd (Type=notify) sends a reload only from now on */
        event_base_dispatch(gw.base);
        serve_hold_signals(1);
        if (cx.attach) /* Codex must not be left pointing at a stopped gateway */
            serve_codex_run(&gw, codex_home, 0);
        if (store_runfile_stopped(gw.cfg.db_path, gw.instance, gateway_now(), err, sizeof err) != 0)
            log_warn("cannot mark the gateway stopped beside the database: %s", err);
        log_info("stopped");
        event_free(tick);
        rc = 0;
        serve_close(&gw);
        /* freed only now: freeing restores the default actions, which
         * would kill a gateway still committing */
        event_free(hup), event_free(term), event_free(intr);
    } else {
        serve_close(&gw);
    }
    serve_ignore_signals();
    event_base_free(gw.base);
    curl_global_cleanup();
    return rc;
}
