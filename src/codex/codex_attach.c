/* codex_attach.c: `switchyard codex attach | detach | status` (see
 * codex_attach.h and docs/codex.md). Owns the order of every step:
 *
 *   attach:  recover -> read + parse -> plan the keys -> journal (and the
 *            platform key) committed -> temp file, fsync -> rename, fsync
 *            dir -> journal 'attached'
 *   detach:  recover -> three-way restore per key -> journal 'detaching'
 *            (with the hash of what it will write) -> temp, fsync, rename,
 *            fsync dir -> key revoked + journal 'detached' in one commit
 *
 * A crash between any two steps leaves a journal whose state and hashes,
 * compared with the file on disk, say whether the write landed: recovery
 * finishes the step or rolls it back. SWITCHYARD_TEST_CRASH_AT names a
 * step at which the process kills itself (a test hook, see docs/codex.md). */
#include "codex/codex_attach.h"
#include "base/json.h"
#include "base/safe_file.h"
#include "base/sha256.h"
#include "store/store_codex.h"
#include "codex/toml_edit.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CA_MAX_KEYS 12
#define CA_MAX_SEGS 4
#define CA_PROVIDER "switchyard"

/* The test hook: SWITCHYARD_TEST_CRASH_AT=<step> kills the process there,
 * as kill -9 would, so tests can prove recovery from every step. */
static void ca_crash_point(const char *step)
{
    const char *at = getenv("SWITCHYARD_TEST_CRASH_AT");
    if (at && strcmp(at, step) == 0)
        raise(SIGKILL);
}

/* ---------- files ---------- */

static void ca_sha(const sbuf *b, int present, char out[65])
{
    if (present)
        sha256_hex(b->p ? b->p : "", b->len, out);
    else
        out[0] = '\0';
}

/* The crash point between the temp file's fsync and the rename. */
static void ca_before_rename(void *step)
{
    char at[64];
    snprintf(at, sizeof at, "%s_after_temp", (const char *)step);
    ca_crash_point(at);
}

/* The mode of a config.toml that holds the attach's platform key: the
 * owner's bits only (0644 becomes 0600), whatever the original's. */
static int ca_secret_mode(int mode) { return (mode & 0700) | 0600; }

static int ca_file_replace(const char *path, const char *p, size_t n, int mode, const char *step, char *err,
                           size_t errlen)
{
    return safe_file_replace(path, p, n, mode, ca_before_rename, (void *)step, err, errlen);
}

int codex_home_resolve(const char *opt, int create, char *out, size_t n, char *err, size_t errlen)
{
    char raw[CODEX_PATH_MAX];
    const char *env = getenv("CODEX_HOME"), *home = getenv("HOME");
    if (opt && *opt)
        snprintf(raw, sizeof raw, "%s", opt);
    else if (env && *env)
        snprintf(raw, sizeof raw, "%s", env);
    else if (home && *home)
        snprintf(raw, sizeof raw, "%s/.codex", home);
    else {
        sbuf_fmt_into(err, errlen, "no Codex home: give --codex-home or set CODEX_HOME or HOME");
        return -1;
    }
    if (create && mkdir(raw, 0700) != 0 && errno != EEXIST) {
        sbuf_fmt_into(err, errlen, "cannot create %s: %s", raw, strerror(errno));
        return -1;
    }
    char real[PATH_MAX];
    if (!realpath(raw, real)) {
        /* a home that does not exist (status, detach): keep it as given, absolute */
        if (raw[0] != '/') {
            char cwd[PATH_MAX];
            if (!getcwd(cwd, sizeof cwd)) {
                sbuf_fmt_into(err, errlen, "cannot resolve %s: %s", raw, strerror(errno));
                return -1;
            }
            if ((size_t)snprintf(real, sizeof real, "%.2047s/%.2047s", cwd, raw) >= sizeof real) {
                sbuf_fmt_into(err, errlen, "the Codex home path is too long");
                return -1;
            }
        } else {
            snprintf(real, sizeof real, "%s", raw);
        }
    }
    if (strlen(real) + 1 > n || strlen(real) + 32 > CODEX_PATH_MAX) {
        sbuf_fmt_into(err, errlen, "the Codex home path is too long");
        return -1;
    }
    memcpy(out, real, strlen(real) + 1);
    return 0;
}

void codex_gateway_url(const char *host, int port, char *out, size_t n)
{
    if (!host || !*host || !strcmp(host, "0.0.0.0") || !strcmp(host, "*"))
        host = "127.0.0.1";
    else if (!strcmp(host, "::") || !strcmp(host, "[::]"))
        host = "[::1]";
    int v6 = strchr(host, ':') && host[0] != '[';
    snprintf(out, n, "http://%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "", port);
}

/* The config file of a home; a symlink (dotfile managers) is followed so the
 * rename replaces its target, not the link. A dangling one stays the link's
 * path: safe_file_read refuses it, so attach never puts a file in its place
 * (and detach never deletes it). */
static void ca_config_path(const char *home, char *out, size_t n)
{
    char p[CODEX_PATH_MAX], real[PATH_MAX];
    snprintf(p, sizeof p, "%s/config.toml", home);
    struct stat sb;
    if (lstat(p, &sb) == 0 && S_ISLNK(sb.st_mode) && realpath(p, real))
        snprintf(out, n, "%s", real);
    else
        snprintf(out, n, "%s", p);
}

/* ---------- the keys attach owns ---------- */

typedef struct ca_key {
    const char *path[CA_MAX_SEGS];
    char *owned[CA_MAX_SEGS];
    size_t n;
    sbuf orig;
    int orig_present;
    sbuf written;        /* raw TOML; empty for the secret */
    char written_sha[65]; /* the secret: sha256 of its comparable form */
    int removed;         /* attach removed the key (it would override the credential) */
} ca_key;

typedef struct ca_plan {
    ca_key k[CA_MAX_KEYS];
    size_t n;
    int table_created; /* [model_providers.switchyard] did not exist */
} ca_plan;

static void ca_plan_free(ca_plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        for (size_t j = 0; j < p->k[i].n; j++)
            free(p->k[i].owned[j]);
        sbuf_free(&p->k[i].orig);
        sbuf_free(&p->k[i].written);
    }
    memset(p, 0, sizeof *p);
}

