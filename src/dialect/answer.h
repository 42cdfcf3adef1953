/* answer.h: a plain (non-stream) answer made the other dialect's
 * (dialect_answer in dialect.h). Also how the aggregated stream answers
 * of another dialect are made: the stream is gathered into its own
 * dialect's answer, then translated here. */
#ifndef SY_DIALECT_ANSWER_H
#define SY_DIALECT_ANSWER_H
#include "dialect/dialect.h"

/* Does doc look like a plain answer of dialect api? A Responses answer is
 * an object with an "output" array ("object", when present, "response")
 * whose status is not "failed"; a chat answer has a "choices" array whose
 * first element holds a "message" object, and no "error". */
int answer_is(api_kind api, const json_value *doc);

#endif
