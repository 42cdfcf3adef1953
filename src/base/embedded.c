/* embedded.c: lookup into the table of bundled Lua files (see embedded.h). */
#include "base/embedded.h"
#include <string.h>

const embedded_file *embedded_find(const char *name)
{
    for (const embedded_file *f = embedded_files; f->name; f++)
        if (strcmp(f->name, name) == 0)
            return f;
    return NULL;
}