static ca_key *ca_plan_add(ca_plan *p, const char *const *segs, size_t n)
{
    ca_key *k = &p->k[p->n++];
    memset(k, 0, sizeof *k);
    for (size_t i = 0; i < n && i < CA_MAX_SEGS; i++) {
        k->owned[i] = strdup(segs[i]);
        if (!k->owned[i])
            abort();
        k->path[i] = k->owned[i];
    }
    k->n = n;
    return k;
}

static void ca_key_name(sbuf *out, const ca_key *k)
{
    for (size_t i = 0; i < k->n; i++) {
        sbuf_puts(out, i ? "." : "");
        sbuf_puts(out, k->path[i]);
    }
}

static void ca_norm_sha(const char *raw, size_t n, char out[65])
{
    sbuf norm = SBUF_INIT;
    toml_value_norm(raw, n, &norm);
    sha256_hex(norm.p, norm.len, out);
    memset(norm.p, 0, norm.len);
    sbuf_free(&norm);
}

/* 1 if the key is as attach left it: cur (raw; r = toml_get's result)
 * is what attach wrote, or absent for a key attach removed. */
static int ca_key_is_written(const ca_key *k, int r, const sbuf *cur)
{
    if (k->removed || r != 1)
        return k->removed && r == 0;
    if (k->written_sha[0]) {
        char sha[65];
        ca_norm_sha(cur->p ? cur->p : "", cur->len, sha);
        return strcmp(sha, k->written_sha) == 0;
    }
    sbuf a = SBUF_INIT, b = SBUF_INIT;
    toml_value_norm(cur->p ? cur->p : "", cur->len, &a);
    toml_value_norm(k->written.p ? k->written.p : "", k->written.len, &b);
    int same = a.len == b.len && memcmp(a.p, b.p, a.len) == 0;
    sbuf_free(&a);
    sbuf_free(&b);
    return same;
}

static void ca_plan_json(const ca_plan *p, sbuf *out)
{
    sbuf_printf(out, "{\"table_created\":%s,\"keys\":[", p->table_created ? "true" : "false");
    for (size_t i = 0; i < p->n; i++) {
        const ca_key *k = &p->k[i];
        sbuf_puts(out, i ? ",{\"path\":[" : "{\"path\":[");
        for (size_t j = 0; j < k->n; j++) {
            sbuf_puts(out, j ? "," : "");
            sbuf_json_str(out, k->path[j], strlen(k->path[j]));
        }
        sbuf_puts(out, "],\"orig\":");
        if (k->orig_present)
            sbuf_json_str(out, k->orig.p, k->orig.len);
        else
            sbuf_puts(out, "null");
        sbuf_puts(out, ",\"written\":");
        if (k->removed)
            sbuf_puts(out, "null,\"removed\":true}");
        else if (k->written_sha[0])
            sbuf_printf(out, "null,\"written_sha256\":\"%s\"}", k->written_sha);
        else {
            sbuf_json_str(out, k->written.p, k->written.len);
            sbuf_puts(out, "}");
        }
    }
    sbuf_puts(out, "]}");
}

static int ca_plan_from_json(const sbuf *text, ca_plan *p)
{
    memset(p, 0, sizeof *p);
    json_value *doc = json_parse(text->p ? text->p : "", text->len, NULL, 0);
    json_value *keys = json_get(doc, "keys");
    int rc = keys && keys->type == JSON_ARRAY ? 0 : -1;
    p->table_created = json_get_bool(doc, "table_created", 0);
    for (json_value *k = keys ? keys->child : NULL; k && rc == 0; k = k->next) {
        json_value *path = json_get(k, "path");
        const char *segs[CA_MAX_SEGS];
        size_t n = 0;
        for (json_value *s = path ? path->child : NULL; s && n < CA_MAX_SEGS; s = s->next)
            segs[n++] = s->type == JSON_STRING ? s->str : "";
        if (n == 0 || p->n == CA_MAX_KEYS) {
            rc = -1;
            break;
        }
        ca_key *ck = ca_plan_add(p, segs, n);
        json_value *orig = json_get(k, "orig"), *written = json_get(k, "written");
        if (orig && orig->type == JSON_STRING) {
            ck->orig_present = 1;
            sbuf_append(&ck->orig, orig->str, orig->str_len);
        }
        if (written && written->type == JSON_STRING)
            sbuf_append(&ck->written, written->str, written->str_len);
        const char *sha = json_get_str(k, "written_sha256");
        snprintf(ck->written_sha, sizeof ck->written_sha, "%s", sha ? sha : "");
        ck->removed = json_get_bool(k, "removed", 0);
    }
    json_free(doc);
    if (rc != 0)
        ca_plan_free(p);
    return rc;
}

/* ---------- attach ---------- */

/* The profile Codex uses by default (top-level `profile = "name"`), if its
 * table sets model_provider: that one wins over the top-level key, so
 * attach must set it too. Fills name; 1 if so. */
