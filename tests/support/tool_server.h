/* tool_server.h: what the test and benchmark servers (tests/mock_upstream,
 * bench/fast_upstream, bench/floor_proxy) share around their handlers:
 * telling the caller which port they got, and running until SIGTERM or
 * SIGINT. Test tools only; the gateway has its own start-up (src/serve.c). */
#ifndef SY_TOOL_SERVER_H
#define SY_TOOL_SERVER_H
#include <event2/event.h>

/* Prints "listening on PORT" for the port fd is bound to (fallback if it
 * cannot be read) and flushes stdout: the line the scripts wait for. */
void tool_server_announce(evutil_socket_t fd, int fallback);

/* Runs the loop until SIGTERM or SIGINT breaks it. */
void tool_server_run(struct event_base *base);

#endif
