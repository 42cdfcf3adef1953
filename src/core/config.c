/* config.c: defaults, environment overrides and validation of settings;
 * the settings stored in the database, and handing the conversation and
 * request log retention to the store's writer. */
#include "core/config.h"
#include "core/redis_url.h"
#include "base/log.h"
#include "store/store.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void config_defaults(sy_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->db_path, sizeof c->db_path, "switchyard.db");
    snprintf(c->listen_host, sizeof c->listen_host, "127.0.0.1");
    c->listen_port = 8787;
    c->max_body = 16u << 20;
    c->max_bodies_in_flight = (size_t)256 << 20;
    c->max_connections = 16384; /* 10 000 long-lived streams and room (docs/architecture.md, "Limits") */
    c->max_connections_per_ip = -1; /* a quarter of the connection cap, at least 256 (server.c) */
    c->per_ip_loopback = 0; /* loopback clients are the user's own (docs/configuration.md) */
    c->client_idle_timeout_s = 30;
    c->client_request_timeout_s = 60;
    c->connect_timeout_ms = 10000;
    c->first_byte_timeout_ms = 60000;
    c->response_timeout_ms = 900000;
    c->idle_timeout_ms = 120000;
    c->preflight_bytes = 64u << 10;
    c->ttft_ms = 600000; /* a cap: the first_token policy decides per request */
    c->capacity_wait_ms = 10000;
    c->redis_wait_ms = 50;
    c->redis_slot_ttl_s = 30;
    snprintf(c->shared_limits_fail, sizeof c->shared_limits_fail, "open");
    snprintf(c->route_strategy, sizeof c->route_strategy, "ordered");
    snprintf(c->rotation, sizeof c->rotation, "hybrid_rotation");
    c->affinity_idle_s = 3600;
    c->affinity_max = 10000;
    c->usage_poll_s = 600;
    c->model_poll_s = 900;
    c->log_level = LOG_INFO;
    snprintf(c->oauth_token_url, sizeof c->oauth_token_url, "https://auth.openai.com/oauth/token");
    snprintf(c->oauth_authorize_url, sizeof c->oauth_authorize_url, "https://auth.openai.com/oauth/authorize");
    snprintf(c->oauth_device_code_url, sizeof c->oauth_device_code_url,
             "https://auth.openai.com/api/accounts/deviceauth/usercode");
    snprintf(c->oauth_device_token_url, sizeof c->oauth_device_token_url,
             "https://auth.openai.com/api/accounts/deviceauth/token");
    c->oauth_refresh_margin_s = 3600;
    c->oauth_retry_min_s = 30;
    c->oauth_retry_max_s = 1800;
    c->oauth_timeout_ms = 20000;
    c->conversation_max_rows = STORE_CONV_MAX_ROWS_DEFAULT;
    c->conversation_max_bytes = STORE_CONV_MAX_BYTES_DEFAULT;
    c->conversation_max_days = STORE_CONV_MAX_DAYS_DEFAULT;
    c->request_log_max_rows = STORE_LOG_MAX_ROWS_DEFAULT;
    c->request_log_max_days = STORE_LOG_MAX_DAYS_DEFAULT;
    c->trace_max_bytes = 64L << 20; /* with 4 files kept: at most 320 MiB of trace on a workstation's disk */
    c->trace_files = 4;
    c->alert_dedup_s = 600;
    c->alert_backoff_ms = 1000;
}

#define CONFIG_AFFINITY_IDLE_RANGE 1, 30L * 86400
#define CONFIG_AFFINITY_MAX_RANGE 1, 1L << 24
#define CONFIG_USAGE_POLL_RANGE 0, 7L * 86400
#define CONFIG_OAUTH_MARGIN_RANGE 0, 30L * 86400
#define CONFIG_OAUTH_RETRY_RANGE 1, 7L * 86400
#define CONFIG_CONV_ROWS_RANGE 0, 100000000L
#define CONFIG_CONV_BYTES_RANGE 0, 1L << 40
#define CONFIG_CONV_DAYS_RANGE 1, 3650
#define CONFIG_LOG_ROWS_RANGE 1000, 1000000000L
#define CONFIG_LOG_DAYS_RANGE 1, 3650
#define CONFIG_TRACE_BYTES_RANGE 1L << 16, 1L << 40
#define CONFIG_TRACE_FILES_RANGE 1, 100

