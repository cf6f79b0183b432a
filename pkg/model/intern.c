/* The process-wide pool of short strings that recur across decoded objects
 * (see model_intern_pool_add in decode_internal.h).
 *
 * Strings live in 64 KiB slabs that are never freed, each preceded by its
 * length byte; the table holds pointers to them (open addressing, load at
 * most 3/4). A direct-mapped filter of hashes remembers strings seen once:
 * a string enters the pool at its second sighting, so that values unique to
 * one object (a StatefulSet pod's own name label) do not use up the cap. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hashmap.h>

#include "decode_internal.h"

#define SLAB        ((size_t)64 << 10)
#define TABLE_MAX   ((size_t)INTERN_MAX_STRINGS * 2)
#define FILTER_SIZE 16384

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const char **table; /* cap slots, each NULL or a pooled string */
static size_t cap, count, bytes;
static char *slab; /* the slab being filled, which starts with the previous one's address */
static size_t slab_used;
static uint32_t seen_once[FILTER_SIZE];

/* The slot of s[0..n), or the empty slot where it would go. */
static size_t slot_of(const char *s, size_t n, uint64_t h)
{
        size_t i = h & (cap - 1);
        for (; table[i]; i = (i + 1) & (cap - 1))
                if ((unsigned char)table[i][-1] == n && memcmp(table[i], s, n) == 0 &&
                    table[i][n] == '\0')
                        return i;
        return i;
}

static const char *find_locked(const char *s, size_t n, uint64_t h)
{
        return cap ? table[slot_of(s, n, h)] : NULL;
}

static int grow_locked(void)
{
        size_t ncap = cap ? cap * 2 : 1024;
        const char **t = se_calloc(ncap, sizeof(*t));
        if (!t)
                return -ENOMEM;
        for (size_t i = 0; i < cap; i++) {
                if (!table[i])
                        continue;
                size_t n = (unsigned char)table[i][-1];
                size_t j = se_hash_mem(table[i], n) & (ncap - 1);
                while (t[j])
                        j = (j + 1) & (ncap - 1);
                t[j] = table[i];
        }
        free(table);
        table = t;
        cap = ncap;
        return 0;
}

/* A pooled copy of s[0..n), or NULL when the caps are reached or memory is
 * short. */
static const char *add_locked(const char *s, size_t n, uint64_t h)
{
        size_t need = n + 2; /* length byte, text, NUL */
        if (count >= INTERN_MAX_STRINGS || bytes + need > INTERN_MAX_BYTES)
                return NULL;
        if ((count + 1) * 4 > cap * 3 && (cap >= TABLE_MAX || grow_locked() < 0))
                return NULL;
        if (!slab || slab_used + need > SLAB) {
                /* the rest of a full slab is lost: at most 65 bytes each */
                char *fresh = se_malloc(SLAB);
                if (!fresh)
                        return NULL;
                /* chained from the newest, so that leak checkers see every
                 * slab as reachable (the table points inside them) */
                memcpy(fresh, &slab, sizeof(slab));
                slab = fresh;
                slab_used = sizeof(slab);
        }
        char *p = slab + slab_used;
        slab_used += need;
        bytes += need;
        p[0] = (char)n;
        memcpy(p + 1, s, n);
        p[n + 1] = '\0';
        table[slot_of(s, n, h)] = p + 1;
        count++;
        return p + 1;
}

const char *model_intern_pool_find(const char *s, size_t n)
{
        if (n == 0 || n > INTERN_MAX_LEN)
                return NULL;
        uint64_t h = se_hash_mem(s, n);
        pthread_mutex_lock(&lock);
        const char *p = find_locked(s, n, h);
        pthread_mutex_unlock(&lock);
        return p;
}

const char *model_intern_pool_add(const char *s, size_t n)
{
        if (n == 0 || n > INTERN_MAX_LEN)
                return NULL;
        uint64_t h = se_hash_mem(s, n);
        uint32_t mark = (uint32_t)(h >> 32) | 1; /* never 0: 0 is "nothing seen" */
        pthread_mutex_lock(&lock);
        const char *p = find_locked(s, n, h);
        if (!p) {
                uint32_t *seen = &seen_once[h % FILTER_SIZE];
                if (*seen == mark)
                        p = add_locked(s, n, h);
                else
                        *seen = mark;
        }
        pthread_mutex_unlock(&lock);
        return p;
}

void model_intern_pool_stats(size_t *ret_strings, size_t *ret_bytes)
{
        pthread_mutex_lock(&lock);
        *ret_strings = count;
        *ret_bytes = bytes;
        pthread_mutex_unlock(&lock);
}
