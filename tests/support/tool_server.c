/* tool_server.c: port announcement and signal-bounded loop for the test
 * and benchmark servers (see tool_server.h). */
#include "tool_server.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int tool_server_args(int argc, char **argv, const char *name, const char **host, int *port)
{
    *host = "127.0.0.1";
    *port = -1;
    int i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--port") && i + 1 < argc)
            *port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--host") && i + 1 < argc)
            *host = argv[++i];
        else
            break;
    }
    if (i < argc || *port < 0 || *port > 65535) {
        fprintf(stderr, "usage: %s --port N [--host ADDR]\n"
                        "  port 0 picks a free port; prints \"listening on PORT\".\n", name);
        return 2;
    }
    return 0;
}

void tool_server_announce(evutil_socket_t fd, int fallback)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int port = fallback;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET)
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6)
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    printf("listening on %d\n", port);
    fflush(stdout);
}

static void tool_server_on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    event_base_loopbreak(arg);
}

void tool_server_run(struct event_base *base)
{
    struct event *sigterm = evsignal_new(base, SIGTERM, tool_server_on_signal, base);
    struct event *sigint = evsignal_new(base, SIGINT, tool_server_on_signal, base);
    event_add(sigterm, NULL);
    event_add(sigint, NULL);
    event_base_dispatch(base);
    event_free(sigterm);
    event_free(sigint);
}
