/* test_redis_url.c: the --redis address read into its parts
 * (core/redis_url.c): both forms, defaults, percent-encoded secrets, and
 * the addresses it refuses with a reason that never quotes the password. */
#include "check.h"
#include "core/redis_url.h"

static void test_tcp_address_with_credentials_port_db_and_pool(void)
{
    redis_url u;
    char err[200];
    CHECK_EQ_INT(redis_url_parse("redis://app:s3cret@10.0.0.5:6380/2?pool=team-a", &u, err, sizeof err), 0);
    CHECK_EQ_INT(u.is_unix, 0);
    CHECK_EQ_STR(u.host, "10.0.0.5");
    CHECK_EQ_INT(u.port, 6380);
    CHECK_EQ_STR(u.user, "app");
    CHECK_EQ_STR(u.pass, "s3cret");
    CHECK_EQ_INT(u.db, 2);
    CHECK_EQ_STR(u.pool, "team-a");
}

static void test_defaults_are_port_6379_db_0_pool_default_no_auth(void)
{
    redis_url u;
    char err[200];
    CHECK_EQ_INT(redis_url_parse("redis://cache.internal", &u, err, sizeof err), 0);
    CHECK_EQ_STR(u.host, "cache.internal");
    CHECK_EQ_INT(u.port, 6379);
    CHECK_EQ_INT(u.db, 0);
    CHECK_EQ_STR(u.pool, "default");
    CHECK_EQ_STR(u.user, "");
    CHECK_EQ_STR(u.pass, "");
    CHECK_EQ_INT(redis_url_parse("REDIS://h:1/", &u, err, sizeof err), 0);
    CHECK_EQ_INT(u.port, 1);
    CHECK_EQ_INT(u.db, 0);
}

static void test_password_alone_and_percent_encoded_at_sign(void)
{
    redis_url u;
    char err[200];
    CHECK_EQ_INT(redis_url_parse("redis://:p%40ss%3Aword@h:7000/1", &u, err, sizeof err), 0);
    CHECK_EQ_STR(u.user, "");
    CHECK_EQ_STR(u.pass, "p@ss:word");
    /* an unencoded '@' in the password: the last '@' ends the credentials */
    CHECK_EQ_INT(redis_url_parse("redis://u:a@b@h:7000", &u, err, sizeof err), 0);
    CHECK_EQ_STR(u.pass, "a@b");
    CHECK_EQ_STR(u.host, "h");
}

static void test_ipv6_host_in_brackets(void)
{
    redis_url u;
    char err[200], d[300];
    CHECK_EQ_INT(redis_url_parse("redis://[::1]:6390/3", &u, err, sizeof err), 0);
    CHECK_EQ_STR(u.host, "::1");
    CHECK_EQ_INT(u.port, 6390);
    CHECK_EQ_INT(u.db, 3);
    redis_url_describe(&u, d, sizeof d);
    CHECK_EQ_STR(d, "redis://[::1]:6390/3 pool default");
}

static void test_unix_socket_with_db_and_pool(void)
{
    redis_url u;
    char err[200];
    CHECK_EQ_INT(redis_url_parse("unix:///run/redis/redis.sock?db=4&pool=p1", &u, err, sizeof err), 0);
    CHECK_EQ_INT(u.is_unix, 1);
    CHECK_EQ_STR(u.path, "/run/redis/redis.sock");
    CHECK_EQ_INT(u.db, 4);
    CHECK_EQ_STR(u.pool, "p1");
    CHECK_EQ_INT(redis_url_parse("unix://:pw@/tmp/r.sock", &u, err, sizeof err), 0);
    CHECK_EQ_STR(u.pass, "pw");
    CHECK_EQ_STR(u.path, "/tmp/r.sock");
}

static void test_describe_leaves_the_password_out(void)
{
    redis_url u;
    char err[200], d[300];
    CHECK_EQ_INT(redis_url_parse("redis://app:hunter2@h:6379/2", &u, err, sizeof err), 0);
    redis_url_describe(&u, d, sizeof d);
    CHECK_EQ_STR(d, "redis://app:***@h:6379/2 pool default");
    CHECK(!strstr(d, "hunter2"));
}

static void test_only_a_socket_localhost_127_or_v6_loopback_is_local(void)
{
    static const struct { const char *url; int local; } cases[] = {
        {"redis://127.0.0.1:6379", 1},   {"redis://127.8.9.10", 1},      {"redis://localhost", 1},
        {"redis://LOCALHOST:7000", 1},   {"redis://[::1]:6379", 1},      {"unix:///run/redis.sock", 1},
        {"redis://10.0.0.5:6379", 0},    {"redis://192.0.2.1", 0},       {"redis://redis.internal", 0},
        {"redis://128.0.0.1", 0},        {"redis://[2001:db8::1]", 0},   {"redis://localhost.evil.com", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        redis_url u;
        char err[200];
        CHECK(redis_url_parse(cases[i].url, &u, err, sizeof err) == 0);
        CHECK_EQ_INT(redis_url_is_local(&u), cases[i].local);
    }
}

static void test_bad_addresses_are_refused_with_a_reason_and_nothing_kept(void)
{
    static const char *const bad[] = {
        "", "http://h:6379", "rediss://h:6379", "redis://", "redis://:6379", "redis://h:0", "redis://h:65536",
        "redis://h:80x", "redis://h/abc", "redis://h/100001", "redis://h?db=1", "redis://h?pool=",
        "redis://h?pool=a/b", "redis://h?pool=123456789012345678901234567890123", "redis://h?x=1",
        "redis://h?pool=a&pool=b", "redis://h?pool=a&", "redis://user@h", "redis://u:@h", "redis://:%zz@h",
        "redis://:%00@h", "redis://:%4@h", "redis://[::1", "redis://[::1]x", "redis://h h", "redis://h\n",
        "redis://a:b:c", "unix://", "unix://relative.sock", "unix:///", "unix:///s?db=-1", "unix:///s?db",
        "unix://pw@nowhere",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        redis_url u;
        char err[200] = "";
        int rc = redis_url_parse(bad[i], &u, err, sizeof err);
        if (rc != -1 || !err[0])
            fprintf(stderr, "  accepted or no reason: \"%s\" (%s)\n", bad[i], err);
        CHECK_EQ_INT(rc, -1);
        CHECK(err[0]);
        CHECK_EQ_STR(u.pass, "");
        CHECK_EQ_STR(u.host, "");
    }
    char err[200];
    redis_url u;
    CHECK_EQ_INT(redis_url_parse("redis://:topsecret@h:bad", &u, err, sizeof err), -1);
    CHECK(!strstr(err, "topsecret"));
    char longpath[200] = "unix:///";
    memset(longpath + 8, 'a', 150);
    longpath[158] = '\0';
    CHECK_EQ_INT(redis_url_parse(longpath, &u, err, sizeof err), -1);
}

int main(void)
{
    RUN(test_tcp_address_with_credentials_port_db_and_pool);
    RUN(test_only_a_socket_localhost_127_or_v6_loopback_is_local);
    RUN(test_defaults_are_port_6379_db_0_pool_default_no_auth);
    RUN(test_password_alone_and_percent_encoded_at_sign);
    RUN(test_ipv6_host_in_brackets);
    RUN(test_unix_socket_with_db_and_pool);
    RUN(test_describe_leaves_the_password_out);
    RUN(test_bad_addresses_are_refused_with_a_reason_and_nothing_kept);
    return check_summary();
}
