/* test_host_check.c: the Host check against DNS rebinding (http/host_check.h):
 * IP literals, localhost, the listen and admin listen hosts and the
 * --allowed-host names pass, with or without a port and in any case; other
 * names, malformed values and an empty Host are refused; the names
 * --allowed-host takes are checked. */
#include "check.h"
#include "core/config.h"
#include "http/host_check.h"
#include <string.h>

static void test_own_names_and_addresses_pass(void)
{
    sy_config c;
    config_defaults(&c);
    snprintf(c.listen_host, sizeof c.listen_host, "gw.lan");
    snprintf(c.admin_host, sizeof c.admin_host, "admin.lan");
    CHECK_EQ_INT(config_add_allowed_hosts(&c, "a.example,B.example"), 0);
    CHECK_EQ_INT(config_add_allowed_hosts(&c, "c.example"), 0);
    const char *ok[] = {NULL, "127.0.0.1", "127.0.0.1:8787", "localhost", "LOCALHOST:1", "localhost.", "[::1]",
                        "[::1]:8787", "10.1.2.3:80", "gw.lan:8787", "GW.LAN", "admin.lan", "a.example",
                        "b.example:443", "c.example"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        if (!host_check_allowed(&c, ok[i]))
            fprintf(stderr, "  refused: %s\n", ok[i] ? ok[i] : "(none)");
        CHECK(host_check_allowed(&c, ok[i]));
    }
}

static void test_other_names_and_malformed_hosts_are_refused(void)
{
    sy_config c;
    config_defaults(&c);
    CHECK_EQ_INT(config_add_allowed_hosts(&c, "a.example"), 0);
    const char *bad[] = {"evil.example", "evil.example:8787", "", "a.example.evil", "localhost.evil.com",
                         "xlocalhost", "[::1", "[::1]x", "[evil]:80", "::1", "127.0.0.1:abc", "127.0.0.1:",
                         "gw.lan", ":80", "."};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (host_check_allowed(&c, bad[i]))
            fprintf(stderr, "  allowed: %s\n", bad[i]);
        CHECK(!host_check_allowed(&c, bad[i]));
    }
}

static void test_allowed_host_names_are_checked(void)
{
    sy_config c;
    config_defaults(&c);
    const char *bad[] = {"", "a b", "a,,b", "a,", "x/y", "evil:80"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_EQ_INT(config_add_allowed_hosts(&c, bad[i]), -1);
    char longname[300];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CHECK_EQ_INT(config_add_allowed_hosts(&c, longname), -1);
    int added = 0;
    while (config_add_allowed_hosts(&c, "name-that-fills.example") == 0 && added < 100)
        added++;
    CHECK(added > 0 && added < 100); /* the list is bounded */
}

int main(void)
{
    RUN(test_own_names_and_addresses_pass);
    RUN(test_other_names_and_malformed_hosts_are_refused);
    RUN(test_allowed_host_names_are_checked);
    return check_summary();
}