/* s if it is a whole number in [min, max], else NULL. */
static const char *config_int_canonical(const char *s, long min, long max)
{
    char *end;
    long v = strtol(s, &end, 10);
    return *s && !*end && v >= min && v <= max ? s : NULL;
}

const char *config_affinity_idle_canonical(const char *s) { return config_int_canonical(s, CONFIG_AFFINITY_IDLE_RANGE); }
const char *config_affinity_max_canonical(const char *s) { return config_int_canonical(s, CONFIG_AFFINITY_MAX_RANGE); }
const char *config_usage_poll_canonical(const char *s) { return config_int_canonical(s, CONFIG_USAGE_POLL_RANGE); }
const char *config_oauth_margin_canonical(const char *s) { return config_int_canonical(s, CONFIG_OAUTH_MARGIN_RANGE); }
const char *config_oauth_retry_canonical(const char *s) { return config_int_canonical(s, CONFIG_OAUTH_RETRY_RANGE); }
const char *config_conversation_rows_canonical(const char *s) { return config_int_canonical(s, CONFIG_CONV_ROWS_RANGE); }
const char *config_conversation_bytes_canonical(const char *s) { return config_int_canonical(s, CONFIG_CONV_BYTES_RANGE); }
const char *config_conversation_days_canonical(const char *s) { return config_int_canonical(s, CONFIG_CONV_DAYS_RANGE); }
const char *config_log_rows_canonical(const char *s) { return config_int_canonical(s, CONFIG_LOG_ROWS_RANGE); }
const char *config_log_days_canonical(const char *s) { return config_int_canonical(s, CONFIG_LOG_DAYS_RANGE); }
const char *config_trace_bytes_canonical(const char *s) { return config_int_canonical(s, CONFIG_TRACE_BYTES_RANGE); }
const char *config_trace_files_canonical(const char *s) { return config_int_canonical(s, CONFIG_TRACE_FILES_RANGE); }

static int config_num(const char *name, long min, long max, long *out)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < min || n > max) {
        log_error("%s=%s: expected an integer in [%ld, %ld]", name, v, min, max);
        return -1;
    }
    *out = n;
    return 1;
}

const char *config_strategy_canonical(const char *s)
{
    if (strcmp(s, "ordered") == 0)
        return "ordered";
    if (strcmp(s, "balanced") == 0 || strcmp(s, "round_robin") == 0 || strcmp(s, "rr") == 0)
        return "balanced";
    if (strcmp(s, "weighted") == 0)
        return "weighted";
    return NULL;
}

const char *config_limits_fail_canonical(const char *s)
{
    return strcmp(s, "open") == 0 ? "open" : strcmp(s, "closed") == 0 ? "closed" : NULL;
}

int config_rotation_valid(const char *s)
{
    static const char *const modes[] = {"account_rotation", "aggregate_api_rotation", "hybrid_rotation",
                                        "hybrid_aggregate_first_rotation"};
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
        if (strcmp(s, modes[i]) == 0)
            return 1;
    return 0;
}

/* "host:port", ":port" or "port" into host (left as it is when s names
 * none) and *port. -1 if invalid. */
static int config_hostport(const char *s, char *host, size_t hn, int *port)
{
    const char *colon = strrchr(s, ':');
    const char *ps = colon ? colon + 1 : s;
    char *end;
    long p = strtol(ps, &end, 10);
    if (*ps == '\0' || *end || p < 0 || p > 65535)
        return -1;
    if (colon && colon != s) {
        size_t n = (size_t)(colon - s);
        if (n >= hn)
            return -1;
        memcpy(host, s, n);
        host[n] = '\0';
    }
    *port = (int)p;
    return 0;
}