static int ca_active_profile(const toml_doc *d, sbuf *name)
{
    const char *p[] = {"profile"};
    sbuf raw = SBUF_INIT;
    int found = toml_get(d, p, 1, &raw, NULL, 0) == 1 && toml_string_decode(raw.p, raw.len, name) == 0;
    sbuf_free(&raw);
    if (!found)
        return 0;
    const char *mp[] = {"profiles", name->p, "model_provider"};
    sbuf cur = SBUF_INIT;
    found = toml_get(d, mp, 3, &cur, NULL, 0) == 1;
    sbuf_free(&cur);
    return found;
}

/* Plans the keys attach sets: their original values and what is written. */
static int ca_plan_make(const toml_doc *d, const char *base_url, const char *token, int websockets, ca_plan *p,
                        char *err, size_t errlen)
{
    static const char *const fields[][2] = {
        {"name", NULL}, {"base_url", NULL}, {"wire_api", "\"responses\""}, {"experimental_bearer_token", NULL},
        {"request_max_retries", "0"}, {"stream_max_retries", "0"}, {"supports_websockets", NULL},
    };
    const char *mp[] = {"model_provider"};
    const char *tbl[] = {"model_providers", CA_PROVIDER};
    sbuf profile = SBUF_INIT;
    memset(p, 0, sizeof *p);
    ca_key *k = ca_plan_add(p, mp, 1);
    sbuf_puts(&k->written, "\"" CA_PROVIDER "\"");
    if (ca_active_profile(d, &profile)) {
        const char *pp[] = {"profiles", profile.p, "model_provider"};
        k = ca_plan_add(p, pp, 3);
        sbuf_puts(&k->written, "\"" CA_PROVIDER "\"");
    }
    sbuf_free(&profile);
    p->table_created = !toml_has_header(d, tbl, 2);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const char *path[] = {"model_providers", CA_PROVIDER, fields[i][0]};
        k = ca_plan_add(p, path, 3);
        if (fields[i][1])
            sbuf_puts(&k->written, fields[i][1]);
        else if (!strcmp(fields[i][0], "supports_websockets"))
            sbuf_puts(&k->written, websockets ? "true" : "false");
        else if (!strcmp(fields[i][0], "name"))
            toml_quote(&k->written, CA_PROVIDER);
        else if (!strcmp(fields[i][0], "base_url"))
            toml_quote(&k->written, base_url);
        else
            toml_quote(&k->written, token);
    }
    /* keys of an existing table that Codex would use instead of the bearer
     * token (env_key: a variable that must be set; requires_openai_auth: the
     * ChatGPT login) are taken out while attached */
    static const char *const overriding[] = {"env_key", "requires_openai_auth"};
    for (size_t i = 0; i < sizeof overriding / sizeof overriding[0]; i++) {
        const char *path[] = {"model_providers", CA_PROVIDER, overriding[i]};
        sbuf cur = SBUF_INIT;
        if (toml_get(d, path, 3, &cur, NULL, 0) == 1)
            ca_plan_add(p, path, 3)->removed = 1;
        sbuf_free(&cur);
    }
    for (size_t i = 0; i < p->n; i++) {
        int r = toml_get(d, p->k[i].path, p->k[i].n, &p->k[i].orig, err, errlen);
        if (r < 0)
            return -1;
        p->k[i].orig_present = r == 1;
    }
    return 0;
}

/* Applies the plan to doc (which is the parsed original). */
static int ca_plan_apply(toml_doc *d, const ca_plan *p, char *err, size_t errlen)
{
    for (size_t i = 0; i < p->n; i++) {
        const ca_key *k = &p->k[i];
        if (k->removed ? toml_remove(d, k->path, k->n, err, errlen) < 0
                       : toml_set(d, k->path, k->n, k->written.p, err, errlen) != 0)
            return -1;
    }
    return 0;
}

/* Moves the secret out of the plan: from now on only its hash is kept. */
static void ca_plan_seal(ca_plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        ca_key *k = &p->k[i];
        if (strcmp(k->path[k->n - 1], "experimental_bearer_token") != 0)
            continue;
        ca_norm_sha(k->written.p, k->written.len, k->written_sha);
        memset(k->written.p, 0, k->written.len);
        sbuf_reset(&k->written);
    }
}

/* 1 if a key holding its written value shows the attach: attach wrote it
 * and the original did not already say the same (request_max_retries = 0
 * in the user's own table proves nothing). */
static int ca_key_is_evidence(const ca_key *k)
{
    if (k->removed)
        return 0;
    return !k->orig_present || !ca_key_is_written(k, 1, &k->orig);
}

/* What the file of a journal looks like now, key by key. */
typedef struct ca_view {
    sbuf bytes;
    int present, mode, parsed;
    char sha[65];
    char parse_err[256];
    size_t n_evidence; /* keys holding what attach wrote where the original differed */
    size_t n_changed;  /* keys changed or removed since attach */
    sbuf drift;                  /* "  key: ..." lines */
} ca_view;

static void ca_view_free(ca_view *v)
{
    sbuf_free(&v->bytes);
    sbuf_free(&v->drift);
}

