/* test_codex_attach.c: `switchyard codex attach | detach | status` on a
 * corpus of real-world config.toml shapes: what attach writes, detach
 * giving the file back byte for byte, edits made while attached surviving
 * detach (three-way per key), refusal of files it cannot parse or does not
 * recognise, the platform key's life, and recovery from a kill -9 at every
 * step of attach and detach (SWITCHYARD_TEST_CRASH_AT in a forked child). */
#include "check.h"
#include "codex/codex_attach.h"
#include "base/sha256.h"
#include "store/store.h"
#include "codex/toml_edit.h"
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define GW "http://127.0.0.1:8787"
#define GW2 "http://127.0.0.1:9999"
static const char *attach_gw = GW; /* where OP_ATTACH points Codex */

static char test_dir[64];
static int test_seq;
static char db_path[256], home[256], cfg[300];
static char template_db[256]; /* an empty database, its schema made once */

static void copy_file(const char *from, const char *to);

/* A fresh home and database for each case. The database is a copy of an
 * empty one made once: making the schema is 26 sqlite commits, each an
 * fdatasync, and for about eighty databases those were most of this
 * test's time (2 of every 3 of its syncs). */
static void fresh(void)
{
    test_seq++;
    snprintf(db_path, sizeof db_path, "%s/t%d.db", test_dir, test_seq);
    snprintf(home, sizeof home, "%s/home%d", test_dir, test_seq);
    snprintf(cfg, sizeof cfg, "%s/config.toml", home);
    mkdir(home, 0700);
    copy_file(template_db, db_path);
}

static void write_file(const char *path, const char *text, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(text, 1, n, f);
        fclose(f);
    }
}

static char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    sbuf b = SBUF_INIT;
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0)
        sbuf_append(&b, buf, got);
    fclose(f);
    sbuf_append(&b, "", 0);
    *n = b.len;
    return b.p;
}

static void copy_file(const char *from, const char *to)
{
    size_t n = 0;
    char *p = read_file(from, &n);
    if (p)
        write_file(to, p, n);
    free(p);
}

static int file_is(const char *path, const char *want, size_t wn)
{
    size_t n = 0;
    char *got = read_file(path, &n);
    int ok = got && n == wn && memcmp(got, want, n) == 0;
    if (!ok)
        fprintf(stderr, "  %s differs:\n--- want\n%.*s--- got\n%s---\n", path, (int)wn, want, got ? got : "(none)");
    free(got);
    return ok;
}

static store *open_db(void)
{
    char err[256] = "";
    store *s = store_open(db_path, err, sizeof err);
    if (!s)
        fprintf(stderr, "  store_open: %s\n", err);
    return s;
}

typedef enum { OP_ATTACH, OP_DETACH, OP_STATUS, OP_DETACH_FORCE, OP_RECOVER_ALL } op;

/* Runs one command on a fresh store handle; returns its result. */
static int run(op o, sbuf *report)
{
    store *s = open_db();
    if (!s)
        return -9;
    char err[1024] = "";
    sbuf tmp = SBUF_INIT;
    sbuf *r = report ? report : &tmp;
    int rc = -9;
    switch (o) {
    case OP_ATTACH: rc = codex_attach(s, home, attach_gw, r, err, sizeof err); break;
    case OP_DETACH: rc = codex_detach(s, home, 0, r, err, sizeof err); break;
    case OP_DETACH_FORCE: rc = codex_detach(s, home, 1, r, err, sizeof err); break;
    case OP_STATUS: rc = codex_status(s, home, r, err, sizeof err); break;
    case OP_RECOVER_ALL: rc = codex_recover_all(s, r); break;
    }
    if (rc < 0 && err[0])
        sbuf_printf(r, "ERROR: %s\n", err);
    sbuf_free(&tmp);
    store_close(s);
    return rc;
}

/* Platform keys in the database: how many, how many revoked. */
static void key_counts(int *total, int *revoked)
{
    store *s = open_db();
    platform_key *k = NULL;
    size_t n = 0;
    *total = *revoked = 0;
    if (s && store_keys_load(s, &k, &n) == 0)
        for (size_t i = 0; i < n; i++)
            (*total)++, *revoked += k[i].revoked;
    store_keys_free(k, n);
    store_close(s);
}

