/* Per service-port balancing: endpoint lists kept across snapshots, the
 * endpoint choice (round robin for now, behind uproxy_pick), ClientIP
 * affinity as kube-proxy's userspace balancer, the retry timeouts. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/macro.h>

#include "uproxy_internal.h"

struct uproxy_ep *uproxy_ep_ref(struct uproxy_ep *ep)
{
        atomic_fetch_add(&ep->refs, 1);
        return ep;
}

void uproxy_ep_unref(struct uproxy_ep *ep)
{
        if (ep && atomic_fetch_sub(&ep->refs, 1) == 1)
                free(ep);
}

struct uproxy_svc *uproxy_svc_new(const char *key)
{
        struct uproxy_svc *s = se_calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        atomic_init(&s->refs, 1);
        pthread_mutex_init(&s->mu, NULL);
        snprintf(s->key, sizeof(s->key), "%s", key);
        return s;
}

struct uproxy_svc *uproxy_svc_ref(struct uproxy_svc *s)
{
        atomic_fetch_add(&s->refs, 1);
        return s;
}

static void drop_affinity_of(struct uproxy_svc *s, const struct uproxy_ep *ep)
{
        size_t it = 0;
        const char *k;
        void *v;
        while (se_hashmap_next(&s->aff, &it, &k, &v)) {
                struct uproxy_aff *a = v;
                if (ep && a->ep != ep)
                        continue;
                se_hashmap_remove(&s->aff, a->key);
                free(a);
                it = 0; /* removal shifts slots: start over */
        }
}

void uproxy_svc_clear(struct uproxy_svc *s)
{
        pthread_mutex_lock(&s->mu);
        drop_affinity_of(s, NULL);
        for (uint32_t i = 0; i < s->n_eps; i++) {
                atomic_store(&s->eps[i]->removed, true);
                uproxy_ep_unref(s->eps[i]);
        }
        free(s->eps);
        s->eps = NULL;
        s->n_eps = 0;
        s->cursor = 0;
        s->lb = se_lb_free(s->lb);
        free(s->lbd);
        s->lbd = NULL;
        s->lb_spec[0] = 0;
        atomic_store(&s->removed, true);
        pthread_mutex_unlock(&s->mu);
}

void uproxy_svc_unref(struct uproxy_svc *s)
{
        if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
                return;
        uproxy_svc_clear(s);
        se_hashmap_release(&s->aff);
        pthread_mutex_destroy(&s->mu);
        free(s);
}

