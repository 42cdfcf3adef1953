/* store_backup.c: the online backup, the restore and the serving lock (see
 * store_backup.h). The backup runs sqlite3_backup_step inside one read
 * transaction of its own: in WAL mode that snapshot never blocks the
 * gateway's writer, and the copy cannot restart (a backup without one
 * starts over whenever another process commits, which under load is
 * always). The restore never writes the database a gateway has open:
 * gateways hold a read lock on <db>.serving, the restore its write lock. */
#include "store/store_backup.h"
#include "store/store_internal.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STORE_BACKUP_BUSY_TRIES 500 /* 10 ms apart: 5 s of a step finding the source busy */

/* path + suffix into out; -1 with err when it does not fit. */
static int store_path_with(char *out, size_t n, const char *path, const char *suffix, char *err, size_t errlen)
{
    if ((size_t)snprintf(out, n, "%s%s", path, suffix) < n)
        return 0;
    store_errf(err, errlen, "path too long: %s", path);
    return -1;
}

/* fsync of the directory holding path, so a rename in it is on disk. */
static int store_dir_sync(const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static int store_file_sync(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Removes path and the files sqlite keeps beside it; absent is fine. */
static void store_files_remove(const char *path)
{
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
    char p[PATH_MAX + 16];
    for (size_t i = 0; i < sizeof sfx / sizeof *sfx; i++)
        if ((size_t)snprintf(p, sizeof p, "%s%s", path, sfx[i]) < sizeof p)
            unlink(p);
}

/* An empty file made by us with mode 0600 (whatever the umask), replacing
 * one a crash left. */
static int store_private_create(const char *path, char *err, size_t errlen)
{
    store_files_remove(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || fchmod(fd, 0600) != 0) {
        store_errf(err, errlen, "cannot create %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

/* ---------- what a copy holds ---------- */

static int64_t store_count(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    int64_t n = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

/* Is db switchyard's, at a version this build knows? Fills info. */
static int store_schema_check(sqlite3 *db, const char *what, store_backup_info *info, char *err, size_t errlen)
{
    int v = store_schema_version(db);
    int64_t meta = store_count(db, "SELECT count(*) FROM meta WHERE key = 'config_version'");
    info->accounts = store_count(db, "SELECT count(*) FROM accounts");
    info->keys = store_count(db, "SELECT count(*) FROM platform_keys");
    info->schema_version = v;
    if (v <= 0 || meta != 1 || info->accounts < 0 || info->keys < 0) {
        store_errf(err, errlen, "%s is not a switchyard database (no schema version, meta or accounts table)", what);
        return -1;
    }
    if (v > store_schema_latest()) {
        store_errf(err, errlen, "%s has schema version %d, newer than this build's %d: use the switchyard that wrote it",
                   what, v, store_schema_latest());
        return -1;
    }
    return 0;
}

/* ---------- backup ---------- */

/* Copies src's main database into dst page by page, in steps. */
static int store_backup_copy(sqlite3 *src, sqlite3 *dst, store_backup_info *info, char *err, size_t errlen)
{
    sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
    if (!b) {
        store_errf(err, errlen, "cannot start the backup: %s", sqlite3_errmsg(dst));
        return -1;
    }
    int rc, busy = 0;
    while ((rc = sqlite3_backup_step(b, STORE_BACKUP_STEP_PAGES)) == SQLITE_OK || rc == SQLITE_BUSY ||
           rc == SQLITE_LOCKED) {
        if (rc != SQLITE_OK && ++busy > STORE_BACKUP_BUSY_TRIES)
            break;
        sqlite3_sleep(rc == SQLITE_OK ? 1 : 10); /* between steps: the disk is the gateway's too */
    }
    info->pages = sqlite3_backup_pagecount(b);
    int frc = sqlite3_backup_finish(b);
    if (rc != SQLITE_DONE || frc != SQLITE_OK) {
        store_errf(err, errlen, "backup failed: %s", sqlite3_errstr(rc != SQLITE_DONE ? rc : frc));
        return -1;
    }
    return 0;
}

/* Opens the source and starts the read transaction the whole copy is made
 * in: the snapshot is taken by the first read. */
static int store_backup_source(const char *db_path, sqlite3 **src, store_backup_info *info, char *err, size_t errlen)
{
    struct stat sb;
    if (stat(db_path, &sb) != 0) {
        store_errf(err, errlen, "cannot read database %s: %s", db_path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        store_errf(err, errlen, "database %s is not a regular file", db_path);
        return -1;
    }
    if (store_conn_open(db_path, STORE_BUSY_MS, 0, src, err, errlen) != 0)
        return -1;
    if (store_exec(*src, "BEGIN", err, errlen) != SQLITE_OK)
        return -1;
    if (store_schema_check(*src, db_path, info, err, errlen) != 0)
        return -1;
    info->page_size = store_count(*src, "PRAGMA page_size");
    return 0;
}

/* out_path may be written: not the database, not a directory, and absent
 * unless force. */
static int store_backup_target(const char *db_path, const char *out_path, int force, char *err, size_t errlen)
{
    struct stat ob, db;
    if (lstat(out_path, &ob) != 0 && errno == ENOENT)
        return 0;
    if (lstat(out_path, &ob) != 0) {
        store_errf(err, errlen, "cannot stat %s: %s", out_path, strerror(errno));
        return -1;
    }
    if (stat(db_path, &db) == 0 && stat(out_path, &ob) == 0 && ob.st_dev == db.st_dev && ob.st_ino == db.st_ino) {
        store_errf(err, errlen, "%s is the database itself", out_path);
        return -1;
    }
    if (S_ISDIR(ob.st_mode)) {
        store_errf(err, errlen, "%s is a directory: give a file name", out_path);
        return -1;
    }
    if (!force) {
        store_errf(err, errlen, "%s exists: give another name, or --force to replace it", out_path);
        return -1;
    }
    return 0;
}

int store_backup(const char *db_path, const char *out_path, int force, store_backup_info *info, char *err,
                 size_t errlen)
{
    store_backup_info scratch;
    char tmp[PATH_MAX];
    if (!info)
        info = &scratch;
    memset(info, 0, sizeof *info);
    if (store_backup_target(db_path, out_path, force, err, errlen) != 0 ||
        store_path_with(tmp, sizeof tmp, out_path, ".tmp", err, errlen) != 0)
        return -1;
    sqlite3 *src = NULL, *dst = NULL;
    int rc = store_backup_source(db_path, &src, info, err, errlen);
    if (rc == 0)
        rc = store_private_create(tmp, err, errlen);
    if (rc == 0 && sqlite3_open_v2(tmp, &dst, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        store_errf(err, errlen, "cannot open %s: %s", tmp, dst ? sqlite3_errmsg(dst) : "out of memory");
        rc = -1;
    }
    if (rc == 0)
        rc = store_backup_copy(src, dst, info, err, errlen);
    if (src)
        store_exec(src, "COMMIT", NULL, 0); /* the snapshot ends: checkpoints may pass it again */
    sqlite3_close(src);
    if (dst && sqlite3_close(dst) != SQLITE_OK && rc == 0) {
        store_errf(err, errlen, "cannot close %s", tmp);
        rc = -1;
    }
    if (rc == 0 && store_file_sync(tmp) != 0) {
        store_errf(err, errlen, "cannot fsync %s: %s", tmp, strerror(errno));
        rc = -1;
    }
    /* without force, link() refuses a file that appeared meanwhile */
    if (rc == 0 && (force ? rename(tmp, out_path) : link(tmp, out_path)) != 0) {
        store_errf(err, errlen, errno == EEXIST ? "%s exists: give another name, or --force to replace it"
                                                : "cannot write %s: %s",
                   out_path, strerror(errno));
        rc = -1;
    }
    store_files_remove(tmp); /* after link(), or a failure: the temp copy goes */
    if (rc == 0)
        store_dir_sync(out_path);
    return rc;
}

/* ---------- the serving lock ---------- */

/* Opens db_path.serving (created 0600); *created (may be NULL) says
 * whether this call made it (O_EXCL: another process's file is never
 * taken for one's own). */
static int store_serving_open(const char *db_path, int *created, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if (created)
        *created = 0;
    if (store_path_with(path, sizeof path, db_path, STORE_SERVING_SUFFIX, err, errlen) != 0)
        return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0 && created)
        *created = 1;
    else if (fd < 0 && errno == EEXIST)
        fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) /* no such directory: the database could not be opened either */
        store_errf(err, errlen, "cannot open database %s: %s", db_path, strerror(errno));
    else if (fd < 0)
        store_errf(err, errlen, "cannot open %s: %s", path, strerror(errno));
    return fd;
}

/* F_SETLK of the whole file: 0 taken, 1 someone holds a conflicting lock, -1 error. */
static int store_lock_try(int fd, short type)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_SETLK, &fl) == 0)
        return 0;
    return errno == EAGAIN || errno == EACCES ? 1 : -1;
}

/* The pid holding a lock that conflicts with type; 0 none. */
static int store_lock_holder(int fd, short type)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_GETLK, &fl) != 0 || fl.l_type == F_UNLCK)
        return 0;
    return fl.l_pid > 0 ? (int)fl.l_pid : 0;
}

