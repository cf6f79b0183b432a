/* Small helpers the benchmarks use to build objects by hand. */
#ifndef SVCENV_TEST_BENCH_OBJECTS_H
#define SVCENV_TEST_BENCH_OBJECTS_H

#include <svcenv/model.h>

/* s copied into o's arena */
static inline const char *dup(struct se_object *o, const char *s)
{
        return se_arena_strdup(&o->arena, s);
}

/* l holds the one pair k=v, copied into o's arena */
static inline void one_kv(struct se_object *o, struct se_kvlist *l, const char *k, const char *v)
{
        l->items = se_arena_alloc(&o->arena, sizeof(*l->items));
        l->items[0] = (struct se_kv){ dup(o, k), dup(o, v) };
        l->n = 1;
}

#endif
