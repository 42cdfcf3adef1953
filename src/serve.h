/* serve.h: `switchyard serve`: wires the modules into a running gateway on
 * one libevent loop and handles signals (SIGHUP reloads policies, SIGTERM
 * and SIGINT drain and stop). */
#ifndef SY_SERVE_H
#define SY_SERVE_H

int serve_main(int argc, char **argv);

#endif
