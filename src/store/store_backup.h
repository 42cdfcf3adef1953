/* store_backup.h: the whole database copied out while a gateway serves it
 * (`switchyard backup`) and a copy put back in its place while none does
 * (`switchyard restore`), and the lock that tells the two apart: a serving
 * gateway holds a read lock on <db>.serving for its whole life, a restore
 * takes the write lock, so neither can happen under the other. The copy
 * holds every token: it is written 0600. docs/operating.md, "Back up and
 * restore". */
#ifndef SY_STORE_BACKUP_H
#define SY_STORE_BACKUP_H
#include <stddef.h>
#include <stdint.h>

#define STORE_SERVING_SUFFIX ".serving"
#define STORE_BEFORE_RESTORE_SUFFIX ".before-restore"
#define STORE_BACKUP_STEP_PAGES 1024 /* pages copied per sqlite3_backup_step */

typedef struct store_backup_info {
    int64_t pages, page_size;        /* what was copied */
    int schema_version;              /* of the copy */
    int64_t accounts, keys;          /* rows in the copy */
} store_backup_info;

/* Copies the database at db_path into out_path with sqlite's online backup
 * API: one read snapshot (so the copy holds exactly what was committed
 * when it began, and a serving gateway's writer never waits for it),
 * copied STORE_BACKUP_STEP_PAGES at a time into out_path.tmp (0600), which
 * is fsynced and then renamed to out_path. An existing out_path is refused
 * unless force (never the database itself). 0 ok (info filled, may be
 * NULL); -1 with err. */
int store_backup(const char *db_path, const char *out_path, int force, store_backup_info *info, char *err,
                 size_t errlen);

/* Puts the database in file at db_path: refused while a gateway serves
 * db_path (its pid in err); the file is copied beside db_path
 * (db_path.restore-tmp) and the copy checked: SQLite, PRAGMA
 * integrity_check ok, switchyard's tables (schema_migrations, meta,
 * accounts) and a schema version this build knows (an older one is
 * migrated when the database is next opened); a -wal beside file (a
 * database copied while something had it open) is copied with it and its
 * commits played in; file itself is only read.
 * The database there before (with its -wal) is kept
 * as db_path.before-restore (replacing an older one), a stale -shm removed,
 * and the copy renamed into place. A db_path.serving the restore made
 * (none was there) is removed as it finishes. 0 ok (info of the restored
 * copy); -1 with err, db_path untouched. */
int store_restore(const char *file, const char *db_path, store_backup_info *info, char *err, size_t errlen);

/* Taken by `switchyard serve` before it opens db_path and held until the
 * process ends: a read lock on db_path.serving (several gateways may share
 * a database). Waits up to wait_s for a restore in progress to finish
 * (and locks the file anew when that restore removed the one it waited
 * on). Returns the lock's descriptor, or -1 with err. */
int store_serving_lock(const char *db_path, double wait_s, char *err, size_t errlen);
/* The pid of a process holding db_path's serving lock; 0 none (or no lock
 * file); -1 it cannot be told (err). For other processes (the CLI): the
 * lock is a POSIX record lock, and closing any descriptor of the file
 * would drop the caller's own. */
int store_serving_pid(const char *db_path, char *err, size_t errlen);

#endif
