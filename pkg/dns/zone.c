/* zone.c — the snapshot's lifetime and its name index. */
#include <errno.h>
#include <stdlib.h>

#include <svcenv/alloc.h>

#include "dns_internal.h"

struct se_dns_zone *se_dns_zone_ref(struct se_dns_zone *z)
{
        if (z)
                __atomic_add_fetch(&z->refs, 1, __ATOMIC_RELAXED);
        return z;
}

struct se_dns_zone *se_dns_zone_unref(struct se_dns_zone *z)
{
        if (!z || __atomic_sub_fetch(&z->refs, 1, __ATOMIC_ACQ_REL) > 0)
                return NULL;
        for (size_t i = 0; i < z->n_nodes; i++) {
                free(z->nodes[i]->rrs.v);
                free(z->nodes[i]->seen); /* a build that failed half way */
        }
        free(z->nodes);
        se_hashmap_release(&z->names);
        se_arena_release(&z->arena);
        free(z->zone);
        free(z);
        return NULL;
}

uint32_t se_dns_zone_serial(const struct se_dns_zone *z)
{
        return z->serial;
}

const struct dns_node *dns_zone_find(const struct se_dns_zone *z, const char *key)
{
        return se_hashmap_get(&z->names, key);
}
