/* check.h: the tiny assertion kit of the C unit tests. Each test file calls
 * RUN(test_fn) for its cases and returns check_summary(), which prints the
 * closing "N passed, N failed" line and yields the exit code. */
#ifndef SY_CHECK_H
#define SY_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_passed, check_failed, check_cur_failed;

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    check_cur_failed = 1; } } while (0)
#define CHECK_EQ_INT(a, b) do { long long _a = (long long)(a), _b = (long long)(b); if (_a != _b) { \
    fprintf(stderr, "  %s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, #a, _a, _b); \
    check_cur_failed = 1; } } while (0)
#define CHECK_EQ_STR(a, b) do { const char *_a = (a), *_b = (b); \
    if (!_a || !_b || strcmp(_a, _b) != 0) { \
    fprintf(stderr, "  %s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__, __LINE__, #a, \
            _a ? _a : "(null)", _b ? _b : "(null)"); check_cur_failed = 1; } } while (0)

#define RUN(fn) do { check_cur_failed = 0; fn(); \
    if (check_cur_failed) { check_failed++; printf("FAIL %s\n", #fn); } \
    else { check_passed++; printf("ok   %s\n", #fn); } } while (0)

/* Makes a fresh scratch directory /tmp/<prefix>_XXXXXX into dir (n bytes). */
static inline int check_tmpdir_make(char *dir, size_t n, const char *prefix)
{
    snprintf(dir, n, "/tmp/%s_XXXXXX", prefix);
    return mkdtemp(dir) ? 0 : -1;
}

/* Removes a scratch directory and everything in it. */
static inline void check_tmpdir_remove(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup of %s failed\n", dir);
}

static inline int check_summary(void)
{
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}
#endif
