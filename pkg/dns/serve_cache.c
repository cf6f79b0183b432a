/* The forwarder's answer cache: upstream answers kept by question, for
 * their TTL clamped as kubeadm's `cache 30` clamps it, negative answers by
 * their SOA (RFC 2308). Sharded so that workers rarely meet on a lock; each
 * shard holds a share of the entry and byte caps and evicts its oldest
 * entry when full (a FIFO list per shard). */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/dns.h>
#include <svcenv/dns_serve.h>
#include <svcenv/hashmap.h>

#define SHARDS         16
#define RCODE_NXDOMAIN 3

struct entry {
        struct entry *next; /* bucket chain */
        struct entry *older, *newer; /* FIFO of the shard */
        uint64_t hash;
        uint64_t stored_s, expires_s;
        bool denial;
        uint16_t qtype, qclass;
        char *name;
        size_t len;
        uint8_t msg[];
};

struct shard {
        pthread_mutex_t lock;
        struct entry **buckets;
        size_t nbuckets;
        struct entry *oldest, *newest;
        size_t entries, bytes;
        size_t n_success, n_denial;
};

struct se_dns_cache {
        struct se_dns_cache_opts o;
        size_t shard_entries, shard_bytes;
        atomic_uint_fast64_t hits_success, hits_denial, misses, evictions;
        struct shard shards[SHARDS];
};

struct se_dns_cache *se_dns_cache_new(const struct se_dns_cache_opts *opts)
{
        struct se_dns_cache *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        if (opts)
                c->o = *opts;
        if (!c->o.max_entries)
                c->o.max_entries = 9984;
        if (!c->o.max_bytes)
                c->o.max_bytes = (size_t)32 << 20;
        if (!c->o.max_ttl)
                c->o.max_ttl = 30;
        if (!c->o.max_neg_ttl)
                c->o.max_neg_ttl = 30;
        if (!c->o.min_ttl)
                c->o.min_ttl = 5;
        c->shard_entries = (c->o.max_entries + SHARDS - 1) / SHARDS;
        c->shard_bytes = c->o.max_bytes / SHARDS;
        for (int i = 0; i < SHARDS; i++) {
                struct shard *s = &c->shards[i];
                pthread_mutex_init(&s->lock, NULL);
                s->nbuckets = 16;
                while (s->nbuckets < c->shard_entries)
                        s->nbuckets <<= 1;
                s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
                if (!s->buckets)
                        return se_dns_cache_free(c);
        }
        return c;
}

static void unlink_entry(struct shard *s, struct entry *e)
{
        struct entry **pp = &s->buckets[e->hash & (s->nbuckets - 1)];
        while (*pp && *pp != e)
                pp = &(*pp)->next;
        if (*pp)
                *pp = e->next;
        if (e->older)
                e->older->newer = e->newer;
        else
                s->oldest = e->newer;
        if (e->newer)
                e->newer->older = e->older;
        else
                s->newest = e->older;
        s->entries--;
        s->bytes -= e->len;
        if (e->denial)
                s->n_denial--;
        else
                s->n_success--;
        free(e->name);
        free(e);
}

struct se_dns_cache *se_dns_cache_free(struct se_dns_cache *c)
{
        if (!c)
                return NULL;
        for (int i = 0; i < SHARDS; i++) {
                struct shard *s = &c->shards[i];
                while (s->buckets && s->oldest)
                        unlink_entry(s, s->oldest);
                free(s->buckets);
                pthread_mutex_destroy(&s->lock);
        }
        free(c);
        return NULL;
}

static uint64_t key_hash(const char *name, uint16_t qtype, uint16_t qclass)
{
        return se_hash_str(name) ^ ((uint64_t)qtype * 0x9e3779b97f4a7c15ull) ^
               ((uint64_t)qclass << 48);
}

static struct entry *find(struct shard *s, uint64_t h, const char *name, uint16_t qtype,
                          uint16_t qclass)
{
        for (struct entry *e = s->buckets[h & (s->nbuckets - 1)]; e; e = e->next)
                if (e->hash == h && e->qtype == qtype && e->qclass == qclass &&
                    strcmp(e->name, name) == 0)
                        return e;
        return NULL;
}

