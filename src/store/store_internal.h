/* store_internal.h: what store.c shares with the store's other files
 * (store_accounts.c); no other module includes it. */
#ifndef SY_STORE_INTERNAL_H
#define SY_STORE_INTERNAL_H
#include "store/store.h"
#include <sqlite3.h>

void store_bind_text(sqlite3_stmt *st, int i, const char *s); /* NULL binds SQL NULL */
/* The six login columns (refresh_token, id_token, email, plan_type,
 * token_expires_at, last_refresh_at) from parameter i on; "" binds NULL. */
void store_bind_login(sqlite3_stmt *st, int i, const account_login *l);
int store_json_is_object(sqlite3 *db, const char *text);
int store_account_check(store *s, const account_new *a, char *err, size_t errlen);
/* INSERT of one account on db; returns the sqlite result code. */
int store_account_insert(sqlite3 *db, const account_new *a);

#endif
