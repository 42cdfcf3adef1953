/* config.h: the gateway's settings. Defaults are compiled in; environment
 * variables (SWITCHYARD_*) override them and command-line flags override
 * both. See docs/configuration.md. */
#ifndef SY_CONFIG_H
#define SY_CONFIG_H
#include <stddef.h>

typedef struct sy_config {
    char db_path[1024];
    char listen_host[64];
    int listen_port;
    char admin_host[64];       /* --admin-listen: "" = the admin surface is on the gateway listener, loopback only */
    int admin_port;
    char allowed_hosts[512];   /* --allowed-host / SWITCHYARD_ALLOWED_HOSTS: more names for the Host check
                                * (http/host_check.h), comma-separated; "" none */
    char policies_dir[1024];   /* "" = the policies embedded in the binary */
    char redis[1025];          /* --redis / SWITCHYARD_REDIS (core/redis_url.h); "" = nothing shared */
    size_t max_body;           /* client request body limit, bytes */
    long connect_timeout_ms;
    long first_byte_timeout_ms;   /* streamed requests: headers come at once */
    long response_timeout_ms;     /* non-streamed: headers come with the whole answer */
    long idle_timeout_ms;
    long upstream_h2c;         /* 1: http:// upstreams get HTTP/2 by prior knowledge (h2c), streams share connections */
    size_t max_bodies_in_flight; /* bytes of request bodies held at once, all requests together */
    long max_connections;      /* client connections; beyond it new ones get a 503 */
    long max_connections_per_ip; /* client connections from one address (IPv6: one /64); -1 auto, 0 none */
    long per_ip_loopback;      /* 1: loopback clients are held to max_connections_per_ip too */
    long client_idle_timeout_s; /* a client connection reading or writing nothing this long is closed */
    long client_request_timeout_s; /* a request must arrive whole within this of its first byte */
    size_t preflight_bytes;    /* SSE hold window, bytes */
    long ttft_ms;              /* cap on the time-to-first-token limit (the first_token policy's answer) */
    long capacity_wait_ms;     /* how long a request may wait for a cooling account to come back */
    long redis_wait_ms;        /* the longest a request waits for a Redis answer (shared/shared.h) */
    long redis_slot_ttl_s;     /* a concurrency slot not renewed this long is free (its instance died) */
    char shared_limits_fail[8]; /* "open" | "closed": a limit whose pool's word cannot be had (shared/limits_fail.h) */
    char route_strategy[32];   /* "ordered" | "balanced" */
    char rotation[40];         /* key rotation mode */
    long affinity_idle_s;      /* a session unseen this long loses its account */
    long affinity_max;         /* sessions remembered (least recently used go first) */
    long usage_poll_s;         /* chatgpt usage polling interval; 0 off */
    long model_poll_s;         /* accounts' GET {base}/models interval (model_poll.c); 0 off */
    int log_level;
    char oauth_token_url[512];     /* OAuth token endpoint for login refresh */
    /* `account login` (accounts/login_flow.c): the authorization server's
     * authorize page, device-code endpoint and device token endpoint */
    char oauth_authorize_url[512], oauth_device_code_url[512], oauth_device_token_url[512];
    long oauth_refresh_margin_s;   /* refresh this long before the access token expires */
    long oauth_retry_min_s;        /* first wait after a transient refresh failure (doubles) */
    long oauth_retry_max_s;        /* cap of that wait */
    long oauth_timeout_ms;         /* one refresh exchange, whole (a trickling token endpoint) */
    long conversation_max_rows;    /* stored conversation turns kept (store.h retention); 0 records none */
    long conversation_max_bytes;   /* their input and output bytes together; 0 records none */
    long conversation_max_days;    /* turns older than this are deleted */
    long request_log_max_rows;     /* request_logs rows kept (store.h, store_log_limits) */
    long request_log_max_days;     /* request_logs rows older than this are deleted */
    long trace_max_bytes;          /* gateway-trace.log rotates past this size (obs/trace.h) */
    long trace_files;              /* rotated trace files kept beside the live one */
    char alert_webhook_url[1024];  /* alerts go here through the alert policy (obs/alert.h); "" none */
    long alert_dedup_s;            /* the same alert at most once per this many seconds */
    long alert_backoff_ms;         /* first wait before an alert's retry (doubles) */
    int strategy_pinned;       /* set by flag or environment: database settings do not apply */
    int rotation_pinned;
    int affinity_idle_pinned, affinity_max_pinned, usage_poll_pinned;
    int oauth_refresh_margin_pinned, oauth_retry_min_pinned, oauth_retry_max_pinned;
    int conversation_max_rows_pinned, conversation_max_bytes_pinned, conversation_max_days_pinned;
    int request_log_max_rows_pinned, request_log_max_days_pinned, trace_max_bytes_pinned, trace_files_pinned;
    int alert_webhook_url_pinned;
    int shared_limits_fail_pinned;
} sy_config;