static int ca_view_load(const codex_journal *j, const ca_plan *p, ca_view *v, char *err, size_t errlen)
{
    memset(v, 0, sizeof *v);
    if (safe_file_read(j->config_path, &v->bytes, &v->present, &v->mode, err, errlen) != 0)
        return -1;
    ca_sha(&v->bytes, v->present, v->sha);
    if (!v->present)
        return 0;
    toml_doc *d = toml_parse(v->bytes.p, v->bytes.len, v->parse_err, sizeof v->parse_err);
    v->parsed = d != NULL;
    for (size_t i = 0; d && i < p->n; i++) {
        const ca_key *k = &p->k[i];
        sbuf cur = SBUF_INIT;
        int r = toml_get(d, k->path, k->n, &cur, NULL, 0);
        if (ca_key_is_written(k, r, &cur)) {
            v->n_evidence += ca_key_is_evidence(k);
        } else {
            v->n_changed++;
            sbuf_puts(&v->drift, "  ");
            ca_key_name(&v->drift, k);
            if (k->removed)
                sbuf_printf(&v->drift, ": now %s (attach had removed it)\n", cur.p);
            else if (r != 1)
                sbuf_puts(&v->drift, ": removed\n");
            else if (k->written_sha[0])
                sbuf_puts(&v->drift, ": changed (the credential is not the attach's key)\n");
            else
                sbuf_printf(&v->drift, ": now %s (attach wrote %s)\n", cur.p, k->written.p);
        }
        sbuf_free(&cur);
    }
    toml_free(d);
    return 0;
}

static void ca_report_attached(sbuf *r, const codex_journal *j)
{
    char when[64];
    time_t t = (time_t)j->created_at;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    sbuf_printf(r, "%s -> %s since %s (key %s)\n", j->config_path, j->gateway_url, when, j->key_prefix);
}

static int ca_journal_plan(const codex_journal *j, ca_plan *p, char *err, size_t errlen)
{
    if (ca_plan_from_json(&j->keys, p) == 0)
        return 0;
    sbuf_fmt_into(err, errlen, "the attach journal of %s is damaged (keys)", j->home);
    return -1;
}

/* A crash after the journal of an attach: did the rename land? */
static int ca_recover_attaching(store *s, codex_journal *j, sbuf *report, char *err, size_t errlen)
{
    ca_plan p;
    ca_view v;
    if (ca_journal_plan(j, &p, err, errlen) != 0)
        return -1;
    int rc = ca_view_load(j, &p, &v, err, errlen);
    safe_file_tmp_remove(j->config_path);
    /* the written bytes, or (edited since) still showing the attach, and not
     * simply the original: the rename landed */
    int landed = !strcmp(v.sha, j->written_sha) ||
                 (strcmp(v.sha, j->original_sha) != 0 && v.parsed && v.n_evidence > 0);
    if (rc == 0 && landed) {
        rc = store_codex_set_state(s, j->id, "attached", NULL, NULL, err, errlen);
        if (rc == 0)
            sbuf_printf(report, "recovered: finished an interrupted attach of %s\n", j->config_path);
    } else if (rc == 0) {
        rc = store_codex_close(s, j, "rolled_back", err, errlen);
        if (rc == 0)
            sbuf_printf(report, "recovered: rolled back an interrupted attach of %s (the file was not changed)\n",
                        j->config_path);
    }
    ca_view_free(&v);
    ca_plan_free(&p);
    return rc;
}

/* A crash after the journal of a detach: did the restore land? */
static int ca_recover_detaching(store *s, codex_journal *j, sbuf *report, char *err, size_t errlen)
{
    sbuf cur = SBUF_INIT;
    int present = 0;
    char sha[65];
    int rc = safe_file_read(j->config_path, &cur, &present, NULL, err, errlen);
    ca_sha(&cur, present, sha);
    sbuf_free(&cur);
    safe_file_tmp_remove(j->config_path);
    if (rc != 0)
        return -1;
    if (!strcmp(sha, j->restore_sha)) {
        rc = store_codex_close(s, j, "detached", err, errlen);
        if (rc == 0)
            sbuf_printf(report, "recovered: finished an interrupted detach of %s\n", j->config_path);
        return rc;
    }
    rc = store_codex_set_state(s, j->id, "attached", NULL, NULL, err, errlen);
    if (rc == 0)
        sbuf_printf(report, "recovered: an interrupted detach of %s had not written the file; still attached\n",
                    j->config_path);
    return rc;
}

static int ca_recover(store *s, const char *home, sbuf *report, char *err, size_t errlen)
{
    codex_journal j;
    int found = store_codex_open_get(s, home, &j);
    if (found < 0) {
        sbuf_fmt_into(err, errlen, "cannot read the attach journal from %s", store_path(s));
        return -1;
    }
    int rc = 0;
    if (found && !strcmp(j.state, "attaching"))
        rc = ca_recover_attaching(s, &j, report, err, errlen);
    else if (found && !strcmp(j.state, "detaching"))
        rc = ca_recover_detaching(s, &j, report, err, errlen);
    if (found)
        store_codex_journal_free(&j);
    return rc;
}

typedef struct ca_homes {
    char **v;
    size_t n;
} ca_homes;

static void ca_homes_add(void *ud, const char *home)
{
    ca_homes *h = ud;
    char **nv = realloc(h->v, (h->n + 1) * sizeof *nv);
    if (!nv || !(nv[h->n] = strdup(home)))
        abort();
    h->v = nv;
    h->n++;
}

static int ca_recover_all_locked(store *s, sbuf *report)
{
    ca_homes h = {0};
    int rc = store_codex_open_homes(s, ca_homes_add, &h);
    for (size_t i = 0; i < h.n; i++) {
        char err[512] = "";
        if (ca_recover(s, h.v[i], report, err, sizeof err) != 0) {
            sbuf_printf(report, "cannot recover the attach of %s: %s\n", h.v[i], err);
            rc = -1;
        }
        free(h.v[i]);
    }
    free(h.v);
    return rc;
}

