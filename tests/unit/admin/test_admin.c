/* test_admin.c: the admin surface's access helpers: which peers count as
 * loopback, and the digest comparison. */
#include "admin/admin_api.h"
#include "check.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

static int test_v4(const char *ip)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, ip, &a.sin_addr);
    return admin_is_loopback((struct sockaddr *)&a);
}

static int test_v6(const char *ip)
{
    struct sockaddr_in6 a = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, ip, &a.sin6_addr);
    return admin_is_loopback((struct sockaddr *)&a);
}

static void test_admin_only_loopback_peers_count_as_local(void)
{
    CHECK(test_v4("127.0.0.1"));
    CHECK(test_v4("127.1.2.3"));
    CHECK(!test_v4("192.0.2.2"));
    CHECK(!test_v4("10.0.0.1"));
    CHECK(!test_v4("0.0.0.0"));
    CHECK(test_v6("::1"));
    CHECK(test_v6("::ffff:127.0.0.1"));
    CHECK(!test_v6("::ffff:192.0.2.2"));
    CHECK(!test_v6("fe80::1"));
    CHECK(!test_v6("::"));
    CHECK(!admin_is_loopback(NULL));
}

static void test_admin_digest_comparison(void)
{
    CHECK(admin_digest_equal("ab12", "ab12"));
    CHECK(!admin_digest_equal("ab12", "ab13"));
    CHECK(!admin_digest_equal("ab12", "ab1"));
    CHECK(!admin_digest_equal("ab1", "ab12"));
    CHECK(!admin_digest_equal("", "")); /* no token set never matches */
}

int main(void)
{
    RUN(test_admin_only_loopback_peers_count_as_local);
    RUN(test_admin_digest_comparison);
    return check_summary();
}
