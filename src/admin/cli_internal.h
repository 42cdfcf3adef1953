/* cli_internal.h: what the subcommand files of `switchyard account|key|
 * config|codex|claude|usage|admin|status|logs|backup|restore|init` (cli_account.c,
 * cli_key.c, cli_config.c, cli_codex.c, cli_claude.c, cli_usage.c, admin_cli.c, cli_backup.c,
 * cli_init.c; cli_table.c their tables) share with cli.c: the exit codes, the parsing helpers cli.c
 * implements, and each group's subcommands and usage text, which cli.c's
 * command table dispatches to. One header for all of them, so the group
 * files need no headers of their own that include each other; no module
 * outside the cli files includes it. */
#ifndef SY_CLI_INTERNAL_H
#define SY_CLI_INTERNAL_H
#include "admin/cli.h"
#include "store/store.h"
#include <stdio.h>

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

/* --- cli.c: parsing and the store --- */

/* Positional arguments a command accepts: up to max, into v. */
typedef struct cli_pos {
    const char **v;
    int max, n;
} cli_pos;

/* Parses options and, when pos is given, up to pos->max positional
 * arguments from argv[0..argc). Prints the error and returns -1 on anything
 * unexpected. */
int cli_parse(const char *cmd, int argc, char **argv, const cli_opt *opts, cli_pos *pos);
/* The database path: --db, else $SWITCHYARD_DB, else ./switchyard.db. */
const char *cli_db_path(const char *opt);
/* Opens the store for a command that acts on --name; NULL with *rc set to
 * the exit code when the name is missing or the store cannot be opened. */
store *cli_store_open_named(const char *cmd, const char *db, const char *name, int *rc);
/* --opt as an integer >= min (INT_MIN: any); prints the error and returns -1. */
/* WHEN for --since / --until (logs, usage): unix seconds, a UTC date or
 * date and time (YYYY-MM-DD[THH:MM[:SS]][Z]), or N minutes / hours / days
 * before now (Nm, Nh, Nd); -1 if unreadable. One form for every command. */
#define CLI_WHEN_FORMS "unix seconds, YYYY-MM-DD[THH:MM[:SS]] or Nm, Nh, Nd"
double cli_parse_when(const char *text, double now);
int cli_parse_int(const char *cmd, const char *opt, const char *text, int min, int *out);
/* --budget USD (>= 0; 0 removes it) and --budget-period month|<N>d. */
int cli_budget_parse(const char *cmd, const char *budget, const char *period, double *usd);

/* --- the groups: usage texts and subcommands (argv after the subcommand's
 * name; each returns the exit code) --- */

void cli_usage_account(FILE *f); /* cli_account.c */
int cli_account_add(int argc, char **argv);
int cli_account_list(int argc, char **argv);
int cli_account_enable(int argc, char **argv);
int cli_account_disable(int argc, char **argv);
int cli_account_remove(int argc, char **argv);
int cli_account_reset(int argc, char **argv);
int cli_account_import(int argc, char **argv);
int cli_account_export(int argc, char **argv);
int cli_account_update(int argc, char **argv);
int cli_account_login(int argc, char **argv); /* cli_login.c */

void cli_usage_key(FILE *f); /* cli_key.c */
int cli_key_add(int argc, char **argv);
int cli_key_update(int argc, char **argv);
int cli_key_list(int argc, char **argv);
int cli_key_prefer(int argc, char **argv);
int cli_key_revoke(int argc, char **argv);

void cli_usage_config(FILE *f); /* cli_config.c */
int cli_config_set(int argc, char **argv);
int cli_config_get(int argc, char **argv);
int cli_config_unset(int argc, char **argv);
int cli_config_list(int argc, char **argv);

/* admin_cli.c: `admin token` (argv: what follows "token"), `status` and
 * `logs` (argv[0] is the command's name) */
void admin_cli_usage_admin(FILE *f);
int admin_cli_token_main(int argc, char **argv);
int admin_cli_status_main(int argc, char **argv);
int admin_cli_logs_main(int argc, char **argv);
/* A new admin token for s: written to <db>.admin-token (mode 0600) first,
 * then its hash stored; tok (n >= 48) gets it. -1 with err. */
int admin_cli_token_new(store *s, char *tok, size_t n, char *err, size_t errlen);

/* cli_alerts.c: `alerts [list]` and `alerts test` (argv[0] is "alerts") */
int cli_alerts_main(int argc, char **argv);

void cli_usage_codex(FILE *f); /* cli_codex.c */
int cli_codex_attach(int argc, char **argv);
int cli_codex_detach(int argc, char **argv);
int cli_codex_status(int argc, char **argv);

void cli_usage_claude(FILE *f); /* cli_claude.c */
int cli_claude_attach(int argc, char **argv);
int cli_claude_detach(int argc, char **argv);
int cli_claude_status(int argc, char **argv);

void cli_usage_backup(FILE *f); /* cli_backup.c: cli_backup_main, cli_restore_main (cli.h) */

/* cli_table.c: a plain table whose columns are as wide as their widest
 * cell. cli_table_init with the header cells and one letter per column
 * ('l' left-aligned, 'r' right: numbers); cli_table_fit every row's cells,
 * then cli_table_print the header and each row (escaped as cli_line does). */
#define CLI_TABLE_COLS 24
typedef struct cli_table {
    size_t ncols;
    const char *align;
    size_t width[CLI_TABLE_COLS];
} cli_table;
void cli_table_init(cli_table *t, const char *const *head, const char *align);
void cli_table_fit(cli_table *t, const char *const *cells);
void cli_table_print(const cli_table *t, const char *const *cells);
/* A budget cell as the dashboard shows it: "$3.20 of $50.00 monthly"
 * (", over" when used up), "-" without a budget (usd 0). */
void cli_table_budget(char *out, size_t n, double usd, const char *period, double spent, int over);

void cli_usage_init(FILE *f); /* cli_init.c */
int cli_init_main(int argc, char **argv);

#endif