static struct uproxy_ep *find_ep(struct uproxy_ep **eps, uint32_t n, const char *str)
{
        for (uint32_t lo = 0, hi = n; lo < hi;) { /* both lists sorted by str */
                uint32_t mid = lo + (hi - lo) / 2;
                int c = strcmp(eps[mid]->str, str);
                if (c == 0)
                        return eps[mid];
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return NULL;
}

/* The scheduler's destination for endpoint ep: its address and port; every
 * endpoint weighs 1, as kube-proxy's IPVS real servers did. */
static void lb_dest_of(const struct uproxy_ep *ep, struct se_lb_dest *d)
{
        memset(d, 0, sizeof(*d));
        d->weight = 1;
        if (ep->addr.ss_family == AF_INET6) {
                const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ep->addr;
                memcpy(d->addr, &a->sin6_addr, 16);
                d->addr_len = 16;
                d->port = ntohs(a->sin6_port);
        } else {
                const struct sockaddr_in *a = (const struct sockaddr_in *)&ep->addr;
                memcpy(d->addr, &a->sin_addr, 4);
                d->addr_len = 4;
                d->port = ntohs(a->sin_port);
        }
}

/* (Re)makes s's scheduler for its endpoint list (s->mu held): a new one
 * when the annotation changed, else the same one told of the new list, so
 * rr keeps its place and sh/mh refill their tables as IPVS does. */
static int scheduler_update(struct uproxy_svc *s)
{
        const char *spec = s->scheduler[0] ? s->scheduler : "rr";
        if (!s->lb || strcmp(spec, s->lb_spec) != 0) {
                enum se_lb_kind kind;
                unsigned flags;
                if (se_lb_parse(spec, &kind, &flags) < 0) /* checked by the snapshot */
                        kind = SE_LB_RR, flags = 0;
                se_lb_free(s->lb);
                s->lb = se_lb_new(kind, flags, (uint64_t)(uintptr_t)s ^ 0x5ee0);
                if (!s->lb)
                        return -ENOMEM;
                snprintf(s->lb_spec, sizeof(s->lb_spec), "%s", spec);
                /* the counts are the scheduler's (its label): a new one starts at 0 */
                for (uint32_t i = 0; i < s->n_eps; i++) {
                        atomic_store(&s->eps[i]->picked, 0);
                        atomic_store(&s->eps[i]->fallback, 0);
                }
        }
        struct se_lb_dest *d = se_reallocarray(s->lbd, s->n_eps ? s->n_eps : 1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        s->lbd = d;
        for (uint32_t i = 0; i < s->n_eps; i++)
                lb_dest_of(s->eps[i], &d[i]);
        return se_lb_update(s->lb, d, s->n_eps);
}

int uproxy_svc_set(struct uproxy_svc *s, const struct se_uproxy_svc *svc)
{
        struct uproxy_ep **eps = se_calloc(svc->n_eps ? svc->n_eps : 1, sizeof(*eps));
        if (!eps)
                return -ENOMEM;
        pthread_mutex_lock(&s->mu);
        uint32_t n = 0;
        for (uint32_t i = 0; i < svc->n_eps; i++) {
                const struct se_uproxy_ep *src = &svc->eps[i];
                struct uproxy_ep *ep = find_ep(s->eps, s->n_eps, src->str);
                if (ep) {
                        uproxy_ep_ref(ep);
                } else if ((ep = se_calloc(1, sizeof(*ep)))) {
                        atomic_init(&ep->refs, 1);
                        memcpy(&ep->addr, &src->addr, sizeof(ep->addr));
                        ep->addr_len = src->addr_len;
                        snprintf(ep->str, sizeof(ep->str), "%s", src->str);
                } else {
                        continue; /* out of memory: that endpoint is left out */
                }
                ep->ready = src->ready;
                ep->serving = src->serving;
                ep->terminating = src->terminating;
                eps[n++] = ep;
        }
        for (uint32_t i = 0; i < s->n_eps; i++) {
                struct uproxy_ep *old = s->eps[i];
                if (!find_ep(eps, n, old->str)) {
                        drop_affinity_of(s, old); /* removeStaleAffinity */
                        atomic_store(&old->removed, true);
                }
                uproxy_ep_unref(old);
        }
        free(s->eps);
        s->eps = eps;
        /* the cursor stays where it was (kube-proxy reshuffled and reset to
         * 0 on every change, which restarts the rotation for everyone) */
        if (n)
                s->cursor %= n;
        else
                s->cursor = 0;
        s->n_eps = n;
        snprintf(s->spn, sizeof(s->spn), "%s", svc->spn);
        memcpy(s->scheduler, svc->scheduler, sizeof(s->scheduler));
        s->proto = svc->proto;
        if (s->affinity && !svc->affinity)
                drop_affinity_of(s, NULL);
        s->affinity = svc->affinity;
        s->affinity_timeout =
                svc->affinity_timeout > 0 ? svc->affinity_timeout : UPROXY_DEFAULT_AFFINITY_S;
        int r = scheduler_update(s);
        atomic_store(&s->removed, false);
        pthread_mutex_unlock(&s->mu);
        return r;
}

bool uproxy_affinity_alive(int64_t last_used_ns, int64_t now_ns, int32_t ttl_s)
{
        /* Go's int(time.Since(t).Seconds()): truncated toward zero */
        int64_t age_s = (now_ns - last_used_ns) / 1000000000LL;
        return age_s < ttl_s;
}

void uproxy_affinity_expire(struct uproxy_svc *s, int64_t now_ns)
{
        size_t it = 0;
        const char *k;
        void *v;
        while (se_hashmap_next(&s->aff, &it, &k, &v)) {
                struct uproxy_aff *a = v;
                if (uproxy_affinity_alive(a->last_used_ns, now_ns, s->affinity_timeout))
                        continue;
                se_hashmap_remove(&s->aff, a->key);
                free(a);
                it = 0;
        }
}

int64_t uproxy_attempt_timeout_ns(unsigned k)
{
        return k < UPROXY_MAX_ATTEMPTS ? 250000000LL << k : -1;
}

void uproxy_addr_ip(const struct sockaddr *sa, char *buf, size_t size)
{
        if (sa->sa_family == AF_INET6) {
                const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)sa;
                inet_ntop(AF_INET6, &a6->sin6_addr, buf, (socklen_t)size);
        } else {
                const struct sockaddr_in *a4 = (const struct sockaddr_in *)sa;
                inet_ntop(AF_INET, &a4->sin_addr, buf, (socklen_t)size);
        }
}

static bool was_tried(const struct uproxy_tried *t, const struct uproxy_ep *ep)
{
        for (unsigned i = 0; t && i < t->n; i++)
                if (t->ep[i] == ep)
                        return true;
        return false;
}

/* Round robin from the cursor over the endpoints that may take new
 * connections; those in the penalty box only when no other is left. */
static struct uproxy_ep *next_rr(struct uproxy_svc *s, const struct uproxy_tried *tried,
                                 int64_t now_ns)
{
        bool any_ready = false;
        for (uint32_t i = 0; i < s->n_eps && !any_ready; i++)
                any_ready = s->eps[i]->ready;
        for (int pass = 0; pass < 2; pass++)
                for (uint32_t k = 0; k < s->n_eps; k++) {
                        uint32_t i = (s->cursor + k) % s->n_eps;
                        struct uproxy_ep *ep = s->eps[i];
                        /* terminating endpoints take no new connections unless
                         * nothing is ready (kube-proxy's serving-terminating
                         * fallback) */
                        bool usable = any_ready ? ep->ready : ep->serving && ep->terminating;
                        if (!usable || was_tried(tried, ep))
                                continue;
                        if (pass == 0 && ep->penalty_until_ns > now_ns)
                                continue;
                        s->cursor = (i + 1) % s->n_eps;
                        return ep;
                }
        return NULL;
}

/* What a packet offers the hashing schedulers: the client's address and
 * port, and the VIP it asked for (dh). */
static void lb_key_of(const struct sockaddr *client, const struct sockaddr *vip,
                      struct se_lb_key *k)
{
        memset(k, 0, sizeof(*k));
        if (!client)
                return;
        if (client->sa_family == AF_INET6) {
                const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)client;
                memcpy(k->saddr, &a->sin6_addr, 16);
                k->addr_len = 16;
                k->sport = ntohs(a->sin6_port);
                if (vip && vip->sa_family == AF_INET6)
                        memcpy(k->daddr, &((const struct sockaddr_in6 *)vip)->sin6_addr, 16);
        } else {
                const struct sockaddr_in *a = (const struct sockaddr_in *)client;
                memcpy(k->saddr, &a->sin_addr, 4);
                k->addr_len = 4;
                k->sport = ntohs(a->sin_port);
                if (vip && vip->sa_family == AF_INET)
                        memcpy(k->daddr, &((const struct sockaddr_in *)vip)->sin_addr, 4);
        }
}

