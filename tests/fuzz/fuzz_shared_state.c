/* fuzz_shared_state.c: what another gateway (or anyone able to write to
 * the pool's Redis) may send (shared/shared_state.c): any bytes as a
 * message; its body merged as a rest into an account twice, and read as a
 * login. What holds: a rest never gets shorter and stays within a year of
 * now, the ladder step within 0..64, the second merge of the same body
 * changes nothing; a login kept has an access token without whitespace or
 * controls; a refused one keeps nothing. */
#include "fuzz_common.h"
#include "shared/shared_state.h"
#include "base/text.h"
#include "policy/policy.h"
#include <string.h>

#define NOW 1700000000.0

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    shared_message m;
    if (shared_message_read((const char *)data, n, &m) != 0) {
        FUZZ_CHECK(m.doc == NULL);
        return 0;
    }
    FUZZ_CHECK(m.type && m.from && m.name && strlen(m.name) < 256);
    pool_account pa;
    memset(&pa, 0, sizeof pa);
    pa.st.cooldown_until = NOW + 10;
    pa.st.last_429_at = NOW - 5;
    pa.st.ladder_step = 2;
    int rc = shared_rest_merge(&pa, m.body, NOW);
    FUZZ_CHECK(rc >= -1 && rc <= 1);
    FUZZ_CHECK(pa.st.cooldown_until >= NOW + 10 && pa.st.cooldown_until <= NOW + SHARED_FUTURE_MAX_S);
    FUZZ_CHECK(pa.st.ladder_step >= 0 && pa.st.ladder_step <= SHARED_LADDER_MAX);
    FUZZ_CHECK(!text_check_str(pa.st.last_error));
    for (int i = 0; i < ACCOUNT_FAMILIES; i++)
        FUZZ_CHECK(pa.st.fam[i].until <= NOW + SHARED_FUTURE_MAX_S && pa.st.fam[i].ladder_step >= 0 &&
                   pa.st.fam[i].ladder_step <= SHARED_LADDER_MAX);
    if (rc >= 0)
        FUZZ_CHECK(shared_rest_merge(&pa, m.body, NOW) == 0);
    account a;
    memset(&a, 0, sizeof a);
    if (shared_login_read(m.body, &a) == 0) {
        FUZZ_CHECK(a.token && *a.token);
        for (const char *p = a.token; *p; p++)
            FUZZ_CHECK((unsigned char)*p > ' ' && *p != 0x7f);
        FUZZ_CHECK(!text_check_str(a.email) && !text_check_str(a.plan_type) && !text_check_str(a.chatgpt_account_id));
    } else {
        FUZZ_CHECK(!a.token && !a.refresh_token && !a.id_token && !a.email);
    }
    store_account_clear(&a);
    json_free(m.doc);
    return 0;
}