int store_serving_lock(const char *db_path, double wait_s, char *err, size_t errlen)
{
    int fd = store_serving_open(db_path, NULL, err, errlen);
    for (int waited_ms = 0; fd >= 0; waited_ms += 50) {
        int rc = store_lock_try(fd, F_RDLCK);
        struct stat sb;
        if (rc == 0 && fstat(fd, &sb) == 0 && sb.st_nlink == 0) {
            /* a restore that made the file removed it as it finished: the
             * lock is on a file no one else can find; take it on the new one */
            close(fd);
            fd = store_serving_open(db_path, NULL, err, errlen);
            continue;
        }
        if (rc == 0)
            return fd;
        if (rc < 0 || waited_ms >= wait_s * 1000) {
            if (rc < 0)
                store_errf(err, errlen, "cannot lock %s%s: %s", db_path, STORE_SERVING_SUFFIX, strerror(errno));
            else
                store_errf(err, errlen, "cannot serve %s: a restore of it is in progress (pid %d)", db_path,
                           store_lock_holder(fd, F_RDLCK));
            close(fd);
            return -1;
        }
        usleep(50 * 1000);
    }
    return -1;
}

int store_serving_pid(const char *db_path, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if (store_path_with(path, sizeof path, db_path, STORE_SERVING_SUFFIX, err, errlen) != 0)
        return -1;
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT)
        return 0; /* no gateway has served this database since the lock came in */
    if (fd < 0) {
        store_errf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    int pid = store_lock_holder(fd, F_WRLCK);
    close(fd);
    return pid;
}

