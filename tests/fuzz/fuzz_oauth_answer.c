/* fuzz_oauth_answer.c: a token endpoint's answer to a refresh
 * (oauth_answer_parse) from any bytes: no undefined conversion (an
 * expires_in of 1e300; this target is built with
 * -fsanitize=float-cast-overflow), and what is kept is fit for where it
 * goes: an access token without whitespace or control characters (the
 * Authorization header), claims that text_check accepts (the
 * ChatGPT-Account-Id header, names, log and terminal lines), an expiry
 * that is unknown (0) or after now. A refused answer keeps nothing. */
#include "fuzz_common.h"
#include "accounts/oauth.h"
#include "base/text.h"
#include "store/store.h"
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    account f;
    memset(&f, 0, sizeof f);
    char note[160];
    const int64_t now = 1700000000;
    int rc = oauth_answer_parse((const char *)data, n, now, &f, note, sizeof note);
    if (rc != 0) {
        FUZZ_CHECK(!f.token && !f.refresh_token && !f.id_token && !f.email && !f.plan_type && !f.chatgpt_account_id);
    } else {
        FUZZ_CHECK(f.token && *f.token);
        for (const char *p = f.token; *p; p++)
            FUZZ_CHECK((unsigned char)*p > ' ' && *p != 0x7f);
        FUZZ_CHECK(!text_check_str(f.email) && !text_check_str(f.plan_type) && !text_check_str(f.chatgpt_account_id));
        FUZZ_CHECK(f.token_expires_at >= 0); /* 0 unknown; an exp claim may be past (already expired) */
        FUZZ_CHECK(f.last_refresh_at == now);
        FUZZ_CHECK(strlen(note) < sizeof note && !text_check_str(note));
    }
    store_account_clear(&f);
    return 0;
}
