/* test_cli.c: the administrative subcommands, run in-process through
 * cli_account_main / cli_key_main / cli_config_main / cli_codex_main with
 * argv arrays against a database in a temporary directory, with stdout and
 * stderr captured to files. Results are checked through the store API:
 * account add / list / enable / disable / remove, key add (the key is the
 * last line and only its hash is stored), key prefer / revoke, config set /
 * get / unset / list with validation, codex attach / status / detach
 * (options, and the attach's key printed only as its prefix), and that no
 * upstream token ever reaches the output. */
#include "check.h"
#include "admin/cli.h"
#include "base/sha256.h"
#include "core/config.h"
#include "store/store.h"
#include <fcntl.h>
#include <sys/stat.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

#define TEST_TOKEN "sk-test-SECRET-token-abcdef0123456789"

static char test_dir[64];
static char test_db[128];

/* What one command printed, and its exit code. */
typedef struct test_out {
    int rc;
    char out[32768];
    char err[8192];
} test_out;

static void test_read_file(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(buf, 1, n - 1, f) : 0;
    buf[got] = '\0';
    if (f)
        fclose(f);
}

/* Points fd at a fresh file; returns a dup of the old fd to restore. */
static int test_redirect(int fd, const char *path)
{
    int saved = dup(fd);
    int tmp = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(tmp, fd);
    close(tmp);
    return saved;
}

static void test_restore(int fd, int saved)
{
    dup2(saved, fd);
    close(saved);
}

/* Runs fn with the NULL-terminated argument list plus "--db <test_db>". */
static void test_run(int (*fn)(int, char **), test_out *o, ...)
{
    char *argv[32], out_path[160], err_path[160];
    int argc = 0;
    va_list ap;
    va_start(ap, o);
    for (char *a; argc < 29 && (a = va_arg(ap, char *)) != NULL;)
        argv[argc++] = a;
    va_end(ap);
    argv[argc++] = "--db";
    argv[argc++] = test_db;
    argv[argc] = NULL;
    snprintf(out_path, sizeof out_path, "%s/stdout", test_dir);
    snprintf(err_path, sizeof err_path, "%s/stderr", test_dir);
    fflush(stdout);
    fflush(stderr);
    int so = test_redirect(STDOUT_FILENO, out_path), se = test_redirect(STDERR_FILENO, err_path);
    o->rc = fn(argc, argv);
    fflush(stdout);
    fflush(stderr);
    test_restore(STDOUT_FILENO, so);
    test_restore(STDERR_FILENO, se);
    test_read_file(out_path, o->out, sizeof o->out);
    test_read_file(err_path, o->err, sizeof o->err);
}

/* A fresh database for each test. */
static store *test_store(void)
{
    char err[256] = "";
    store *s = store_open(test_db, err, sizeof err);
    if (!s)
        fprintf(stderr, "  store_open: %s\n", err);
    return s;
}

/* A new path (test_missing_db), or a new empty database there (test_fresh_db). */
static void test_missing_db(void)
{
    static int seq;
    snprintf(test_db, sizeof test_db, "%s/t%d.db", test_dir, ++seq);
}

static void test_fresh_db(void)
{
    test_missing_db();
    store_close(test_store());
}

static void test_add(const char *name)
{
    test_out o;
    test_run(cli_account_main, &o, "account", "add", "--name", name, "--base-url", "https://api.example.com/v1",
             "--token", TEST_TOKEN, NULL);
    CHECK_EQ_INT(o.rc, 0);
}

/* enabled flag of the named account; -1 when it does not exist. */
static int test_account_enabled(const char *name)
{
    store *s = test_store();
    account *a = NULL;
    size_t n = 0;
    int enabled = -1;
    if (s && store_accounts_load(s, &a, &n) == 0)
        for (size_t i = 0; i < n; i++)
            if (strcmp(a[i].name, name) == 0)
                enabled = a[i].enabled;
    store_accounts_free(a, n);
    store_close(s);
    return enabled;
}

static const char *test_last_line(const char *text, char *buf, size_t n)
{
    size_t len = strlen(text);
    while (len && text[len - 1] == '\n')
        len--;
    size_t start = len;
    while (start && text[start - 1] != '\n')
        start--;
    snprintf(buf, n, "%.*s", (int)(len - start), text + start);
    return buf;
}

/* ---------- accounts ---------- */