/* ---------- restore ---------- */

/* Copies file into the new private file dst, fsynced. */
static int store_file_copy(const char *file, const char *dst, char *err, size_t errlen)
{
    int in = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat sb;
    if (in < 0 || fstat(in, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        store_errf(err, errlen, "cannot read %s: %s", file, in < 0 ? strerror(errno) : "not a regular file");
        if (in >= 0)
            close(in);
        return -1;
    }
    int out = store_private_create(dst, err, errlen) == 0 ? open(dst, O_WRONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
    int rc = out < 0 ? -1 : 0;
    char buf[65536];
    while (rc == 0) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -1 : 0;
            break;
        }
        for (ssize_t off = 0; rc == 0 && off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            rc = w > 0 ? 0 : -1;
            off += w > 0 ? w : 0;
        }
    }
    if (rc == 0 && fsync(out) != 0)
        rc = -1;
    if (rc != 0 && out >= 0)
        store_errf(err, errlen, "cannot copy %s to %s: %s", file, dst, strerror(errno));
    close(in);
    if (out >= 0)
        close(out);
    return rc;
}

/* A -wal beside file (a database copied while something had it open)
 * holds its newest commits: it goes beside the copy, and opening the copy
 * plays it in. */
static int store_wal_copy(const char *file, const char *staged, char *err, size_t errlen)
{
    char wal[PATH_MAX], staged_wal[PATH_MAX];
    struct stat sb;
    if (store_path_with(wal, sizeof wal, file, "-wal", err, errlen) != 0 ||
        store_path_with(staged_wal, sizeof staged_wal, staged, "-wal", err, errlen) != 0)
        return -1;
    if (stat(wal, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0)
        return 0;
    return store_file_copy(wal, staged_wal, err, errlen);
}

/* The checks of store_restore on the copy at path; what names the file
 * in messages. */
static int store_restore_check(const char *path, const char *what, store_backup_info *info, char *err,
                               size_t errlen)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int rc = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        store_errf(err, errlen, "cannot open %s: %s", what, db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return -1;
    }
    int prc = sqlite3_prepare_v2(db, "PRAGMA integrity_check(1)", -1, &st, NULL);
    int step = prc == SQLITE_OK ? sqlite3_step(st) : prc;
    const char *res = step == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
    if ((sqlite3_errcode(db) & 0xff) == SQLITE_NOTADB)
        store_errf(err, errlen, "%s is not a SQLite database", what);
    else if (step != SQLITE_ROW)
        store_errf(err, errlen, "%s cannot be read as a database: %s", what, sqlite3_errmsg(db));
    else if (!res || strcmp(res, "ok") != 0)
        store_errf(err, errlen, "%s fails PRAGMA integrity_check: %.200s", what, res ? res : "?");
    else
        rc = 0;
    sqlite3_finalize(st);
    if (rc == 0) {
        rc = store_schema_check(db, what, info, err, errlen);
        if (rc == 0)
            rc = store_schema_refuse_foreign(db, what, err, errlen);
        info->page_size = store_count(db, "PRAGMA page_size");
        info->pages = store_count(db, "PRAGMA page_count");
    }
    /* whatever a -wal brought goes into the file itself: the file alone
     * is renamed into place (busy, the first column, is 0 when done) */
    if (rc == 0 && store_count(db, "PRAGMA wal_checkpoint(TRUNCATE)") != 0) {
        store_errf(err, errlen, "cannot checkpoint the copy of %s: %s", what, sqlite3_errmsg(db));
        rc = -1;
    }
    if (sqlite3_close(db) != SQLITE_OK && rc == 0) {
        store_errf(err, errlen, "cannot close %s", path);
        rc = -1;
    }
    return rc;
}

