/* cli_init.c: `switchyard init`: a new, empty database made on purpose
 * (the schema and an admin token in <db>.admin-token), and where it is.
 * Every other command acts on a database that is there (cli_store_open);
 * init is the one whose whole job is to make one, so it refuses a path
 * where a file already is rather than open it. */
#include "admin/cli_internal.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cli_usage_init(FILE *f)
{
    fputs("usage: switchyard init [--db PATH]\n"
          "  makes a new database at PATH ($SWITCHYARD_DB, else ./switchyard.db): the schema, and an admin\n"
          "  token kept beside it in PATH.admin-token (mode 0600; `switchyard admin token` prints it).\n"
          "  Refuses when PATH exists. `serve`, `account add`, `key add` and `restore` also make one\n"
          "  where none is; every other command needs one there\n",
          f);
}

/* Removes what a failed init made: the file and sqlite's companions. */
static void cli_init_undo(const char *path)
{
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal", ".admin-token"};
    char p[PATH_MAX + 16];
    for (size_t i = 0; i < sizeof sfx / sizeof *sfx; i++)
        if ((size_t)snprintf(p, sizeof p, "%s%s", path, sfx[i]) < sizeof p)
            unlink(p);
}

int cli_init_main(int argc, char **argv)
{
    const char *cmd = "init", *db = NULL;
    int help = 0;
    const cli_opt opts[] = {{"db", &db, NULL}, {"help", NULL, &help}, {NULL, NULL, NULL}};
    int rc = cli_parse_or_usage(cmd, argc - 1, argv + 1, opts, &help, cli_usage_init);
    if (rc >= 0)
        return rc;
    const char *path = cli_db_path(db);
    /* O_EXCL: the check and the making are one step, so a database made
     * meanwhile by a starting gateway is never taken over */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        if (errno == EEXIST)
            fprintf(stderr, "switchyard %s: %s exists; init makes a new database only (nothing was changed)\n", cmd,
                    path);
        else
            fprintf(stderr, "switchyard %s: cannot create %s: %s\n", cmd, path, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    close(fd);
    store *s = cli_store_open_new(cmd, path);
    char tok[64] = "", err[600] = "";
    if (s && admin_cli_token_new(s, tok, sizeof tok, err, sizeof err) != 0) {
        fprintf(stderr, "switchyard %s: %s\n", cmd, err);
        store_close(s);
        s = NULL;
    }
    explicit_bzero(tok, sizeof tok);
    if (!s) {
        cli_init_undo(path);
        return CLI_EXIT_FAIL;
    }
    store_close(s);
    char real[PATH_MAX];
    const char *where = realpath(path, real) ? real : path;
    cli_line("created a new database at %s", where);
    cli_line("the admin token is in %s.admin-token (mode 0600; `switchyard admin token` prints it)", where);
    cli_line("next: switchyard account add ..., switchyard key add --name NAME, switchyard serve (each with --db %s)",
             path);
    return CLI_EXIT_OK;
}
