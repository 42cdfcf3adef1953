/* store_keys.c: the platform_keys table (see store.h): generating a key
 * (only its sha256 and a display prefix are stored; the plaintext is shown
 * once), adding, loading, preferring an account and revoking, by id or by
 * name. Rules and budgets of a key are changed in store_controls.c. */
#include "store/store_internal.h"
#include "base/sha256.h"
#include "base/text.h"
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define STORE_KEY_RANDOM_CHARS 40
#define STORE_KEY_PREFIX_LEN 7     /* "sy-" plus 4 random chars */

/* Fills out[0..n) with base62 characters from getrandom(), rejecting bytes
 * >= 248 so every character is equally likely. */
int store_random_base62(char *out, size_t n)
{
    static const char alphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    unsigned char buf[64];
    size_t have = 0;
    while (have < n) {
        ssize_t got = getrandom(buf, sizeof buf, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        for (ssize_t i = 0; i < got && have < n; i++)
            if (buf[i] < 248)
                out[have++] = alphabet[buf[i] % 62];
    }
    memset(buf, 0, sizeof buf);
    return 0;
}

static int store_key_insert(store *s, const char *name, const char *hash, const char *prefix, int64_t *id_out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "INSERT INTO platform_keys(name, hash, prefix, created_at) VALUES (?,?,?,?)",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, hash, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 3, prefix, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 4, store_now());
        store_sync_write_begin(s);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(s->db);
        store_sync_write_end(s);
    }
    if (rc == SQLITE_OK && id_out)
        *id_out = sqlite3_last_insert_rowid(s->db);
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : -1;
}

int store_key_generate(char *key_out, size_t keylen, char hash[65], char prefix[16], char *err, size_t errlen)
{
    char key[3 + STORE_KEY_RANDOM_CHARS + 1] = "sy-";
    if (keylen < sizeof key) {
        store_errf(err, errlen, "key buffer too small (need %zu bytes)", sizeof key);
        return -1;
    }
    if (store_random_base62(key + 3, STORE_KEY_RANDOM_CHARS) != 0) {
        store_errf(err, errlen, "getrandom failed: %s", strerror(errno));
        return -1;
    }
    key[sizeof key - 1] = '\0';
    sha256_hex(key, strlen(key), hash);
    snprintf(prefix, 16, "%.*s", STORE_KEY_PREFIX_LEN, key);
    memcpy(key_out, key, sizeof key);
    memset(key, 0, sizeof key);
    return 0;
}

int store_key_add(store *s, const char *name, char *key_out, size_t keylen, int64_t *id_out,
                  char *err, size_t errlen)
{
    char key[3 + STORE_KEY_RANDOM_CHARS + 1];
    char hash[65], prefix[16];
    if (!name || !*name) {
        store_errf(err, errlen, "key name is required");
        return -1;
    }
    if (text_check_str(name)) { /* shown in logs, the trace and on terminals */
        store_errf(err, errlen, "key name %s", text_check_str(name));
        return -1;
    }
    if (store_key_generate(key, keylen < sizeof key ? keylen : sizeof key, hash, prefix, err, errlen) != 0)
        return -1;
    int rc = store_key_insert(s, name, hash, prefix, id_out);
    if (rc == 0)
        memcpy(key_out, key, sizeof key);
    else
        store_errf(err, errlen, "cannot add key: %s", sqlite3_errmsg(s->db));
    memset(key, 0, sizeof key);
    return rc;
}

int store_key_set_preferred(store *s, int64_t key_id, int64_t account_id)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "UPDATE platform_keys SET preferred_account_id = ? WHERE id = ?",
                                -1, &st, NULL);
    if (rc == SQLITE_OK) {
        store_bind_opt_int(st, 1, account_id, 0);
        sqlite3_bind_int64(st, 2, key_id);
        store_sync_write_begin(s);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(s->db);
        store_sync_write_end(s);
    }
    int changed = rc == SQLITE_OK && sqlite3_changes(s->db) == 1;
    sqlite3_finalize(st);
    return changed ? 0 : -1; /* unknown key id, unknown account id (FK) or db error */
}

static void store_key_row(sqlite3_stmt *st, void *slot)
{
    platform_key *k = slot;
    k->id = sqlite3_column_int64(st, 0);
    k->name = store_col_dup(st, 1);
    store_col_copy(st, 2, k->hash, sizeof k->hash);
    store_col_copy(st, 3, k->prefix, sizeof k->prefix);
    k->preferred_account_id = sqlite3_column_int64(st, 4); /* NULL reads as 0 */
    k->revoked = sqlite3_column_int(st, 5);
    k->allowed_models = store_col_dup(st, 6);
    k->max_rpm = sqlite3_column_int(st, 7);
    k->expires_at = sqlite3_column_int64(st, 8);
    k->budget_usd = sqlite3_column_double(st, 9);
    store_col_copy(st, 10, k->budget_period, sizeof k->budget_period);
}

