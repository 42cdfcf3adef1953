/* fuzz_login_file.c: import files (login_file_parse: Codex auth.json,
 * CLIProxyAPI, sub2api, CodexManager and our export; one document, an
 * array, or several concatenated) from any bytes. Besides no crash: a
 * failure says why and keeps nothing; every login kept has an access token
 * without whitespace or control characters, and names, ids, e-mails and
 * plans that text_check accepts (they become a header, names, log and
 * terminal lines); the account name made of a login, cut to any size, is
 * valid UTF-8 without control characters. */
#include "fuzz_common.h"
#include "accounts/login_file.h"
#include "base/text.h"
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    size_t cap = n ? (size_t)data[0] % 80 + 1 : 16; /* the name buffer's size, 1..80 */
    login_list l = {0};
    char err[512] = "";
    int rc = login_file_parse("fuzz", (const char *)data, n, &l, err, sizeof err);
    if (rc != 0) {
        FUZZ_CHECK(l.n == 0);
        FUZZ_CHECK(err[0] != '\0');
        for (const char *p = err; *p; p++) /* the error is printed on a terminal */
            FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
    }
    for (size_t i = 0; i < l.n; i++) {
        const login_entry *e = &l.v[i];
        FUZZ_CHECK(e->access_token && *e->access_token);
        for (const char *p = e->access_token; *p; p++)
            FUZZ_CHECK((unsigned char)*p > ' ' && *p != 0x7f);
        FUZZ_CHECK(!text_check_str(e->name) && !text_check_str(e->account_id) && !text_check_str(e->email));
        FUZZ_CHECK(!text_check_str(e->plan_type) && !text_check_str(e->base_url));
        FUZZ_CHECK(e->kind != ACCOUNT_CHATGPT || e->account_id);
        account_new an;
        char name[81];
        login_entry_to_account(e, &an, name, cap);
        FUZZ_CHECK(strlen(name) < cap && !text_check_str(name));
        FUZZ_CHECK(an.token == e->access_token);
    }
    login_list_free(&l);
    return 0;
}
