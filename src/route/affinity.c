/* affinity.c: the session -> account table (see affinity.h): a hash of
 * session-id hashes chained through a fixed slot array, and a doubly linked
 * recency list through the same slots, so lookups, uses and evictions are
 * O(1) and memory is fixed at max entries. */
#include "route/affinity.h"
#include "base/sbuf.h"
#include <stdlib.h>
#include <string.h>

typedef struct aff_slot {
    uint64_t h;         /* 0: free */
    int64_t account_id;
    double used_at;
    double told_at;     /* the entry as it is now was last worth telling (affinity_put's answer) */
    uint32_t hnext;     /* chain in the bucket; UINT32_MAX ends */
    uint32_t prev, next; /* recency list, most recent at head */
} aff_slot;

#define AFF_NIL UINT32_MAX

struct affinity {
    aff_slot *slots;
    uint32_t *buckets;
    uint32_t max, nbuckets, used, head, tail, free_top;
    uint32_t *free_list;
    double idle_s;
};

static uint64_t affinity_hash(const char *s)
{
    uint64_t h = sbuf_hash(s);
    return h ? h : 1;
}

affinity *affinity_new(size_t max, double idle_s)
{
    if (max < 1)
        max = 1;
    if (max > (1u << 24))
        max = 1u << 24;
    affinity *a = calloc(1, sizeof *a);
    a->max = (uint32_t)max;
    a->nbuckets = 1;
    while (a->nbuckets < 2 * a->max)
        a->nbuckets <<= 1;
    a->slots = calloc(a->max, sizeof *a->slots);
    a->buckets = malloc(a->nbuckets * sizeof *a->buckets);
    memset(a->buckets, 0xff, a->nbuckets * sizeof *a->buckets);
    a->free_list = malloc(a->max * sizeof *a->free_list);
    for (uint32_t i = 0; i < a->max; i++)
        a->free_list[i] = a->max - 1 - i;
    a->free_top = a->max;
    a->head = a->tail = AFF_NIL;
    a->idle_s = idle_s;
    return a;
}

void affinity_free(affinity *a)
{
    if (!a)
        return;
    free(a->slots);
    free(a->buckets);
    free(a->free_list);
    free(a);
}

void affinity_set_idle(affinity *a, double idle_s) { a->idle_s = idle_s; }
size_t affinity_count(const affinity *a) { return a->used; }

static void affinity_list_unlink(affinity *a, uint32_t i)
{
    aff_slot *s = &a->slots[i];
    if (s->prev != AFF_NIL)
        a->slots[s->prev].next = s->next;
    else
        a->head = s->next;
    if (s->next != AFF_NIL)
        a->slots[s->next].prev = s->prev;
    else
        a->tail = s->prev;
    s->prev = s->next = AFF_NIL;
}

static void affinity_list_push_head(affinity *a, uint32_t i)
{
    aff_slot *s = &a->slots[i];
    s->prev = AFF_NIL;
    s->next = a->head;
    if (a->head != AFF_NIL)
        a->slots[a->head].prev = i;
    a->head = i;
    if (a->tail == AFF_NIL)
        a->tail = i;
}

static uint32_t *affinity_link_of(affinity *a, uint64_t h)
{
    uint32_t *link = &a->buckets[h & (a->nbuckets - 1)];
    while (*link != AFF_NIL && a->slots[*link].h != h)
        link = &a->slots[*link].hnext;
    return link;
}

static void affinity_drop(affinity *a, uint32_t i)
{
    uint32_t *link = affinity_link_of(a, a->slots[i].h);
    if (*link == i)
        *link = a->slots[i].hnext;
    affinity_list_unlink(a, i);
    a->slots[i].h = 0;
    a->free_list[a->free_top++] = i;
    a->used--;
}

int64_t affinity_get(affinity *a, const char *session, double now)
{
    if (!session || !*session)
        return 0;
    uint32_t i = *affinity_link_of(a, affinity_hash(session));
    if (i == AFF_NIL)
        return 0;
    if (now - a->slots[i].used_at > a->idle_s) {
        affinity_drop(a, i);
        return 0;
    }
    return a->slots[i].account_id;
}

int affinity_put(affinity *a, const char *session, int64_t account_id, double now)
{
    if (!session || !*session || account_id <= 0)
        return 0;
    uint64_t h = affinity_hash(session);
    uint32_t *link = affinity_link_of(a, h);
    uint32_t i = *link;
    if (i == AFF_NIL) {
        /* sessions idle too long go first, then the least recently used */
        while (a->tail != AFF_NIL && now - a->slots[a->tail].used_at > a->idle_s)
            affinity_drop(a, a->tail);
        if (!a->free_top)
            affinity_drop(a, a->tail);
        i = a->free_list[--a->free_top];
        a->used++;
        aff_slot *s = &a->slots[i];
        s->h = h;
        link = affinity_link_of(a, h); /* a drop may have changed the chain */
        s->hnext = AFF_NIL;
        *link = i;
        s->prev = s->next = AFF_NIL;
        s->account_id = 0;
    } else {
        affinity_list_unlink(a, i);
    }
    aff_slot *s = &a->slots[i];
    /* worth telling: new, moved, or told a quarter of the idle time ago
     * (a shared copy expires with the idle time) */
    int tell = s->account_id != account_id || now - s->told_at > a->idle_s / 4;
    if (tell)
        s->told_at = now;
    s->account_id = account_id;
    s->used_at = now;
    affinity_list_push_head(a, i);
    return tell;
}
