/* cli_claude.c: `switchyard claude attach|detach|status`: pointing Claude
 * Code at the gateway through the env object of its settings.json, and
 * handing the file back. Owns the options, the settings path, the order of
 * every step and the record beside settings.json that makes each step
 * survive a kill:
 *
 *   attach:  recover -> read + check -> key minted (or the attached one
 *            kept) -> record 'attaching' (originals, hash of what will be
 *            written) -> temp, fsync, rename -> record 'attached'
 *   detach:  recover -> three-way restore per key -> record 'detaching'
 *            (hash of what will be written) -> temp, fsync, rename (or
 *            remove) -> key revoked -> record removed
 *
 * The gateway is found as `codex attach` finds it (admin/gateway_find.h);
 * the key is a platform key minted by the store's key code, as codex
 * attach's is; what is edited in the file, and the record's format, are
 * codex/claude_settings.c's. See docs/claude.md. */
#include "admin/cli_internal.h"
#include "admin/gateway_find.h"
#include "base/safe_file.h"
#include "base/sbuf.h"
#include "base/sha256.h"
#include "base/text.h"
#include "codex/claude_settings.h"
#include "codex/codex_attach.h"
#include "core/config.h"
#include "store/store.h"
#include "store/store_codex.h"
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

#define CC_KEY_NAME "claude-code"
#define CC_RECORD_SUFFIX ".switchyard-attach"
#define CC_BASE_URL "ANTHROPIC_BASE_URL"
#define CC_TOKEN "ANTHROPIC_AUTH_TOKEN"
#define CC_MODEL "ANTHROPIC_MODEL"
#define CC_HAIKU "ANTHROPIC_DEFAULT_HAIKU_MODEL"
#define CC_SMALL_FAST "ANTHROPIC_SMALL_FAST_MODEL" /* the older name of the haiku model; older versions read only it */

/* every env member attach may set: none of them may appear twice */
static const char *const cc_names[] = {CC_BASE_URL, CC_TOKEN, CC_MODEL, CC_HAIKU, CC_SMALL_FAST};
#define CC_NAMES (sizeof cc_names / sizeof cc_names[0])

void cli_usage_claude(FILE *f)
{
    fputs("usage: switchyard claude attach [--settings PATH [--create]] [--gateway HOST:PORT|URL] [--offline]\n"
          "                                [--model M] [--small-model M] [--db PATH]\n"
          "       switchyard claude detach [--settings PATH] [--db PATH]\n"
          "       switchyard claude status [--settings PATH] [--db PATH]\n"
          "  the settings file defaults to $CLAUDE_CONFIG_DIR/settings.json, else ~/.claude/settings.json;\n"
          "  attach refuses a directory that does not exist unless --create. The gateway is found as for\n"
          "  `codex attach`: --gateway, else the one serving this database, else the configured listen\n"
          "  address, which must answer (--offline: unchecked). attach writes ANTHROPIC_BASE_URL and\n"
          "  ANTHROPIC_AUTH_TOKEN (a platform key of its own) into the file's env, and ANTHROPIC_MODEL\n"
          "  (--model) and ANTHROPIC_DEFAULT_HAIKU_MODEL (--small-model); detach gives the file back;\n"
          "  status exits 1 when the gateway does not answer or refuses the key (see docs/claude.md)\n",
          f);
}

/* ---------- options and paths ---------- */

typedef struct cc_args {
    const char *db, *settings, *gateway, *model, *small;
    int offline, create, help;
    char gateway_url[STORE_RUNFILE_URL_MAX]; /* --gateway as a URL */
} cc_args;

/* Where things are: the settings file as named (the record goes beside
 * it, in Claude's directory even when the file is a dotfile manager's
 * link), the file written (a link's target), and the record. */
typedef struct cc_paths {
    char given[CLAUDE_PATH_MAX];
    char target[CLAUDE_PATH_MAX];
    char record[CLAUDE_PATH_MAX + 32];
} cc_paths;

/* --settings, else $CLAUDE_CONFIG_DIR/settings.json, else
 * $HOME/.claude/settings.json (Claude Code's own rule), made absolute
 * without resolving links. */
static int cc_paths_resolve(const char *opt, cc_paths *p, char *err, size_t errlen)
{
    char raw[CLAUDE_PATH_MAX];
    const char *dir = getenv("CLAUDE_CONFIG_DIR"), *home = getenv("HOME");
    int fit;
    if (opt && *opt)
        fit = snprintf(raw, sizeof raw, "%s", opt);
    else if (dir && *dir)
        fit = snprintf(raw, sizeof raw, "%s/settings.json", dir);
    else if (home && *home)
        fit = snprintf(raw, sizeof raw, "%s/.claude/settings.json", home);
    else {
        sbuf_fmt_into(err, errlen, "no settings file: give --settings or set CLAUDE_CONFIG_DIR or HOME");
        return -1;
    }
    if (fit >= (int)sizeof raw - 64) {
        sbuf_fmt_into(err, errlen, "the settings path is too long");
        return -1;
    }
    if (raw[0] == '/') {
        snprintf(p->given, sizeof p->given, "%s", raw);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd) ||
            (size_t)snprintf(p->given, sizeof p->given, "%s/%s", cwd, raw) >= sizeof p->given - 64) {
            sbuf_fmt_into(err, errlen, "cannot make %s absolute", raw);
            return -1;
        }
    }
    /* a symlink (dotfile managers) is followed so the rename replaces its
     * target; a dangling one stays the link, which safe_file_read refuses */
    char real[PATH_MAX];
    struct stat sb;
    if (lstat(p->given, &sb) == 0 && S_ISLNK(sb.st_mode) && realpath(p->given, real) && strlen(real) < 4000)
        snprintf(p->target, sizeof p->target, "%s", real);
    else
        snprintf(p->target, sizeof p->target, "%s", p->given);
    snprintf(p->record, sizeof p->record, "%s%s", p->given, CC_RECORD_SUFFIX);
    return 0;
}

