/* test_gateway_find.c: finding the gateway that serves a database: the
 * run file beside it (store/store_runfile.h) read back as written and
 * refused when it is not one; a database no gateway served, one whose
 * gateway stopped and one whose process is gone each say so (and never
 * "answering"); the gateway address an operator writes (host:port or a
 * URL) made a base URL, anything else refused; a probe of a port where
 * nothing listens fails with the reason. */
#include "check.h"
#include "admin/gateway_find.h"
#include "store/store_runfile.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char test_dir[64];

static void test_runfile_is_read_back_as_written_and_a_foreign_file_is_refused(void)
{
    char db[128], err[256] = "", path[200];
    snprintf(db, sizeof db, "%s/a.db", test_dir);
    store_runfile w = {.pid = 4242, .started_at = 1700000000, .stopped_at = 0}, r;
    snprintf(w.url, sizeof w.url, "http://127.0.0.1:18787");
    snprintf(w.instance, sizeof w.instance, "abc123");
    CHECK_EQ_INT(store_runfile_read(db, &r, err, sizeof err), 0);
    CHECK_EQ_INT(store_runfile_write(db, &w, err, sizeof err), 0);
    CHECK_EQ_INT(store_runfile_read(db, &r, err, sizeof err), 1);
    CHECK_EQ_INT(r.pid, 4242);
    CHECK_EQ_STR(r.url, "http://127.0.0.1:18787");
    CHECK_EQ_STR(r.admin_url, "");
    CHECK_EQ_STR(r.instance, "abc123");
    CHECK(r.started_at == 1700000000 && r.stopped_at == 0);
    CHECK_EQ_INT(store_runfile_stopped(db, "someone-else", 1700000100, err, sizeof err), 0);
    store_runfile_read(db, &r, err, sizeof err);
    CHECK(r.stopped_at == 0); /* another instance's stop does not mark ours */
    CHECK_EQ_INT(store_runfile_stopped(db, "abc123", 1700000100, err, sizeof err), 0);
    store_runfile_read(db, &r, err, sizeof err);
    CHECK(r.stopped_at == 1700000100);
    store_runfile_path(db, path, sizeof path);
    FILE *f = fopen(path, "w");
    fputs("{\"pid\":\"x\",\"url\":\"ftp://h\"}", f);
    fclose(f);
    CHECK_EQ_INT(store_runfile_read(db, &r, err, sizeof err), -1);
    CHECK(strstr(err, "not a gateway run file") != NULL);
    unlink(path);
}

static void test_a_database_no_gateway_answers_for_says_why(void)
{
    char db[128], err[256] = "", line[700];
    gateway_found g;
    snprintf(db, sizeof db, "%s/never.db", test_dir);
    gateway_find(db, &g);
    CHECK(!g.recorded && !g.answering && strstr(g.why, "no gateway has served it yet"));
    gateway_find_describe(&g, line, sizeof line);
    CHECK(strstr(line, "no gateway is answering for this database (") == line);

    snprintf(db, sizeof db, "%s/stopped.db", test_dir);
    store_runfile w = {.pid = (long)getpid(), .started_at = 1700000000, .stopped_at = 1700000060};
    snprintf(w.url, sizeof w.url, "http://127.0.0.1:9");
    store_runfile_write(db, &w, err, sizeof err);
    gateway_find(db, &g);
    CHECK(g.recorded && !g.answering && strstr(g.why, "stopped"));
    gateway_find_describe(&g, line, sizeof line);
    CHECK(strstr(line, "last seen at 2023-11-14 22:14:20 UTC") && strstr(line, "http://127.0.0.1:9"));

    /* running by the file, but its process is gone (killed): not answering */
    snprintf(db, sizeof db, "%s/killed.db", test_dir);
    w.stopped_at = 0;
    w.pid = 0x7ffffff0; /* beyond pid_max */
    store_runfile_write(db, &w, err, sizeof err);
    gateway_find(db, &g);
    CHECK(g.recorded && !g.answering && strstr(g.why, "process is gone"));

    /* our own pid (alive), but nothing listens on port 9 */
    snprintf(db, sizeof db, "%s/silent.db", test_dir);
    w.pid = (long)getpid();
    store_runfile_write(db, &w, err, sizeof err);
    gateway_find(db, &g);
    CHECK(g.recorded && !g.answering && g.why[0]);
}

static void test_gateway_address_takes_host_port_or_a_url(void)
{
    char out[300], err[256];
    const char *ok[][2] = {{"127.0.0.1:18787", "http://127.0.0.1:18787"},
                           {"localhost:8787", "http://localhost:8787"},
                           {"[::1]:8787", "http://[::1]:8787"},
                           {"http://127.0.0.1:18787/v1/", "http://127.0.0.1:18787"},
                           {"http://127.0.0.1:18787", "http://127.0.0.1:18787"},
                           {"https://gw.example", "https://gw.example"}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        CHECK_EQ_INT(gateway_find_url(ok[i][0], out, sizeof out, err, sizeof err), 0);
        CHECK_EQ_STR(out, ok[i][1]);
    }
    const char *bad[] = {"ftp://x", "localhost", "127.0.0.1:", "127.0.0.1:80/v1", "h:port", "http://", "",
                         "http://exa mple/v1", "[::1]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = '\0';
        CHECK_EQ_INT(gateway_find_url(bad[i], out, sizeof out, err, sizeof err), -1);
        CHECK(err[0] != '\0');
    }
}

static void test_probe_of_a_port_nobody_listens_on_fails_with_the_reason(void)
{
    char why[300] = "", inst[32] = "x";
    CHECK_EQ_INT(gateway_find_probe("http://127.0.0.1:9", 1000, inst, sizeof inst, why, sizeof why), -1);
    CHECK(why[0] != '\0' && inst[0] == '\0');
}

int main(void)
{
    if (check_tmpdir_make(test_dir, sizeof test_dir, "sy_gwfind") != 0)
        return 2;
    RUN(test_runfile_is_read_back_as_written_and_a_foreign_file_is_refused);
    RUN(test_a_database_no_gateway_answers_for_says_why);
    RUN(test_gateway_address_takes_host_port_or_a_url);
    RUN(test_probe_of_a_port_nobody_listens_on_fails_with_the_reason);
    check_tmpdir_remove(test_dir);
    return check_summary();
}