int config_set_listen(sy_config *c, const char *s)
{
    return config_hostport(s, c->listen_host, sizeof c->listen_host, &c->listen_port);
}

int config_set_admin_listen(sy_config *c, const char *s)
{
    snprintf(c->admin_host, sizeof c->admin_host, "127.0.0.1");
    if (config_hostport(s, c->admin_host, sizeof c->admin_host, &c->admin_port) < 0 || c->admin_port == 0) {
        c->admin_host[0] = '\0';
        c->admin_port = 0;
        return -1;
    }
    return 0;
}

int config_add_allowed_hosts(sy_config *c, const char *names)
{
    const char *p = names;
    do {
        size_t n = strcspn(p, ",");
        if (n == 0 || n > 253 || strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._") < n)
            return -1;
        size_t have = strlen(c->allowed_hosts);
        if (have + n + 2 > sizeof c->allowed_hosts)
            return -1;
        snprintf(c->allowed_hosts + have, sizeof c->allowed_hosts - have, "%s%.*s", have ? "," : "", (int)n, p);
        p += n;
    } while (*p++ == ',');
    return 0;
}

static int config_str(const char *name, char *dst, size_t n)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    if (strlen(v) >= n) {
        log_error("%s is too long", name);
        return -1;
    }
    memcpy(dst, v, strlen(v) + 1);
    return 1;
}

int config_set_redis(sy_config *c, const char *s, char *err, size_t n)
{
    redis_url u;
    if (redis_url_parse(s, &u, err, n) != 0)
        return -1;
    memset(u.pass, 0, sizeof u.pass);
    snprintf(c->redis, sizeof c->redis, "%s", s);
    return 0;
}

int config_redis_check(const char *s, char *err, size_t n)
{
    redis_url u;
    int rc = redis_url_parse(s, &u, err, n);
    memset(u.pass, 0, sizeof u.pass);
    return rc;
}

int config_redis_from_store(sy_config *c, struct store *st, char *err, size_t n)
{
    if (c->redis[0])
        return 0; /* the flag or the environment */
    char v[sizeof c->redis];
    int r = store_setting_get(st, "redis", v, sizeof v);
    if (r != 0)
        return 0; /* not set (or the database busy: a lone gateway, as before) */
    char why[256];
    int rc = config_set_redis(c, v, why, sizeof why);
    if (rc != 0)
        snprintf(err, n, "the database's redis setting: %s (switchyard config set redis URL, or unset it)", why);
    else
        log_info("redis: the address is the database's redis setting (no --redis, no SWITCHYARD_REDIS)");
    explicit_bzero(v, sizeof v);
    return rc;
}

