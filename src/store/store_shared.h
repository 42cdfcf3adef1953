/* store_shared.h: the rows the gateways of one pool share (accounts,
 * platform keys, settings; docs/scale-out.md, "Accounts, keys and
 * settings"), as the store sees them: one canonical text per row, the
 * record of which shared version of each row this database holds, and
 * another gateway's text applied through the writer.
 *
 * A row is named by its field: "account:NAME", "key:HASH" (the sha256 hex
 * of the platform key: the key itself is never stored) or "setting:KEY".
 * Its text is a JSON object written by sqlite's json_object from the row,
 * so the same row is the same text on every instance, and applying a text
 * and reading the row back gives the text again (the digest then matches
 * the record: nothing to tell back). The texts hold the accounts' tokens:
 * secrets. */
#ifndef SY_STORE_SHARED_H
#define SY_STORE_SHARED_H
#include <stddef.h>
#include <stdint.h>
#include "store/store.h"

#define STORE_SHARED_FIELD_MAX 300          /* a field's bytes, NUL excluded */
#define STORE_SHARED_BODY_MAX (256u * 1024) /* a text's bytes */
#define STORE_SHARED_GONE "gone"            /* the digest of a removed row */

/* fn per account, platform key and setting of the database, in field
 * order (accounts, keys, settings): its field and text. 0 ok, -1 error.
 * Never waits for a lock (the loop calls it). */
int store_shared_rows(store *s, void (*fn)(void *ud, const char *field, const char *body), void *ud);
/* fn per record: the shared version this database holds of field and the
 * digest of the row's text when it was recorded (STORE_SHARED_GONE: the
 * row was removed). 0 ok, -1 error. Never waits for a lock. */
int store_shared_records(store *s, void (*fn)(void *ud, const char *field, int64_t version, const char *digest),
                         void *ud);
/* The digest of a text (sha256 hex); body NULL: STORE_SHARED_GONE. */
void store_shared_digest(const char *body, char out[65]);
/* Whether field names a shared row (its shape only): 1 yes, 0 no. */
int store_shared_field_ok(const char *field);
/* Whether body (NULL: a removal) is a text this build applies as field:
 * every value of the row checked as `account add`, `key add` and
 * `config set` would (s for the JSON checks of a model map). 0, or -1
 * with err. */
int store_shared_check(store *s, const char *field, const char *body, char *err, size_t errlen);
/* Queues for the writer, in one transaction: field's row set to body
 * (NULL: removed; apply 0: left as it is) and the record (version, the
 * digest of body). Applying never moves a login back: an account's tokens
 * stay when the row's last_refresh_at is newer than the text's; and never
 * un-revokes a platform key. A text the tables refuse is skipped (logged)
 * and its version recorded. Strings are copied. The ticket as
 * store_writer_put_login's; 0 when not queued. */
uint64_t store_shared_put(store *s, const char *field, int64_t version, const char *body, int apply);

#endif
