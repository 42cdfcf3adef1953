/* admin_client.c: reaching the running gateway's admin API from the
 * command line (see admin_client.h): libcurl easy calls, blocking, which
 * is right in a command and never happens in the gateway. */
#include "admin/admin_client.h"
#include "base/json.h"
#include "base/safe_file.h"
#include "base/sha256.h"
#include "core/config.h"
#include "store/store_admin.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void admin_client_token_path(const char *db, char *out, size_t n) { snprintf(out, n, "%s.admin-token", db); }

int admin_client_token_read(const char *db, store *s, char *tok, size_t n)
{
    char path[PATH_MAX], err[256], hash[65], want[65];
    admin_client_token_path(db, path, sizeof path);
    sbuf b = SBUF_INIT;
    int present = 0, ok = 0;
    if (safe_file_read(path, &b, &present, NULL, err, sizeof err) == 0 && present && b.len) {
        size_t len = strcspn(b.p, "\r\n");
        if (len > 4 && len < n && strncmp(b.p, "sya-", 4) == 0) {
            sha256_hex(b.p, len, hash);
            if (!s || (store_admin_token_get(s, want) == 0 && strcmp(want, hash) == 0)) {
                memcpy(tok, b.p, len);
                tok[len] = '\0';
                ok = 1;
            }
        }
        explicit_bzero(b.p, b.len);
    }
    sbuf_free(&b);
    return ok;
}

/* The admin API base URL from the same settings `serve` reads. */
static void admin_client_default_url(char *out, size_t n)
{
    sy_config c;
    config_defaults(&c);
    config_from_env(&c);
    const char *host = c.admin_port ? c.admin_host : c.listen_host;
    int port = c.admin_port ? c.admin_port : c.listen_port;
    if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 || !*host)
        host = "127.0.0.1";
    snprintf(out, n, strchr(host, ':') ? "http://[%s]:%d" : "http://%s:%d", host, port);
}

void admin_client_locate(const char *db, const char *url, admin_client *c)
{
    memset(c, 0, sizeof *c);
    /* the gateway that serves this database, not a guess from the environment */
    gateway_find(db, &c->found);
    if (url)
        snprintf(c->base, sizeof c->base, "%s", url);
    else if (c->found.answering)
        snprintf(c->base, sizeof c->base, "%s", c->found.rf.admin_url[0] ? c->found.rf.admin_url : c->found.rf.url);
    else
        admin_client_default_url(c->base, sizeof c->base);
    size_t bl = strlen(c->base);
    while (bl && c->base[bl - 1] == '/')
        c->base[--bl] = '\0';
    const char *env = getenv("SWITCHYARD_ADMIN_TOKEN");
    if (env && *env)
        snprintf(c->token, sizeof c->token, "%s", env);
    else
        c->from_file = admin_client_token_read(db, NULL, c->token, sizeof c->token); /* no ceremony */
}

void admin_client_close(admin_client *c) { explicit_bzero(c->token, sizeof c->token); }

int admin_client_call(const admin_client *c, const char *method, const char *path, long timeout_ms, sbuf *body,
                      char *why, size_t whylen)
{
    sbuf url = SBUF_INIT;
    sbuf_printf(&url, "%s%s", c->base, path);
    long status = gateway_find_call(method, url.p, c->token, timeout_ms, body, why, whylen);
    sbuf_free(&url);
    if (status && status != 200) {
        json_value *doc = body->len ? json_parse(body->p, body->len, NULL, 0) : NULL;
        const char *msg = doc ? json_get_str(json_get(doc, "error"), "message") : NULL;
        snprintf(why, whylen, "the gateway answered HTTP %ld%s%s", status, msg ? ": " : "", msg ? msg : "");
        json_free(doc);
    }
    return status == 200 ? 0 : -1;
}
