/* String-keyed open-addressing hash map (see hashmap.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hashmap.h>

/* FNV-1a with a final avalanche: cheap for short keys like "ns/name". */
static uint64_t avalanche(uint64_t h)
{
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 33;
        return h;
}

uint64_t se_hash_str(const char *s)
{
        uint64_t h = 1469598103934665603ULL;
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                h ^= *p;
                h *= 1099511628211ULL;
        }
        return avalanche(h);
}

uint64_t se_hash_mem(const void *p, size_t n)
{
        uint64_t h = 1469598103934665603ULL;
        for (const unsigned char *b = p, *end = b + n; b < end; b++) {
                h ^= *b;
                h *= 1099511628211ULL;
        }
        return avalanche(h);
}

static size_t find_slot(const struct se_hashmap *m, const char *key, uint64_t h)
{
        size_t mask = m->cap - 1;
        size_t i = h & mask;
        while (m->slots[i].key) {
                if (m->slots[i].hash == h && strcmp(m->slots[i].key, key) == 0)
                        return i;
                i = (i + 1) & mask;
        }
        return i;
}

void *se_hashmap_get(const struct se_hashmap *m, const char *key)
{
        return m->cap ? se_hashmap_get_hashed(m, key, se_hash_str(key)) : NULL;
}

void *se_hashmap_get_hashed(const struct se_hashmap *m, const char *key, uint64_t hash)
{
        if (!m->cap)
                return NULL;
        size_t i = find_slot(m, key, hash);
        return m->slots[i].key ? m->slots[i].value : NULL;
}

static int resize(struct se_hashmap *m, size_t cap)
{
        struct se_hashmap_slot *slots = se_calloc(cap, sizeof(*slots));
        if (!slots)
                return -ENOMEM;
        struct se_hashmap old = *m;
        m->slots = slots;
        m->cap = cap;
        for (size_t i = 0; i < old.cap; i++) {
                if (!old.slots[i].key)
                        continue;
                size_t j = old.slots[i].hash & (cap - 1);
                while (slots[j].key)
                        j = (j + 1) & (cap - 1);
                slots[j] = old.slots[i];
        }
        free(old.slots);
        return 0;
}

int se_hashmap_put(struct se_hashmap *m, const char *key, void *value, void **ret_old)
{
        /* keep the load factor at or below 3/4 */
        if ((m->n + 1) * 4 > m->cap * 3) {
                int r = resize(m, m->cap ? m->cap * 2 : 8);
                if (r < 0)
                        return r;
        }
        uint64_t h = se_hash_str(key);
        size_t i = find_slot(m, key, h);
        if (ret_old)
                *ret_old = m->slots[i].key ? m->slots[i].value : NULL;
        if (!m->slots[i].key)
                m->n++;
        m->slots[i].key = key;
        m->slots[i].value = value;
        m->slots[i].hash = h;
        return 0;
}

void *se_hashmap_remove(struct se_hashmap *m, const char *key)
{
        if (!m->cap)
                return NULL;
        size_t mask = m->cap - 1;
        size_t i = find_slot(m, key, se_hash_str(key));
        if (!m->slots[i].key)
                return NULL;
        void *value = m->slots[i].value;
        /* backward-shift deletion keeps probe chains intact without tombstones */
        size_t j = i;
        for (;;) {
                j = (j + 1) & mask;
                if (!m->slots[j].key)
                        break;
                size_t home = m->slots[j].hash & mask;
                /* move j back to i when i lies on j's probe path (home .. j) */
                if (((j - home) & mask) >= ((j - i) & mask)) {
                        m->slots[i] = m->slots[j];
                        i = j;
                }
        }
        m->slots[i].key = NULL;
        m->slots[i].value = NULL;
        m->n--;
        return value;
}

int se_hashmap_copy(struct se_hashmap *dst, const struct se_hashmap *src)
{
        *dst = (struct se_hashmap)SE_HASHMAP_INIT;
        if (src->cap == 0)
                return 0;
        dst->slots = se_reallocarray(NULL, src->cap, sizeof(*dst->slots));
        if (!dst->slots)
                return -ENOMEM;
        memcpy(dst->slots, src->slots, src->cap * sizeof(*dst->slots));
        dst->cap = src->cap;
        dst->n = src->n;
        return 0;
}

void se_hashmap_release(struct se_hashmap *m)
{
        free(m->slots);
        m->slots = NULL;
        m->cap = m->n = 0;
}

int se_hashmap_next(const struct se_hashmap *m, size_t *iter, const char **ret_key,
                    void **ret_value)
{
        for (size_t i = *iter; i < m->cap; i++) {
                if (m->slots[i].key) {
                        if (ret_key)
                                *ret_key = m->slots[i].key;
                        if (ret_value)
                                *ret_value = m->slots[i].value;
                        *iter = i + 1;
                        return 1;
                }
        }
        *iter = m->cap;
        return 0;
}
