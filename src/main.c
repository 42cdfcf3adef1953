/* main.c: the switchyard command line: the command table is admin/cli.c's;
 * the top hands it `serve`, which sits above it. */
#include "admin/cli.h"
#include "serve.h"

int main(int argc, char **argv) { return cli_main(argc, argv, serve_main); }