int store_keys_load(store *s, platform_key **out, size_t *n)
{
    void *rows;
    int rc = store_rows_load(s,
        "SELECT id, name, hash, prefix, preferred_account_id, revoked, allowed_models, max_rpm, expires_at,"
        " budget_usd, budget_period FROM platform_keys ORDER BY id",
        sizeof(platform_key), store_key_row, &rows, n);
    if (rc != 0) {
        store_keys_free(rows, *n);
        rows = NULL;
        *n = 0;
    }
    *out = rows;
    return rc;
}

void store_keys_free(platform_key *k, size_t n)
{
    for (size_t i = 0; k && i < n; i++) {
        free(k[i].name);
        free(k[i].allowed_models);
    }
    free(k);
}

/* An account's id by name: 1 found, 0 none, -1 error. */
static int store_account_id_by_name(store *s, const char *name, int64_t *id)
{
    sqlite3_stmt *st = NULL;
    int rc = -1;
    if (sqlite3_prepare_v2(s->db, "SELECT id FROM accounts WHERE name = ?", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        int step = sqlite3_step(st);
        rc = step == SQLITE_ROW ? 1 : step == SQLITE_DONE ? 0 : -1;
        if (rc == 1)
            *id = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    return rc;
}

int store_key_prefer(store *s, int64_t key_id, const char *account_name, char *err, size_t errlen)
{
    int64_t acc = 0;
    int found = account_name ? store_account_id_by_name(s, account_name, &acc) : 1;
    if (found <= 0) {
        store_errf(err, errlen, found == 0 ? "no account named '%s'" : "cannot look up account '%s'", account_name);
        return -1;
    }
    if (store_key_set_preferred(s, key_id, acc) != 0) {
        store_errf(err, errlen, "cannot set the preferred account: %s", sqlite3_errmsg(s->db));
        return -1;
    }
    return 0;
}

/* The live (not revoked) key called name: 1 with its id and prefix, 0 none,
 * -1 on error. */
int store_key_live_by_name(store *s, const char *name, int64_t *id, char prefix[16])
{
    sqlite3_stmt *st = NULL;
    int found = -1;
    if (sqlite3_prepare_v2(s->db, "SELECT id, prefix FROM platform_keys WHERE name = ?1 AND revoked = 0 ORDER BY id",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        found = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
        if (found == 1) {
            *id = sqlite3_column_int64(st, 0);
            store_col_copy(st, 1, prefix, 16);
        }
    }
    sqlite3_finalize(st);
    return found;
}

/* One selector's matches: id > 0 that key; else a prefix (the start of the
 * key as `key list` shows it, or more of it); else a name, among the live
 * keys first and the revoked ones when no live key has it. */
int store_key_select(store *s, int64_t id, const char *prefix, const char *name, int64_t *out, char *err,
                     size_t errlen)
{
    static const char *const sql[] = {
        "SELECT id, revoked FROM platform_keys WHERE id = ?1",
        ("SELECT id, revoked FROM platform_keys WHERE ?2 LIKE prefix || '%' OR prefix LIKE ?2 || '%'"
         " ORDER BY revoked, id"), /* one string: parenthesised for clang's -Wstring-concatenation */
        "SELECT id, revoked FROM platform_keys WHERE name = ?3 ORDER BY revoked, id",
    };
    int which = id > 0 ? 0 : prefix ? 1 : 2;
    const char *what = which == 0 ? "id" : which == 1 ? "prefix" : "name";
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql[which], -1, &st, NULL) != SQLITE_OK) {
        store_errf(err, errlen, "cannot look up keys: %s", sqlite3_errmsg(s->db));
        return -1;
    }
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_text(st, 2, prefix ? prefix : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, name ? name : "", -1, SQLITE_STATIC);
    int64_t ids[2] = {0, 0};
    int revoked[2] = {0, 0}, n = 0;
    while (n < 2 && sqlite3_step(st) == SQLITE_ROW) {
        revoked[n] = sqlite3_column_int(st, 1);
        ids[n++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    if (n == 0) {
        if (which == 0)
            store_errf(err, errlen, "no key with id %lld", (long long)id);
        else
            store_errf(err, errlen, "no key with %s '%s'", what, which == 1 ? prefix : name);
        return 0;
    }
    if (n == 2 && revoked[0] == revoked[1]) { /* two live keys (or, with none live, two revoked) match */
        store_errf(err, errlen, "more than one key has %s '%s' (ids %lld, %lld, ...): give --id (see 'switchyard "
                                "key list')", what, which == 1 ? prefix : name, (long long)ids[0], (long long)ids[1]);
        return -1;
    }
    *out = ids[0];
    return 1;
}

int store_key_revoke_id(store *s, int64_t id, char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "UPDATE platform_keys SET revoked = 1 WHERE id = ?1 AND revoked = 0", -1, &st,
                                NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, id);
        store_sync_write_begin(s);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(s->db);
        store_sync_write_end(s);
    }
    int changed = rc == SQLITE_OK ? sqlite3_changes(s->db) : -1;
    if (changed < 0)
        store_errf(err, errlen, "cannot revoke key: %s", sqlite3_errmsg(s->db));
    sqlite3_finalize(st);
    return changed;
}
