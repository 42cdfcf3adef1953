/* fuzz_admin_body.c: the admin API's POST bodies (admin_body_parse) from
 * any bytes, read as each kind (the first byte picks it): no undefined
 * conversion (an id of 1e300; this target is built with
 * -fsanitize=float-cast-overflow), a refusal is a 400 with a code and a
 * NUL-terminated message and holds nothing, an accepted body holds only
 * what its kind reads: ids in 1..INT64_MAX, names as NUL-terminated copies,
 * a strategy and rotation the configuration accepts. */
#include "fuzz_common.h"
#include "admin/admin_body.h"
#include "core/config.h"
#include <string.h>

static void check_ref(const admin_ref *r)
{
    FUZZ_CHECK(r->kind >= ADMIN_REF_NONE && r->kind <= ADMIN_REF_NULL);
    FUZZ_CHECK((r->kind == ADMIN_REF_NAME) == (r->name != NULL));
    if (r->kind == ADMIN_REF_ID)
        FUZZ_CHECK(r->id >= 1);
    if (r->invalid)
        FUZZ_CHECK(r->kind == ADMIN_REF_NONE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    if (n < 1)
        return 0;
    admin_body_kind kind = (admin_body_kind)(data[0] % 4);
    admin_body b;
    int rc = admin_body_parse(kind, (const char *)data + 1, n - 1, &b);
    if (rc != 0) {
        FUZZ_CHECK(rc == -1 && b.status == 400 && b.code && *b.code);
        FUZZ_CHECK(memchr(b.message, '\0', sizeof b.message) != NULL && b.message[0]);
        FUZZ_CHECK(!b.account.name && !b.key.name && !b.rotation && !b.strategy && !b.name);
    } else {
        check_ref(&b.account);
        check_ref(&b.key);
        if (kind == ADMIN_BODY_ACCOUNT)
            FUZZ_CHECK(!b.account.invalid && b.account.kind != ADMIN_REF_NULL && b.key.kind == ADMIN_REF_NONE);
        if (kind == ADMIN_BODY_LOGIN)
            FUZZ_CHECK(!b.name || (strlen(b.name) >= 1 && strlen(b.name) <= 127));
        else
            FUZZ_CHECK(!b.name);
        if (kind == ADMIN_BODY_SETTINGS) {
            FUZZ_CHECK(b.strategy || b.rotation);
            FUZZ_CHECK(!b.strategy || config_strategy_canonical(b.strategy) == b.strategy);
            FUZZ_CHECK(!b.rotation || config_rotation_valid(b.rotation));
            FUZZ_CHECK(!b.account.name && !b.key.name);
        } else {
            FUZZ_CHECK(!b.strategy && !b.rotation);
        }
    }
    admin_body_free(&b);
    FUZZ_CHECK(!b.account.name && !b.key.name && !b.rotation && !b.name);
    return 0;
}