/* The scheduler's choice among the endpoints that may take the connection
 * (the others marked overloaded, which every scheduler skips); those in the
 * penalty box only when no other is left. */
static struct uproxy_ep *next_scheduled(struct uproxy_svc *s, const struct sockaddr *client,
                                        const struct sockaddr *vip,
                                        const struct uproxy_tried *tried, int64_t now_ns)
{
        if (!s->lb || !s->n_eps)
                return NULL;
        bool any_ready = false;
        for (uint32_t i = 0; i < s->n_eps && !any_ready; i++)
                any_ready = s->eps[i]->ready;
        struct se_lb_key key;
        lb_key_of(client, vip, &key);
        for (int pass = 0; pass < 2; pass++) {
                bool any = false;
                for (uint32_t i = 0; i < s->n_eps; i++) {
                        const struct uproxy_ep *ep = s->eps[i];
                        bool usable = any_ready ? ep->ready : ep->serving && ep->terminating;
                        bool skip = !usable || was_tried(tried, ep) ||
                                    (pass == 0 && ep->penalty_until_ns > now_ns);
                        s->lbd[i].overloaded = skip;
                        s->lbd[i].active = (uint32_t)atomic_load(&ep->active);
                        s->lbd[i].inactive = (uint32_t)atomic_load(&ep->inactive);
                        any |= !skip;
                }
                if (!any)
                        continue;
                int at = se_lb_pick(s->lb, s->lbd, s->n_eps, &key);
                if (at >= 0) {
                        atomic_fetch_add_explicit(&s->eps[at]->picked, 1, memory_order_relaxed);
                        return s->eps[at];
                }
                if (tried && tried->n) { /* a retry the hash cannot place */
                        struct uproxy_ep *ep = next_rr(s, tried, now_ns);
                        if (ep)
                                atomic_fetch_add_explicit(&ep->fallback, 1, memory_order_relaxed);
                        return ep;
                }
                if (pass == 0) /* the penalty box only orders: the hash's endpoint is tried */
                        continue;
                return NULL; /* sh/dh/mh without fallback: as IPVS, no destination */
        }
        return NULL;
}

