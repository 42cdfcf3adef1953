/* test_url.c: an account's base URL checked before it is stored (url.c). */
#include "check.h"
#include "base/url.h"

static void test_well_formed_bases_pass(void)
{
    static const char *const ok[] = {
        "https://api.openai.com/v1", "http://127.0.0.1:8080/v1", "https://chatgpt.com/backend-api/codex",
        "http://[::1]:9/v1", "https://x", "https://host.example:443/", "http://a-b.c_d.example/openai/v1/",
        "https://models.example.com/inference", "http://h/acct/x/ok,models=gpt-x",
    };
    char why[256];
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        why[0] = '\0';
        if (url_base_check(ok[i], why, sizeof why) != 0)
            fprintf(stderr, "  %s: %s\n", ok[i], why);
        CHECK_EQ_INT(url_base_check(ok[i], why, sizeof why), 0);
    }
}

static void test_malformed_bases_are_refused_with_the_reason(void)
{
    static const struct {
        const char *url, *why;
    } bad[] = {
        {"", "is empty"},
        {"https://", "has no host"},
        {"http://:8080/v1", "has no host"},
        {"http://exa mple/v1", "contains a space"},
        {"https://api.example.com/v1 ", "contains a space"},
        {"ftp://x/v1", "must start with http:// or https://"},
        {"api.openai.com/v1", "must start with http:// or https://"},
        {"http://h:0/v1", "invalid port"},
        {"http://h:65536/v1", "invalid port"},
        {"http://h:/v1", "invalid port"},
        {"http://h:8x/v1", "invalid port"},
        {"http://h:99999999999999999999/v1", "invalid port"},
        {"http://user:pw@h/v1", "user:password@"},
        {"http://h/v1?api-version=1", "no ?query"},
        {"http://h/v1#x", "no ?query"},
        {"http://h\x7f/v1", "control character"},
        {"http://h\xc3\xa9/v1", "non-ASCII"},
        {"http://h!/v1", "invalid character '!'"},
        {"http://.h/v1", "invalid host name"},
        {"http://a..b/v1", "invalid host name"},
        {"http://[::1/v1", "IPv6"},
        {"http://[zz]/v1", "IPv6"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char why[256] = "";
        CHECK_EQ_INT(url_base_check(bad[i].url, why, sizeof why), -1);
        if (!strstr(why, bad[i].why))
            fprintf(stderr, "  '%s': got '%s', expected '%s'\n", bad[i].url, why, bad[i].why);
        CHECK(strstr(why, bad[i].why) != NULL);
    }
    CHECK_EQ_INT(url_base_check(NULL, NULL, 0), -1);
}

/* A base that already ends in an endpoint would send
 * .../v1/chat/completions/chat/completions: refused with the base to give. */
static void test_a_path_ending_in_an_endpoint_is_refused_with_the_base_as_hint(void)
{
    static const struct {
        const char *url, *endpoint, *hint;
    } bad[] = {
        {"https://api.example.com/v1/chat/completions", "/chat/completions", "e.g. https://api.example.com/v1 "},
        {"https://api.example.com/v1/chat/completions/", "/chat/completions", "e.g. https://api.example.com/v1 "},
        {"https://api.example.com/v1/completions", "/completions", "e.g. https://api.example.com/v1 "},
        {"https://api.example.com/v1/Responses", "/responses", "e.g. https://api.example.com/v1 "},
        {"https://chatgpt.com/backend-api/codex/responses", "/responses",
         "e.g. https://chatgpt.com/backend-api/codex "},
        {"http://127.0.0.1:9/v1/models", "/models", "e.g. http://127.0.0.1:9/v1 "},
        {"http://h/v1/embeddings", "/embeddings", "e.g. http://h/v1 "},
        {"http://h/chat/completions", "/chat/completions", "e.g. http://h "},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char why[256] = "", want[128];
        snprintf(want, sizeof want, "ends in the endpoint %s: give the base, ", bad[i].endpoint);
        CHECK_EQ_INT(url_base_check(bad[i].url, why, sizeof why), -1);
        if (!strstr(why, want) || !strstr(why, bad[i].hint))
            fprintf(stderr, "  '%s': got '%s'\n", bad[i].url, why);
        CHECK(strstr(why, want) != NULL);
        CHECK(strstr(why, bad[i].hint) != NULL);
    }
}

static void test_an_overlong_base_is_refused(void)
{
    static char url[URL_BASE_MAX + 32];
    memcpy(url, "https://h/", 10);
    memset(url + 10, 'a', sizeof url - 11);
    url[sizeof url - 1] = '\0';
    char why[64] = "";
    CHECK_EQ_INT(url_base_check(url, why, sizeof why), -1);
    CHECK(strstr(why, "longer than") != NULL);
}

int main(void)
{
    RUN(test_well_formed_bases_pass);
    RUN(test_malformed_bases_are_refused_with_the_reason);
    RUN(test_a_path_ending_in_an_endpoint_is_refused_with_the_base_as_hint);
    RUN(test_an_overlong_base_is_refused);
    return check_summary();
}