/* The credential attach wrote is a live platform key of the database. */
static int token_is_live_key(void)
{
    size_t n = 0;
    char *text = read_file(cfg, &n);
    toml_doc *d = text ? toml_parse(text, n, NULL, 0) : NULL;
    const char *path[] = {"model_providers", "switchyard", "experimental_bearer_token"};
    sbuf raw = SBUF_INIT, tok = SBUF_INIT;
    int ok = d && toml_get(d, path, 3, &raw, NULL, 0) == 1 && toml_string_decode(raw.p, raw.len, &tok) == 0;
    char hash[65] = "";
    if (ok)
        sha256_hex(tok.p, tok.len, hash);
    store *s = open_db();
    platform_key *k = NULL;
    size_t nk = 0, live = 0;
    if (ok && s && store_keys_load(s, &k, &nk) == 0)
        for (size_t i = 0; i < nk; i++)
            live += !k[i].revoked && strcmp(k[i].hash, hash) == 0;
    store_keys_free(k, nk);
    store_close(s);
    toml_free(d);
    free(text);
    sbuf_free(&raw);
    sbuf_free(&tok);
    return ok && live == 1;
}

static const char *const corpus[] = {
    /* comments, inline tables, MCP servers, trusted projects */
    "# Codex config\nmodel = \"gpt-5\"  # default model\napproval_policy = \"on-request\"\n\n"
    "[mcp_servers.fs]\ncommand = \"npx\"\nargs = [\"-y\", \"@mcp/fs\", \"/home/me\"]\n"
    "env = { ROOT = \"/home/me\", DEBUG = '1' }\n\n[projects.\"/home/me/src/app.v2\"]\ntrust_level = \"trusted\"\n",
    /* dotted keys */
    "model = \"o3\"\ntui.notifications = true\nmodel_providers.other.name = \"Other\"\n"
    "model_providers.other.base_url = \"http://other/v1\"\n",
    /* an existing model_providers.switchyard with keys attach does not own */
    "model_provider = \"switchyard\"\n[model_providers.switchyard]\nname = \"old gateway\"\n"
    "base_url = \"http://127.0.0.1:9999/v1\"\nenv_key = \"SWITCHYARD_KEY\"\n",
    /* model_provider set to another provider, and under the active profile */
    "model_provider = \"azure\" # work\nprofile = \"fast\"\n\n[profiles.fast]\nmodel = \"o4-mini\"\n"
    "model_provider = \"openai\"\n\n[profiles.slow]\nmodel_provider = \"ollama\"\n",
    /* CRLF */
    "model = \"gpt-5\"\r\n\r\n[mcp_servers.docs]\r\ncommand = \"docs\"\r\n",
    /* BOM */
    "\xEF\xBB\xBF# bom\nmodel = \"gpt-5\"\n",
    /* no trailing newline */
    "model = \"gpt-5\"\n[projects.\"/srv/x\"]\ntrust_level = \"trusted\"",
    /* multi-line strings and arrays that contain statement-like lines */
    "instructions = \"\"\"\nmodel_provider = \"x\"\n[model_providers.switchyard]\n\"\"\"\n"
    "notify = [\n  \"notify-send\", # desktop\n  \"Codex\",\n]\n",
    /* the provider table exists only through a sub-table */
    "model = \"o3\"\n\n[model_providers.switchyard.http_headers]\nX-Team = \"infra\"\n",
    /* only tables, with a comment above the first */
    "# servers\n[mcp_servers.a]\ncommand = \"a\"\n",
    /* empty file */
    "",
};
#define N_CORPUS (sizeof corpus / sizeof corpus[0])