/* The settings file's directory must exist for attach (a mistyped
 * CLAUDE_CONFIG_DIR must not become a directory Claude Code never reads)
 * unless --create, which makes it 0700. 0, or -1 printed. */
static int cc_dir_ready(const char *cmd, const cc_paths *p, int create)
{
    char dir[CLAUDE_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", p->given);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    struct stat sb;
    if (stat(dir, &sb) == 0) {
        if (S_ISDIR(sb.st_mode))
            return 0;
        fprintf(stderr, "switchyard %s: %s is not a directory\n", cmd, dir);
        return -1;
    }
    if (errno == ENOENT && !create) {
        fprintf(stderr,
                "switchyard %s: the directory %s does not exist (is Claude Code set up here? CLAUDE_CONFIG_DIR "
                "mistyped?); pass --create to create it\n",
                cmd, dir);
        return -1;
    }
    if (errno != ENOENT || mkdir(dir, 0700) != 0) {
        fprintf(stderr, "switchyard %s: cannot use the directory %s: %s\n", cmd, dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* Parses the options (the attach-only ones refused elsewhere), resolves
 * the paths and opens the store; NULL with *rc the exit code to stop with. */
static store *cc_open(const char *cmd, int argc, char **argv, cc_args *a, cc_paths *p, int *rc)
{
    int attach = strcmp(cmd, "claude attach") == 0;
    const char *gw = NULL, *model = NULL, *small = NULL;
    int f_off = 0, f_create = 0;
    const cli_opt opts[] = {{"db", &a->db, NULL},         {"settings", &a->settings, NULL},
                            {"gateway", &gw, NULL},       {"model", &model, NULL},
                            {"small-model", &small, NULL}, {"offline", NULL, &f_off},
                            {"create", NULL, &f_create},  {"help", NULL, &a->help},
                            {NULL, NULL, NULL}};
    *rc = cli_parse_or_usage(cmd, argc, argv, opts, &a->help, cli_usage_claude);
    if (*rc >= 0)
        return NULL;
    const char *wrong = attach ? NULL
                        : gw   ? "--gateway"
                        : model ? "--model"
                        : small ? "--small-model"
                        : f_off ? "--offline"
                        : f_create ? "--create"
                                   : NULL;
    if (wrong) {
        fprintf(stderr, "switchyard %s: %s applies to attach only\n", cmd, wrong);
        *rc = CLI_EXIT_USAGE;
        return NULL;
    }
    /* a model name goes into a file Claude Code reads and onto terminals */
    const char *bad = model && (!*model || text_check_str(model))   ? "--model"
                      : small && (!*small || text_check_str(small)) ? "--small-model"
                                                                     : NULL;
    if (bad) {
        fprintf(stderr, "switchyard %s: %s needs a model name (no control characters)\n", cmd, bad);
        *rc = CLI_EXIT_USAGE;
        return NULL;
    }
    a->gateway = gw, a->model = model, a->small = small, a->offline = f_off, a->create = f_create;
    char err[512] = "";
    if (gw && gateway_find_url(gw, a->gateway_url, sizeof a->gateway_url, err, sizeof err) != 0) {
        fprintf(stderr, "switchyard %s: --gateway %s\n", cmd, err);
        *rc = CLI_EXIT_USAGE;
        return NULL;
    }
    if (cc_paths_resolve(a->settings, p, err, sizeof err) != 0) {
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
        *rc = CLI_EXIT_FAIL;
        return NULL;
    }
    if (attach && cc_dir_ready(cmd, p, a->create) != 0) {
        *rc = CLI_EXIT_FAIL;
        return NULL;
    }
    store *s = cli_store_open(cmd, a->db);
    *rc = s ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    return s;
}

/* ---------- the gateway ---------- */

/* The gateway to attach to, as `codex attach` picks it: --gateway, else
 * the one serving this database (its run file), else the configured
 * listen address. It must answer (unless --offline), and a gateway found
 * at the listen address must be this database's: one that says another
 * instance is serving there would refuse the key minted here, and Claude
 * Code would only show 401s. -1 printed, *rc the exit code. */
static int cc_gateway(const char *cmd, const cc_args *a, char *gw, size_t n, int *rc)
{
    char why[300] = "", inst[STORE_RUNFILE_INSTANCE] = "";
    const char *db = cli_db_path(a->db);
    *rc = CLI_EXIT_FAIL;
    gateway_found found;
    memset(&found, 0, sizeof found);
    if (a->gateway) {
        snprintf(gw, n, "%s", a->gateway_url);
    } else {
        gateway_find(db, &found);
        if (found.answering) {
            snprintf(gw, n, "%s", found.rf.url);
            return 0;
        }
        sy_config c;
        config_defaults(&c);
        if (config_from_env(&c) < 0) {
            *rc = CLI_EXIT_USAGE;
            return -1;
        }
        codex_gateway_url(c.listen_host, c.listen_port, gw, n);
    }
    if (a->offline)
        return 0;
    if (gateway_find_probe(gw, GATEWAY_FIND_TIMEOUT_MS, inst, sizeof inst, why, sizeof why) != 0) {
        fprintf(stderr,
                "switchyard %s: no gateway answers at %s (%s); start one (switchyard serve --db %s) or name it with "
                "--gateway HOST:PORT; --offline attaches anyway\n",
                cmd, gw, why, db);
        return -1;
    }
    if (!a->gateway && inst[0] && (!found.recorded || strcmp(inst, found.rf.instance) != 0)) {
        char seen[400];
        if (found.recorded)
            snprintf(seen, sizeof seen, "the gateway it records is instance %.30s at %.200s: %.100s",
                     found.rf.instance, found.rf.url, found.why);
        else
            snprintf(seen, sizeof seen, "no gateway has recorded serving it");
        fprintf(stderr,
                "switchyard %s: a gateway answers at %s, but it does not serve %s (%s), so it would refuse the key "
                "attach makes; start this database's gateway (switchyard serve --db %s), or name that one with "
                "--gateway HOST:PORT if it does serve this database\n",
                cmd, gw, db, seen, db);
        return -1;
    }
    return 0;
}

/* A base URL as written in the file, without trailing slashes. */
static void cc_base_trim(const char *in, char *out, size_t n)
{
    size_t len = strlen(in);
    while (len && in[len - 1] == '/')
        len--;
    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), in);
}

/* ---------- the record, the lock, the key ---------- */

/* The test hook codex attach has too: SWITCHYARD_TEST_CRASH_AT=<step>
 * kills the process there, as kill -9 would. */
static void cc_crash_point(const char *step)
{
    const char *at = getenv("SWITCHYARD_TEST_CRASH_AT");
    if (at && strcmp(at, step) == 0)
        raise(SIGKILL);
}

static void cc_before_rename(void *step)
{
    char at[64];
    snprintf(at, sizeof at, "%s_after_temp", (const char *)step);
    cc_crash_point(at);
}

static void cc_sha(const sbuf *b, int present, char out[65])
{
    if (present)
        sha256_hex(b->p ? b->p : "", b->len, out);
    else
        out[0] = '\0';
}

/* The record beside the file: 1 (r filled), 0 none, -1 err. */
static int cc_record_load(const cc_paths *p, claude_record *r, char *err, size_t errlen)
{
    sbuf b = SBUF_INIT;
    int present = 0, rc = safe_file_read(p->record, &b, &present, NULL, err, errlen);
    if (rc == 0 && present) {
        char e[256] = "";
        rc = claude_record_read(b.p, b.len, r, e, sizeof e) == 0 ? 1 : -1;
        if (rc < 0)
            sbuf_fmt_into(err, errlen,
                          "%s is damaged (%s); it was left as it is: see docs/claude.md, \"Recovering by hand\"",
                          p->record, e);
    }
    sbuf_secret_wipe(&b);
    return rc;
}

/* Replaces the record: owner-only, since it holds the original values,
 * which may be secrets of the user's. */
static int cc_record_save(const cc_paths *p, const claude_record *r, char *err, size_t errlen)
{
    sbuf b = SBUF_INIT;
    claude_record_write(r, &b);
    int rc = safe_file_replace(p->record, b.p, b.len, 0600, NULL, NULL, err, errlen);
    sbuf_secret_wipe(&b);
    return rc;
}

/* Attach, detach, status and their recovery never overlap for one
 * database: an flock beside it, held for the whole operation (as codex
 * attach holds <db>-codex.lock). */
static int cc_lock(store *s, char *err, size_t errlen)
{
    char path[CLAUDE_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s-claude.lock", store_path(s));
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

/* The database's path as the record names it (to tell the user which one
 * holds the key when it is not this one). */
static void cc_db_name(store *s, char *out, size_t n)
{
    char real[PATH_MAX];
    snprintf(out, n, "%s", realpath(store_path(s), real) ? real : store_path(s));
}

/* A new platform key named claude-code (store_key_add, the key code
 * `switchyard key add` and codex attach use): its plaintext, id, display
 * prefix and sha256. */
static int cc_key_mint(store *s, char key[64], int64_t *id, char prefix[16], char sha[65], char *err, size_t errlen)
{
    if (store_key_add(s, CC_KEY_NAME, key, 64, id, err, errlen) != 0)
        return -1;
    sha256_hex(key, strlen(key), sha);
    platform_key *ks = NULL;
    size_t n = 0;
    snprintf(prefix, 16, "%.7s", key); /* what the store shows, should the lookup below fail */
    if (store_keys_load(s, &ks, &n) == 0) {
        for (size_t i = 0; i < n; i++)
            if (ks[i].id == *id)
                snprintf(prefix, 16, "%s", ks[i].prefix);
        store_keys_free(ks, n);
    }
    return 0;
}

/* Revokes a key the record names, in this database only when its id and
 * hash both match (a record made with another database never revokes a
 * key of this one that happens to have the same id). One phrase for the
 * report: "revoked", "already revoked", ... */
static const char *cc_key_revoke(store *s, int64_t id, const char *sha)
{
    if (store_codex_key_is_live(s, id, sha) != 1)
        return "not live in this database (revoked already, or made with another --db)";
    char err[256] = "";
    return store_key_revoke_id(s, id, err, sizeof err) >= 0 ? "revoked" : "could not be revoked";
}

/* ---------- recovery ---------- */

/* The file as it is now: its bytes, whether it exists, its hash, and the
 * hash of the token in its env ("" none). */
typedef struct cc_view {
    sbuf bytes;
    int present, mode;
    char sha[65], token_sha[65];
} cc_view;

static int cc_view_load(const char *path, cc_view *v, char *err, size_t errlen)
{
    memset(v, 0, sizeof *v);
    v->mode = 0600;
    if (safe_file_read(path, &v->bytes, &v->present, &v->mode, err, errlen) != 0)
        return -1;
    cc_sha(&v->bytes, v->present, v->sha);
    sbuf tok = SBUF_INIT;
    if (v->present && claude_settings_env_get(v->bytes.p, v->bytes.len, CC_TOKEN, &tok) == 1)
        sha256_hex(tok.p ? tok.p : "", tok.len, v->token_sha);
    sbuf_secret_wipe(&tok);
    return 0;
}

static void cc_view_free(cc_view *v) { sbuf_secret_wipe(&v->bytes); }

/* A crash inside an attach: did the rename land? The file attach meant to
 * write, or (edited since) one holding the new key, says yes. */
static int cc_recover_attaching(store *s, const cc_paths *p, claude_record *r, sbuf *report, char *err,
                                size_t errlen)
{
    cc_view v;
    if (cc_view_load(r->settings, &v, err, errlen) != 0)
        return -1;
    safe_file_tmp_remove(r->settings);
    int landed = !strcmp(v.sha, r->written_sha);
    if (!landed && r->prev && !strcmp(v.sha, r->prev->written_sha))
        landed = 0;
    else if (!landed && v.token_sha[0] && !strcmp(v.token_sha, r->key_sha))
        landed = !r->prev || strcmp(r->prev->key_sha, r->key_sha) != 0;
    cc_view_free(&v);
    int rc;
    if (landed) {
        claude_record *prev = r->prev;
        r->prev = NULL;
        snprintf(r->state, sizeof r->state, "attached");
        rc = cc_record_save(p, r, err, errlen);
        if (rc == 0 && prev && prev->key_id != r->key_id)
            cc_key_revoke(s, prev->key_id, prev->key_sha);
        claude_record_free(prev);
        free(prev);
        if (rc == 0)
            sbuf_printf(report, "recovered: finished an interrupted attach of %s\n", r->settings);
        return rc;
    }
    if (r->prev) {
        /* a re-attach that did not land: the attach before it stands */
        if (r->prev->key_id != r->key_id)
            cc_key_revoke(s, r->key_id, r->key_sha);
        rc = cc_record_save(p, r->prev, err, errlen);
        if (rc == 0)
            sbuf_printf(report, "recovered: an interrupted attach of %s had not written the file; still attached as "
                                "before\n", r->settings);
        return rc;
    }
    cc_key_revoke(s, r->key_id, r->key_sha);
    rc = safe_file_remove(p->record, err, errlen);
    if (rc == 0)
        sbuf_printf(report, "recovered: rolled back an interrupted attach of %s (the file was not changed)\n",
                    r->settings);
    return rc;
}

/* A crash inside a detach: did the restore land? */
static int cc_recover_detaching(store *s, const cc_paths *p, claude_record *r, sbuf *report, char *err,
                                size_t errlen)
{
    cc_view v;
    if (cc_view_load(r->settings, &v, err, errlen) != 0)
        return -1;
    safe_file_tmp_remove(r->settings);
    int landed = r->restore_present ? v.present && !strcmp(v.sha, r->restore_sha) : !v.present;
    cc_view_free(&v);
    if (landed) {
        cc_key_revoke(s, r->key_id, r->key_sha);
        int rc = safe_file_remove(p->record, err, errlen);
        if (rc == 0)
            sbuf_printf(report, "recovered: finished an interrupted detach of %s\n", r->settings);
        return rc;
    }
    snprintf(r->state, sizeof r->state, "attached");
    int rc = cc_record_save(p, r, err, errlen);
    if (rc == 0)
        sbuf_printf(report, "recovered: an interrupted detach of %s had not written the file; still attached\n",
                    r->settings);
    return rc;
}

/* Recovery first, then the record: 1 attached (r filled), 0 not, -1 err. */
static int cc_record_get(store *s, const cc_paths *p, claude_record *r, sbuf *report, char *err, size_t errlen)
{
    int found = cc_record_load(p, r, err, errlen);
    if (found <= 0)
        return found;
    int rc = 0;
    if (!strcmp(r->state, "attaching"))
        rc = cc_recover_attaching(s, p, r, report, err, errlen);
    else if (!strcmp(r->state, "detaching"))
        rc = cc_recover_detaching(s, p, r, report, err, errlen);
    claude_record_free(r);
    return rc != 0 ? -1 : cc_record_load(p, r, err, errlen);
}

/* ---------- attach ---------- */

static void cc_report_attached(sbuf *out, const claude_record *r)
{
    char when[64];
    time_t t = (time_t)r->created_at;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    sbuf_printf(out, "%s -> %s since %s (key %s)\n", r->settings, r->gateway, when, r->key_prefix);
}

/* The models the file sets now, one line each ("Claude Code's default"
 * when unset). */
static void cc_report_models(sbuf *out, const char *text, size_t len)
{
    static const struct {
        const char *label, *a, *b;
    } rows[] = {{"model", CC_MODEL, NULL}, {"small/fast model", CC_HAIKU, CC_SMALL_FAST}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        sbuf v = SBUF_INIT;
        const char *from = rows[i].a;
        if (claude_settings_env_get(text, len, rows[i].a, &v) != 1 && rows[i].b) {
            sbuf_reset(&v);
            from = claude_settings_env_get(text, len, rows[i].b, &v) == 1 ? rows[i].b : NULL;
        }
        if (v.len && from)
            sbuf_printf(out, "  %s: %s (%s)\n", rows[i].label, v.p, from);
        else
            sbuf_printf(out, "  %s: Claude Code's default (%s not set)\n", rows[i].label, rows[i].a);
        sbuf_free(&v);
    }
}

/* The members attach sets this time, in the order they are added. */
static size_t cc_plan(claude_env_set *set, const char *gw, const char *key, const cc_args *a)
{
    size_t n = 0;
    memset(set, 0, CC_NAMES * sizeof *set);
    set[n].name = CC_BASE_URL, set[n++].value = gw;
    set[n].name = CC_TOKEN, set[n++].value = key;
    if (a->model)
        set[n].name = CC_MODEL, set[n++].value = a->model;
    if (a->small) {
        set[n].name = CC_HAIKU, set[n++].value = a->small;
        set[n].name = CC_SMALL_FAST, set[n++].value = a->small;
    }
    return n;
}

static void cc_plan_free(claude_env_set *set, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sbuf_secret_wipe(&set[i].orig);
}

/* The record of this attach: the earlier one's originals (the first
 * attach's are the ones detach gives back) plus the members set now. */
static void cc_record_make(claude_record *r, const claude_record *old, const cc_view *v, const claude_env_set *set,
                           size_t n, int env_created, const char *db, const char *gw, int64_t key_id,
                           const char *prefix, const char *key_sha, const sbuf *out)
{
    if (old) {
        claude_record_copy(r, old);
        r->prev = calloc(1, sizeof *r->prev);
        if (!r->prev)
            abort();
        claude_record_copy(r->prev, old);
    } else {
        memset(r, 0, sizeof *r);
        r->original_present = v->present;
        r->original_mode = v->mode;
        sbuf_append(&r->original, v->bytes.p ? v->bytes.p : "", v->bytes.len);
        snprintf(r->original_sha, sizeof r->original_sha, "%s", v->sha);
        r->env_created = env_created;
        r->created_at = (int64_t)time(NULL);
    }
    snprintf(r->state, sizeof r->state, "attaching");
    snprintf(r->db, sizeof r->db, "%s", db);
    snprintf(r->gateway, sizeof r->gateway, "%s", gw);
    r->key_id = key_id;
    snprintf(r->key_prefix, sizeof r->key_prefix, "%s", prefix);
    snprintf(r->key_sha, sizeof r->key_sha, "%s", key_sha);
    for (size_t i = 0; i < n; i++) {
        claude_record_key *k = claude_record_key_get(r, set[i].name);
        if (!k) {
            k = &r->k[r->n++];
            snprintf(k->name, sizeof k->name, "%s", set[i].name);
            k->orig_present = set[i].orig_present;
            sbuf_append(&k->orig, set[i].orig.p ? set[i].orig.p : "", set[i].orig.len);
        }
        sbuf_reset(&k->written);
        k->written_sha[0] = '\0';
        if (!strcmp(set[i].name, CC_TOKEN))
            snprintf(k->written_sha, sizeof k->written_sha, "%s", key_sha); /* never the key itself */
        else
            sbuf_puts(&k->written, set[i].value);
    }
    sha256_hex(out->p ? out->p : "", out->len, r->written_sha);
}

static int cc_attach_locked(store *s, const cc_paths *p, const char *gw, const cc_args *a, sbuf *report, char *err,
                            size_t errlen)
{
    claude_record old;
    int have_old = cc_record_get(s, p, &old, report, err, errlen);
    if (have_old < 0)
        return -1;
    const char *target = have_old ? old.settings : p->target;
    cc_view v;
    if (cc_view_load(target, &v, err, errlen) != 0) {
        if (have_old)
            claude_record_free(&old);
        return -1;
    }
    char perr[300] = "";
    if (v.present && claude_settings_check(v.bytes.p, v.bytes.len, cc_names, CC_NAMES, perr, sizeof perr) != 0) {
        sbuf_fmt_into(err, errlen, "cannot attach %s: %s; it was left untouched", target, perr);
        cc_view_free(&v);
        if (have_old)
            claude_record_free(&old);
        return -1;
    }
    /* the key: the attached one while the file still holds it and it is
     * live (attach twice changes no credential), else a new one */
    char key[64] = "", prefix[16] = "", key_sha[65] = "";
    int64_t key_id = 0;
    int reuse = 0, rc = 0;
    if (have_old && v.token_sha[0] && !strcmp(v.token_sha, old.key_sha) &&
        store_codex_key_is_live(s, old.key_id, old.key_sha) == 1) {
        sbuf tok = SBUF_INIT;
        claude_settings_env_get(v.bytes.p, v.bytes.len, CC_TOKEN, &tok);
        if (tok.len < sizeof key) {
            memcpy(key, tok.p, tok.len);
            key[tok.len] = '\0';
            key_id = old.key_id;
            snprintf(prefix, sizeof prefix, "%s", old.key_prefix);
            snprintf(key_sha, sizeof key_sha, "%s", old.key_sha);
            reuse = 1;
        }
        sbuf_secret_wipe(&tok);
    }
    if (!reuse)
        rc = cc_key_mint(s, key, &key_id, prefix, key_sha, err, errlen);
    claude_env_set set[CC_NAMES];
    size_t n = cc_plan(set, gw, key, a);
    int env_created = 0;
    sbuf out = SBUF_INIT;
    if (rc == 0 && claude_settings_set(v.bytes.p, v.bytes.len, set, n, &env_created, &out, perr, sizeof perr) != 0) {
        sbuf_fmt_into(err, errlen, "cannot attach %s: %s; it was left untouched", target, perr);
        rc = -1;
    }
    memset(key, 0, sizeof key);
    claude_record r;
    memset(&r, 0, sizeof r);
    if (rc == 0 && reuse && v.present && out.len == v.bytes.len && !memcmp(out.p, v.bytes.p, out.len)) {
        sbuf_puts(report, "already attached: ");
        cc_report_attached(report, &old);
        cc_report_models(report, v.bytes.p, v.bytes.len);
        goto done;
    }
    if (rc != 0) {
        if (!reuse && key_id)
            cc_key_revoke(s, key_id, key_sha);
        goto done;
    }
    char db[CLAUDE_PATH_MAX];
    cc_db_name(s, db, sizeof db);
    cc_record_make(&r, have_old ? &old : NULL, &v, set, n, env_created, db, gw, key_id, prefix, key_sha, &out);
    if (!have_old)
        snprintf(r.settings, sizeof r.settings, "%s", target);
    /* the record first: a kill from here on leaves what recovery needs */
    if ((rc = cc_record_save(p, &r, err, errlen)) != 0) {
        if (!reuse)
            cc_key_revoke(s, key_id, key_sha);
        goto done;
    }
    cc_crash_point("claude_attach_after_record");
    /* a new file is the owner's only; an existing one keeps its mode */
    if ((rc = safe_file_replace(target, out.p, out.len, v.present ? v.mode : 0600, cc_before_rename,
                                (void *)"claude_attach", err, errlen)) != 0) {
        char e2[256] = "";
        if (!reuse)
            cc_key_revoke(s, key_id, key_sha);
        if (have_old ? cc_record_save(p, &old, e2, sizeof e2) : safe_file_remove(p->record, e2, sizeof e2))
            sbuf_printf(report, "the attach record %s could not be put back (%s); the next command does it\n",
                        p->record, e2);
        goto done;
    }
    cc_crash_point("claude_attach_after_rename");
    claude_record_free(r.prev);
    free(r.prev);
    r.prev = NULL;
    snprintf(r.state, sizeof r.state, "attached");
    if ((rc = cc_record_save(p, &r, err, errlen)) != 0)
        goto done; /* the file is attached; the next command's recovery finishes the record */
    sbuf_puts(report, have_old ? (reuse ? "attached (same key): " : "attached (new key): ") : "attached: ");
    cc_report_attached(report, &r);
    cc_report_models(report, out.p, out.len);
    if (have_old && !reuse)
        sbuf_printf(report, "  the earlier key %s: %s\n", old.key_prefix, cc_key_revoke(s, old.key_id, old.key_sha));
    if (!have_old)
        sbuf_printf(report, "  what the file's env held before is kept in %s; `switchyard claude detach` gives it "
                            "back\n", p->record);
    if (v.present && (v.mode & 077))
        sbuf_printf(report, "  note: %s is readable by others (mode %04o) and now holds a platform key; "
                            "chmod 600 it if others use this machine\n", target, (unsigned)v.mode);
done:
    if (out.p)
        memset(out.p, 0, out.len);
    sbuf_free(&out);
    cc_plan_free(set, n);
    cc_view_free(&v);
    claude_record_free(&r);
    if (have_old)
        claude_record_free(&old);
    return rc;
}

/* ---------- detach ---------- */

/* The original of a file removed while attached, so detach loses nothing:
 * a copy beside it. */
static int cc_keep_original(const claude_record *r, sbuf *report, char *err, size_t errlen)
{
    char path[CLAUDE_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s.switchyard-original-%lld", r->settings, (long long)time(NULL));
    if (safe_file_replace(path, r->original.p ? r->original.p : "", r->original.len, 0600, NULL, NULL, err, errlen))
        return -1;
    sbuf_printf(report, "%s is gone (removed while attached); the file as it was before attach is in %s\n",
                r->settings, path);
    return 0;
}

static int cc_detach_locked(store *s, const cc_paths *p, sbuf *report, char *err, size_t errlen)
{
    claude_record r;
    int found = cc_record_get(s, p, &r, report, err, errlen);
    if (found <= 0) {
        if (found == 0)
            sbuf_printf(report, "not attached: %s is as you left it\n", p->given);
        return found;
    }
    cc_view v;
    if (cc_view_load(r.settings, &v, err, errlen) != 0) {
        claude_record_free(&r);
        return -1;
    }
    sbuf restore = SBUF_INIT;
    int restore_present = 1, rc = 0;
    claude_env_restore keys[CLAUDE_ENV_KEYS_MAX];
    memset(keys, 0, sizeof keys);
    if (!v.present) {
        restore_present = 0;
        if (r.original_present)
            rc = cc_keep_original(&r, report, err, errlen);
        else
            sbuf_printf(report, "%s is gone (removed while attached): nothing to give back\n", r.settings);
    } else if (!strcmp(v.sha, r.written_sha)) {
        /* untouched since attach: the original, exactly */
        restore_present = r.original_present;
        sbuf_append(&restore, r.original.p ? r.original.p : "", r.original.len);
        sbuf_puts(report, r.original_present ? "restored the original byte for byte\n"
                                             : "removed the file attach created\n");
    } else {
        for (size_t i = 0; i < r.n; i++) {
            keys[i].name = r.k[i].name;
            keys[i].written = r.k[i].written_sha[0] ? NULL : (r.k[i].written.p ? r.k[i].written.p : "");
            keys[i].written_sha = r.k[i].written_sha;
            keys[i].orig_present = r.k[i].orig_present;
            keys[i].orig = r.k[i].orig.p ? r.k[i].orig.p : "";
            keys[i].orig_len = r.k[i].orig.len;
        }
        char perr[300] = "";
        int empty = 0;
        if (claude_settings_restore(v.bytes.p, v.bytes.len, keys, r.n, r.env_created, &restore, &empty, perr,
                                    sizeof perr) != 0) {
            sbuf_fmt_into(err, errlen,
                          "%s changed since attach and %s: it was not touched; fix it and run detach again",
                          r.settings, perr);
            rc = -1;
        } else if (!r.original_present && empty) {
            restore_present = 0;
            sbuf_puts(report, "removed the file attach created (nothing else had been added to it)\n");
        } else if (r.original_present && restore.len == r.original.len &&
                   !memcmp(restore.p, r.original.p ? r.original.p : "", restore.len)) {
            sbuf_puts(report, "restored the original byte for byte\n");
        } else {
            sbuf_puts(report, "gave back the env members attach set; everything else stays as you have it\n");
        }
        for (size_t i = 0; rc == 0 && i < r.n; i++)
            if (keys[i].changed)
                sbuf_printf(report, "  kept %s: you changed it while attached\n", keys[i].name);
    }
    if (rc == 0 && (v.present || restore_present)) {
        snprintf(r.state, sizeof r.state, "detaching");
        r.restore_present = restore_present;
        cc_sha(&restore, restore_present, r.restore_sha);
        rc = cc_record_save(p, &r, err, errlen);
        if (rc == 0)
            cc_crash_point("claude_detach_after_record");
        /* the file keeps the mode it has (attach never changed it) */
        if (rc == 0)
            rc = restore_present ? safe_file_replace(r.settings, restore.p ? restore.p : "", restore.len, v.mode,
                                                     cc_before_rename, (void *)"claude_detach", err, errlen)
                                 : safe_file_remove(r.settings, err, errlen);
        if (rc != 0) {
            snprintf(r.state, sizeof r.state, "attached");
            cc_record_save(p, &r, NULL, 0);
        } else {
            cc_crash_point("claude_detach_after_rename");
        }
    }
    if (rc == 0) {
        const char *key = cc_key_revoke(s, r.key_id, r.key_sha);
        rc = safe_file_remove(p->record, err, errlen);
        if (rc == 0)
            sbuf_printf(report, "detached: %s (key %s %s)\n", r.settings, r.key_prefix, key);
    }
    if (restore.p)
        memset(restore.p, 0, restore.len);
    sbuf_free(&restore);
    cc_view_free(&v);
    claude_record_free(&r);
    return rc;
}

/* ---------- status ---------- */

/* Where the file points now and whether that works: the gateway answers
 * /health and takes the key. *bad set when Claude Code would fail; head
 * (NULL: already said) gets what the first line starts with then. */
static void cc_status_check(const cc_view *v, sbuf *head, sbuf *lines, int *bad)
{
    sbuf base = SBUF_INIT, tok = SBUF_INIT;
    char url[STORE_RUNFILE_URL_MAX] = "", why[300] = "";
    if (claude_settings_env_get(v->bytes.p, v->bytes.len, CC_BASE_URL, &base) == 1)
        cc_base_trim(base.p, url, sizeof url);
    int has_tok = claude_settings_env_get(v->bytes.p, v->bytes.len, CC_TOKEN, &tok) == 1 && tok.len;
    if (!url[0]) {
        sbuf_puts(lines, "  gateway: none (ANTHROPIC_BASE_URL is not set: Claude Code goes to Anthropic)\n");
        *bad = 1;
    } else if (gateway_find_probe(url, GATEWAY_FIND_TIMEOUT_MS, NULL, 0, why, sizeof why) != 0) {
        sbuf_printf(lines, "  gateway: no answer at %s (%s)\n", url, why);
        sbuf_puts(lines, "  key: not checked\n");
        if (head)
            sbuf_printf(head, "attached, but no gateway answers at %s: ", url);
        *bad = 1;
    } else {
        sbuf_printf(lines, "  gateway: %s answers (GET /health)\n", url);
        long st = has_tok ? gateway_find_key_check(url, tok.p, why, sizeof why) : 0;
        if (!has_tok)
            sbuf_puts(lines, "  key: none (ANTHROPIC_AUTH_TOKEN is not set)\n");
        else if (st == 200)
            sbuf_puts(lines, "  key: valid there (GET /v1/models answered 200)\n");
        else if (st)
            sbuf_printf(lines, "  key: refused there (GET /v1/models answered %ld)\n", st);
        else
            sbuf_printf(lines, "  key: not checked (%s)\n", why);
        if (st != 200 && head)
            sbuf_printf(head, "attached, but the gateway at %s does not take the key: ", url);
        *bad |= st != 200;
    }
    sbuf_free(&base);
    sbuf_secret_wipe(&tok);
}

static int cc_status_locked(store *s, const cc_paths *p, sbuf *report, int *bad, char *err, size_t errlen)
{
    claude_record r;
    int found = cc_record_get(s, p, &r, report, err, errlen);
    if (found < 0)
        return -1;
    if (!found) {
        sbuf_printf(report, "direct: %s is not attached\n", p->given);
        cc_view v;
        sbuf base = SBUF_INIT;
        if (cc_view_load(p->target, &v, NULL, 0) == 0 && v.present &&
            claude_settings_env_get(v.bytes.p, v.bytes.len, CC_BASE_URL, &base) == 1)
            sbuf_printf(report, "  (its env sets ANTHROPIC_BASE_URL = %s, not written by attach)\n", base.p);
        sbuf_free(&base);
        cc_view_free(&v);
        return 0;
    }
    cc_view v;
    if (cc_view_load(r.settings, &v, err, errlen) != 0) {
        claude_record_free(&r);
        return -1;
    }
    sbuf head = SBUF_INIT, lines = SBUF_INIT, drift = SBUF_INIT;
    char perr[300] = "";
    if (!v.present) {
        sbuf_puts(&head, "drifted: ");
        sbuf_puts(&lines, "  the file is gone\n");
    } else if (claude_settings_check(v.bytes.p, v.bytes.len, cc_names, CC_NAMES, perr, sizeof perr) != 0) {
        sbuf_puts(&head, "drifted: ");
        sbuf_printf(&lines, "  the file no longer parses: %s\n", perr);
    } else {
        for (size_t i = 0; i < r.n; i++) {
            const claude_record_key *k = &r.k[i];
            claude_env_restore want = {.name = k->name,
                                       .written = k->written_sha[0] ? NULL : (k->written.p ? k->written.p : ""),
                                       .written_sha = k->written_sha};
            if (claude_settings_is_written(v.bytes.p, v.bytes.len, &want) == 1)
                continue;
            sbuf now = SBUF_INIT;
            int g = claude_settings_env_get(v.bytes.p, v.bytes.len, k->name, &now);
            if (g == 0)
                sbuf_printf(&drift, "  %s: removed\n", k->name);
            else if (k->written_sha[0])
                sbuf_printf(&drift, "  %s: changed (not the attach's key)\n", k->name);
            else
                sbuf_printf(&drift, "  %s: now %s (attach wrote %s)\n", k->name, now.p, k->written.p);
            sbuf_secret_wipe(&now);
        }
        /* drifted first, as codex status says it: what changed is the news */
        if (drift.len)
            sbuf_puts(&head, "drifted: ");
        cc_status_check(&v, drift.len ? NULL : &head, &lines, bad);
        cc_report_models(&lines, v.bytes.p, v.bytes.len);
        if (!drift.len && strcmp(v.sha, r.written_sha) != 0)
            sbuf_puts(&lines, "  (other parts of the file changed since attach; detach keeps them)\n");
    }
    sbuf_append(report, head.len ? head.p : "attached: ", head.len ? head.len : 10);
    cc_report_attached(report, &r);
    sbuf_append(report, lines.p ? lines.p : "", lines.len);
    sbuf_append(report, drift.p ? drift.p : "", drift.len);
    sbuf_free(&head), sbuf_free(&lines), sbuf_free(&drift);
    cc_view_free(&v);
    claude_record_free(&r);
    return 0;
}

/* ---------- the commands ---------- */

typedef enum { CC_ATTACH, CC_DETACH, CC_STATUS } cc_op;

static int cc_run(const char *cmd, cc_op op, int argc, char **argv)
{
    cc_args a;
    cc_paths p;
    memset(&a, 0, sizeof a);
    memset(&p, 0, sizeof p);
    int rc;
    store *s = cc_open(cmd, argc, argv, &a, &p, &rc);
    if (!s)
        return rc;
    char gw[STORE_RUNFILE_URL_MAX] = "", err[1024] = "";
    if (op == CC_ATTACH && cc_gateway(cmd, &a, gw, sizeof gw, &rc) != 0) {
        store_close(s);
        return rc;
    }
    sbuf report = SBUF_INIT;
    int bad = 0, fd = cc_lock(s, err, sizeof err);
    rc = fd < 0                ? -1
         : op == CC_ATTACH ? cc_attach_locked(s, &p, gw, &a, &report, err, sizeof err)
         : op == CC_DETACH ? cc_detach_locked(s, &p, &report, err, sizeof err)
                           : cc_status_locked(s, &p, &report, &bad, err, sizeof err);
    if (fd >= 0)
        close(fd); /* releases the flock */
    if (rc == 0 && op == CC_ATTACH && a.offline)
        sbuf_printf(&report, "  (--offline: not checked that a gateway answers at %s)\n", gw);
    if (report.len)
        fputs(report.p, stdout);
    if (rc < 0)
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
    sbuf_free(&report);
    store_close(s);
    /* attached, but Claude Code would fail every request: a script
     * checking `claude status` must not take that for working */
    return rc < 0 ? CLI_EXIT_FAIL : bad ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

int cli_claude_attach(int argc, char **argv) { return cc_run("claude attach", CC_ATTACH, argc, argv); }
int cli_claude_detach(int argc, char **argv) { return cc_run("claude detach", CC_DETACH, argc, argv); }
int cli_claude_status(int argc, char **argv) { return cc_run("claude status", CC_STATUS, argc, argv); }
