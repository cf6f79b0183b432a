/* The digest of an EndpointSlice endpoint: what the EndpointSlice
 * controller compares, for slim slices and for the planner's own. */
#include <string.h>

#include <svcenv/model.h>

/* FNV-1a over a canonical serialisation (strings end with a NUL byte, which
 * no decoded string holds; absent strings are marked), then an avalanche. */
struct hasher {
        uint64_t h;
};

static void put_byte(struct hasher *x, unsigned char b)
{
        x->h ^= b;
        x->h *= 0x100000001b3ull;
}

static void put_str(struct hasher *x, const char *s)
{
        for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++)
                put_byte(x, *p);
        put_byte(x, 0);
}

/* a string whose absence differs from "" */
static void put_opt_str(struct hasher *x, const char *s)
{
        put_byte(x, s ? 1 : 0);
        if (s)
                put_str(x, s);
}

static uint64_t finish(const struct hasher *x)
{
        uint64_t h = x->h;
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 33;
        h *= 0xc4ceb9fe1a85ec53ull;
        h ^= h >> 33;
        return h;
}

static const char *or_empty(const char *s)
{
        return s ? s : "";
}

/* The addresses in sorted order (upstream sorts them before hashing), by
 * selection: no allocation, and an endpoint holds at most 100. */
static void put_addresses(struct hasher *x, const struct se_strs *a)
{
        const char *prev = NULL;
        uint32_t done = 0;
        put_byte(x, (unsigned char)(a->n & 0xff));
        put_byte(x, (unsigned char)(a->n >> 8 & 0xff));
        while (done < a->n) {
                const char *min = NULL;
                uint32_t count = 0;
                for (uint32_t i = 0; i < a->n; i++) {
                        const char *s = or_empty(a->v[i]);
                        if (prev && strcmp(s, prev) <= 0)
                                continue;
                        int c = min ? strcmp(s, min) : -1;
                        if (c < 0) {
                                min = s;
                                count = 1;
                        } else if (c == 0) {
                                count++;
                        }
                }
                for (uint32_t k = 0; k < count; k++)
                        put_str(x, min);
                done += count;
                prev = min;
        }
}

void se_slice_endpoint_digest(const struct se_slice_endpoint *e,
                              struct se_slice_endpoint_digest *ret)
{
        const struct se_object_ref *r = se_slice_endpoint_target_ref(e);
        struct hasher x = { 0xcbf29ce484222325ull };
        put_addresses(&x, &e->addresses);
        put_str(&x, e->hostname);
        put_str(&x, r ? r->namespace : NULL);
        put_str(&x, r ? r->name : NULL);
        ret->identity = finish(&x);
        x.h = 0xcbf29ce484222325ull;
        put_opt_str(&x, se_slice_endpoint_node(e));
        put_opt_str(&x, se_slice_endpoint_zone(e));
        put_byte(&x, (unsigned char)e->ready);
        put_byte(&x, (unsigned char)e->serving);
        put_byte(&x, (unsigned char)e->terminating);
        put_byte(&x, r ? 1 : 0);
        if (r) {
                put_str(&x, r->kind);
                put_str(&x, r->namespace);
                put_str(&x, r->name);
                put_str(&x, r->uid);
        }
        ret->beyond = finish(&x);
        ret->ready = e->ready;
        ret->hints = 0;
}