void config_defaults(sy_config *c);
/* Applies SWITCHYARD_* environment variables; returns -1 (and logs) on a bad value. */
int config_from_env(sy_config *c);
/* Parses "host:port" (or ":port" / "port") into c; -1 if invalid. */
int config_set_listen(sy_config *c, const char *s);
/* Takes a --redis address after checking it (redis_url_parse); -1 and
 * err (no password in it) if it is no such address. */
int config_set_redis(sy_config *c, const char *s, char *err, size_t n);
/* The database's `redis` setting (switchyard config set redis URL) when
 * neither --redis nor SWITCHYARD_REDIS gave one (they take precedence):
 * 0 (taken, or none), -1 with err (a setting that does not parse: the
 * gateway does not start on it; never quoting its password). */
struct store;
int config_redis_from_store(sy_config *c, struct store *st, char *err, size_t n);
/* The check `config set redis` makes: the address, or NULL (why in err). */
int config_redis_check(const char *s, char *err, size_t n);
/* Parses the admin listen address ("host:port", or "port" for 127.0.0.1). */
int config_set_admin_listen(sy_config *c, const char *s);
/* Adds names (comma-separated) to c->allowed_hosts: each a DNS name
 * (letters, digits, '-', '.', '_'), at most 253 bytes; -1 if one is not
 * or the list is full. */
int config_add_allowed_hosts(sy_config *c, const char *names);
/* Canonical strategy name ("rr"/"round_robin" -> "balanced"); NULL if unknown. */
const char *config_strategy_canonical(const char *s);
/* "open" or "closed" (shared_limits_fail); NULL otherwise. */
const char *config_limits_fail_canonical(const char *s);
/* 1 if s names a rotation mode. */
int config_rotation_valid(const char *s);
/* s if it is a valid value of that numeric setting (a whole number in its
 * range), else NULL. */
const char *config_affinity_idle_canonical(const char *s);
const char *config_affinity_max_canonical(const char *s);
const char *config_usage_poll_canonical(const char *s);
const char *config_oauth_margin_canonical(const char *s); /* oauth_refresh_margin_s: 0..30 days */
const char *config_oauth_retry_canonical(const char *s);  /* oauth_retry_min_s / _max_s: 1 s..7 days */
const char *config_conversation_rows_canonical(const char *s);  /* conversation_max_rows: 0..100000000 */
const char *config_conversation_bytes_canonical(const char *s); /* conversation_max_bytes: 0..2^40 */
const char *config_conversation_days_canonical(const char *s);  /* conversation_max_days: 1..3650 */
const char *config_log_rows_canonical(const char *s);    /* request_log_max_rows: 1000..1000000000 */
const char *config_log_days_canonical(const char *s);    /* request_log_max_days: 1..3650 */
const char *config_trace_bytes_canonical(const char *s); /* trace_max_bytes: 64 KiB..1 TiB */
const char *config_trace_files_canonical(const char *s); /* trace_files: 1..100 */
/* alert_webhook_url: an http:// or https:// URL with a host, no spaces or
 * control bytes, shorter than 1024 bytes. */
const char *config_alert_url_canonical(const char *s);

struct store;
/* Applies the `switchyard config` settings (route_strategy, rotation,
 * affinity_idle_s, affinity_max, usage_poll_s, oauth_refresh_margin_s,
 * oauth_retry_min_s, oauth_retry_max_s, conversation_max_rows,
 * conversation_max_bytes, conversation_max_days, request_log_max_rows,
 * request_log_max_days, trace_max_bytes, trace_files, alert_webhook_url,
 * shared_limits_fail) from
 * the database to the fields no flag or environment variable pinned. Keeps
 * the current value when the database is busy or the value is invalid.
 * Then hands the conversation and request log retention to the store's
 * writer (the trace's rotation is the caller's: serve.c) (the store
 * cannot read the settings itself: it sits below core/). */
void config_from_store(sy_config *c, struct store *st);

#endif
