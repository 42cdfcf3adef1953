/* test_hold.c: what a hold says (route/hold.c), and that the router keeps
 * a held account out whatever else it could do. */
#include "check.h"
#include "route/hold.h"
#include "route/router.h"

static int starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static void test_known_states_say_what_happened_and_what_to_do(void)
{
    const char *states[] = {"deactivated_workspace", "workspace_denied", "region_unsupported", "account_deactivated",
                            "key_refused"};
    for (size_t i = 0; i < sizeof states / sizeof *states; i++) {
        hold_info h = hold_describe(states[i]);
        CHECK_EQ_STR(h.state, states[i]);
        CHECK(strlen(h.what) > 10 && strlen(h.fix) > 10);
        CHECK(strstr(h.what, "upstream refused this account") == NULL); /* not the general text */
    }
    CHECK(strstr(hold_describe("deactivated_workspace").what, "workspace was deactivated") != NULL);
    CHECK(strstr(hold_describe("region_unsupported").what, "region") != NULL);
}

static void test_a_policys_own_state_gets_the_general_text(void)
{
    hold_info h = hold_describe("my_own_state");
    CHECK_EQ_STR(h.state, "my_own_state");
    CHECK(strstr(h.what, "refused this account") != NULL);
    CHECK_EQ_STR(hold_describe(NULL).state, "held");
    CHECK_EQ_STR(hold_describe("").state, "held");
}

static void test_fix_and_reason_name_the_reset_of_this_account(void)
{
    char fix[HOLD_TEXT_MAX], why[HOLD_TEXT_MAX];
    hold_fix("deactivated_workspace", "team-3", fix, sizeof fix);
    CHECK_EQ_STR(fix, "sign in to another workspace and import the login again, then "
                      "`switchyard account reset --name team-3`");
    hold_reason("region_unsupported", "eu-1", why, sizeof why);
    CHECK(starts(why, "region_unsupported: the upstream does not serve"));
    CHECK(strstr(why, "then `switchyard account reset --name eu-1`") != NULL);
    /* the longest known text with a long name still ends in the reset command */
    char name[48];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    hold_reason("workspace_denied", name, why, sizeof why);
    CHECK(strlen(why) < sizeof why - 1);
    CHECK(strstr(why, name) != NULL && why[strlen(why) - 1] == '`');
    /* a refused key: the update command with the name, or the reset; with a long name it fits whole */
    hold_fix("key_refused", "k1", fix, sizeof fix);
    CHECK_EQ_STR(fix, "update it with `switchyard account update --name k1 --token ...` or "
                      "`switchyard account reset --name k1`");
    hold_reason("key_refused", name, why, sizeof why);
    CHECK(starts(why, "key_refused: the upstream refuses this key as invalid; update it with"));
    CHECK(strlen(why) < sizeof why - 1 && why[strlen(why) - 1] == '`');
    /* a small buffer cuts, never overflows */
    char small[16];
    hold_reason("workspace_denied", "x", small, sizeof small);
    CHECK_EQ_INT(strlen(small), sizeof small - 1);
}

static void test_the_router_skips_a_held_account_naming_state_and_fix(void)
{
    pool_account pa;
    memset(&pa, 0, sizeof pa);
    pa.a.id = 1;
    pa.a.name = "acct";
    pa.a.enabled = 1;
    pa.a.kind = ACCOUNT_API_KEY;
    route_ctx ctx = {.endpoint = "/v1/responses", .api = API_RESPONSES, .model = "m"};
    char why[ROUTER_WHY_MAX];
    CHECK_EQ_INT(router_available(&pa, &ctx, 1000.0, why, sizeof why), 1);
    pa.a.hold = "deactivated_workspace";
    CHECK_EQ_INT(router_available(&pa, &ctx, 1000.0, why, sizeof why), 0);
    CHECK(starts(why, "deactivated_workspace: the ChatGPT workspace was deactivated; "));
    CHECK(strstr(why, "then `switchyard account reset --name acct`") != NULL);
    /* no cooldown to wait out: a wait for capacity does not count on it */
    CHECK(router_rest_until(&pa, 1000.0) <= 1000.0);
}

int main(void)
{
    RUN(test_known_states_say_what_happened_and_what_to_do);
    RUN(test_a_policys_own_state_gets_the_general_text);
    RUN(test_fix_and_reason_name_the_reset_of_this_account);
    RUN(test_the_router_skips_a_held_account_naming_state_and_fix);
    return check_summary();
}