static int ca_attach_write(store *s, codex_journal *j, const char *key_hash, int64_t handover_from, const char *bytes,
                           size_t len, char *err, size_t errlen)
{
    if (store_codex_begin(s, j, "codex-attach", key_hash, handover_from, err, errlen) != 0)
        return -1;
    ca_crash_point("attach_after_journal");
    /* the file now holds a key: never world- or group-readable */
    if (ca_file_replace(j->config_path, bytes, len, ca_secret_mode(j->original_mode), "attach", err, errlen) != 0) {
        char e2[256] = "", first[512];
        snprintf(first, sizeof first, "%s", err ? err : "");
        if (store_codex_close(s, j, "rolled_back", e2, sizeof e2) != 0)
            sbuf_fmt_into(err, errlen, "%s (and the journal could not be rolled back: %s)", first, e2);
        return -1;
    }
    ca_crash_point("attach_after_rename");
    return store_codex_set_state(s, j->id, "attached", NULL, NULL, err, errlen);
}

/* Fills j from the file and the plan, and the edited bytes into out. */
static int ca_attach_prepare(codex_journal *j, const char *base_url, const char *token, int websockets, ca_plan *p,
                             sbuf *out, char *err, size_t errlen)
{
    int present = 0;
    j->original_mode = 0600;
    if (safe_file_read(j->config_path, &j->original, &present, &j->original_mode, err, errlen) != 0)
        return -1;
    j->original_present = present;
    ca_sha(&j->original, present, j->original_sha);
    char perr[256] = "";
    toml_doc *d = toml_parse(j->original.p, j->original.len, perr, sizeof perr);
    if (!d) {
        sbuf_fmt_into(err, errlen, "cannot parse %s (%s); it was left untouched", j->config_path, perr);
        return -1;
    }
    char eerr[384] = "";
    int rc = ca_plan_make(d, base_url, token, websockets, p, eerr, sizeof eerr);
    if (rc == 0)
        rc = ca_plan_apply(d, p, eerr, sizeof eerr);
    if (rc == 0) {
        size_t len;
        const char *b = toml_bytes(d, &len);
        sbuf_append(out, b, len);
        sha256_hex(out->p, out->len, j->written_sha);
    } else {
        sbuf_fmt_into(err, errlen, "cannot attach %s: %s; it was left untouched", j->config_path, eerr);
    }
    toml_free(d);
    return rc;
}

/* An attached file written group- or world-readable (by a version before
 * attach set the mode, or by hand): made owner-only, since it holds the
 * key. Only a regular file, never through a link's new target. */
static void ca_tighten(const codex_journal *j, sbuf *report)
{
    int fd = open(j->config_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY);
    struct stat sb;
    if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (sb.st_mode & 077) &&
        fchmod(fd, (mode_t)ca_secret_mode((int)(sb.st_mode & 07777))) == 0)
        sbuf_printf(report, "made %s readable by its owner only (it holds the platform key)\n", j->config_path);
    if (fd >= 0)
        close(fd);
}

static int ca_detach_locked(store *s, const char *home, int force, sbuf *report, char *err, size_t errlen);
static int ca_detach_journal(store *s, codex_journal *j, int force, int keep_key, sbuf *report, char *err,
                             size_t errlen);
static int ca_journal_get(store *s, const char *home, codex_journal *j, sbuf *report, char *err, size_t errlen);
static int ca_status_locked(store *s, const char *home, codex_answers_fn answers, void *ud, sbuf *report, char *err,
                            size_t errlen);

/* The platform key an attach wrote, read back from its file while the file
 * still holds it (the credential key of the journal's plan), with its
 * hash: 0, or -1 when the file no longer holds one. */
static int ca_attached_key(const codex_journal *j, sbuf *key, char hash[65])
{
    ca_plan p;
    char err[256];
    if (ca_journal_plan(j, &p, err, sizeof err) != 0)
        return -1;
    sbuf bytes = SBUF_INIT, raw = SBUF_INIT;
    int present = 0, rc = -1;
    toml_doc *d = NULL;
    if (safe_file_read(j->config_path, &bytes, &present, NULL, err, sizeof err) == 0 && present)
        d = toml_parse(bytes.p, bytes.len, NULL, 0);
    for (size_t i = 0; d && rc != 0 && i < p.n; i++) {
        const ca_key *k = &p.k[i];
        if (strcmp(k->path[k->n - 1], "experimental_bearer_token") != 0 || k->removed)
            continue;
        sbuf_secret_wipe(&raw);
        if (toml_get(d, k->path, k->n, &raw, NULL, 0) == 1 && ca_key_is_written(k, 1, &raw) &&
            toml_string_decode(raw.p, raw.len, key) == 0 && key->len) {
            sha256_hex(key->p, key->len, hash);
            rc = 0;
        }
    }
    toml_free(d);
    sbuf_secret_wipe(&raw);
    sbuf_free(&raw);
    if (bytes.p)
        memset(bytes.p, 0, bytes.len);
    sbuf_free(&bytes);
    ca_plan_free(&p);
    return rc;
}