static void test_cli_account_add_from_codex_auth_json(void)
{
    test_fresh_db();
    char auth[160];
    snprintf(auth, sizeof auth, "%s/auth.json", test_dir);
    FILE *f = fopen(auth, "w");
    fputs("{\"OPENAI_API_KEY\":null,\"tokens\":{\"id_token\":\"x\",\"access_token\":\"" TEST_TOKEN "\","
          "\"refresh_token\":\"r\",\"account_id\":\"acct-42\"},\"last_refresh\":\"2026-12-01\"}", f);
    fclose(f);
    test_out o;
    test_run(cli_account_main, &o, "account", "add", "--name", "codex", "--codex-auth", auth, NULL);
    CHECK_EQ_INT(o.rc, 0);
    store *s = test_store();
    account *a = NULL;
    size_t n = 0;
    CHECK(s && store_accounts_load(s, &a, &n) == 0);
    CHECK_EQ_INT(n, 1);
    if (n == 1) {
        CHECK_EQ_INT(a[0].kind, ACCOUNT_CHATGPT);
        CHECK_EQ_STR(a[0].base_url, "https://chatgpt.com/backend-api/codex");
        CHECK_EQ_STR(a[0].token, TEST_TOKEN);
        CHECK_EQ_STR(a[0].chatgpt_account_id, "acct-42");
        CHECK_EQ_INT(a[0].max_concurrency, 1);
    }
    store_accounts_free(a, n);
    store_close(s);
    /* a file without tokens.access_token is refused, and so is --token beside it */
    f = fopen(auth, "w");
    fputs("{\"OPENAI_API_KEY\":\"sk-x\"}", f);
    fclose(f);
    test_run(cli_account_main, &o, "account", "add", "--name", "c2", "--codex-auth", auth, NULL);
    CHECK(o.rc != 0);
    CHECK(strstr(o.err, "access_token") != NULL);
    test_run(cli_account_main, &o, "account", "add", "--name", "c3", "--codex-auth", auth, "--token", "t", NULL);
    CHECK(o.rc != 0);
}