static void test_attach_then_detach_is_byte_identical_for_every_shape(void)
{
    for (size_t i = 0; i < N_CORPUS; i++) {
        fresh();
        write_file(cfg, corpus[i], strlen(corpus[i]));
        chmod(cfg, 0640);
        sbuf r = SBUF_INIT;
        CHECK_EQ_INT(run(OP_ATTACH, &r), 0);
        CHECK(token_is_live_key());
        CHECK_EQ_INT(run(OP_STATUS, NULL), CODEX_ATTACHED);
        struct stat sb;
        CHECK(stat(cfg, &sb) == 0 && (sb.st_mode & 0777) == 0600); /* it holds the key */
        CHECK_EQ_INT(run(OP_DETACH, &r), 0);
        CHECK(stat(cfg, &sb) == 0 && (sb.st_mode & 0777) == 0640); /* the original's mode is back */
        if (!file_is(cfg, corpus[i], strlen(corpus[i]))) {
            fprintf(stderr, "  corpus[%zu]: %s\n", i, r.p);
            CHECK(0);
        }
        CHECK_EQ_INT(run(OP_STATUS, NULL), CODEX_DIRECT);
        int total, revoked;
        key_counts(&total, &revoked);
        CHECK_EQ_INT(total, 1);
        CHECK_EQ_INT(revoked, 1);
        sbuf_free(&r);
    }
}

/* Applies the same user edit to a file's bytes (a new MCP server table at
 * the end, a changed model, a comment at the top). */
static void user_edit(sbuf *out, const char *text, size_t n, int which)
{
    toml_doc *d = toml_parse(text, n, NULL, 0);
    const char *model[] = {"model"};
    const char *mcp[] = {"mcp_servers", "added_while_attached", "command"};
    if (which == 0)
        toml_set(d, mcp, 3, "\"new-server\"", NULL, 0);
    else if (which == 1)
        toml_set(d, model, 1, "\"gpt-user-choice\"", NULL, 0);
    size_t len;
    const char *b = toml_bytes(d, &len);
    if (which == 2) {
        size_t bom = len >= 3 && !memcmp(b, "\xEF\xBB\xBF", 3) ? 3 : 0;
        sbuf_append(out, b, bom);
        sbuf_puts(out, "# note added while attached\n");
        sbuf_append(out, b + bom, len - bom);
    } else {
        sbuf_append(out, b, len);
    }
    toml_free(d);
}

static void test_user_edits_made_while_attached_survive_detach(void)
{
    for (size_t i = 0; i < N_CORPUS; i++) {
        for (int which = 0; which < 3; which++) {
            fresh();
            write_file(cfg, corpus[i], strlen(corpus[i]));
            CHECK_EQ_INT(run(OP_ATTACH, NULL), 0);
            size_t n = 0;
            char *attached = read_file(cfg, &n);
            sbuf edited = SBUF_INIT, want = SBUF_INIT;
            user_edit(&edited, attached, n, which);
            write_file(cfg, edited.p, edited.len);
            CHECK_EQ_INT(run(OP_STATUS, NULL), CODEX_ATTACHED);
            sbuf r = SBUF_INIT;
            CHECK_EQ_INT(run(OP_DETACH, &r), 0);
            user_edit(&want, corpus[i], strlen(corpus[i]), which);
            toml_final_newline_restore(&want, corpus[i], strlen(corpus[i]));
            if (!file_is(cfg, want.p, want.len)) {
                fprintf(stderr, "  corpus[%zu] edit %d: %s\n", i, which, r.p);
                CHECK(0);
            }
            free(attached);
            sbuf_free(&edited);
            sbuf_free(&want);
            sbuf_free(&r);
        }
    }
}

