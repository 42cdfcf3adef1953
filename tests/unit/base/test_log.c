/* test_log.c: the log's rate limit of repeated lines. */
#include "check.h"
#include "base/log.h"
#include <unistd.h>

static char out_path[] = "/tmp/sy_test_log_XXXXXX";

static size_t lines_in(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    size_t n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    if (f)
        fclose(f);
    return n;
}

static void test_a_repeating_call_site_is_cut_to_its_burst_and_counted(void)
{
    unsigned long before = log_suppressed();
    for (int i = 0; i < 1000; i++)
        log_warn("accept(): Too many open files (%d)", i);
    fflush(stderr);
    CHECK_EQ_INT(lines_in(out_path, "Too many open files"), 100);
    CHECK_EQ_INT(log_suppressed() - before, 900);
}

static void test_other_call_sites_are_not_held_back_by_a_noisy_one(void)
{
    log_error("a different line");
    log_debug("debug lines are never limited %d", 1);
    fflush(stderr);
    CHECK_EQ_INT(lines_in(out_path, "a different line"), 1);
    for (int i = 0; i < 300; i++)
        log_debug("debug flood %d", i);
    fflush(stderr);
    CHECK_EQ_INT(lines_in(out_path, "debug flood"), 300);
}

int main(void)
{
    int fd = mkstemp(out_path);
    if (fd < 0 || !freopen(out_path, "w", stderr))
        return 1;
    close(fd);
    log_set_level(LOG_DEBUG);
    RUN(test_a_repeating_call_site_is_cut_to_its_burst_and_counted);
    RUN(test_other_call_sites_are_not_held_back_by_a_noisy_one);
    unlink(out_path);
    return check_summary();
}
