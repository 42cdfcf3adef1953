/* test_sbuf.c: sbuf_put_int writes what printf's %lld would. */
#include "check.h"
#include "sbuf.h"
#include <limits.h>

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

int main(void)
{
    RUN(test_sbuf_put_int_matches_printf);
    return check_summary();
}