int config_from_env(sy_config *c)
{
    long n;
    int bad = 0;
    bad |= config_str("SWITCHYARD_DB", c->db_path, sizeof c->db_path) < 0;
    bad |= config_str("SWITCHYARD_POLICIES", c->policies_dir, sizeof c->policies_dir) < 0;
    bad |= config_str("SWITCHYARD_OAUTH_TOKEN_URL", c->oauth_token_url, sizeof c->oauth_token_url) < 0;
    bad |= config_str("SWITCHYARD_OAUTH_AUTHORIZE_URL", c->oauth_authorize_url, sizeof c->oauth_authorize_url) < 0;
    bad |= config_str("SWITCHYARD_OAUTH_DEVICE_CODE_URL", c->oauth_device_code_url, sizeof c->oauth_device_code_url) < 0;
    bad |= config_str("SWITCHYARD_OAUTH_DEVICE_TOKEN_URL", c->oauth_device_token_url,
                      sizeof c->oauth_device_token_url) < 0;
    const char *redis = getenv("SWITCHYARD_REDIS");
    char rerr[256];
    if (redis && *redis && config_set_redis(c, redis, rerr, sizeof rerr) < 0) {
        log_error("SWITCHYARD_REDIS: %s", rerr); /* the value itself may hold a password */
        bad = 1;
    }
    const char *listen = getenv("SWITCHYARD_LISTEN");
    if (listen && *listen && config_set_listen(c, listen) < 0) {
        log_error("SWITCHYARD_LISTEN=%s: expected host:port", listen);
        bad = 1;
    }
    const char *hosts = getenv("SWITCHYARD_ALLOWED_HOSTS");
    if (hosts && *hosts && config_add_allowed_hosts(c, hosts) < 0) {
        log_error("SWITCHYARD_ALLOWED_HOSTS=%s: expected host names, comma-separated", hosts);
        bad = 1;
    }
    const char *admin = getenv("SWITCHYARD_ADMIN_LISTEN");
    if (admin && *admin && config_set_admin_listen(c, admin) < 0) {
        log_error("SWITCHYARD_ADMIN_LISTEN=%s: expected host:port (port not 0)", admin);
        bad = 1;
    }
    struct { const char *name; long min, max; long *dst_l; size_t *dst_z; int *pinned; } nums[] = {
        {"SWITCHYARD_MAX_BODY", 1, 1L << 30, NULL, &c->max_body, NULL},
        {"SWITCHYARD_MAX_BODIES_IN_FLIGHT", 1, 1L << 40, NULL, &c->max_bodies_in_flight, NULL},
        {"SWITCHYARD_MAX_CONNECTIONS", 1, 1L << 20, &c->max_connections, NULL, NULL},
        {"SWITCHYARD_MAX_CONNECTIONS_PER_IP", 0, 1L << 20, &c->max_connections_per_ip, NULL, NULL},
        {"SWITCHYARD_MAX_CONNECTIONS_PER_IP_LOOPBACK", 0, 1, &c->per_ip_loopback, NULL, NULL},
        {"SWITCHYARD_CLIENT_IDLE_TIMEOUT_S", 1, 86400, &c->client_idle_timeout_s, NULL, NULL},
        {"SWITCHYARD_CLIENT_REQUEST_TIMEOUT_S", 1, 86400, &c->client_request_timeout_s, NULL, NULL},
        {"SWITCHYARD_CONNECT_TIMEOUT_MS", 1, 3600000, &c->connect_timeout_ms, NULL, NULL},
        {"SWITCHYARD_FIRST_BYTE_TIMEOUT_MS", 1, 3600000, &c->first_byte_timeout_ms, NULL, NULL},
        {"SWITCHYARD_RESPONSE_TIMEOUT_MS", 1, 7200000, &c->response_timeout_ms, NULL, NULL},
        {"SWITCHYARD_IDLE_TIMEOUT_MS", 1, 3600000, &c->idle_timeout_ms, NULL, NULL},
        {"SWITCHYARD_UPSTREAM_H2C", 0, 1, &c->upstream_h2c, NULL, NULL},
        {"SWITCHYARD_PREFLIGHT_BYTES", 0, 64L << 20, NULL, &c->preflight_bytes, NULL},
        {"SWITCHYARD_TTFT_MS", 1, 3600000, &c->ttft_ms, NULL, NULL},
        {"SWITCHYARD_CAPACITY_WAIT_MS", 0, 600000, &c->capacity_wait_ms, NULL, NULL},
        {"SWITCHYARD_REDIS_WAIT_MS", 1, 10000, &c->redis_wait_ms, NULL, NULL},
        {"SWITCHYARD_REDIS_SLOT_TTL_S", 3, 3600, &c->redis_slot_ttl_s, NULL, NULL},
        {"SWITCHYARD_AFFINITY_IDLE_S", CONFIG_AFFINITY_IDLE_RANGE, &c->affinity_idle_s, NULL, &c->affinity_idle_pinned},
        {"SWITCHYARD_AFFINITY_MAX", CONFIG_AFFINITY_MAX_RANGE, &c->affinity_max, NULL, &c->affinity_max_pinned},
        {"SWITCHYARD_USAGE_POLL_S", CONFIG_USAGE_POLL_RANGE, &c->usage_poll_s, NULL, &c->usage_poll_pinned},
        {"SWITCHYARD_MODEL_POLL_S", CONFIG_USAGE_POLL_RANGE, &c->model_poll_s, NULL, NULL},
        {"SWITCHYARD_OAUTH_REFRESH_MARGIN_S", CONFIG_OAUTH_MARGIN_RANGE, &c->oauth_refresh_margin_s, NULL,
         &c->oauth_refresh_margin_pinned},
        {"SWITCHYARD_OAUTH_RETRY_MIN_S", CONFIG_OAUTH_RETRY_RANGE, &c->oauth_retry_min_s, NULL, &c->oauth_retry_min_pinned},
        {"SWITCHYARD_OAUTH_RETRY_MAX_S", CONFIG_OAUTH_RETRY_RANGE, &c->oauth_retry_max_s, NULL, &c->oauth_retry_max_pinned},
        {"SWITCHYARD_OAUTH_TIMEOUT_MS", 100, 600000, &c->oauth_timeout_ms, NULL, NULL},
        {"SWITCHYARD_CONVERSATION_MAX_ROWS", CONFIG_CONV_ROWS_RANGE, &c->conversation_max_rows, NULL,
         &c->conversation_max_rows_pinned},
        {"SWITCHYARD_CONVERSATION_MAX_BYTES", CONFIG_CONV_BYTES_RANGE, &c->conversation_max_bytes, NULL,
         &c->conversation_max_bytes_pinned},
        {"SWITCHYARD_CONVERSATION_MAX_DAYS", CONFIG_CONV_DAYS_RANGE, &c->conversation_max_days, NULL,
         &c->conversation_max_days_pinned},
        {"SWITCHYARD_REQUEST_LOG_MAX_ROWS", CONFIG_LOG_ROWS_RANGE, &c->request_log_max_rows, NULL,
         &c->request_log_max_rows_pinned},
        {"SWITCHYARD_REQUEST_LOG_MAX_DAYS", CONFIG_LOG_DAYS_RANGE, &c->request_log_max_days, NULL,
         &c->request_log_max_days_pinned},
        {"SWITCHYARD_TRACE_MAX_BYTES", CONFIG_TRACE_BYTES_RANGE, &c->trace_max_bytes, NULL, &c->trace_max_bytes_pinned},
        {"SWITCHYARD_TRACE_FILES", CONFIG_TRACE_FILES_RANGE, &c->trace_files, NULL, &c->trace_files_pinned},
        {"SWITCHYARD_ALERT_DEDUP_S", 0, 7L * 86400, &c->alert_dedup_s, NULL, NULL},
        {"SWITCHYARD_ALERT_BACKOFF_MS", 1, 600000, &c->alert_backoff_ms, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
        int r = config_num(nums[i].name, nums[i].min, nums[i].max, &n);
        if (r < 0)
            bad = 1;
        else if (r > 0 && nums[i].dst_l)
            *nums[i].dst_l = n;
        else if (r > 0)
            *nums[i].dst_z = (size_t)n;
        if (r > 0 && nums[i].pinned)
            *nums[i].pinned = 1;
    }
    const char *hook = getenv("SWITCHYARD_ALERT_WEBHOOK_URL");
    if (hook && *hook) {
        if (!config_alert_url_canonical(hook)) {
            log_error("SWITCHYARD_ALERT_WEBHOOK_URL: expected an http:// or https:// URL with a host");
            bad = 1;
        } else {
            snprintf(c->alert_webhook_url, sizeof c->alert_webhook_url, "%s", hook);
            c->alert_webhook_url_pinned = 1;
        }
    }
    const char *strat = getenv("SWITCHYARD_ROUTE_STRATEGY");
    if (strat && *strat) {
        const char *canon = config_strategy_canonical(strat);
        if (!canon) {
            log_error("SWITCHYARD_ROUTE_STRATEGY=%s: expected ordered, balanced or weighted", strat);
            bad = 1;
        } else {
            snprintf(c->route_strategy, sizeof c->route_strategy, "%s", canon);
            c->strategy_pinned = 1;
        }
    }
    const char *fail = getenv("SWITCHYARD_SHARED_LIMITS_FAIL");
    if (fail && *fail) {
        const char *canon = config_limits_fail_canonical(fail);
        if (!canon) {
            log_error("SWITCHYARD_SHARED_LIMITS_FAIL=%s: expected open or closed", fail);
            bad = 1;
        } else {
            snprintf(c->shared_limits_fail, sizeof c->shared_limits_fail, "%s", canon);
            c->shared_limits_fail_pinned = 1;
        }
    }
    const char *rot = getenv("SWITCHYARD_ROTATION");
    if (rot && *rot) {
        if (!config_rotation_valid(rot)) {
            log_error("SWITCHYARD_ROTATION=%s: unknown rotation mode", rot);
            bad = 1;
        } else {
            snprintf(c->rotation, sizeof c->rotation, "%s", rot);
            c->rotation_pinned = 1;
        }
    }
    const char *lvl = getenv("SWITCHYARD_LOG_LEVEL");
    if (lvl && *lvl) {
        int l = log_level_parse(lvl);
        if (l < 0) {
            log_error("SWITCHYARD_LOG_LEVEL=%s: expected debug, info, warn or error", lvl);
            bad = 1;
        } else {
            c->log_level = l;
        }
    }
    return bad ? -1 : 0;
}

/* Sets dst to the database setting key, or back to the compiled default
 * when the setting was removed; keeps dst when the database is busy. */
static void config_setting_apply(struct store *st, const char *key, const char *what, const char *dflt, char *dst,
                                 size_t n, const char *(*canon)(const char *))
{
    char v[64];
    int r = store_setting_get(st, key, v, sizeof v);
    if (r < 0)
        return;
    const char *want = r == 0 ? canon(v) : dflt;
    if (!want || strcmp(want, dst) == 0 || strlen(want) >= n)
        return;
    memcpy(dst, want, strlen(want) + 1);
    log_info("%s is now %s (%s)", what, want, r == 0 ? "database setting" : "default");
}

static const char *config_rotation_canonical(const char *s) { return config_rotation_valid(s) ? s : NULL; }

/* The numeric twin of config_setting_apply. */
static void config_setting_apply_num(struct store *st, const char *key, const char *what, long dflt, long *dst,
                                     const char *(*canon)(const char *))
{
    char v[64];
    int r = store_setting_get(st, key, v, sizeof v);
    if (r < 0 || (r == 0 && !canon(v)))
        return;
    long want = r == 0 ? strtol(v, NULL, 10) : dflt;
    if (want == *dst)
        return;
    *dst = want;
    log_info("%s is now %ld (%s)", what, want, r == 0 ? "database setting" : "default");
}

const char *config_alert_url_canonical(const char *s)
{
    size_t skip = strncmp(s, "https://", 8) == 0 ? 8 : strncmp(s, "http://", 7) == 0 ? 7 : 0;
    size_t n = strlen(s);
    if (!skip || n <= skip || n >= sizeof(((sy_config *)0)->alert_webhook_url) || strchr("/?#:@", s[skip]))
        return NULL;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
            return NULL;
    return s;
}

/* alert_webhook_url from the database (longer than config_setting_apply's
 * values); never logged: a webhook URL's path is often its secret. */
static void config_alert_url_apply(sy_config *c, struct store *st)
{
    char v[sizeof c->alert_webhook_url];
    int r = store_setting_get(st, "alert_webhook_url", v, sizeof v);
    if (r < 0 || (r == 0 && !config_alert_url_canonical(v)))
        return;
    const char *want = r == 0 ? v : "";
    if (strcmp(want, c->alert_webhook_url) == 0)
        return;
    snprintf(c->alert_webhook_url, sizeof c->alert_webhook_url, "%s", want);
    log_info("alert webhook %s (database setting)", *want ? "set" : "removed");
}

void config_from_store(sy_config *c, struct store *st)
{
    if (!c->alert_webhook_url_pinned)
        config_alert_url_apply(c, st);
    sy_config d;
    config_defaults(&d);
    if (!c->strategy_pinned)
        config_setting_apply(st, "route_strategy", "route strategy", d.route_strategy, c->route_strategy, sizeof c->route_strategy,
                             config_strategy_canonical);
    if (!c->rotation_pinned)
        config_setting_apply(st, "rotation", "rotation mode", d.rotation, c->rotation, sizeof c->rotation, config_rotation_canonical);
    if (!c->shared_limits_fail_pinned)
        config_setting_apply(st, "shared_limits_fail", "shared_limits_fail (a shared limit Redis cannot check)",
                             d.shared_limits_fail, c->shared_limits_fail, sizeof c->shared_limits_fail,
                             config_limits_fail_canonical);
    if (!c->affinity_idle_pinned)
        config_setting_apply_num(st, "affinity_idle_s", "session affinity idle time (s)", d.affinity_idle_s,
                                 &c->affinity_idle_s, config_affinity_idle_canonical);
    if (!c->affinity_max_pinned)
        config_setting_apply_num(st, "affinity_max", "session affinity table size", d.affinity_max, &c->affinity_max,
                                 config_affinity_max_canonical);
    if (!c->usage_poll_pinned)
        config_setting_apply_num(st, "usage_poll_s", "usage poll interval (s)", d.usage_poll_s, &c->usage_poll_s,
                                 config_usage_poll_canonical);
    if (!c->oauth_refresh_margin_pinned)
        config_setting_apply_num(st, "oauth_refresh_margin_s", "login refresh margin (s)", d.oauth_refresh_margin_s,
                                 &c->oauth_refresh_margin_s, config_oauth_margin_canonical);
    if (!c->oauth_retry_min_pinned)
        config_setting_apply_num(st, "oauth_retry_min_s", "login refresh first retry (s)", d.oauth_retry_min_s,
                                 &c->oauth_retry_min_s, config_oauth_retry_canonical);
    if (!c->oauth_retry_max_pinned)
        config_setting_apply_num(st, "oauth_retry_max_s", "login refresh longest retry (s)", d.oauth_retry_max_s,
                                 &c->oauth_retry_max_s, config_oauth_retry_canonical);
    if (!c->conversation_max_rows_pinned)
        config_setting_apply_num(st, "conversation_max_rows", "stored conversation turns kept", d.conversation_max_rows,
                                 &c->conversation_max_rows, config_conversation_rows_canonical);
    if (!c->conversation_max_bytes_pinned)
        config_setting_apply_num(st, "conversation_max_bytes", "stored conversation bytes kept",
                                 d.conversation_max_bytes, &c->conversation_max_bytes, config_conversation_bytes_canonical);
    if (!c->conversation_max_days_pinned)
        config_setting_apply_num(st, "conversation_max_days", "stored conversation days kept", d.conversation_max_days,
                                 &c->conversation_max_days, config_conversation_days_canonical);
    store_conversation_limits_set(st, &(store_conversation_limits){c->conversation_max_rows, c->conversation_max_bytes,
                                                                   c->conversation_max_days});
    if (!c->request_log_max_rows_pinned)
        config_setting_apply_num(st, "request_log_max_rows", "request log rows kept", d.request_log_max_rows,
                                 &c->request_log_max_rows, config_log_rows_canonical);
    if (!c->request_log_max_days_pinned)
        config_setting_apply_num(st, "request_log_max_days", "request log days kept", d.request_log_max_days,
                                 &c->request_log_max_days, config_log_days_canonical);
    store_log_limits_set(st, &(store_log_limits){c->request_log_max_rows, c->request_log_max_days});
    if (!c->trace_max_bytes_pinned)
        config_setting_apply_num(st, "trace_max_bytes", "trace log size before rotation", d.trace_max_bytes,
                                 &c->trace_max_bytes, config_trace_bytes_canonical);
    if (!c->trace_files_pinned)
        config_setting_apply_num(st, "trace_files", "rotated trace logs kept", d.trace_files, &c->trace_files,
                                 config_trace_files_canonical);
}