static void test_a_key_the_user_changed_while_attached_keeps_the_users_value(void)
{
    fresh();
    const char *orig = "model_provider = \"azure\"\nmodel = \"o3\"\n";
    write_file(cfg, orig, strlen(orig));
    CHECK_EQ_INT(run(OP_ATTACH, NULL), 0);
    size_t n = 0;
    char *text = read_file(cfg, &n);
    toml_doc *d = toml_parse(text, n, NULL, 0);
    const char *mp[] = {"model_provider"};
    const char *url[] = {"model_providers", "switchyard", "base_url"};
    toml_set(d, mp, 1, "\"openai\"", NULL, 0);
    toml_set(d, url, 3, "\"http://elsewhere/v1\"", NULL, 0);
    const char *b = toml_bytes(d, &n);
    write_file(cfg, b, n);
    sbuf r = SBUF_INIT;
    CHECK_EQ_INT(run(OP_STATUS, &r), CODEX_DRIFTED);
    CHECK(strstr(r.p, "model_provider: now \"openai\"") != NULL);
    CHECK_EQ_INT(run(OP_DETACH, &r), 0);
    CHECK(strstr(r.p, "kept 2 keys") != NULL);
    const char *want = "model_provider = \"openai\"\nmodel = \"o3\"\n\n[model_providers.switchyard]\n"
                       "base_url = \"http://elsewhere/v1\"\n";
    CHECK(file_is(cfg, want, strlen(want)));
    toml_free(d);
    free(text);
    sbuf_free(&r);
}

static void test_attach_sets_the_active_profiles_provider_and_restores_it(void)
{
    fresh();
    const char *orig = corpus[3];
    write_file(cfg, orig, strlen(orig));
    CHECK_EQ_INT(run(OP_ATTACH, NULL), 0);
    size_t n = 0;
    char *text = read_file(cfg, &n);
    CHECK(strstr(text, "[profiles.fast]\nmodel = \"o4-mini\"\nmodel_provider = \"switchyard\"\n") != NULL);
    CHECK(strstr(text, "[profiles.slow]\nmodel_provider = \"ollama\"\n") != NULL);
    CHECK(strstr(text, "model_provider = \"switchyard\" # work\n") != NULL);
    free(text);
    CHECK_EQ_INT(run(OP_DETACH, NULL), 0);
    CHECK(file_is(cfg, orig, strlen(orig)));
}

static void test_attach_writes_the_provider_table_codex_needs(void)
{
    fresh();
    CHECK_EQ_INT(run(OP_ATTACH, NULL), 0); /* no file yet: created 0600 */
    size_t n = 0;
    char *text = read_file(cfg, &n);
    CHECK(text && strncmp(text, "model_provider = \"switchyard\"\n\n[model_providers.switchyard]\n"
                                "name = \"switchyard\"\nbase_url = \"" GW "/v1\"\nwire_api = \"responses\"\n"
                                "experimental_bearer_token = \"sy-", 170) == 0);
    CHECK(text && strstr(text, "\"\nrequest_max_retries = 0\nstream_max_retries = 0\nsupports_websockets = false\n"));
    struct stat sb;
    CHECK(stat(cfg, &sb) == 0 && (sb.st_mode & 0777) == 0600);
    free(text);
    CHECK_EQ_INT(run(OP_DETACH, NULL), 0);
    CHECK(access(cfg, F_OK) != 0); /* there was no file: there is none again */
}

static void test_attach_with_websockets_writes_supports_websockets_true_and_detach_restores(void)
{
    fresh();
    const char *orig = "[model_providers.switchyard]\nsupports_websockets = false # mine\n";
    write_file(cfg, orig, strlen(orig));
    store *s = open_db();
    CHECK(s != NULL);
    char err[512] = "";
    sbuf r = SBUF_INIT;
    CHECK_EQ_INT(codex_attach_ws(s, home, GW, 1, &r, err, sizeof err), 0);
    sbuf_free(&r);
    store_close(s);
    size_t n = 0;
    char *text = read_file(cfg, &n);
    CHECK(text && strstr(text, "supports_websockets = true # mine\n"));
    CHECK(text && !strstr(text, "supports_websockets = false"));
    free(text);
    CHECK_EQ_INT(run(OP_DETACH, NULL), 0);
    CHECK(file_is(cfg, orig, strlen(orig)));
}

