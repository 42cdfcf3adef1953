/* cli.h: the administrative subcommands `switchyard account ...`,
 * `switchyard key ...`, `switchyard config ...` and `switchyard codex ...`,
 * which write the database synchronously. Each takes argv with argv[0] =
 * "account" / "key" / "config" / "codex" and returns the process exit code (0 ok, 1 failure, 2 bad usage
 * or an invalid value). The database is --db PATH, else $SWITCHYARD_DB,
 * else ./switchyard.db. */
#ifndef SY_CLI_H
#define SY_CLI_H

int cli_account_main(int argc, char **argv);
int cli_key_main(int argc, char **argv);
int cli_config_main(int argc, char **argv);
int cli_codex_main(int argc, char **argv); /* argv[0] = "codex": attach | detach | status */

#endif
