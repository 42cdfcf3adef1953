/* service_notify.c: the sd_notify datagram (see service_notify.h). */
#include "core/service_notify.h"
#include "base/log.h"
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int service_notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return 0;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    size_t n = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || n >= sizeof sa.sun_path) {
        log_warn("NOTIFY_SOCKET %.80s is no unix socket path: the service manager is not told '%s'", path, state);
        return -1;
    }
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@') /* an abstract socket: its name starts with a NUL */
        sa.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        log_warn("NOTIFY_SOCKET: socket: %s", strerror(errno));
        return -1;
    }
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    ssize_t w = sendto(fd, state, strlen(state), MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
    int err = errno;
    close(fd);
    if (w < 0) {
        log_warn("NOTIFY_SOCKET %.80s: %s: the service manager is not told '%s'", path, strerror(err), state);
        return -1;
    }
    return 0;
}