static void test_attach_refuses_a_file_it_cannot_parse_and_leaves_it_untouched(void)
{
    static const char *const bad[] = {"model = gpt-5\n", "[mcp_servers.x\ncommand = \"a\"\n",
                                      "model_providers = { switchyard = { name = \"x\" } }\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fresh();
        write_file(cfg, bad[i], strlen(bad[i]));
        sbuf r = SBUF_INIT;
        CHECK_EQ_INT(run(OP_ATTACH, &r), -1);
        CHECK(strstr(r.p, "left untouched") != NULL);
        CHECK(file_is(cfg, bad[i], strlen(bad[i])));
        CHECK_EQ_INT(run(OP_STATUS, NULL), CODEX_DIRECT);
        int total, revoked;
        key_counts(&total, &revoked);
        CHECK_EQ_INT(total, 0);
        sbuf_free(&r);
    }
}

static void test_detach_refuses_a_replaced_file_unless_forced_and_keeps_a_backup(void)
{
    fresh();
    const char *orig = corpus[0], *other = "model = \"something else entirely\"\n";
    write_file(cfg, orig, strlen(orig));
    CHECK_EQ_INT(run(OP_ATTACH, NULL), 0);
    write_file(cfg, other, strlen(other));
    sbuf r = SBUF_INIT;
    CHECK_EQ_INT(run(OP_STATUS, &r), CODEX_DRIFTED);
    CHECK_EQ_INT(run(OP_DETACH, &r), -1);
    CHECK(strstr(r.p, "--force") != NULL);
    CHECK(file_is(cfg, other, strlen(other)));
    CHECK_EQ_INT(run(OP_STATUS, NULL), CODEX_DRIFTED);
    sbuf_reset(&r);
    CHECK_EQ_INT(run(OP_DETACH_FORCE, &r), 0);
    CHECK(file_is(cfg, orig, strlen(orig)));
    const char *bk = strstr(r.p, "kept the file as it was in ");
    CHECK(bk != NULL);
    if (bk) {
        char path[512];
        snprintf(path, sizeof path, "%.*s", (int)strcspn(bk + 27, "\n"), bk + 27);
        CHECK(file_is(path, other, strlen(other)));
    }
    CHECK_EQ_INT(run(OP_STATUS, NULL), CODEX_DIRECT);
    sbuf_free(&r);
}

static void test_attach_twice_is_a_no_op_and_each_home_has_its_own_journal(void)
{
    fresh();
    char home1[256];
    snprintf(home1, sizeof home1, "%s", home);
    write_file(cfg, corpus[1], strlen(corpus[1]));
    CHECK_EQ_INT(run(OP_ATTACH, NULL), 0);
    size_t n1 = 0, n2 = 0;
    char *first = read_file(cfg, &n1);
    sbuf r = SBUF_INIT;
    CHECK_EQ_INT(run(OP_ATTACH, &r), 0);
    CHECK(strstr(r.p, "already attached") != NULL);
    char *second = read_file(cfg, &n2);
    CHECK(n1 == n2 && memcmp(first, second, n1) == 0);
    int total, revoked;
    key_counts(&total, &revoked);
    CHECK_EQ_INT(total, 1);
    /* a second home, same database */
    snprintf(home, sizeof home, "%s/second%d", test_dir, test_seq);
    snprintf(cfg, sizeof cfg, "%s/config.toml", home);
    mkdir(home, 0700);
    CHECK_EQ_INT(run(OP_ATTACH, NULL), 0);
    key_counts(&total, &revoked);
    CHECK_EQ_INT(total, 2);
    CHECK_EQ_INT(run(OP_DETACH, NULL), 0);
    snprintf(home, sizeof home, "%s", home1);
    snprintf(cfg, sizeof cfg, "%s/config.toml", home);
    CHECK_EQ_INT(run(OP_STATUS, NULL), CODEX_ATTACHED);
    CHECK_EQ_INT(run(OP_DETACH, NULL), 0);
    CHECK(file_is(cfg, corpus[1], strlen(corpus[1])));
    free(first);
    free(second);
    sbuf_free(&r);
}

