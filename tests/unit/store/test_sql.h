/* test_sql.h: the store tests' own look at a database, on a connection of
 * their own (not the store's): one number from a query, and statements
 * that must run. Included by the store wing's unit tests only. */
#ifndef SY_TEST_SQL_H
#define SY_TEST_SQL_H
#include "check.h"
#include <sqlite3.h>
#include <stdint.h>

/* The first column of the first row of sql, -999 when there is none. */
static inline int64_t test_sql_int(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int64_t v = -999;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* Runs sql on path (which must exist, unless open_flags adds
 * SQLITE_OPEN_CREATE), waiting up to 5 s for a writer's lock; a failure
 * fails the test. */
static inline void test_sql_exec_flags(const char *path, const char *sql, int open_flags)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | open_flags, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(db, 5000);
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    }
    CHECK_EQ_INT(rc, SQLITE_OK);
    sqlite3_close(db);
}

static inline void test_sql_exec(const char *path, const char *sql) { test_sql_exec_flags(path, sql, 0); }

#endif
