/* redis_reply.c: hiredis reply objects built with bounds (see
 * redis_reply.h). The construction follows hiredis 0.14's own
 * (createStringObject and the others in hiredis.c, static there): one
 * calloc'd redisReply per value, strings copied with a NUL, each value
 * stored in its parent's element table at the task's index, so that
 * freeReplyObject frees what is built here. An array is a redisReply
 * followed by a count: the root's counts the elements declared so far by
 * the whole reply (free() of the redisReply frees both). */
#include "core/redis_reply.h"
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct redis_reply_array {
    redisReply r;     /* first: freeReplyObject frees the whole */
    size_t declared;  /* the root's: elements declared by the reply so far */
} redis_reply_array;

static void redis_reply_attach(const redisReadTask *task, redisReply *r)
{
    if (task->parent) {
        redisReply *parent = task->parent->obj;
        parent->element[task->idx] = r;
    }
}

static void *redis_reply_string(const redisReadTask *task, char *str, size_t len)
{
    redisReply *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->type = task->type; /* a string, a status or an error */
    r->str = malloc(len + 1);
    if (!r->str) {
        free(r);
        return NULL;
    }
    memcpy(r->str, str, len);
    r->str[len] = '\0';
    r->len = len;
    redis_reply_attach(task, r);
    return r;
}

static void *redis_reply_array_new(const redisReadTask *task, int elements)
{
    const redisReadTask *root = task;
    int depth = 1;
    while (root->parent) {
        root = root->parent;
        depth++;
    }
    /* every array here is built below: the root's count is the reply's */
    redis_reply_array *top = root != task ? root->obj : NULL;
    size_t count = elements > 0 ? (size_t)elements : 0;
    size_t declared = count + (top ? top->declared : 0);
    if (depth > REDIS_REPLY_MAX_DEPTH || declared > REDIS_REPLY_MAX_ELEMENTS) {
        char *note = task->privdata;
        if (note && depth > REDIS_REPLY_MAX_DEPTH)
            snprintf(note, REDIS_REPLY_NOTE, "a reply nesting arrays %d deep (at most %d) refused", depth,
                     REDIS_REPLY_MAX_DEPTH);
        else if (note)
            snprintf(note, REDIS_REPLY_NOTE, "a reply declaring %zu array elements (at most %d) refused", declared,
                     REDIS_REPLY_MAX_ELEMENTS);
        return NULL;
    }
    redis_reply_array *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->r.type = REDIS_REPLY_ARRAY;
    if (count) {
        a->r.element = calloc(count, sizeof(redisReply *));
        if (!a->r.element) {
            free(a);
            return NULL;
        }
    }
    a->r.elements = count;
    if (top)
        top->declared = declared;
    else
        a->declared = declared;
    redis_reply_attach(task, &a->r);
    return a;
}

static void *redis_reply_integer(const redisReadTask *task, long long value)
{
    redisReply *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->type = REDIS_REPLY_INTEGER;
    r->integer = value;
    redis_reply_attach(task, r);
    return r;
}

static void *redis_reply_nil(const redisReadTask *task)
{
    redisReply *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->type = REDIS_REPLY_NIL;
    redis_reply_attach(task, r);
    return r;
}

static redisReplyObjectFunctions redis_reply_fns = {
    redis_reply_string, redis_reply_array_new, redis_reply_integer, redis_reply_nil, freeReplyObject,
};

void redis_reply_bound(struct redisReader *r, char *note)
{
    r->fn = &redis_reply_fns;
    r->privdata = note;
    r->maxbuf = REDIS_READER_MAX_BUF;
}
