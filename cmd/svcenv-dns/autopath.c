/* --autopath: answer the first query of a pod's ndots:5 search walk with
 * the final result, as CoreDNS's autopath does, without CoreDNS's price (a
 * full watch of every Pod behind `pods verified`).
 *
 * The client's namespace comes from its source address through a pod-IP ->
 * namespace index: a flat hash table of addresses and interned namespace
 * names, rebuilt with the zone and handed to the workers the same way
 * (one atomic exchange per worker). An address two namespaces claim (pods
 * on the host network share their node's) maps to nothing: no autopath for
 * it rather than a wrong one (CoreDNS #7120). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/log.h>
#include <svcenv/parse.h>

#include "dnsd.h"

struct slot {
        uint8_t addr[16];
        uint8_t family; /* 0: empty */
        const char *ns; /* NULL: ambiguous */
};

struct dnsd_podindex {
        atomic_int refs;
        size_t mask;
        struct slot *slots;
        char **names; /* the namespace strings, owned */
        size_t n_names;
};

static uint64_t addr_hash(const uint8_t *a, int family)
{
        uint64_t h = 1469598103934665603ull ^ (uint64_t)family;
        for (int i = 0; i < (family == AF_INET ? 4 : 16); i++)
                h = (h ^ a[i]) * 1099511628211ull;
        return h;
}

struct dnsd_podindex *dnsd_podindex_ref(struct dnsd_podindex *x)
{
        if (x)
                atomic_fetch_add(&x->refs, 1);
        return x;
}

struct dnsd_podindex *dnsd_podindex_unref(struct dnsd_podindex *x)
{
        if (x && atomic_fetch_sub(&x->refs, 1) == 1) {
                for (size_t i = 0; i < x->n_names; i++)
                        free(x->names[i]);
                free(x->names);
                free(x->slots);
                free(x);
        }
        return NULL;
}

const char *dnsd_podindex_lookup(const struct dnsd_podindex *x, int family, const uint8_t *addr)
{
        if (!x || !family)
                return NULL;
        size_t n = family == AF_INET ? 4 : 16;
        for (size_t i = addr_hash(addr, family) & x->mask;; i = (i + 1) & x->mask) {
                const struct slot *s = &x->slots[i];
                if (!s->family)
                        return NULL;
                if (s->family == family && memcmp(s->addr, addr, n) == 0)
                        return s->ns;
        }
}

static void insert(struct dnsd_podindex *x, const struct se_ip *ip, const char *ns)
{
        int family = ip->family == SE_IPV4 ? AF_INET : AF_INET6;
        size_t n = family == AF_INET ? 4 : 16;
        for (size_t i = addr_hash(ip->addr, family) & x->mask;; i = (i + 1) & x->mask) {
                struct slot *s = &x->slots[i];
                if (!s->family) {
                        memcpy(s->addr, ip->addr, n);
                        s->family = (uint8_t)family;
                        s->ns = ns;
                        return;
                }
                if (s->family == family && memcmp(s->addr, ip->addr, n) == 0) {
                        if (s->ns && strcmp(s->ns, ns) != 0)
                                s->ns = NULL; /* claimed by two namespaces */
                        return;
                }
        }
}

static int cmp_name(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Pods that hold their address: not finished, not being deleted. */
static bool holds_ip(const struct se_pod *p)
{
        if (p->obj.meta.deletion_timestamp)
                return false;
        return !p->phase || (strcmp(p->phase, "Succeeded") != 0 && strcmp(p->phase, "Failed") != 0);
}

int dnsd_podindex_build(const struct se_store *st, struct dnsd_podindex **ret)
{
        *ret = NULL;
        struct dnsd_podindex *x = calloc(1, sizeof(*x));
        if (!x)
                return -ENOMEM;
        atomic_init(&x->refs, 1);
        se_store_rdlock(st);
        const struct se_object **pods = NULL, **nss = NULL;
        long np = se_store_list_unordered(st, SE_KIND_POD, NULL, &pods);
        long nn = se_store_list(st, SE_KIND_NAMESPACE, NULL, &nss); /* sorted by name */
        int r = np < 0 || nn < 0 ? -ENOMEM : 0;
        size_t want = 16;
        while (r == 0 && want < (size_t)np * 4 + 16) /* two IPs a pod, half full */
                want <<= 1;
        if (r == 0 && (!(x->slots = calloc(want, sizeof(*x->slots))) ||
                       !(x->names = calloc((size_t)(nn > 0 ? nn : 1), sizeof(char *)))))
                r = -ENOMEM;
        x->mask = want - 1;
        /* namespace strings copied once, shared by their pods */
        for (long i = 0; r == 0 && i < nn; i++)
                if (!(x->names[x->n_names++] = strdup(nss[i]->meta.name)))
                        r = -ENOMEM;
        for (long i = 0; r == 0 && i < np; i++) {
                const struct se_pod *p = se_pod_of(pods[i]);
                if (!p || !holds_ip(p))
                        continue;
                char *const *found = bsearch(&p->obj.meta.namespace, x->names, x->n_names,
                                             sizeof(char *), cmp_name);
                const char *ns = found ? *found : NULL;
                if (!ns)
                        continue; /* its namespace is gone: no search path */
                for (uint32_t k = 0; k < p->pod_ips.n + 1; k++) {
                        const char *s = k < p->pod_ips.n ? p->pod_ips.v[k] : p->pod_ip;
                        struct se_ip ip;
                        if (s && se_parse_ip(s, &ip) == 0)
                                insert(x, &ip, ns);
                }
        }
        se_store_unlock(st);
        free(pods);
        free(nss);
        if (r < 0) {
                dnsd_podindex_unref(x);
                return r;
        }
        *ret = x;
        return 0;
}
