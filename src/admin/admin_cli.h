/* admin_cli.h: `switchyard admin token`, `switchyard status` and
 * `switchyard logs` (argv[0] is the subcommand's name; each returns the
 * process exit code: 0 ok, 1 failure, 2 bad usage). */
#ifndef SY_ADMIN_CLI_H
#define SY_ADMIN_CLI_H

#include <stdio.h>

/* `admin token` (argv: what follows "token") and the usage of `admin`. */
int admin_cli_token_main(int argc, char **argv);
void admin_cli_usage_admin(FILE *f);
int admin_cli_status_main(int argc, char **argv);
int admin_cli_logs_main(int argc, char **argv);

#endif