static int ca_attach_locked(store *s, const char *home, const char *gateway, int websockets, sbuf *report, char *err,
                            size_t errlen)
{
    char base_url[512];
    size_t glen = strlen(gateway);
    while (glen && gateway[glen - 1] == '/')
        glen--;
    int has_v1 = glen >= 3 && !memcmp(gateway + glen - 3, "/v1", 3);
    snprintf(base_url, sizeof base_url, "%.*s%s", (int)glen, gateway, has_v1 ? "" : "/v1");
    codex_journal j, moved; /* moved: the journal whose key this attach takes over (id 0: none) */
    memset(&moved, 0, sizeof moved);
    sbuf moved_key = SBUF_INIT;
    char hash[65];
    int found = ca_journal_get(s, home, &j, report, err, errlen);
    if (found < 0)
        return -1;
    if (found) {
        int same = !strcmp(j.gateway_url, base_url);
        if (same) {
            ca_tighten(&j, report);
            store_codex_journal_free(&j);
            sbuf tmp = SBUF_INIT;
            int st = ca_status_locked(s, home, NULL, NULL, &tmp, err, errlen);
            sbuf_puts(report, "already ");
            sbuf_append(report, tmp.p ? tmp.p : "", tmp.len);
            if (st == CODEX_DRIFTED)
                sbuf_puts(report, "  (detach, then attach again, to write it afresh)\n");
            sbuf_free(&tmp);
            return st < 0 ? -1 : 0;
        }
        /* attached to another gateway address (a restart on a new port):
         * hand the file back and attach anew, keeping the attach's key when
         * the file still holds it and it is live, so moves leave no trail
         * of keys; else the old key is revoked and a new one made */
        if (ca_attached_key(&j, &moved_key, hash) == 0 && store_codex_key_is_live(s, j.key_id, hash) == 1) {
            moved = j;
            memset(&j, 0, sizeof j); /* moved owns the journal's buffers now */
        } else {
            sbuf_secret_wipe(&moved_key);
            store_codex_journal_free(&j);
        }
        if (moved.id ? ca_detach_journal(s, &moved, 0, 1, report, err, errlen) != 0
                     : ca_detach_locked(s, home, 0, report, err, errlen) != 0) {
            sbuf_secret_wipe(&moved_key);
            sbuf_free(&moved_key);
            store_codex_journal_free(&moved);
            return -1;
        }
    }
    memset(&j, 0, sizeof j);
    snprintf(j.home, sizeof j.home, "%s", home);
    ca_config_path(home, j.config_path, sizeof j.config_path);
    snprintf(j.gateway_url, sizeof j.gateway_url, "%s", base_url);
    char key[64];
    if (moved.id) {
        snprintf(key, sizeof key, "%.*s", (int)moved_key.len, moved_key.p);
        snprintf(j.key_prefix, sizeof j.key_prefix, "%s", moved.key_prefix);
        j.key_id = moved.key_id;
        sbuf_secret_wipe(&moved_key);
        sbuf_free(&moved_key);
    } else if (store_key_generate(key, sizeof key, hash, j.key_prefix, err, errlen) != 0) {
        return -1;
    }
    ca_plan p = {0};
    sbuf bytes = SBUF_INIT;
    int rc = ca_attach_prepare(&j, base_url, key, websockets, &p, &bytes, err, errlen);
    memset(key, 0, sizeof key);
    if (rc == 0) {
        ca_plan_seal(&p);
        ca_plan_json(&p, &j.keys);
        rc = ca_attach_write(s, &j, hash, moved.id, bytes.p, bytes.len, err, errlen);
    }
    if (rc == 0) {
        sbuf_puts(report, moved.id ? "attached (same key): " : "attached: ");
        ca_report_attached(report, &j);
    } else if (moved.id) {
        /* the move did not happen: finish the detach it began (key revoked) */
        char e2[256] = "";
        codex_journal cur;
        if (store_codex_open_get(s, home, &cur) == 1) {
            if (cur.id == moved.id && store_codex_close(s, &cur, "detached", e2, sizeof e2) != 0)
                sbuf_printf(report, "could not close the earlier attach's journal: %s\n", e2);
            store_codex_journal_free(&cur);
        }
    }
    store_codex_journal_free(&moved);
    if (bytes.p)
        memset(bytes.p, 0, bytes.len);
    sbuf_free(&bytes);
    ca_plan_free(&p);
    store_codex_journal_free(&j);
    return rc;
}

/* ---------- detach ---------- */

/* The three-way restore: each key still as attach wrote it gets its
 * original back (or goes); a key the user changed stays. */
static int ca_restore_keys(const codex_journal *j, const ca_plan *p, const ca_view *v, sbuf *out, sbuf *report,
                           char *err, size_t errlen)
{
    toml_doc *d = toml_parse(v->bytes.p, v->bytes.len, NULL, 0);
    int rc = d ? 0 : -1;
    size_t kept = 0;
    for (size_t i = p->n; d && rc == 0 && i-- > 0;) {
        const ca_key *k = &p->k[i];
        sbuf cur = SBUF_INIT;
        int r = toml_get(d, k->path, k->n, &cur, err, errlen);
        if (ca_key_is_written(k, r, &cur))
            rc = k->orig_present ? toml_set(d, k->path, k->n, k->orig.p, err, errlen)
                                 : (toml_remove(d, k->path, k->n, err, errlen) < 0 ? -1 : 0);
        else if (r == 1)
            kept++;
        sbuf_free(&cur);
    }
    const char *tbl[] = {"model_providers", CA_PROVIDER};
    if (rc == 0 && p->table_created)
        toml_remove_empty_table(d, tbl, 2);
    if (rc == 0) {
        size_t len;
        const char *b = toml_bytes(d, &len);
        sbuf_append(out, b, len);
        toml_final_newline_restore(out, j->original.p, j->original.len);
        if (kept)
            sbuf_printf(report, "kept %zu key%s you changed while attached:\n%s", kept, kept == 1 ? "" : "s",
                        v->drift.p ? v->drift.p : "");
    }
    toml_free(d);
    return rc;
}

