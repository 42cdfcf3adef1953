/* test_sbuf.c: sbuf_put_int and sbuf_put_fixed write what printf's %lld
 * and %.*f would; sbuf_hash is FNV-1a 64. */
#include "check.h"
#include "base/sbuf.h"
#include <limits.h>
#include <math.h>
#include <stdint.h>

static void test_sbuf_put_int_matches_printf(void)
{
    const long long vals[] = {0, 7, -5, 10, 429, 1234567890123LL, LLONG_MAX, LLONG_MIN};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        sbuf a = SBUF_INIT, b = SBUF_INIT;
        sbuf_puts(&a, "x=");
        sbuf_put_int(&a, vals[i]);
        sbuf_printf(&b, "x=%lld", vals[i]);
        CHECK_EQ_STR(a.p, b.p);
        CHECK_EQ_INT(a.len, b.len);
        sbuf_free(&a);
        sbuf_free(&b);
    }
}

/* Checks one value at every precision; returns 1 when all matched. */
static int test_fixed_same(double v)
{
    int same = 1;
    for (int prec = 0; prec <= 9; prec++) {
        sbuf a = SBUF_INIT, b = SBUF_INIT;
        sbuf_puts(&a, "x=");
        sbuf_put_fixed(&a, v, prec);
        sbuf_printf(&b, "x=%.*f", prec, v);
        if (strcmp(a.p, b.p) != 0 || a.len != b.len) {
            fprintf(stderr, "  %.17g at %d: %s, printf %s\n", v, prec, a.p, b.p);
            same = 0;
        }
        sbuf_free(&a);
        sbuf_free(&b);
    }
    return same;
}

static void test_sbuf_put_fixed_matches_printf(void)
{
    const double vals[] = {0, -0.0, 0.05, 0.15, 0.25, 0.35, 2.675, 1.005, -0.04, -0.05, 0.5, 1.5, 2.5, -2.5,
                           3.25, 44.5, 999.95, 1e-7, 123456789.987654321, 1099511627775.9, 1099511627776.0,
                           1e15, 1e20, -1e20, 1e300, NAN, -NAN, INFINITY, -INFINITY, 5e-324, 9.999999999,
                           0.0000000005, 0.00000000049999};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++)
        CHECK(test_fixed_same(vals[i]));
    /* latencies and waits as the gateway traces them, and a spread of magnitudes */
    uint64_t x = 88172645463325252ull;
    int bad = 0;
    for (int i = 0; i < 200000 && bad < 5; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double v = (double)(x >> 11) / 9007199254740992.0 * pow(10, (int)(x % 17) - 4);
        if (x & 1)
            v = -v;
        if (i % 4 == 0)
            v = (double)(x % 100000) / 1000.0; /* three decimals: ties at %.2f */
        bad += !test_fixed_same(v);
    }
    CHECK_EQ_INT(bad, 0);
}

/* FNV-1a 64, the published test values; NULL hashes as "". */
static void test_sbuf_keep_keeps_only_small_buffers(void)
{
    sbuf b = SBUF_INIT;
    sbuf_puts(&b, "small");
    char *mem = b.p;
    sbuf_keep(&b, 4096);
    CHECK_EQ_INT(b.len, 0);
    CHECK(b.p == mem && b.cap > 0 && b.p[0] == '\0'); /* emptied, memory kept */
    sbuf_reserve(&b, 8192);
    sbuf_keep(&b, 4096);
    CHECK(b.p == NULL && b.cap == 0 && b.len == 0); /* larger than max: freed */
    sbuf_keep(&b, 0); /* an empty one stays empty */
    CHECK(b.p == NULL && b.len == 0);
}

static void test_sbuf_hash_is_fnv1a_64(void)
{
    CHECK(sbuf_hash("") == 0xcbf29ce484222325ull);
    CHECK(sbuf_hash(NULL) == 0xcbf29ce484222325ull);
    CHECK(sbuf_hash("a") == 0xaf63dc4c8601ec8cull);
    CHECK(sbuf_hash("foobar") == 0x85944171f73967e8ull);
}

int main(void)
{
    RUN(test_sbuf_put_int_matches_printf);
    RUN(test_sbuf_put_fixed_matches_printf);
    RUN(test_sbuf_hash_is_fnv1a_64);
    RUN(test_sbuf_keep_keeps_only_small_buffers);
    return check_summary();
}
