/* service_notify.h: tells the service manager (systemd, Type=notify) how
 * the gateway stands: READY=1 once it listens with its signal handlers in
 * (a reload is sent only after it), STOPPING=1 when it drains. The
 * protocol is a datagram on the unix socket $NOTIFY_SOCKET names (systemd's
 * sd_notify, written here in a few lines instead of linking libsystemd);
 * without it nothing is sent. Never blocks: one non-blocking sendto. */
#ifndef SY_SERVICE_NOTIFY_H
#define SY_SERVICE_NOTIFY_H

/* Sends state (e.g. "READY=1") to $NOTIFY_SOCKET; 0 sent or nothing to
 * send to, -1 when the socket named cannot be reached (logged once). */
int service_notify(const char *state);

#endif