static void test_attach_over_a_drifted_attach_changes_nothing_and_says_so(void)
{
    fresh();
    CHECK_EQ_INT(run(OP_ATTACH, NULL), 0);
    const char *mine = "model_provider = \"openai\"\n";
    size_t n = 0;
    char *text = read_file(cfg, &n);
    sbuf edited = SBUF_INIT;
    sbuf_puts(&edited, mine);
    sbuf_puts(&edited, strchr(text, '\n') + 1); /* the user replaced the first line */
    write_file(cfg, edited.p, edited.len);
    sbuf r = SBUF_INIT;
    CHECK_EQ_INT(run(OP_ATTACH, &r), 0);
    CHECK(strstr(r.p, "already drifted") != NULL && strstr(r.p, "model_provider: now \"openai\"") != NULL);
    CHECK(file_is(cfg, edited.p, edited.len));
    int total, revoked;
    key_counts(&total, &revoked);
    CHECK_EQ_INT(total, 1);
    free(text);
    sbuf_free(&edited);
    sbuf_free(&r);
}

static void test_a_symlinked_config_is_edited_at_its_target_and_the_link_stays(void)
{
    fresh();
    char target[400];
    snprintf(target, sizeof target, "%s/dotfiles-%d.toml", test_dir, test_seq);
    write_file(target, corpus[0], strlen(corpus[0]));
    CHECK(symlink(target, cfg) == 0);
    CHECK_EQ_INT(run(OP_ATTACH, NULL), 0);
    struct stat sb;
    CHECK(lstat(cfg, &sb) == 0 && S_ISLNK(sb.st_mode));
    size_t n = 0;
    char *text = read_file(target, &n);
    CHECK(text && strstr(text, "[model_providers.switchyard]") != NULL);
    free(text);
    CHECK_EQ_INT(run(OP_DETACH, NULL), 0);
    CHECK(lstat(cfg, &sb) == 0 && S_ISLNK(sb.st_mode));
    CHECK(file_is(target, corpus[0], strlen(corpus[0])));
}

/* ---------- crash safety ---------- */

/* Runs o in a child with SWITCHYARD_TEST_CRASH_AT=step; 1 if the child
 * died of SIGKILL (the hook fired). */
static int crash_at(op o, const char *step)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("SWITCHYARD_TEST_CRASH_AT", step, 1);
        run(o, NULL);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

static int tmp_exists(void)
{
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s.switchyard-tmp", cfg);
    return access(tmp, F_OK) == 0;
}

static const op recoverers[] = {OP_STATUS, OP_ATTACH, OP_DETACH, OP_RECOVER_ALL};

static void test_kill_at_each_step_of_attach_is_recovered_by_the_next_command(void)
{
    static const char *const steps[] = {"attach_after_journal", "attach_after_temp", "attach_after_rename"};
    const char *orig = corpus[0];
    for (size_t s = 0; s < 3; s++) {
        for (size_t r = 0; r < sizeof recoverers / sizeof recoverers[0]; r++) {
            fresh();
            write_file(cfg, orig, strlen(orig));
            CHECK(crash_at(OP_ATTACH, steps[s]));
            if (s < 2)
                CHECK(file_is(cfg, orig, strlen(orig))); /* the rename had not happened */
            sbuf rep = SBUF_INIT;
            int rc = run(recoverers[r], &rep);
            CHECK(rc >= 0);
            CHECK(strstr(rep.p ? rep.p : "", "recovered:") != NULL);
            CHECK(!tmp_exists());
            int st = run(OP_STATUS, NULL);
            int total, revoked;
            key_counts(&total, &revoked);
            if (recoverers[r] == OP_DETACH) {
                CHECK_EQ_INT(st, CODEX_DIRECT);
                CHECK_EQ_INT(revoked, total);
            } else if (recoverers[r] == OP_ATTACH || s == 2) {
                CHECK_EQ_INT(st, CODEX_ATTACHED); /* finished, or attached afresh */
                CHECK(token_is_live_key());
            } else {
                CHECK_EQ_INT(st, CODEX_DIRECT); /* rolled back */
                CHECK_EQ_INT(revoked, total);
            }
            CHECK_EQ_INT(run(OP_DETACH, NULL), 0);
            CHECK(file_is(cfg, orig, strlen(orig)));
            key_counts(&total, &revoked);
            CHECK_EQ_INT(revoked, total);
            sbuf_free(&rep);
        }
    }
}