/* 1 if restore holds no bearer token but the original's (or none): it may
 * get the original's mode back. A token the user set while attached keeps
 * the file owner-only. */
static int ca_restore_secret_is_original(const ca_plan *p, const sbuf *restore)
{
    toml_doc *d = toml_parse(restore->p ? restore->p : "", restore->len, NULL, 0);
    int ok = d != NULL;
    for (size_t i = 0; d && i < p->n; i++) {
        const ca_key *k = &p->k[i];
        if (strcmp(k->path[k->n - 1], "experimental_bearer_token") != 0)
            continue;
        sbuf cur = SBUF_INIT, a = SBUF_INIT, b = SBUF_INIT;
        int r = toml_get(d, k->path, k->n, &cur, NULL, 0);
        if (r == 1 && k->orig_present) {
            toml_value_norm(cur.p, cur.len, &a);
            toml_value_norm(k->orig.p, k->orig.len, &b);
            ok = a.len == b.len && memcmp(a.p, b.p, a.len) == 0;
        } else {
            ok = r == 0;
        }
        if (cur.p)
            memset(cur.p, 0, cur.len);
        sbuf_free(&cur), sbuf_free(&a), sbuf_free(&b);
    }
    toml_free(d);
    return ok;
}

/* Writes the restore (or removes the file), journal first. */
static int ca_detach_write(store *s, codex_journal *j, const ca_plan *p, const ca_view *v, const sbuf *restore,
                           int restore_present, int keep_key, char *err, size_t errlen)
{
    char rsha[65];
    ca_sha(restore, restore_present, rsha);
    if (store_codex_set_state(s, j->id, "detaching", rsha, v->sha, err, errlen) != 0)
        return -1;
    ca_crash_point("detach_after_journal");
    /* the original's mode comes back with the original's secrets; a mode
     * the user chose since attach stays */
    int mode = v->present ? v->mode : j->original_mode;
    if (v->present && v->mode == ca_secret_mode(j->original_mode) && ca_restore_secret_is_original(p, restore))
        mode = j->original_mode;
    int rc = restore_present ? ca_file_replace(j->config_path, restore->p, restore->len, mode, "detach", err, errlen)
                             : safe_file_remove(j->config_path, err, errlen);
    if (rc != 0) {
        store_codex_set_state(s, j->id, "attached", NULL, NULL, NULL, 0);
        return -1;
    }
    ca_crash_point("detach_after_rename");
    /* keep_key: the journal stays 'detaching' (its file given back) until
     * the next attach takes its key over in its own first commit; a crash
     * in between is recovered as any detach that stopped here (key revoked) */
    return keep_key ? 0 : store_codex_close(s, j, "detached", err, errlen);
}