struct uproxy_ep *uproxy_pick(struct uproxy_svc *s, const struct sockaddr *client,
                              const struct sockaddr *vip, const struct uproxy_tried *tried,
                              bool affinity_reset, int64_t now_ns)
{
        char ip[48];
        struct uproxy_ep *ep = NULL;
        struct uproxy_aff *a = NULL;
        pthread_mutex_lock(&s->mu);
        if (s->affinity && client) {
                uproxy_addr_ip(client, ip, sizeof(ip));
                a = se_hashmap_get(&s->aff, ip);
                if (a && !affinity_reset && !was_tried(tried, a->ep) &&
                    uproxy_affinity_alive(a->last_used_ns, now_ns, s->affinity_timeout)) {
                        a->last_used_ns = now_ns;
                        ep = uproxy_ep_ref(a->ep);
                        goto out;
                }
        }
        ep = next_scheduled(s, client, vip, tried, now_ns);
        if (!ep)
                goto out;
        uproxy_ep_ref(ep);
        if (s->affinity && client) {
                if (!a && s->aff.n < UPROXY_MAX_AFFINITY && (a = se_calloc(1, sizeof(*a)))) {
                        snprintf(a->key, sizeof(a->key), "%s", ip);
                        if (se_hashmap_put(&s->aff, a->key, a, NULL) < 0) {
                                free(a);
                                a = NULL;
                        }
                }
                if (a) {
                        a->ep = ep;
                        a->last_used_ns = now_ns;
                }
        }
out:
        pthread_mutex_unlock(&s->mu);
        return ep;
}

void uproxy_penalize(struct uproxy_svc *s, struct uproxy_ep *ep, int64_t now_ns, int64_t penalty_ns)
{
        pthread_mutex_lock(&s->mu);
        ep->penalty_until_ns = now_ns + penalty_ns;
        pthread_mutex_unlock(&s->mu);
}