static void test_cli_account_add_list_disable_enable_remove(void)
{
    test_out o;
    test_fresh_db();
    test_add("alpha");
    test_add("beta");
    test_run(cli_account_main, &o, "account", "list", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK(strstr(o.out, "alpha") && strstr(o.out, "beta"));
    test_run(cli_account_main, &o, "account", "disable", "--name", "alpha", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_INT(test_account_enabled("alpha"), 0);
    CHECK_EQ_INT(test_account_enabled("beta"), 1);
    test_run(cli_account_main, &o, "account", "list", "--json", NULL);
    CHECK(strstr(o.out, "\"name\":\"alpha\",\"kind\":\"api_key\"") != NULL);
    CHECK(strstr(o.out, "\"enabled\":false") != NULL);
    test_run(cli_account_main, &o, "account", "enable", "--name=alpha", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_INT(test_account_enabled("alpha"), 1);
    test_run(cli_account_main, &o, "account", "remove", "--name", "alpha", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_INT(test_account_enabled("alpha"), -1);
    CHECK_EQ_INT(test_account_enabled("beta"), 1);
}

/* Only the commands that make something (account add, key add, account
 * import, login, serve) make a database; one that reads or changes what is
 * there says there is none and makes none (issue 34: `codex attach` run
 * elsewhere minted its key in a new ./switchyard.db). */
static void test_cli_commands_that_only_read_or_change_make_no_database(void)
{
    test_out o;
    struct stat sb;
    test_missing_db();
    test_run(cli_account_main, &o, "account", "list", NULL);
    CHECK_EQ_INT(o.rc, 1);
    CHECK(strstr(o.err, "no database at ") != NULL);
    CHECK(stat(test_db, &sb) != 0);
    test_run(cli_account_main, &o, "account", "disable", "--name", "a", NULL);
    CHECK_EQ_INT(o.rc, 1);
    CHECK(stat(test_db, &sb) != 0);
    test_run(cli_account_main, &o, "account", "add", "--name", "a", "--base-url", "https://api.example.com/v1",
             "--token", "sk-a", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK(stat(test_db, &sb) == 0);
}

static void test_cli_account_commands_fail_on_unknown_or_missing_name(void)
{
    test_out o;
    test_fresh_db();
    test_run(cli_account_main, &o, "account", "disable", "--name", "ghost", NULL);
    CHECK_EQ_INT(o.rc, 1);
    CHECK(strstr(o.err, "no account named 'ghost'") != NULL);
    test_run(cli_account_main, &o, "account", "remove", "--name", "ghost", NULL);
    CHECK_EQ_INT(o.rc, 1);
    test_run(cli_account_main, &o, "account", "enable", NULL);
    CHECK_EQ_INT(o.rc, 2);
    CHECK(strstr(o.err, "--name is required") != NULL);
    test_run(cli_account_main, &o, "account", "remove", "--name", "x", "stray", NULL);
    CHECK_EQ_INT(o.rc, 2);
}

static void test_cli_account_output_never_contains_the_token(void)
{
    test_out o;
    test_fresh_db();
    test_run(cli_account_main, &o, "account", "add", "--name", "a", "--base-url", "https://api.example.com/v1",
             "--token", TEST_TOKEN, "--kind", "chatgpt", "--chatgpt-account-id", "acc-1", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK(!strstr(o.out, "SECRET") && !strstr(o.err, "SECRET"));
    test_run(cli_account_main, &o, "account", "list", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK(strstr(o.out, "a ") != NULL);
    CHECK(!strstr(o.out, "SECRET") && !strstr(o.err, "SECRET"));
    test_run(cli_account_main, &o, "account", "list", "--json", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK(o.out[0] == '[');
    CHECK(!strstr(o.out, "SECRET") && !strstr(o.err, "SECRET"));
    CHECK(!strstr(o.out, "token"));
    store *s = test_store(); /* the token was stored, just never shown */
    account *a = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_accounts_load(s, &a, &n), 0);
    CHECK(n == 1 && strcmp(a[0].token, TEST_TOKEN) == 0);
    store_accounts_free(a, n);
    store_close(s);
}

/* ---------- keys ---------- */

static void test_cli_key_add_prints_the_key_as_last_line(void)
{
    test_out o;
    char key[128], hex[65];
    test_fresh_db();
    test_run(cli_key_main, &o, "key", "add", "--name", "team", NULL);
    CHECK_EQ_INT(o.rc, 0);
    test_last_line(o.out, key, sizeof key);
    CHECK(strncmp(key, "sy-", 3) == 0);
    CHECK_EQ_INT(strlen(key), 43);
    sha256_hex(key, strlen(key), hex);
    store *s = test_store();
    platform_key *k = NULL;
    size_t n = 0;
    CHECK_EQ_INT(store_keys_load(s, &k, &n), 0);
    CHECK(n == 1 && strcmp(k[0].hash, hex) == 0 && strcmp(k[0].name, "team") == 0);
    store_keys_free(k, n);
    store_close(s);
    test_run(cli_key_main, &o, "key", "list", "--json", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK(!strstr(o.out, key + 7)); /* only the prefix is ever shown again */
}

/* preferred_account_id of the first key; -1 on error. */
static int64_t test_key_preferred(int *revoked)
{
    store *s = test_store();
    platform_key *k = NULL;
    size_t n = 0;
    int64_t v = -1;
    if (s && store_keys_load(s, &k, &n) == 0 && n > 0) {
        v = k[0].preferred_account_id;
        if (revoked)
            *revoked = k[0].revoked;
    }
    store_keys_free(k, n);
    store_close(s);
    return v;
}

static void test_cli_key_prefer_sets_and_clears_the_account(void)
{
    test_out o;
    test_fresh_db();
    test_add("first");
    test_add("second");
    test_run(cli_key_main, &o, "key", "add", "--name", "k", NULL);
    CHECK_EQ_INT(o.rc, 0);
    test_run(cli_key_main, &o, "key", "prefer", "--name", "k", "--account", "second", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_INT(test_key_preferred(NULL), 2);
    test_run(cli_key_main, &o, "key", "prefer", "--name", "k", "--account", "ghost", NULL);
    CHECK_EQ_INT(o.rc, 1);
    CHECK(strstr(o.err, "no account named 'ghost'") != NULL);
    CHECK_EQ_INT(test_key_preferred(NULL), 2);
    test_run(cli_key_main, &o, "key", "prefer", "--name", "nokey", "--account", "first", NULL);
    CHECK_EQ_INT(o.rc, 1);
    CHECK(strstr(o.err, "no key with name 'nokey'") != NULL);
    test_run(cli_key_main, &o, "key", "prefer", "--name", "k", NULL); /* neither --account nor --clear */
    CHECK_EQ_INT(o.rc, 2);
    test_run(cli_key_main, &o, "key", "prefer", "--name", "k", "--account", "first", "--clear", NULL);
    CHECK_EQ_INT(o.rc, 2);
    test_run(cli_key_main, &o, "key", "prefer", "--name", "k", "--clear", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_INT(test_key_preferred(NULL), 0);
}

static void test_cli_key_revoke_marks_the_key_revoked(void)
{
    test_out o;
    int revoked = -1;
    test_fresh_db();
    test_run(cli_key_main, &o, "key", "add", "--name", "k", NULL);
    test_run(cli_key_main, &o, "key", "revoke", "--name", "k", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_INT(test_key_preferred(&revoked), 0);
    CHECK_EQ_INT(revoked, 1);
    test_run(cli_key_main, &o, "key", "revoke", "--name", "k", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK(strstr(o.out, "already revoked") != NULL);
    test_run(cli_key_main, &o, "key", "revoke", "--name", "ghost", NULL);
    CHECK_EQ_INT(o.rc, 1);
    test_run(cli_key_main, &o, "key", "list", NULL);
    CHECK(strstr(o.out, "yes") != NULL);
}

/* Names are unique among live keys; --id and --prefix name one key; a
 * name two keys share (from before) is refused, never applied to both. */
static void test_cli_key_names_are_unique_and_id_or_prefix_choose_one_key(void)
{
    test_out o;
    test_fresh_db();
    test_run(cli_key_main, &o, "key", "add", "--name", "laptop", NULL);
    CHECK_EQ_INT(o.rc, 0);
    test_run(cli_key_main, &o, "key", "add", "--name", "laptop", NULL);
    CHECK_EQ_INT(o.rc, 1);
    CHECK(strstr(o.err, "a key named 'laptop' exists (id 1, prefix sy-") != NULL);
    CHECK(strstr(o.err, "key revoke --id 1") != NULL);
    /* two live keys of one name, as an older gateway allowed */
    char *err = NULL;
    sqlite3 *db = NULL;
    CHECK_EQ_INT(sqlite3_open(test_db, &db), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(db, "INSERT INTO platform_keys(name, hash, prefix, created_at)"
                                  " VALUES ('laptop', 'h2', 'sy-Zzzz', 1)", NULL, NULL, &err), SQLITE_OK);
    sqlite3_close(db);
    test_run(cli_key_main, &o, "key", "revoke", "--name", "laptop", NULL);
    CHECK_EQ_INT(o.rc, 1);
    CHECK(strstr(o.err, "more than one key has name 'laptop'") != NULL);
    test_run(cli_key_main, &o, "key", "revoke", "--prefix", "sy-Zzzz", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK(strstr(o.out, "revoked key id 2") != NULL);
    int revoked = -1;
    CHECK_EQ_INT(test_key_preferred(&revoked), 0);
    CHECK_EQ_INT(revoked, 0); /* the first laptop key still serves */
    test_run(cli_key_main, &o, "key", "update", "--id", "1", "--rpm", "5", NULL);
    CHECK_EQ_INT(o.rc, 0);
    test_run(cli_key_main, &o, "key", "revoke", "--id", "1", "--name", "laptop", NULL);
    CHECK_EQ_INT(o.rc, 2);
    test_run(cli_key_main, &o, "key", "revoke", "--id", "x", NULL);
    CHECK_EQ_INT(o.rc, 2);
}

/* ---------- config ---------- */

static int test_setting(const char *key, char *out, size_t n)
{
    store *s = test_store();
    int rc = s ? store_setting_get(s, key, out, n) : -1;
    store_close(s);
    return rc;
}

static void test_cli_config_set_get_unset_list(void)
{
    test_out o;
    char v[64];
    test_fresh_db();
    test_run(cli_config_main, &o, "config", "set", "route_strategy", "rr", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_INT(test_setting("route_strategy", v, sizeof v), 0);
    CHECK_EQ_STR(v, "balanced"); /* alias stored canonically */
    test_run(cli_config_main, &o, "config", "set", "rotation", "hybrid_aggregate_first_rotation", NULL);
    CHECK_EQ_INT(o.rc, 0);
    test_run(cli_config_main, &o, "config", "get", "route_strategy", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_STR(o.out, "balanced\n");
    test_run(cli_config_main, &o, "config", "list", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_STR(o.out, "rotation=hybrid_aggregate_first_rotation\nroute_strategy=balanced\n");
    test_run(cli_config_main, &o, "config", "unset", "route_strategy", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_INT(test_setting("route_strategy", v, sizeof v), 1);
    test_run(cli_config_main, &o, "config", "get", "route_strategy", NULL);
    CHECK_EQ_INT(o.rc, 1);
    CHECK(strstr(o.err, "not set") != NULL);
    test_run(cli_config_main, &o, "config", "unset", "route_strategy", NULL);
    CHECK_EQ_INT(o.rc, 0); /* unsetting twice is fine */
    CHECK_EQ_INT(test_setting("rotation", v, sizeof v), 0);
    CHECK_EQ_STR(v, "hybrid_aggregate_first_rotation");
}

static void test_cli_config_rejects_unknown_keys_and_bad_values(void)
{
    test_out o;
    char v[64];
    test_fresh_db();
    test_run(cli_config_main, &o, "config", "set", "colour", "blue", NULL);
    CHECK_EQ_INT(o.rc, 2);
    CHECK(strstr(o.err, "unknown setting 'colour'") != NULL);
    CHECK(strstr(o.err, "route_strategy") && strstr(o.err, "rotation"));
    test_run(cli_config_main, &o, "config", "get", "colour", NULL);
    CHECK(o.rc != 0 && strstr(o.err, "route_strategy") != NULL);
    test_run(cli_config_main, &o, "config", "unset", "colour", NULL);
    CHECK(o.rc != 0);
    test_run(cli_config_main, &o, "config", "set", "route_strategy", "random", NULL);
    CHECK_EQ_INT(o.rc, 2);
    CHECK(strstr(o.err, "ordered") != NULL);
    test_run(cli_config_main, &o, "config", "set", "rotation", "round_robin", NULL);
    CHECK_EQ_INT(o.rc, 2);
    CHECK(strstr(o.err, "hybrid_rotation") != NULL);
    CHECK_EQ_INT(test_setting("route_strategy", v, sizeof v), 1);
    CHECK_EQ_INT(test_setting("rotation", v, sizeof v), 1);
}

/* The conversation retention: validated by `config set`, and what a
 * gateway reads with config_from_store reaches the store's writer; an
 * environment variable pins its setting. */
static void test_cli_config_conversation_limits_are_checked_and_reach_the_store(void)
{
    test_out o;
    char v[64];
    test_fresh_db();
    test_run(cli_config_main, &o, "config", "set", "conversation_max_rows", "500", NULL);
    CHECK_EQ_INT(o.rc, 0);
    test_run(cli_config_main, &o, "config", "set", "conversation_max_days", "7", NULL);
    CHECK_EQ_INT(o.rc, 0);
    test_run(cli_config_main, &o, "config", "set", "conversation_max_rows", "-1", NULL);
    CHECK_EQ_INT(o.rc, 2);
    test_run(cli_config_main, &o, "config", "set", "conversation_max_days", "0", NULL);
    CHECK_EQ_INT(o.rc, 2);
    test_run(cli_config_main, &o, "config", "set", "conversation_max_bytes", "1099511627777", NULL);
    CHECK_EQ_INT(o.rc, 2);
    CHECK_EQ_INT(test_setting("conversation_max_rows", v, sizeof v), 0);
    CHECK_EQ_STR(v, "500");
    store *s = test_store();
    if (!s)
        return;
    sy_config c;
    config_defaults(&c);
    setenv("SWITCHYARD_CONVERSATION_MAX_DAYS", "3", 1);
    CHECK_EQ_INT(config_from_env(&c), 0);
    unsetenv("SWITCHYARD_CONVERSATION_MAX_DAYS");
    config_from_store(&c, s);
    store_conversation_limits l;
    store_conversation_limits_get(s, &l);
    CHECK_EQ_INT(l.max_rows, 500);
    CHECK_EQ_INT(l.max_bytes, STORE_CONV_MAX_BYTES_DEFAULT);
    CHECK_EQ_INT(l.max_days, 3); /* the environment over the database setting */
    store_close(s);
}

static void test_cli_config_checks_argument_counts(void)
{
    test_out o;
    test_fresh_db();
    test_run(cli_config_main, &o, "config", "set", "route_strategy", NULL);
    CHECK_EQ_INT(o.rc, 2);
    test_run(cli_config_main, &o, "config", "set", "route_strategy", "ordered", "extra", NULL);
    CHECK_EQ_INT(o.rc, 2);
    test_run(cli_config_main, &o, "config", "get", NULL);
    CHECK_EQ_INT(o.rc, 2);
    test_run(cli_config_main, &o, "config", "list", "x", NULL);
    CHECK_EQ_INT(o.rc, 2);
    test_run(cli_config_main, &o, "config", "frobnicate", NULL);
    CHECK_EQ_INT(o.rc, 2);
    test_run(cli_config_main, &o, "config", "set", "--help", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK(strstr(o.out, "config set KEY VALUE") != NULL);
}

/* A change made by `config set` is visible to a running server as a new
 * config_version, which makes it reload. */
static void test_cli_config_set_bumps_config_version(void)
{
    test_out o;
    test_fresh_db();
    store *server = test_store();
    int64_t v0 = store_config_version(server);
    test_run(cli_config_main, &o, "config", "set", "rotation", "account_rotation", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK(store_config_version(server) > v0);
    store_close(server);
}

static void test_cli_codex_attach_status_detach_and_their_option_checks(void)
{
    test_out o;
    char home[160], cfg[200];
    test_fresh_db();
    snprintf(home, sizeof home, "%s/codex-home", test_dir);
    snprintf(cfg, sizeof cfg, "%s/config.toml", home);
    test_run(cli_codex_main, &o, "codex", "attach", "--force", "--codex-home", home, NULL);
    CHECK_EQ_INT(o.rc, 2);
    test_run(cli_codex_main, &o, "codex", "status", "--gateway", "http://x", "--codex-home", home, NULL);
    CHECK_EQ_INT(o.rc, 2);
    test_run(cli_codex_main, &o, "codex", "attach", "--gateway", "ftp://x", "--codex-home", home, NULL);
    CHECK_EQ_INT(o.rc, 2);
    CHECK(access(cfg, F_OK) != 0);
    /* a mistyped home is not created; nothing answers on port 9: refused unless --offline */
    test_run(cli_codex_main, &o, "codex", "attach", "--gateway", "http://127.0.0.1:9/", "--codex-home", home, NULL);
    CHECK(o.rc == 1 && strstr(o.err, "does not exist") && strstr(o.err, "--create"));
    CHECK(access(home, F_OK) != 0);
    test_run(cli_codex_main, &o, "codex", "attach", "--gateway", "127.0.0.1:9", "--codex-home", home, "--create",
             NULL);
    CHECK(o.rc == 1 && strstr(o.err, "no gateway answers at http://127.0.0.1:9 (") && strstr(o.err, "--offline"));
    CHECK(access(cfg, F_OK) != 0);
    test_run(cli_codex_main, &o, "codex", "status", "--offline", "--codex-home", home, NULL);
    CHECK_EQ_INT(o.rc, 2);
    test_run(cli_codex_main, &o, "codex", "attach", "--gateway", "127.0.0.1:9", "--codex-home", home, "--create",
             "--offline", NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK(strstr(o.out, "attached: ") && strstr(o.out, "-> http://127.0.0.1:9/v1 since "));
    char text[4096], *tok;
    test_read_file(cfg, text, sizeof text);
    tok = strstr(text, "experimental_bearer_token = \"");
    CHECK(tok != NULL);
    if (tok) {
        char key[64];
        snprintf(key, sizeof key, "%.43s", tok + 29);
        CHECK(strncmp(key, "sy-", 3) == 0);
        CHECK(strstr(o.out, key) == NULL && strstr(o.err, key) == NULL); /* printed only as a prefix */
    }
    /* the file is as attach wrote it, but nothing answers there: not plain
     * "attached", and exit 1 (Codex would spin on "Reconnecting...") */
    test_run(cli_codex_main, &o, "codex", "status", "--codex-home", home, NULL);
    CHECK(o.rc == 1 && strncmp(o.out, "attached, but no gateway answers at http://127.0.0.1:9/v1: ", 58) == 0);
    test_run(cli_codex_main, &o, "codex", "detach", "--codex-home", home, NULL);
    CHECK(o.rc == 0 && strstr(o.out, "detached: ") != NULL);
    CHECK(access(cfg, F_OK) != 0); /* there was no file before attach */
    test_run(cli_codex_main, &o, "codex", "status", "--codex-home", home, NULL);
    CHECK(o.rc == 0 && strncmp(o.out, "direct: ", 8) == 0);
}

/* ---------- the command table, help and global options ---------- */

/* Runs cli_main with the NULL-terminated arguments after "switchyard" (no --db added). */
static void test_run_main(test_out *o, ...)
{
    char *argv[32], out_path[160], err_path[160];
    int argc = 0;
    argv[argc++] = "switchyard";
    va_list ap;
    va_start(ap, o);
    for (char *a; argc < 31 && (a = va_arg(ap, char *)) != NULL;)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    snprintf(out_path, sizeof out_path, "%s/stdout", test_dir);
    snprintf(err_path, sizeof err_path, "%s/stderr", test_dir);
    fflush(stdout);
    fflush(stderr);
    int so = test_redirect(STDOUT_FILENO, out_path), se = test_redirect(STDERR_FILENO, err_path);
    o->rc = cli_main(argc, argv, NULL);
    fflush(stdout);
    fflush(stderr);
    test_restore(STDOUT_FILENO, so);
    test_restore(STDERR_FILENO, se);
    test_read_file(out_path, o->out, sizeof o->out);
    test_read_file(err_path, o->err, sizeof o->err);
}

/* The help's command lines ("  account add   summary"): their first one or two words. */
typedef struct test_cmd {
    char w1[32], w2[32];
} test_cmd;

static size_t test_help_commands(const char *help, test_cmd *cmds, size_t max)
{
    const char *p = strstr(help, "commands:\n");
    size_t n = 0;
    for (p = p ? strchr(p, '\n') + 1 : NULL; p && strncmp(p, "  ", 2) == 0 && n < max; p = strchr(p, '\n') + 1) {
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)strcspn(p, "\n"), p);
        test_cmd *c = &cmds[n++];
        c->w1[0] = c->w2[0] = '\0';
        /* the name is the text before the run of spaces that starts the summary */
        char *gap = strstr(line + 2, "  ");
        if (gap)
            *gap = '\0';
        sscanf(line, " %31s %31s", c->w1, c->w2);
        if (!strchr(p, '\n'))
            break;
    }
    return n;
}

static void test_cli_help_lists_every_command_and_every_line_dispatches(void)
{
    test_out o, h;
    test_run_main(&o, "--help", NULL);
    CHECK_EQ_INT(o.rc, 0);
    test_run_main(&h, "help", NULL);
    CHECK(h.rc == 0 && strcmp(o.out, h.out) == 0);
    test_cmd cmds[64];
    size_t n = test_help_commands(o.out, cmds, 64);
    CHECK(n >= 27);
    const char *want[] = {"serve", "account add", "account import", "account export", "key revoke", "config list",
                          "codex attach", "codex status", "admin token", "status", "logs", "usage", "test"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        char needle[64];
        snprintf(needle, sizeof needle, "\n  %s ", want[i]);
        CHECK(strstr(o.out, needle) != NULL);
    }
    for (size_t i = 0; i < n; i++) { /* each line reaches its command: its --help answers */
        if (strcmp(cmds[i].w1, "serve") == 0)
            continue; /* the top's: not linked here */
        test_out c;
        if (cmds[i].w2[0])
            test_run_main(&c, cmds[i].w1, cmds[i].w2, "--help", NULL);
        else
            test_run_main(&c, cmds[i].w1, "--help", NULL);
        if (c.rc != 0 || !strstr(c.out, "usage"))
            fprintf(stderr, "  '%s %s --help' rc %d: %s\n", cmds[i].w1, cmds[i].w2, c.rc, c.err);
        CHECK(c.rc == 0 && strstr(c.out, "usage") != NULL);
    }
}

/* 1 if word occurs in text between non-letters ("enable" in "enable|disable"). */
static int test_has_word(const char *text, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word)) {
        int before = p == text || !(p[-1] >= 'a' && p[-1] <= 'z');
        int after = !(p[n] >= 'a' && p[n] <= 'z');
        if (before && after)
            return 1;
    }
    return 0;
}

static void test_cli_each_group_usage_names_every_subcommand_of_the_table(void)
{
    test_out o;
    test_run_main(&o, "help", NULL);
    test_cmd cmds[64];
    size_t n = test_help_commands(o.out, cmds, 64);
    for (size_t i = 0; i < n; i++) {
        if (!cmds[i].w2[0])
            continue;
        test_out g;
        test_run_main(&g, "help", cmds[i].w1, NULL);
        if (!test_has_word(g.out, cmds[i].w2))
            fprintf(stderr, "  'switchyard %s --help' does not name %s\n", cmds[i].w1, cmds[i].w2);
        CHECK(g.rc == 0 && test_has_word(g.out, cmds[i].w2));
    }
}

static void test_cli_global_db_before_the_command_reaches_it_and_one_after_wins(void)
{
    test_out o;
    char other[160];
    test_fresh_db();
    snprintf(other, sizeof other, "%s/other.db", test_dir);
    test_run_main(&o, "--db", test_db, "account", "add", "--name", "front", "--base-url", "https://a.example/v1",
                  "--token", TEST_TOKEN, NULL);
    CHECK_EQ_INT(o.rc, 0);
    CHECK_EQ_INT(test_account_enabled("front"), 1);
    char eq[200];
    snprintf(eq, sizeof eq, "--db=%s", test_db);
    test_run_main(&o, eq, "account", "list", NULL);
    CHECK(o.rc == 0 && strstr(o.out, "front") != NULL);
    test_run_main(&o, "--db", other, "account", "list", "--db", test_db, NULL);
    CHECK(o.rc == 0 && strstr(o.out, "front") != NULL);
    test_run_main(&o, "--db", other, "account", "list", NULL); /* other.db: none there, none made */
    CHECK(o.rc == 1 && strstr(o.out, "front") == NULL && strstr(o.err, "no database at ") != NULL);
    unsetenv("SWITCHYARD_DB");
}

static void test_cli_global_options_refuse_what_they_do_not_know(void)
{
    test_out o;
    test_run_main(&o, "--bogus", "account", "list", NULL);
    CHECK(o.rc == 2 && strstr(o.err, "unknown option '--bogus'"));
    test_run_main(&o, "--db", NULL);
    CHECK(o.rc == 2 && strstr(o.err, "--db needs a value"));
    test_run_main(&o, "--db=", "account", "list", NULL);
    CHECK(o.rc == 2 && strstr(o.err, "--db needs a path"));
    test_run_main(&o, "nosuch", NULL);
    CHECK(o.rc == 2 && strstr(o.err, "unknown command 'nosuch'") && strstr(o.err, "account add"));
    test_run_main(&o, NULL);
    CHECK(o.rc == 2 && strstr(o.err, "commands:"));
    test_run_main(&o, "help", "nosuch", NULL);
    CHECK_EQ_INT(o.rc, 2);
    test_run_main(&o, "account", "nosuch", NULL);
    CHECK(o.rc == 2 && strstr(o.err, "unknown command 'nosuch'"));
    unsetenv("SWITCHYARD_DB");
}

static void test_cli_account_add_with_an_empty_name_names_only_that_flag(void)
{
    test_out o;
    test_fresh_db();
    test_run(cli_account_main, &o, "account", "add", "--name", "", "--base-url", "https://a.example/v1", "--token",
             TEST_TOKEN, NULL);
    CHECK(o.rc != 0 && strstr(o.err, "--name") && !strstr(o.err, "--base-url"));
    test_run(cli_account_main, &o, "account", "add", "--name", "n", "--token", TEST_TOKEN, NULL);
    CHECK(o.rc != 0 && strstr(o.err, "--base-url") && !strstr(o.err, "--name"));
}

int main(void)
{
    if (check_tmpdir_make(test_dir, sizeof test_dir, "sy_cli") != 0)
        return 2;
    unsetenv("SWITCHYARD_DB");
    RUN(test_cli_account_add_list_disable_enable_remove);
    RUN(test_cli_account_add_from_codex_auth_json);
    RUN(test_cli_commands_that_only_read_or_change_make_no_database);
    RUN(test_cli_account_commands_fail_on_unknown_or_missing_name);
    RUN(test_cli_account_output_never_contains_the_token);
    RUN(test_cli_key_add_prints_the_key_as_last_line);
    RUN(test_cli_key_prefer_sets_and_clears_the_account);
    RUN(test_cli_key_revoke_marks_the_key_revoked);
    RUN(test_cli_key_names_are_unique_and_id_or_prefix_choose_one_key);
    RUN(test_cli_config_set_get_unset_list);
    RUN(test_cli_config_conversation_limits_are_checked_and_reach_the_store);
    RUN(test_cli_config_rejects_unknown_keys_and_bad_values);
    RUN(test_cli_config_checks_argument_counts);
    RUN(test_cli_config_set_bumps_config_version);
    RUN(test_cli_codex_attach_status_detach_and_their_option_checks);
    RUN(test_cli_help_lists_every_command_and_every_line_dispatches);
    RUN(test_cli_each_group_usage_names_every_subcommand_of_the_table);
    RUN(test_cli_global_db_before_the_command_reaches_it_and_one_after_wins);
    RUN(test_cli_global_options_refuse_what_they_do_not_know);
    RUN(test_cli_account_add_with_an_empty_name_names_only_that_flag);
    check_tmpdir_remove(test_dir);
    return check_summary();
}