/* The database at db_path (if any) becomes db_path.before-restore with its
 * -wal, its -shm goes, and staged takes its name. */
static int store_restore_swap(const char *db_path, const char *staged, char *err, size_t errlen)
{
    char before[PATH_MAX], wal[PATH_MAX], before_wal[PATH_MAX], shm[PATH_MAX];
    if (store_path_with(before, sizeof before, db_path, STORE_BEFORE_RESTORE_SUFFIX, err, errlen) != 0 ||
        store_path_with(wal, sizeof wal, db_path, "-wal", err, errlen) != 0 ||
        store_path_with(before_wal, sizeof before_wal, before, "-wal", err, errlen) != 0 ||
        store_path_with(shm, sizeof shm, db_path, "-shm", err, errlen) != 0)
        return -1;
    struct stat sb;
    if (lstat(db_path, &sb) == 0) {
        store_files_remove(before);
        /* a hard link keeps the database at its name until the rename below
         * replaces it; a file system without links gets a rename */
        if (link(db_path, before) != 0 && rename(db_path, before) != 0) {
            store_errf(err, errlen, "cannot keep %s as %s: %s", db_path, before, strerror(errno));
            return -1;
        }
        /* its log goes with it: left here, sqlite would play it into the
         * restored database */
        if (rename(wal, before_wal) != 0 && errno != ENOENT) {
            store_errf(err, errlen, "cannot move %s: %s", wal, strerror(errno));
            return -1;
        }
        if (unlink(shm) != 0 && errno != ENOENT) {
            store_errf(err, errlen, "cannot remove %s: %s", shm, strerror(errno));
            return -1;
        }
    } else if (errno != ENOENT) {
        store_errf(err, errlen, "cannot stat %s: %s", db_path, strerror(errno));
        return -1;
    }
    if (rename(staged, db_path) != 0) {
        store_errf(err, errlen, "cannot put the restored database at %s: %s", db_path, strerror(errno));
        return -1;
    }
    store_dir_sync(db_path);
    return 0;
}

int store_restore(const char *file, const char *db_path, store_backup_info *info, char *err, size_t errlen)
{
    store_backup_info scratch;
    char staged[PATH_MAX];
    if (!info)
        info = &scratch;
    memset(info, 0, sizeof *info);
    struct stat fb, db;
    if (stat(file, &fb) != 0) {
        store_errf(err, errlen, "cannot read %s: %s", file, strerror(errno));
        return -1;
    }
    if (stat(db_path, &db) == 0 && fb.st_dev == db.st_dev && fb.st_ino == db.st_ino) {
        store_errf(err, errlen, "%s is the database itself", file);
        return -1;
    }
    if (store_path_with(staged, sizeof staged, db_path, ".restore-tmp", err, errlen) != 0)
        return -1;
    int made_lock = 0, lock = store_serving_open(db_path, &made_lock, err, errlen);
    if (lock < 0)
        return -1;
    int rc = store_lock_try(lock, F_WRLCK);
    if (rc != 0) {
        int pid = rc > 0 ? store_lock_holder(lock, F_WRLCK) : 0;
        if (rc > 0)
            store_errf(err, errlen, "a gateway is serving %s (pid %d): stop it first, then restore", db_path, pid);
        else
            store_errf(err, errlen, "cannot lock %s%s: %s", db_path, STORE_SERVING_SUFFIX, strerror(errno));
        close(lock);
        return -1;
    }
    /* held from here on: a gateway starting now waits for the swap */
    rc = store_file_copy(file, staged, err, errlen);
    if (rc == 0)
        rc = store_wal_copy(file, staged, err, errlen);
    if (rc == 0)
        rc = store_restore_check(staged, file, info, err, errlen);
    if (rc == 0)
        rc = store_restore_swap(db_path, staged, err, errlen);
    store_files_remove(staged);
    if (made_lock) {
        /* no gateway has served here (the file is this restore's): leave
         * none behind (issue 34: a restore into a new path left a 0-byte
         * <db>.serving). Removed while the write lock is held, so a gateway
         * waiting on it sees it unlinked and takes the lock anew
         * (store_serving_lock). */
        char path[PATH_MAX];
        if (store_path_with(path, sizeof path, db_path, STORE_SERVING_SUFFIX, NULL, 0) == 0)
            unlink(path);
    }
    close(lock);
    return rc;
}