/* The original already says model_provider = "switchyard": a crash before
 * the rename must still be told apart from a landed attach. */
static void test_crash_before_the_rename_rolls_back_even_when_the_original_looks_attached(void)
{
    fresh();
    const char *orig = corpus[2];
    write_file(cfg, orig, strlen(orig));
    CHECK(crash_at(OP_ATTACH, "attach_after_journal"));
    sbuf r = SBUF_INIT;
    CHECK_EQ_INT(run(OP_STATUS, &r), CODEX_DIRECT);
    CHECK(strstr(r.p, "rolled back") != NULL);
    CHECK(file_is(cfg, orig, strlen(orig)));
    int total, revoked;
    key_counts(&total, &revoked);
    CHECK(total == 1 && revoked == 1);
    sbuf_free(&r);
}

static void test_kill_at_each_step_of_detach_is_recovered_by_the_next_command(void)
{
    static const char *const steps[] = {"detach_after_journal", "detach_after_temp", "detach_after_rename"};
    const char *orig = corpus[3];
    for (size_t s = 0; s < 3; s++) {
        for (size_t r = 0; r < sizeof recoverers / sizeof recoverers[0]; r++) {
            fresh();
            write_file(cfg, orig, strlen(orig));
            CHECK_EQ_INT(run(OP_ATTACH, NULL), 0);
            CHECK(crash_at(OP_DETACH, steps[s]));
            sbuf rep = SBUF_INIT;
            int rc = run(recoverers[r], &rep);
            CHECK(rc >= 0);
            CHECK(strstr(rep.p ? rep.p : "", "recovered:") != NULL);
            CHECK(!tmp_exists());
            /* detach ran again, attach attached (anew), or the restore had landed */
            int want = recoverers[r] == OP_DETACH   ? CODEX_DIRECT
                       : recoverers[r] == OP_ATTACH ? CODEX_ATTACHED
                       : s == 2                     ? CODEX_DIRECT
                                                    : CODEX_ATTACHED;
            int st = run(OP_STATUS, NULL);
            if (st != want)
                fprintf(stderr, "  step %s, recoverer %zu: %s\n", steps[s], r, rep.p);
            CHECK_EQ_INT(st, want);
            if (want == CODEX_DIRECT)
                CHECK(file_is(cfg, orig, strlen(orig)));
            else
                CHECK(token_is_live_key());
            CHECK_EQ_INT(run(OP_DETACH, NULL), 0);
            CHECK(file_is(cfg, orig, strlen(orig)));
            int total, revoked;
            key_counts(&total, &revoked);
            CHECK_EQ_INT(revoked, total);
            sbuf_free(&rep);
        }
    }
}

static int cfg_has(const char *text)
{
    size_t n = 0;
    char *got = read_file(cfg, &n);
    int ok = got && strstr(got, text) != NULL;
    free(got);
    return ok;
}

static void keys_are(int want_total, int want_revoked)
{
    int total, revoked;
    key_counts(&total, &revoked);
    CHECK_EQ_INT(total, want_total);
    CHECK_EQ_INT(revoked, want_revoked);
}

/* An attach that moves to another gateway address (serve restarted on a
 * new port) keeps its key when the file still holds it and it is live, so
 * moves leave no trail of keys; a move whose key was revoked meanwhile
 * gets a new one; a kill after the move handed the file back, before the
 * new journal, is recovered as a detach (the key revoked). An attach after
 * a detach makes a new key (detach revoked the old one). */
