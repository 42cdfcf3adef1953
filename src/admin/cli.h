/* cli.h: the command line: the table of every command (cli_main), and
 * the administrative subcommands `switchyard account ...`,
 * `switchyard key ...`, `switchyard config ...` and `switchyard codex ...`,
 * which write the database synchronously. Each takes argv with argv[0] =
 * "account" / "key" / "config" / "codex" and returns the process exit code (0 ok, 1 failure, 2 bad usage
 * or an invalid value). The database is --db PATH, else $SWITCHYARD_DB,
 * else ./switchyard.db. */
#ifndef SY_CLI_H
#define SY_CLI_H
#include <stdio.h>

/* `switchyard [--db PATH] COMMAND ...` (argv[0] the program): the global
 * options before the command (--db sets $SWITCHYARD_DB for whichever
 * command runs; --help), then the command table. serve is the top's
 * (src/serve.c sits above admin/), handed in; NULL: serve is refused.
 * Returns the exit code. */
int cli_main(int argc, char **argv, int (*serve)(int argc, char **argv));
/* `switchyard --help`: every command and subcommand of the table that
 * cli_main dispatches, each with its one-line summary. */
void cli_help(FILE *f);

int cli_account_main(int argc, char **argv);
int cli_key_main(int argc, char **argv);
int cli_config_main(int argc, char **argv);
int cli_codex_main(int argc, char **argv); /* argv[0] = "codex": attach | detach | status */
/* `switchyard usage [--by key|account|model|day] [--since WHEN] [--json]`:
 * requests, tokens and cost from the request log (argv[0] = "usage"). */
int cli_spend_main(int argc, char **argv);
/* `switchyard backup --out FILE [--force]` (argv[0] = "backup"): a
 * consistent copy of the whole database while a gateway serves it;
 * `switchyard restore FILE` (argv[0] = "restore"): puts a copy back while
 * none does (store/store_backup.h). */
int cli_backup_main(int argc, char **argv);
int cli_restore_main(int argc, char **argv);

/* --- shared with the other subcommand files (admin_cli.c) --- */
#include <stdio.h>
#include "store/store.h"

/* One --long option: takes a value when val is set, else sets *flag. */
typedef struct cli_opt {
    const char *name;
    const char **val;
    int *flag;
} cli_opt;

/* Parses argv (options only, terminated by a NULL name); returns -1 to go
 * on, else the exit code (usage printed on a bad option or --help). */
int cli_parse_or_usage(const char *cmd, int argc, char **argv, const cli_opt *opts, const int *help,
                       void (*usage)(FILE *));
/* The database path: --db (opt), else $SWITCHYARD_DB, else ./switchyard.db. */
const char *cli_db_path(const char *opt);
/* Opens --db (else $SWITCHYARD_DB, else ./switchyard.db); NULL and a
 * message on stderr on failure. */
store *cli_store_open(const char *cmd, const char *db);     /* an existing database only (else says so: NULL) */
/* 1 after saying so when there is no database at the path db names (a
 * command that reads what is there must not make one); else 0. */
int cli_db_missing(const char *cmd, const char *db);
store *cli_store_open_new(const char *cmd, const char *db); /* made when missing: account add, key add, import, login */
/* Prints one line (fmt holds no newline; one is added) to stdout with the
 * control characters and invalid UTF-8 of what it was given escaped
 * (text_escape): names, models, e-mails and plans come from outside (an
 * import file, a client, a usage endpoint) and must not move the cursor,
 * start an escape sequence or forge another line on the operator's
 * terminal. For every table row and line that shows such values. */
void cli_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
