/* stream.h: the stream translator object (the dialect_stream_* functions
 * of dialect.h) and its table of pairs. What tests need besides the
 * public API is here. */
#ifndef SY_DIALECT_STREAM_H
#define SY_DIALECT_STREAM_H
#include <stddef.h>
#include "dialect/dialect.h"

/* Sets the budget for what the translator keeps (TRACK_KEEP_MAX by
 * default, track.h): for the tests of what happens when it is spent. */
void dialect_stream_set_budget(dialect_stream *s, size_t max);

#endif
