/* fuzz_login_callback.c: what reaches `account login` from outside, from any
 * bytes: a request to the loopback callback (login_callback_check; the
 * first byte picks which header the rest fills, the input split at the
 * first newline into request target and header value), and the device-code
 * endpoints' answers (login_device_answer, login_device_poll_answer). A
 * code is handed out only with our state, on our path, by GET, for our
 * Host; every string kept fits its buffer and is text that text_check
 * accepts (it is printed or sent back); intervals and expiries stay in
 * their bounds. */
#include "fuzz_common.h"
#include "accounts/login_flow.h"
#include "base/text.h"
#include <stdlib.h>
#include <string.h>

#define STATE "stateOfThisSignIn_0123456789abcdefghijklmn"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    if (n < 1)
        return 0;
    char *s = malloc(n);
    if (!s)
        return 0;
    memcpy(s, data + 1, n - 1);
    s[n - 1] = '\0';
    char *nl = strchr(s, '\n');
    const char *hv = nl ? nl + 1 : "localhost:1455";
    if (nl)
        *nl = '\0';
    int pick = data[0] & 3;
    const char *host = pick == 0 ? "localhost:1455" : pick == 1 ? hv : "127.0.0.1:1455";
    const char *origin = pick == 2 ? hv : NULL;
    char code[256], why[300];
    login_callback_kind k = login_callback_check(data[0] & 4 ? "POST" : "GET", s, host, origin, 1455, STATE,
                                                 "https://auth.example", code, sizeof code, why, sizeof why);
    FUZZ_CHECK(!text_check_str(why));
    if (k == LOGIN_CB_CODE) {
        FUZZ_CHECK(!(data[0] & 4) && code[0] && !text_check_str(code) && strstr(s, STATE));
        FUZZ_CHECK(strncmp(s, "/auth/callback", 14) == 0);
    } else {
        FUZZ_CHECK(code[0] == '\0');
    }

    login_device d;
    memset(&d, 0, sizeof d);
    char err[300];
    const int64_t now = 1700000000;
    if (login_device_answer((const char *)data + 1, n - 1, now, &d, err, sizeof err) == 0) {
        FUZZ_CHECK(d.device_auth_id[0] && !text_check_str(d.device_auth_id));
        FUZZ_CHECK(d.user_code[0] && !text_check_str(d.user_code));
        FUZZ_CHECK(d.interval_s >= 1 && d.interval_s <= 60);
        FUZZ_CHECK(d.expires_at > now && d.expires_at <= now + LOGIN_DEVICE_MAX_S);
    } else {
        FUZZ_CHECK(!text_check_str(err));
    }
    d.interval_s = 1 + data[0] % 60;
    char ac[128], ver[128];
    login_poll_result r = login_device_poll_answer(data[0] & 8 ? 200 : 400, (const char *)data + 1, n - 1, &d, ac,
                                                   sizeof ac, ver, sizeof ver, err, sizeof err);
    FUZZ_CHECK(d.interval_s >= 1 && d.interval_s <= 60);
    if (r == LOGIN_POLL_APPROVED)
        FUZZ_CHECK(ac[0] && ver[0] && strlen(ac) < sizeof ac && strlen(ver) < sizeof ver);
    free(s);
    return 0;
}