static int ca_backup(const codex_journal *j, const ca_view *v, sbuf *report, char *err, size_t errlen)
{
    if (!v->present)
        return 0;
    char path[CODEX_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s.switchyard-backup-%lld", j->config_path, (long long)time(NULL));
    if (ca_file_replace(path, v->bytes.p, v->bytes.len, ca_secret_mode(v->mode), "backup", err, errlen) != 0)
        return -1;
    sbuf_printf(report, "kept the file as it was in %s\n", path);
    return 0;
}

static int ca_detach_journal(store *s, codex_journal *j, int force, int keep_key, sbuf *report, char *err,
                             size_t errlen)
{
    ca_plan p;
    ca_view v;
    if (ca_journal_plan(j, &p, err, errlen) != 0)
        return -1;
    if (ca_view_load(j, &p, &v, err, errlen) != 0) {
        ca_plan_free(&p);
        return -1;
    }
    sbuf restore = SBUF_INIT;
    int restore_present = 1, rc = 0;
    if (!strcmp(v.sha, j->written_sha)) {
        sbuf_append(&restore, j->original.p, j->original.len);
        restore_present = j->original_present;
        sbuf_puts(report, j->original_present ? "restored the original byte for byte\n"
                                              : "removed the file attach created (there was none before)\n");
    } else if (!v.parsed || v.n_evidence == 0) {
        const char *why = !v.present ? "is gone" : !v.parsed ? "no longer parses" : "holds nothing attach wrote";
        if (!force) {
            sbuf_fmt_into(err, errlen,
                    "%s %s%s%s: it is not the file attach left, so it was not touched; "
                    "`switchyard codex detach --force` restores the original from the journal "
                    "(keeping the current file as a backup)",
                    j->config_path, why, v.parsed ? "" : " ", v.parsed ? "" : v.parse_err);
            rc = -1;
        } else if ((rc = ca_backup(j, &v, report, err, errlen)) == 0) {
            sbuf_append(&restore, j->original.p, j->original.len);
            restore_present = j->original_present;
            sbuf_puts(report, "restored the original (--force)\n");
        }
    } else {
        rc = ca_restore_keys(j, &p, &v, &restore, report, err, errlen);
        if (rc == 0 && !j->original_present && restore.len == 0)
            restore_present = 0;
        if (rc == 0)
            sbuf_puts(report, "restored the keys attach set; everything else stays as you have it\n");
    }
    if (rc == 0)
        rc = ca_detach_write(s, j, &p, &v, &restore, restore_present, keep_key, err, errlen);
    if (rc == 0)
        sbuf_printf(report, "detached: %s (key %s %s)\n", j->config_path, j->key_prefix,
                    keep_key ? "kept for the new address" : "revoked");
    sbuf_free(&restore);
    ca_view_free(&v);
    ca_plan_free(&p);
    return rc;
}

/* Recovery first, then the unfinished journal of home: 1 (j filled), 0, -1. */
static int ca_journal_get(store *s, const char *home, codex_journal *j, sbuf *report, char *err, size_t errlen)
{
    if (ca_recover(s, home, report, err, errlen) != 0)
        return -1;
    int found = store_codex_open_get(s, home, j);
    if (found < 0)
        sbuf_fmt_into(err, errlen, "cannot read the attach journal from %s", store_path(s));
    return found;
}

static int ca_detach_locked(store *s, const char *home, int force, sbuf *report, char *err, size_t errlen)
{
    codex_journal j;
    int found = ca_journal_get(s, home, &j, report, err, errlen);
    if (found < 0)
        return -1;
    if (!found) {
        sbuf_printf(report, "not attached: %s/config.toml is as you left it\n", home);
        return 0;
    }
    int rc = ca_detach_journal(s, &j, force, 0, report, err, errlen);
    store_codex_journal_free(&j);
    return rc;
}

/* ---------- status ---------- */

static int ca_status_locked(store *s, const char *home, codex_answers_fn answers, void *ud, sbuf *report, char *err,
                            size_t errlen)
{
    codex_journal j;
    int found = ca_journal_get(s, home, &j, report, err, errlen);
    if (found < 0)
        return -1;
    if (!found) {
        sbuf_printf(report, "direct: %s/config.toml is not attached\n", home);
        return CODEX_DIRECT;
    }
    ca_plan p;
    ca_view v;
    int rc = ca_journal_plan(&j, &p, err, errlen);
    if (rc == 0 && (rc = ca_view_load(&j, &p, &v, err, errlen)) != 0)
        ca_plan_free(&p);
    if (rc == 0) {
        int drifted = !v.present || !v.parsed || v.n_changed > 0;
        codex_check check = {.ok = 1};
        if (!drifted && answers) {
            /* asked as Codex asks, with the key the file holds: an answer from
             * another database's gateway, or one that refuses the key, is not
             * a working attach (Codex would spin on "Reconnecting..." or 401s) */
            sbuf key = SBUF_INIT;
            char hash[65];
            if (ca_attached_key(&j, &key, hash) != 0)
                sbuf_secret_wipe(&key);
            answers(j.gateway_url, key.p ? key.p : "", ud, &check);
            sbuf_secret_wipe(&key);
        }
        if (drifted)
            sbuf_puts(report, "drifted: ");
        else if (!answers)
            sbuf_puts(report, "attached: ");
        else if (check.ok)
            sbuf_puts(report, "attached, verified: ");
        else
            sbuf_printf(report, "attached, but %s: ", check.head);
        ca_report_attached(report, &j);
        if (!drifted && check.detail[0])
            sbuf_printf(report, "  %s\n", check.detail);
        if (!v.present)
            sbuf_puts(report, "  the file is gone\n");
        else if (!v.parsed)
            sbuf_printf(report, "  the file no longer parses: %s\n", v.parse_err);
        else if (v.drift.len)
            sbuf_append(report, v.drift.p, v.drift.len);
        if (!drifted && strcmp(v.sha, j.written_sha) != 0)
            sbuf_puts(report, "  (other parts of the file changed since attach; detach keeps them)\n");
        rc = drifted ? CODEX_DRIFTED : CODEX_ATTACHED;
        ca_view_free(&v);
        ca_plan_free(&p);
    }
    store_codex_journal_free(&j);
    return rc;
}

/* ---------- one operation at a time ---------- */

/* Attach, detach, status and recovery of one database never overlap, in
 * this process or another (a `status` must not "recover" an attach that a
 * starting gateway is in the middle of): an flock on a file beside the
 * database, held for the whole operation. -1 if it cannot be taken. */
static int ca_lock(store *s, char *err, size_t errlen)
{
    char path[CODEX_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s-codex.lock", store_path(s));
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    while (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0)
        sbuf_fmt_into(err, errlen, "cannot lock %s: %s", path, strerror(errno));
    return fd;
}

static void ca_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* releases the flock */
}

int codex_recover_all(store *s, sbuf *report)
{
    char err[256] = "";
    int fd = ca_lock(s, err, sizeof err);
    if (fd < 0) {
        sbuf_printf(report, "%s\n", err);
        return -1;
    }
    int rc = ca_recover_all_locked(s, report);
    ca_unlock(fd);
    return rc;
}

int codex_attach_ws(store *s, const char *home, const char *gateway, int websockets, sbuf *report, char *err,
                    size_t errlen)
{
    int fd = ca_lock(s, err, errlen);
    int rc = fd < 0 ? -1 : ca_attach_locked(s, home, gateway, websockets, report, err, errlen);
    ca_unlock(fd);
    return rc;
}

int codex_attach(store *s, const char *home, const char *gateway, sbuf *report, char *err, size_t errlen)
{
    return codex_attach_ws(s, home, gateway, 0, report, err, errlen);
}

int codex_detach(store *s, const char *home, int force, sbuf *report, char *err, size_t errlen)
{
    int fd = ca_lock(s, err, errlen);
    int rc = fd < 0 ? -1 : ca_detach_locked(s, home, force, report, err, errlen);
    ca_unlock(fd);
    return rc;
}

int codex_status(store *s, const char *home, sbuf *report, char *err, size_t errlen)
{
    return codex_status_check(s, home, NULL, NULL, report, err, errlen);
}

int codex_status_check(store *s, const char *home, codex_answers_fn answers, void *ud, sbuf *report, char *err,
                       size_t errlen)
{
    int fd = ca_lock(s, err, errlen);
    int rc = fd < 0 ? -1 : ca_status_locked(s, home, answers, ud, report, err, errlen);
    ca_unlock(fd);
    return rc;
}
