/* cli_backup.c: `switchyard backup` (a consistent copy of the whole
 * database, taken while a gateway serves it) and `switchyard restore` (a
 * copy put back while none does); the work is store_backup.c's. */
#include "admin/cli_internal.h"
#include "store/store_backup.h"
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

void cli_usage_backup(FILE *f)
{
    fputs("usage: switchyard backup --out FILE [--force] [--db PATH]\n"
          "       switchyard restore FILE [--db PATH]\n"
          "  backup copies the whole database (accounts and their tokens, keys, settings, state, request logs)\n"
          "  while a gateway serves it; FILE is written 0600 and an existing one is kept unless --force\n"
          "  restore checks FILE (SQLite, integrity, switchyard's schema, not newer than this build), refuses\n"
          "  while a gateway serves the database, keeps the one there as PATH.before-restore and puts FILE's\n"
          "  copy in its place; the database defaults to $SWITCHYARD_DB or ./switchyard.db\n",
          f);
}

int cli_backup_main(int argc, char **argv)
{
    const char *cmd = "backup", *db = NULL, *out = NULL;
    int force = 0, help = 0;
    const cli_opt opts[] = {{"db", &db, NULL}, {"out", &out, NULL}, {"force", NULL, &force},
                            {"help", NULL, &help}, {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc - 1, argv + 1, opts, &help, cli_usage_backup);
    if (rc >= 0)
        return rc;
    if (!out || !*out) {
        fprintf(stderr, "switchyard %s: --out FILE is required\n", cmd);
        cli_usage_backup(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *path = cli_db_path(db);
    char err[1024] = "";
    store_backup_info info;
    if (store_backup(path, out, force, &info, err, sizeof err) != 0) {
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
        return CLI_EXIT_FAIL;
    }
    cli_line("backed up %s to %s: %lld account%s, %lld key%s, %.1f MB (schema version %d); it holds the tokens:"
             " keep it private",
             path, out, (long long)info.accounts, info.accounts == 1 ? "" : "s", (long long)info.keys,
             info.keys == 1 ? "" : "s", (double)info.pages * (double)info.page_size / 1e6, info.schema_version);
    return CLI_EXIT_OK;
}

int cli_restore_main(int argc, char **argv)
{
    const char *cmd = "restore", *db = NULL, *file = NULL;
    int help = 0;
    cli_pos pos = {&file, 1, 0};
    const cli_opt opts[] = {{"db", &db, NULL}, {"help", NULL, &help}, {NULL, NULL, NULL}};
    if (cli_parse(cmd, argc - 1, argv + 1, opts, &pos) != 0 || (!help && !file)) {
        if (!help && !file)
            fprintf(stderr, "switchyard %s: give the backup FILE to restore\n", cmd);
        cli_usage_backup(stderr);
        return CLI_EXIT_USAGE;
    }
    if (help) {
        cli_usage_backup(stdout);
        return CLI_EXIT_OK;
    }
    const char *path = cli_db_path(db);
    struct stat sb;
    int had = stat(path, &sb) == 0;
    char err[1024] = "";
    store_backup_info info;
    if (store_restore(file, path, &info, err, sizeof err) != 0) {
        fprintf(stderr, "switchyard %s: %s; nothing was changed\n", cmd, err);
        return CLI_EXIT_FAIL;
    }
    cli_line("restored %s into %s: %lld account%s, %lld key%s (schema version %d)", file, path,
             (long long)info.accounts, info.accounts == 1 ? "" : "s", (long long)info.keys, info.keys == 1 ? "" : "s",
             info.schema_version);
    if (had)
        cli_line("the database that was there is kept as %s%s", path, STORE_BEFORE_RESTORE_SUFFIX);
    return CLI_EXIT_OK;
}
