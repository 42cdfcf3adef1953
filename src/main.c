/* main.c: the switchyard command line: dispatches to the subcommands. */
#include "admin/admin_cli.h"
#include "admin/cli.h"
#include "policy/policy.h"
#include "serve.h"
#include <stdio.h>
#include <string.h>

static void main_usage(FILE *f)
{
    fprintf(f, "switchyard: a local-first LLM API gateway\n\n"
               "usage:\n"
               "  switchyard serve [--db PATH] [--listen HOST:PORT] [--policies DIR] [--strategy S] [--codex-attach [DIR]]\n"
               "                   [--admin-listen HOST:PORT]\n"
               "  switchyard account add --name N --base-url URL --token T [--kind api_key|chatgpt|aggregate] [--sort N]\n"
               "  switchyard account list [--json]\n"
               "  switchyard account enable|disable|remove --name N\n"
               "  switchyard key add --name N\n"
               "  switchyard key list\n"
               "  switchyard key prefer --name KEY (--account ACCOUNT | --clear)\n"
               "  switchyard key revoke --name KEY\n"
               "  switchyard config set KEY VALUE | get KEY | unset KEY | list\n"
               "  switchyard codex attach [--codex-home DIR] [--gateway URL] | detach [--force] | status\n"
               "  switchyard admin token\n"
               "  switchyard status [--url URL] [--json]\n"
               "  switchyard logs [--follow] [--account A] [--key K] [--failed] [--limit N]\n"
               "  switchyard usage [--by key|account|model|day] [--since WHEN] [--json]\n"
               "  switchyard backup --out FILE [--force]\n"
               "  switchyard restore FILE\n"
               "  switchyard test [DIR] [--policies DIR]\n\n"
               "Every subcommand takes --db PATH (default ./switchyard.db, or $SWITCHYARD_DB).\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        main_usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "serve") == 0)
        return serve_main(argc - 1, argv + 1);
    if (strcmp(cmd, "account") == 0)
        return cli_account_main(argc - 1, argv + 1);
    if (strcmp(cmd, "key") == 0)
        return cli_key_main(argc - 1, argv + 1);
    if (strcmp(cmd, "config") == 0)
        return cli_config_main(argc - 1, argv + 1);
    if (strcmp(cmd, "codex") == 0)
        return cli_codex_main(argc - 1, argv + 1);
    if (strcmp(cmd, "admin") == 0)
        return admin_cli_admin_main(argc - 1, argv + 1);
    if (strcmp(cmd, "status") == 0)
        return admin_cli_status_main(argc - 1, argv + 1);
    if (strcmp(cmd, "logs") == 0)
        return admin_cli_logs_main(argc - 1, argv + 1);
    if (strcmp(cmd, "usage") == 0)
        return cli_spend_main(argc - 1, argv + 1);
    if (strcmp(cmd, "backup") == 0)
        return cli_backup_main(argc - 1, argv + 1);
    if (strcmp(cmd, "restore") == 0)
        return cli_restore_main(argc - 1, argv + 1);
    if (strcmp(cmd, "test") == 0)
        return policy_test_main(argc - 1, argv + 1);
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        main_usage(stdout);
        return 0;
    }
    fprintf(stderr, "switchyard: unknown command '%s'\n\n", cmd);
    main_usage(stderr);
    return 2;
}
