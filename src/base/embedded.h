/* embedded.h: the lua/, policies/ and web/ files compiled into the binary by
 * cmake/embed.cmake, so the gateway runs on its defaults with no files. */
#ifndef SY_EMBEDDED_H
#define SY_EMBEDDED_H
#include <stddef.h>

typedef struct embedded_file {
    const char *name; /* path relative to the source root, e.g. "policies/order.lua" */
    const char *data; /* NUL-terminated */
    size_t len;
} embedded_file;

/* Terminated by an entry whose name is NULL. */
extern const embedded_file embedded_files[];

/* Returns the file called name, or NULL. */
const embedded_file *embedded_find(const char *name);

#endif
