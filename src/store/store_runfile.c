/* store_runfile.c: the run file beside the database (see store_runfile.h). */
#include "store/store_runfile.h"
#include "base/json.h"
#include "base/safe_file.h"
#include "base/sbuf.h"
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define RUNFILE_MAX 8192 /* ours is a few hundred bytes; a larger file is not ours */

int store_runfile_path(const char *db, char *out, size_t n)
{
    int k = snprintf(out, n, "%s-gateway.json", db);
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

int store_runfile_write(const char *db, const store_runfile *r, char *err, size_t errlen)
{
    char path[4200];
    if (store_runfile_path(db, path, sizeof path) != 0) {
        sbuf_fmt_into(err, errlen, "the database path is too long");
        return -1;
    }
    sbuf b = SBUF_INIT;
    sbuf_printf(&b, "{\"pid\":%ld,\"url\":", r->pid);
    sbuf_json_str(&b, r->url, strlen(r->url));
    sbuf_puts(&b, ",\"admin_url\":");
    sbuf_json_str(&b, r->admin_url, strlen(r->admin_url));
    sbuf_puts(&b, ",\"instance\":");
    sbuf_json_str(&b, r->instance, strlen(r->instance));
    sbuf_printf(&b, ",\"started_at\":%.0f,\"stopped_at\":%.0f}\n", r->started_at, r->stopped_at);
    int rc = safe_file_replace(path, b.p, b.len, 0600, NULL, NULL, err, errlen);
    sbuf_free(&b);
    return rc;
}

static int runfile_str(const json_value *doc, const char *k, char *out, size_t n, int required)
{
    const char *v = json_get_str(doc, k);
    if (!v)
        return required ? -1 : (out[0] = '\0', 0);
    if (strlen(v) >= n)
        return -1;
    memcpy(out, v, strlen(v) + 1);
    return 0;
}

int store_runfile_read(const char *db, store_runfile *r, char *err, size_t errlen)
{
    char path[4200];
    memset(r, 0, sizeof *r);
    if (store_runfile_path(db, path, sizeof path) != 0) {
        sbuf_fmt_into(err, errlen, "the database path is too long");
        return -1;
    }
    sbuf b = SBUF_INIT;
    int present = 0;
    if (safe_file_read(path, &b, &present, NULL, err, errlen) != 0) {
        sbuf_free(&b);
        return -1;
    }
    if (!present) {
        sbuf_free(&b);
        return 0;
    }
    json_value *doc = b.len <= RUNFILE_MAX ? json_parse(b.p, b.len, NULL, 0) : NULL;
    int64_t pid = 0;
    int ok = doc && doc->type == JSON_OBJECT && json_get_int64(doc, "pid", 1, INT32_MAX, &pid) == 0 &&
             runfile_str(doc, "url", r->url, sizeof r->url, 1) == 0 &&
             strncmp(r->url, "http", 4) == 0 &&
             runfile_str(doc, "admin_url", r->admin_url, sizeof r->admin_url, 0) == 0 &&
             runfile_str(doc, "instance", r->instance, sizeof r->instance, 0) == 0;
    if (ok) {
        r->pid = (long)pid;
        r->started_at = json_get_num(doc, "started_at", 0);
        r->stopped_at = json_get_num(doc, "stopped_at", 0);
    } else {
        memset(r, 0, sizeof *r);
        sbuf_fmt_into(err, errlen, "%s is not a gateway run file", path);
    }
    json_free(doc);
    sbuf_free(&b);
    return ok ? 1 : -1;
}

int store_runfile_stopped(const char *db, const char *instance, double when, char *err, size_t errlen)
{
    store_runfile r;
    if (store_runfile_read(db, &r, err, errlen) != 1 || strcmp(r.instance, instance) != 0)
        return 0;
    r.stopped_at = when;
    return store_runfile_write(db, &r, err, errlen);
}
