/* Upstream's canonical order inside an Endpoints object (SortSubsets in
 * pkg/api/v1/endpoints), and of an EndpointSlice's ports (the
 * endpointslice util's portsInOrder): the ports of a subset or slice, and
 * the subsets, ascend by
 * the FNV-1a 128 digest (compared as big-endian bytes) of the text Go's
 * spew library prints for the struct with "%#v" (k8s.io/utils/dump.ForHash:
 * types shown, no pointer addresses, nil as <nil>, strings bare). The text
 * is streamed into the hash, never built. Addresses are already in order
 * (IP bytes, then UID) when a subset is hashed, as upstream sorts them
 * first; a subset's ports are sorted before its own digest is taken. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hash.h>

#include "endpoints_internal.h"

static void put(struct se_fnv128a *h, const char *s)
{
        se_fnv128a_update(h, s, strlen(s));
}

/* "(string)" then the value ("" when absent: a Go string is never nil) */
static void put_field(struct se_fnv128a *h, const char *label, const char *v)
{
        put(h, label);
        if (v)
                put(h, v);
}

/* a *string field: "<nil>" when absent */
static void put_ptr_field(struct se_fnv128a *h, const char *label, const char *v)
{
        put(h, label);
        put(h, v ? v : "<nil>");
}

static void put_port(struct se_fnv128a *h, const struct se_endpoint_port *p)
{
        char num[16];
        snprintf(num, sizeof(num), "%" PRId32, p->port);
        put_field(h, "{Name:(string)", p->name);
        put_field(h, " Port:(int32)", num);
        put_field(h, " Protocol:(v1.Protocol)", se_protocol_name(p->protocol));
        put_ptr_field(h, " AppProtocol:(*string)", p->app_protocol);
        put(h, "}");
}

static void put_address(struct se_fnv128a *h, const struct se_endpoint_address *a)
{
        const struct se_object_ref *r = a->target_ref;
        put_field(h, "{IP:(string)", a->ip);
        put_field(h, " Hostname:(string)", a->hostname);
        put_ptr_field(h, " NodeName:(*string)", a->node_name);
        put(h, " TargetRef:(*v1.ObjectReference)");
        if (r) {
                put_field(h, "{Kind:(string)", r->kind);
                put_field(h, " Namespace:(string)", r->namespace);
                put_field(h, " Name:(string)", r->name);
                put_field(h, " UID:(types.UID)", r->uid);
                put(h, " APIVersion:(string)");
                put_field(h, " ResourceVersion:(string)", r->resource_version);
                put(h, " FieldPath:(string)}");
        } else {
                put(h, "<nil>");
        }
        put(h, "}");
}

/* a slice: "<nil>" when empty (upstream's repacked lists are nil then) */
static void put_addresses(struct se_fnv128a *h, const struct se_endpoint_address *a, uint32_t n)
{
        put(h, "([]v1.EndpointAddress)");
        if (!n) {
                put(h, "<nil>");
                return;
        }
        put(h, "[");
        for (uint32_t i = 0; i < n; i++) {
                if (i)
                        put(h, " ");
                put_address(h, &a[i]);
        }
        put(h, "]");
}

void endpoints_port_order_key(const struct se_endpoint_port *p, uint8_t out[EP_ORDER_KEY_LEN])
{
        struct se_fnv128a h;
        se_fnv128a_init(&h);
        put(&h, "(v1.EndpointPort)");
        put_port(&h, p);
        se_fnv128a_sum(&h, out);
}

void endpoints_subset_order_key(const struct se_endpoint_subset *s, uint8_t out[EP_ORDER_KEY_LEN])
{
        struct se_fnv128a h;
        se_fnv128a_init(&h);
        put(&h, "(v1.EndpointSubset){Addresses:");
        put_addresses(&h, s->addresses, s->n_addresses);
        put(&h, " NotReadyAddresses:");
        put_addresses(&h, s->not_ready, s->n_not_ready);
        put(&h, " Ports:([]v1.EndpointPort)");
        if (!s->n_ports) {
                put(&h, "<nil>");
        } else {
                put(&h, "[");
                for (uint32_t i = 0; i < s->n_ports; i++) {
                        if (i)
                                put(&h, " ");
                        put_port(&h, &s->ports[i]);
                }
                put(&h, "]");
        }
        put(&h, "}");
        se_fnv128a_sum(&h, out);
}

/* discovery/v1 EndpointPort: every field a pointer, in its own order */
void endpoints_slice_port_order_key(const struct se_slice_port *p, uint8_t out[EP_ORDER_KEY_LEN])
{
        struct se_fnv128a h;
        char num[16];
        se_fnv128a_init(&h);
        put_ptr_field(&h, "(v1.EndpointPort){Name:(*string)", p->name);
        put_ptr_field(&h, " Protocol:(*v1.Protocol)",
                      p->has_protocol ? se_protocol_name(p->protocol) : NULL);
        snprintf(num, sizeof(num), "%" PRId32, p->port);
        put_ptr_field(&h, " Port:(*int32)", p->has_port ? num : NULL);
        put_ptr_field(&h, " AppProtocol:(*string)", p->app_protocol);
        put(&h, "}");
        se_fnv128a_sum(&h, out);
}

struct keyed {
        uint8_t key[EP_ORDER_KEY_LEN];
        uint32_t index;
};

static int cmp_keyed(const void *pa, const void *pb)
{
        const struct keyed *a = pa, *b = pb;
        int c = memcmp(a->key, b->key, sizeof(a->key));
        if (c)
                return c;
        /* equal digests only for equal structs: keep the order stable */
        return (a->index > b->index) - (a->index < b->index);
}

/* Reorders n items of size bytes at v by their keys (k sorted). */
static int apply_order(void *v, size_t size, const struct keyed *k, uint32_t n)
{
        unsigned char *tmp = se_calloc(n, size);
        if (!tmp)
                return -ENOMEM;
        for (uint32_t i = 0; i < n; i++)
                memcpy(tmp + (size_t)i * size, (unsigned char *)v + (size_t)k[i].index * size,
                       size);
        memcpy(v, tmp, (size_t)n * size);
        free(tmp);
        return 0;
}

int endpoints_sort_subsets(struct se_endpoint_subset *subs, uint32_t n)
{
        uint32_t max = n;
        for (uint32_t i = 0; i < n; i++)
                if (subs[i].n_ports > max)
                        max = subs[i].n_ports;
        if (!max)
                return 0;
        struct keyed *k = se_calloc(max, sizeof(*k));
        int r = k ? 0 : -ENOMEM;
        for (uint32_t i = 0; r == 0 && i < n; i++) {
                struct se_endpoint_subset *s = &subs[i];
                for (uint32_t j = 0; j < s->n_ports; j++) {
                        endpoints_port_order_key(&s->ports[j], k[j].key);
                        k[j].index = j;
                }
                qsort(k, s->n_ports, sizeof(*k), cmp_keyed);
                if (s->n_ports > 1)
                        r = apply_order(s->ports, sizeof(*s->ports), k, s->n_ports);
        }
        for (uint32_t i = 0; r == 0 && i < n; i++) {
                endpoints_subset_order_key(&subs[i], k[i].key);
                k[i].index = i;
        }
        if (r == 0) {
                qsort(k, n, sizeof(*k), cmp_keyed);
                if (n > 1)
                        r = apply_order(subs, sizeof(*subs), k, n);
        }
        free(k);
        return r;
}
