/* tool_server.h: what the test and benchmark servers (tests/mock_upstream,
 * bench/fast_upstream, bench/floor_proxy) share around their handlers:
 * telling the caller which port they got, and running until SIGTERM or
 * SIGINT. Test tools only; the gateway has its own start-up (src/serve.c). */
#ifndef SY_TOOL_SERVER_H
#define SY_TOOL_SERVER_H
#include <event2/event.h>

/* Reads "--port N [--host ADDR]" (host defaults to 127.0.0.1, port 0 picks
 * a free one). Returns 0, or prints the usage line for name and returns 2. */
int tool_server_args(int argc, char **argv, const char *name, const char **host, int *port);

/* Prints "listening on PORT" for the port fd is bound to (fallback if it
 * cannot be read) and flushes stdout: the line the scripts wait for. */
void tool_server_announce(evutil_socket_t fd, int fallback);

/* Runs the loop until SIGTERM or SIGINT breaks it. */
void tool_server_run(struct event_base *base);

#endif
