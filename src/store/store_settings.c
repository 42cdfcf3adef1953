/* store_settings.c: the settings table (key/value text of `switchyard
 * config`; see store.h). Its triggers bump config_version, so a running
 * gateway reloads what the CLI set. Reads never wait for a lock, so the
 * loop may call them; writes are the CLI's. */
#include "store/store_internal.h"
#include <sqlite3.h>
#include <string.h>

int store_setting_get(store *s, const char *key, char *out, size_t n)
{
    sqlite3_stmt *st = NULL;
    int rc = -1;
    if (!key || !out || n == 0)
        return -1;
    out[0] = '\0';
    if (sqlite3_prepare_v2(s->db, "SELECT value FROM settings WHERE key = ?", -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    int step = sqlite3_step(st);
    if (step == SQLITE_DONE) {
        rc = 1;
    } else if (step == SQLITE_ROW) {
        const unsigned char *v = sqlite3_column_text(st, 0);
        size_t len = (size_t)sqlite3_column_bytes(st, 0);
        if (v && len < n) {
            memcpy(out, v, len + 1);
            rc = 0;
        }
    }
    sqlite3_finalize(st);
    return rc;
}

int store_setting_set(store *s, const char *key, const char *value, char *err, size_t errlen)
{
    if (!key || !*key || !value) {
        store_errf(err, errlen, "a setting needs a key and a value");
        return -1;
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db,
        "INSERT INTO settings(key, value, updated_at) VALUES (?1, ?2, ?3) ON CONFLICT(key) DO UPDATE"
        " SET value = excluded.value, updated_at = excluded.updated_at", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, store_now());
        store_sync_write_begin(s);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(s->db);
        store_sync_write_end(s);
    }
    if (rc != SQLITE_OK)
        store_errf(err, errlen, "cannot set %s: %s", key, sqlite3_errmsg(s->db));
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : -1;
}

int store_setting_delete(store *s, const char *key, char *err, size_t errlen)
{
    int changes = 0;
    if (store_name_write_sync(s, "DELETE FROM settings WHERE key = ?1", key, NULL, &changes, "unset a setting",
                              err, errlen) != 0)
        return -1;
    return changes ? 0 : 1;
}

int store_settings_load(store *s, void (*fn)(void *ud, const char *key, const char *value), void *ud)
{
    sqlite3_stmt *st = NULL;
    int rc;
    if (sqlite3_prepare_v2(s->db, "SELECT key, value FROM settings ORDER BY key", -1, &st, NULL) != SQLITE_OK)
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        fn(ud, (const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1));
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : -1;
}
