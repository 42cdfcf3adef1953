/* test_usage_poll.c: the pure parts of usage polling (src/accounts/usage_poll.c):
 * the usage URL for an account base URL, and reading Codex's usage payload
 * (plan_type, rate_limit windows, credits) into an account's state. */
#include "check.h"
#include "accounts/usage_poll.h"
#include <string.h>

static void test_usage_url_for_chatgpt_and_other_bases(void)
{
    char u[256];
    usage_poll_url("https://chatgpt.com/backend-api/codex", u, sizeof u);
    CHECK_EQ_STR(u, "https://chatgpt.com/backend-api/wham/usage");
    usage_poll_url("https://chatgpt.com/backend-api/codex/", u, sizeof u);
    CHECK_EQ_STR(u, "https://chatgpt.com/backend-api/wham/usage");
    usage_poll_url("https://chatgpt.com/backend-api", u, sizeof u);
    CHECK_EQ_STR(u, "https://chatgpt.com/backend-api/wham/usage");
    usage_poll_url("http://127.0.0.1:9/acct/a/ok", u, sizeof u);
    CHECK_EQ_STR(u, "http://127.0.0.1:9/acct/a/ok/api/codex/usage");
    usage_poll_url("http://proxy.local/backend-apis/x/", u, sizeof u); /* not the /backend-api segment */
    CHECK_EQ_STR(u, "http://proxy.local/backend-apis/x/api/codex/usage");
}

static account_state blank_state(void)
{
    account_state st;
    memset(&st, 0, sizeof st);
    st.primary_used_pct = st.secondary_used_pct = -1;
    st.has_credits = st.credits_unlimited = -1;
    st.credits_balance = -1;
    return st;
}

static void test_usage_payload_is_read_into_the_state(void)
{
    const char *body =
        "{\"plan_type\":\"pro\",\"rate_limit\":{\"allowed\":true,\"limit_reached\":false,"
        "\"primary_window\":{\"used_percent\":42.5,\"limit_window_seconds\":18000,\"reset_after_seconds\":100,"
        "\"reset_at\":1700003600},"
        "\"secondary_window\":{\"used_percent\":7,\"limit_window_seconds\":604800,\"reset_after_seconds\":250}},"
        "\"credits\":{\"has_credits\":true,\"unlimited\":false,\"balance\":\"12.25\"}}";
    account_state st = blank_state();
    CHECK_EQ_INT(usage_poll_apply(&st, body, strlen(body), 1700000000), 0);
    CHECK_EQ_STR(st.plan_type, "pro");
    CHECK(st.primary_used_pct == 42.5 && st.primary_window_s == 18000);
    CHECK(st.primary_reset_at == 1700003600);        /* reset_at wins over reset_after_seconds */
    CHECK(st.secondary_used_pct == 7 && st.secondary_window_s == 604800);
    CHECK(st.secondary_reset_at == 1700000250);      /* only reset_after_seconds: now + it */
    CHECK_EQ_INT(st.has_credits, 1);
    CHECK_EQ_INT(st.credits_unlimited, 0);
    CHECK(st.credits_balance == 12.25);
}

static void test_usage_payload_without_windows_keeps_what_was_known(void)
{
    account_state st = blank_state();
    st.primary_used_pct = 30;
    st.primary_reset_at = 5;
    const char *body = "{\"plan_type\":\"free\",\"rate_limit\":null,\"credits\":null}";
    CHECK_EQ_INT(usage_poll_apply(&st, body, strlen(body), 1700000000), 0);
    CHECK_EQ_STR(st.plan_type, "free");
    CHECK(st.primary_used_pct == 30 && st.primary_reset_at == 5);
    CHECK_EQ_INT(st.has_credits, -1);
    CHECK_EQ_INT(usage_poll_apply(&st, "[1]", 3, 0), -1);
    CHECK_EQ_INT(usage_poll_apply(&st, "not json", 8, 0), -1);
    CHECK_EQ_INT(usage_poll_apply(&st, "", 0, 0), -1);
}

int main(void)
{
    RUN(test_usage_url_for_chatgpt_and_other_bases);
    RUN(test_usage_payload_is_read_into_the_state);
    RUN(test_usage_payload_without_windows_keeps_what_was_known);
    return check_summary();
}
