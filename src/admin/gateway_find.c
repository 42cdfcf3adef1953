/* gateway_find.c: finding the gateway that serves a database (see
 * gateway_find.h). */
#include "admin/gateway_find.h"
#include "base/json.h"
#include "base/sbuf.h"
#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#define GATEWAY_FIND_BODY_MAX 65536

static size_t gateway_find_write(char *p, size_t size, size_t n, void *ud)
{
    sbuf *b = ud;
    if (b->len + size * n > GATEWAY_FIND_BODY_MAX)
        return 0; /* not a /health answer: stop reading */
    sbuf_append(b, p, size * n);
    return size * n;
}

int gateway_find_probe(const char *url, long timeout_ms, char *instance, size_t in, char *why, size_t whylen)
{
    if (instance && in)
        instance[0] = '\0';
    char u[STORE_RUNFILE_URL_MAX + 16];
    snprintf(u, sizeof u, "%s/health", url);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(why, whylen, "curl unavailable");
        curl_global_cleanup();
        return -1;
    }
    sbuf body = SBUF_INIT;
    curl_easy_setopt(c, CURLOPT_URL, u);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, gateway_find_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*"); /* the gateway is reached directly, never through $http_proxy */
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    int ok = -1;
    if (rc != CURLE_OK) {
        snprintf(why, whylen, "%s", curl_easy_strerror(rc));
    } else if (status != 200) {
        snprintf(why, whylen, "%s answered HTTP %ld, not a gateway's /health", u, status);
    } else {
        json_value *doc = json_parse(body.p ? body.p : "", body.len, NULL, 0);
        if (doc && doc->type == JSON_OBJECT && json_get_str(doc, "status")) {
            ok = 0;
            const char *inst = json_get_str(doc, "instance");
            if (instance && in)
                snprintf(instance, in, "%s", inst ? inst : "");
        } else {
            snprintf(why, whylen, "%s answered, but not as a switchyard gateway", u);
        }
        json_free(doc);
    }
    sbuf_free(&body);
    curl_easy_cleanup(c);
    curl_global_cleanup();
    return ok;
}

static size_t gateway_find_keep(char *p, size_t size, size_t n, void *ud)
{
    if (ud)
        sbuf_append(ud, p, size * n);
    return size * n;
}

long gateway_find_call(const char *method, const char *url, const char *token, long timeout_ms, sbuf *body,
                       char *why, size_t whylen)
{
    sbuf auth = SBUF_INIT;
    if (token)
        sbuf_printf(&auth, "Authorization: Bearer %s", token);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *c = curl_easy_init();
    struct curl_slist *h = c && token ? curl_slist_append(NULL, auth.p) : NULL;
    long status = 0;
    if (c && (h || !token)) {
        curl_easy_setopt(c, CURLOPT_URL, url);
        if (h)
            curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        if (strcmp(method, "POST") == 0) {
            curl_easy_setopt(c, CURLOPT_POST, 1L);
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{}");
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 2L);
        }
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, gateway_find_keep);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_NOPROXY, "*"); /* as the probe: the gateway is reached directly */
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        CURLcode rc = curl_easy_perform(c);
        if (rc == CURLE_OK)
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        else
            snprintf(why, whylen, "%s", curl_easy_strerror(rc));
    } else {
        snprintf(why, whylen, "curl unavailable");
    }
    curl_slist_free_all(h);
    if (c)
        curl_easy_cleanup(c);
    curl_global_cleanup();
    sbuf_secret_wipe(&auth);
    return status;
}

long gateway_find_key_check(const char *url, const char *key, char *why, size_t whylen)
{
    char u[STORE_RUNFILE_URL_MAX + 16];
    snprintf(u, sizeof u, "%s/v1/models", url);
    return gateway_find_call("GET", u, key, GATEWAY_FIND_TIMEOUT_MS, NULL, why, whylen);
}

void gateway_find(const char *db_path, gateway_found *out)
{
    memset(out, 0, sizeof *out);
    char err[512] = "";
    int rc = store_runfile_read(db_path, &out->rf, err, sizeof err);
    if (rc <= 0) {
        snprintf(out->why, sizeof out->why, "%.280s", rc < 0 ? err : "no gateway has served it yet");
        return;
    }
    out->recorded = 1;
    if (out->rf.stopped_at > 0) {
        snprintf(out->why, sizeof out->why, "it stopped");
        return;
    }
    if (kill((pid_t)out->rf.pid, 0) != 0 && errno == ESRCH) {
        snprintf(out->why, sizeof out->why, "its process is gone");
        return;
    }
    char inst[64], why[256] = "";
    if (gateway_find_probe(out->rf.url, GATEWAY_FIND_TIMEOUT_MS, inst, sizeof inst, why, sizeof why) != 0) {
        snprintf(out->why, sizeof out->why, "%.200s", why);
        return;
    }
    if (out->rf.instance[0] && inst[0] && strcmp(inst, out->rf.instance) != 0) {
        snprintf(out->why, sizeof out->why, "another gateway answers at %.200s now", out->rf.url);
        return;
    }
    out->answering = 1;
}

int gateway_find_url(const char *in, char *out, size_t n, char *err, size_t errlen)
{
    const char *scheme = "http://", *rest = in;
    if (strncmp(in, "http://", 7) == 0) {
        rest = in + 7;
    } else if (strncmp(in, "https://", 8) == 0) {
        scheme = "https://";
        rest = in + 8;
    } else if (strstr(in, "://")) {
        sbuf_fmt_into(err, errlen, "'%.200s' is neither host:port nor an http:// or https:// URL", in);
        return -1;
    }
    size_t auth = strcspn(rest, "/?#");
    if (!auth || strspn(rest, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:[]") < auth) {
        sbuf_fmt_into(err, errlen, "'%.200s' names no host (expected host:port or http://host:port)", in);
        return -1;
    }
    if (rest == in) { /* host:port: the port is required (there is no default to guess) */
        const char *colon = strrchr(rest, ':'), *bracket = strrchr(rest, ']');
        if (!colon || (bracket && colon < bracket) || colon + 1 >= rest + auth ||
            strspn(colon + 1, "0123456789") != (size_t)(rest + auth - colon - 1) || rest[auth]) {
            sbuf_fmt_into(err, errlen, "'%.200s': expected host:port (e.g. 127.0.0.1:8787) or a URL", in);
            return -1;
        }
    }
    if ((size_t)snprintf(out, n, "%s%.*s", scheme, (int)auth, rest) >= n) {
        sbuf_fmt_into(err, errlen, "the gateway address is too long");
        return -1;
    }
    return 0;
}

void gateway_find_describe(const gateway_found *g, char *out, size_t n)
{
    if (!g->recorded) {
        snprintf(out, n, "no gateway is answering for this database (%s)", g->why);
        return;
    }
    char when[64];
    time_t t = (time_t)(g->rf.stopped_at > 0 ? g->rf.stopped_at : g->rf.started_at);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    snprintf(out, n, "no gateway is answering for this database (last seen at %s: pid %ld on %s; %s)", when,
             g->rf.pid, g->rf.url, g->why);
}