static void test_attach_to_another_address_keeps_its_live_key(void)
{
    fresh();
    const char *orig = corpus[0];
    write_file(cfg, orig, strlen(orig));
    for (int i = 0; i < 4; i++) {
        attach_gw = i % 2 ? GW2 : GW;
        sbuf r = SBUF_INIT;
        CHECK_EQ_INT(run(OP_ATTACH, &r), 0);
        if (i)
            CHECK(strstr(r.p, "attached (same key)") && strstr(r.p, "kept for the new address"));
        sbuf_free(&r);
        CHECK(token_is_live_key());
        CHECK(cfg_has(i % 2 ? GW2 "/v1" : GW "/v1"));
        keys_are(1, 0);
    }
    CHECK_EQ_INT(run(OP_DETACH, NULL), 0);
    CHECK(file_is(cfg, orig, strlen(orig)));
    keys_are(1, 1);
    /* the key revoked while attached: the move makes a new one */
    attach_gw = GW;
    CHECK_EQ_INT(run(OP_ATTACH, NULL), 0);
    keys_are(2, 1);
    store *s = open_db();
    char err[256] = "";
    CHECK_EQ_INT(s ? store_key_revoke_id(s, 2, err, sizeof err) : -1, 1);
    store_close(s);
    attach_gw = GW2;
    sbuf r = SBUF_INIT;
    CHECK_EQ_INT(run(OP_ATTACH, &r), 0);
    CHECK(strstr(r.p, "attached (same key)") == NULL && strstr(r.p, "key ") != NULL);
    sbuf_free(&r);
    CHECK(token_is_live_key());
    keys_are(3, 2);
    CHECK_EQ_INT(run(OP_DETACH, NULL), 0);
    CHECK(file_is(cfg, orig, strlen(orig)));
    keys_are(3, 3);
    /* killed between handing the file back and the new journal */
    attach_gw = GW;
    CHECK_EQ_INT(run(OP_ATTACH, NULL), 0);
    attach_gw = GW2;
    CHECK(crash_at(OP_ATTACH, "detach_after_rename"));
    CHECK(file_is(cfg, orig, strlen(orig)));
    r = (sbuf)SBUF_INIT;
    CHECK_EQ_INT(run(OP_STATUS, &r), CODEX_DIRECT);
    CHECK(strstr(r.p ? r.p : "", "recovered:") != NULL);
    sbuf_free(&r);
    keys_are(4, 4);
    CHECK_EQ_INT(run(OP_ATTACH, NULL), 0);
    CHECK(token_is_live_key());
    CHECK_EQ_INT(run(OP_DETACH, NULL), 0);
    CHECK(file_is(cfg, orig, strlen(orig)));
    keys_are(5, 5);
    attach_gw = GW;
}

int main(void)
{
    if (check_tmpdir_make(test_dir, sizeof test_dir, "sy_codex") != 0)
        return 1;
    unsetenv("SWITCHYARD_TEST_CRASH_AT");
    snprintf(template_db, sizeof template_db, "%s/template.db", test_dir);
    snprintf(db_path, sizeof db_path, "%s", template_db);
    store_close(open_db());
    RUN(test_attach_then_detach_is_byte_identical_for_every_shape);
    RUN(test_user_edits_made_while_attached_survive_detach);
    RUN(test_a_key_the_user_changed_while_attached_keeps_the_users_value);
    RUN(test_attach_sets_the_active_profiles_provider_and_restores_it);
    RUN(test_attach_writes_the_provider_table_codex_needs);
    RUN(test_attach_with_websockets_writes_supports_websockets_true_and_detach_restores);
    RUN(test_attach_refuses_a_file_it_cannot_parse_and_leaves_it_untouched);
    RUN(test_detach_refuses_a_replaced_file_unless_forced_and_keeps_a_backup);
    RUN(test_attach_twice_is_a_no_op_and_each_home_has_its_own_journal);
    RUN(test_attach_over_a_drifted_attach_changes_nothing_and_says_so);
    RUN(test_a_symlinked_config_is_edited_at_its_target_and_the_link_stays);
    RUN(test_kill_at_each_step_of_attach_is_recovered_by_the_next_command);
    RUN(test_crash_before_the_rename_rolls_back_even_when_the_original_looks_attached);
    RUN(test_kill_at_each_step_of_detach_is_recovered_by_the_next_command);
    RUN(test_attach_to_another_address_keeps_its_live_key);
    check_tmpdir_remove(test_dir);
    return check_summary();
}