int se_dns_cache_put(struct se_dns_cache *c, const uint8_t *msg, size_t len, uint64_t now_s)
{
        char name[SE_DNS_MAX_NAME + 1];
        uint16_t qtype, qclass;
        uint32_t ttl;
        if (len < 12 || se_dns_question(msg, len, name, sizeof(name), &qtype, &qclass) < 0)
                return -EBADMSG;
        unsigned rcode = msg[3] & 0x0f;
        bool tc = msg[2] & 0x02, qr = msg[2] & 0x80;
        if (!qr || tc || (rcode != 0 && rcode != RCODE_NXDOMAIN) || len > SE_DNS_MAX_MSG)
                return -EINVAL;
        int r = se_dns_min_ttl(msg, len, &ttl);
        if (r == -EBADMSG)
                return r;
        if (r < 0)
                return -EINVAL; /* nothing to take a TTL from: not kept */
        bool denial = rcode == RCODE_NXDOMAIN || (msg[6] == 0 && msg[7] == 0);
        uint32_t max = denial ? c->o.max_neg_ttl : c->o.max_ttl;
        if (ttl > max)
                ttl = max;
        if (ttl < c->o.min_ttl)
                ttl = c->o.min_ttl;
        if (len > c->shard_bytes)
                return -EINVAL;

        struct entry *e = malloc(sizeof(*e) + len);
        if (!e || !(e->name = strdup(name))) {
                free(e);
                return -ENOMEM;
        }
        e->hash = key_hash(name, qtype, qclass);
        e->qtype = qtype;
        e->qclass = qclass;
        e->stored_s = now_s;
        e->expires_s = now_s + ttl;
        e->denial = denial;
        e->len = len;
        memcpy(e->msg, msg, len);

        struct shard *s = &c->shards[e->hash % SHARDS];
        pthread_mutex_lock(&s->lock);
        struct entry *old = find(s, e->hash, name, qtype, qclass);
        if (old)
                unlink_entry(s, old);
        while (s->oldest && (s->entries >= c->shard_entries || s->bytes + len > c->shard_bytes)) {
                unlink_entry(s, s->oldest);
                atomic_fetch_add_explicit(&c->evictions, 1, memory_order_relaxed);
        }
        struct entry **b = &s->buckets[e->hash & (s->nbuckets - 1)];
        e->next = *b;
        *b = e;
        e->older = s->newest;
        e->newer = NULL;
        if (s->newest)
                s->newest->newer = e;
        else
                s->oldest = e;
        s->newest = e;
        s->entries++;
        s->bytes += len;
        if (denial)
                s->n_denial++;
        else
                s->n_success++;
        pthread_mutex_unlock(&s->lock);
        return 0;
}

/* Length of the wire name at msg[off], without following pointers; 0 when
 * it has a pointer or runs off the end. */
static size_t plain_name_len(const uint8_t *msg, size_t len, size_t off)
{
        size_t start = off;
        while (off < len) {
                uint8_t l = msg[off];
                if (l == 0)
                        return off + 1 - start;
                if (l & 0xc0)
                        return 0;
                off += 1u + l;
        }
        return 0;
}

size_t se_dns_cache_get(struct se_dns_cache *c, const uint8_t *query, size_t qlen, uint64_t now_s,
                        size_t udp_max, uint8_t *out, size_t cap)
{
        char name[SE_DNS_MAX_NAME + 1];
        uint16_t qtype, qclass;
        if (qlen < 12 || se_dns_question(query, qlen, name, sizeof(name), &qtype, &qclass) < 0)
                return 0;
        uint64_t h = key_hash(name, qtype, qclass);
        struct shard *s = &c->shards[h % SHARDS];
        size_t n = 0;
        bool denial = false;
        uint64_t age = 0;
        pthread_mutex_lock(&s->lock);
        struct entry *e = find(s, h, name, qtype, qclass);
        if (e && now_s >= e->expires_s) {
                unlink_entry(s, e);
                e = NULL;
        }
        if (e && e->len <= cap) {
                memcpy(out, e->msg, e->len);
                n = e->len;
                denial = e->denial;
                age = now_s - e->stored_s;
        }
        pthread_mutex_unlock(&s->lock);
        if (!n) {
                atomic_fetch_add_explicit(&c->misses, 1, memory_order_relaxed);
                return 0;
        }
        atomic_fetch_add_explicit(denial ? &c->hits_denial : &c->hits_success, 1,
                                  memory_order_relaxed);
        /* the asker's ID, RD and spelling of the name */
        out[0] = query[0];
        out[1] = query[1];
        out[2] = (uint8_t)((out[2] & ~0x01) | (query[2] & 0x01));
        size_t qn = plain_name_len(query, qlen, 12);
        if (qn && plain_name_len(out, n, 12) == qn)
                memcpy(out + 12, query + 12, qn);
        (void)se_dns_age_ttls(out, n, age > UINT32_MAX ? UINT32_MAX : (uint32_t)age);
        if (udp_max && n > udp_max)
                n = se_dns_truncate(out, n, udp_max);
        return n;
}

void se_dns_cache_stats(struct se_dns_cache *c, struct se_dns_cache_stats *ret)
{
        memset(ret, 0, sizeof(*ret));
        ret->hits_success = atomic_load_explicit(&c->hits_success, memory_order_relaxed);
        ret->hits_denial = atomic_load_explicit(&c->hits_denial, memory_order_relaxed);
        ret->misses = atomic_load_explicit(&c->misses, memory_order_relaxed);
        ret->evictions = atomic_load_explicit(&c->evictions, memory_order_relaxed);
        for (int i = 0; i < SHARDS; i++) {
                struct shard *s = &c->shards[i];
                pthread_mutex_lock(&s->lock);
                ret->entries_success += s->n_success;
                ret->entries_denial += s->n_denial;
                pthread_mutex_unlock(&s->lock);
        }
}
