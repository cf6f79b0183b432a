/* The proxy's runtime: listeners, one epoll loop per worker thread, the
 * snapshot swap (an epoch every worker acknowledges before the old lookup
 * is freed: no lock on the packet path), metrics. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <svcenv/alloc.h>
#include <svcenv/timeutil.h>

#include "uproxy_worker.h"

#define MAX_EVENTS 128

int uproxy_watch(struct uproxy_worker *w, struct uproxy_handle *h, uint32_t events)
{
        struct epoll_event ev = { .events = events, .data.ptr = h };
        int op = h->events == UINT32_MAX ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
        if (h->events == events)
                return 0;
        if (epoll_ctl(w->epfd, op, h->fd, &ev) < 0)
                return -errno;
        h->events = events;
        return 0;
}

struct uproxy_svc *uproxy_find(struct uproxy_worker *w, const struct sockaddr *dst, int proto)
{
        const struct uproxy_lookup *lk = w->lk;
        if (!lk)
                return NULL;
        const struct se_uproxy_vip *v;
        if (dst->sa_family == AF_INET) {
                const struct sockaddr_in *a = (const struct sockaddr_in *)dst;
                v = se_uproxy_snapshot_find(lk->snap, AF_INET, (const uint8_t *)&a->sin_addr,
                                            ntohs(a->sin_port), proto);
        } else {
                const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)dst;
                const uint8_t *b = a->sin6_addr.s6_addr;
                /* a v4-mapped address (dual-stack socket): look it up as IPv4 */
                if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr))
                        v = se_uproxy_snapshot_find(lk->snap, AF_INET, b + 12, ntohs(a->sin6_port),
                                                    proto);
                else
                        v = se_uproxy_snapshot_find(lk->snap, AF_INET6, b, ntohs(a->sin6_port),
                                                    proto);
        }
        return v ? lk->svcs[v->svc] : NULL;
}

static int listener(int family, int type, uint16_t port, bool transparent)
{
        int fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
        int r = 0;
        struct sockaddr_storage ss = { 0 };
        socklen_t len;
        if (family == AF_INET6) {
                struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
                a->sin6_family = AF_INET6;
                a->sin6_port = htons(port);
                a->sin6_addr = in6addr_any;
                len = sizeof(*a);
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        } else {
                struct sockaddr_in *a = (struct sockaddr_in *)&ss;
                a->sin_family = AF_INET;
                a->sin_port = htons(port);
                len = sizeof(*a);
        }
        if (transparent) { /* TPROXY delivers foreign destinations to it */
                int lvl = family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP;
                int t = family == AF_INET6 ? IPV6_TRANSPARENT : IP_TRANSPARENT;
                int o = family == AF_INET6 ? IPV6_RECVORIGDSTADDR : IP_RECVORIGDSTADDR;
                if (setsockopt(fd, lvl, t, &one, sizeof(one)) < 0 ||
                    setsockopt(fd, lvl, o, &one, sizeof(one)) < 0)
                        r = -errno;
        }
        if (r == 0 && bind(fd, (struct sockaddr *)&ss, len) < 0)
                r = -errno;
        if (r == 0 && type == SOCK_STREAM && listen(fd, 4096) < 0)
                r = -errno;
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}

static int64_t now_mono(void)
{
        return (int64_t)se_now_mono_ns();
}

static void on_epoch(struct uproxy_worker *w)
{
        uproxy_udp_sweep_removed(w);
}

static void *worker_main(void *data)
{
        struct uproxy_worker *w = data;
        struct se_uproxy *up = w->up;
        struct epoll_event evs[MAX_EVENTS];
        while (!atomic_load(&up->stop)) {
                /* the epoch first, then the lookup: a worker that says it saw
                 * epoch E holds a lookup at least as new as E's */
                uint64_t e = atomic_load(&up->epoch);
                w->lk = atomic_load(&up->cur);
                atomic_store(&w->seen, e);
                w->now_ns = now_mono();
                if (e != w->epoch) {
                        w->epoch = e;
                        on_epoch(w);
                }
                int t1 = uproxy_tcp_timers(w), t2 = uproxy_udp_timers(w);
                int timeout = t1 < 0 ? t2 : t2 < 0 ? t1 : t1 < t2 ? t1 : t2;
                if (w->accept_paused_until) {
                        int64_t left = (w->accept_paused_until - w->now_ns) / 1000000 + 1;
                        if (left <= 1) {
                                w->accept_paused_until = 0;
                                for (int f = 0; f < 2; f++)
                                        if (w->tcp[f].fd >= 0)
                                                uproxy_watch(w, &w->tcp[f], EPOLLIN);
                        } else if (timeout < 0 || left < timeout) {
                                timeout = (int)left;
                        }
                }
                if (w->busy)
                        timeout = 0;
                int n = epoll_wait(w->epfd, evs, MAX_EVENTS, timeout);
                if (n < 0 && errno != EINTR)
                        break;
                w->now_ns = now_mono();
                for (int i = 0; i < n; i++) {
                        struct uproxy_handle *h = evs[i].data.ptr;
                        switch (h->type) {
                        case UH_WAKE: {
                                uint64_t v;
                                (void)!read(h->fd, &v, sizeof(v));
                                break;
                        }
                        case UH_TCP_LISTEN:
                                uproxy_tcp_accept(w, h);
                                break;
                        case UH_UDP_LISTEN:
                                uproxy_udp_listen(w, h);
                                break;
                        case UH_TCP_CLIENT:
                        case UH_TCP_BACKEND:
                                uproxy_tcp_event(w, h, evs[i].events);
                                break;
                        case UH_UDP_CLIENT:
                        case UH_UDP_BACKEND:
                                uproxy_udp_event(w, h, evs[i].events);
                                break;
                        }
                }
                uproxy_tcp_more(w);
                uproxy_tcp_reap(w);
                uproxy_udp_reap(w);
        }
        uproxy_tcp_close_all(w);
        uproxy_udp_close_all(w);
        uproxy_tcp_reap(w);
        uproxy_udp_reap(w);
        return NULL;
}

static void lookup_free(struct uproxy_lookup *lk)
{
        if (!lk)
                return;
        for (uint32_t i = 0; lk->snap && i < lk->snap->n_svcs; i++)
                uproxy_svc_unref(lk->svcs[i]);
        free(lk->svcs);
        se_uproxy_snapshot_free(lk->snap);
        free(lk);
}

static void worker_release(struct uproxy_worker *w)
{
        struct uproxy_handle *hs[] = { &w->wake, &w->tcp[0], &w->tcp[1], &w->udp[0], &w->udp[1] };
        for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
                if (hs[i]->fd >= 0)
                        close(hs[i]->fd);
        if (w->epfd >= 0)
                close(w->epfd);
        for (unsigned i = 0; i < w->n_pipes; i++) {
                close(w->pipes[i][0]);
                close(w->pipes[i][1]);
        }
        se_hashmap_release(&w->udp_sessions);
        free(w->udp_buf);
}

static int worker_init(struct uproxy_worker *w, struct se_uproxy *up)
{
        memset(w, 0, sizeof(*w));
        w->up = up;
        w->epfd = -1;
        struct uproxy_handle *hs[] = { &w->wake, &w->tcp[0], &w->tcp[1], &w->udp[0], &w->udp[1] };
        for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++) {
                hs[i]->fd = -1;
                hs[i]->events = UINT32_MAX;
        }
        if ((w->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
                return -errno;
        if (!(w->udp_buf = se_malloc((size_t)UPROXY_UDP_BATCH * UPROXY_UDP_MAX)))
                return -ENOMEM;
        w->wake.type = UH_WAKE;
        if ((w->wake.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
                return -errno;
        int r = uproxy_watch(w, &w->wake, EPOLLIN);
        for (int f = 0; r == 0 && f < (up->cfg.ipv6 ? 2 : 1); f++) {
                int fam = f ? AF_INET6 : AF_INET;
                w->tcp[f].type = UH_TCP_LISTEN;
                w->udp[f].type = UH_UDP_LISTEN;
                if ((r = w->tcp[f].fd = listener(fam, SOCK_STREAM, up->cfg.port, false)) < 0)
                        break;
                if ((r = w->udp[f].fd = listener(fam, SOCK_DGRAM, up->cfg.port, true)) < 0)
                        break;
                if ((r = uproxy_watch(w, &w->tcp[f], EPOLLIN)) == 0)
                        r = uproxy_watch(w, &w->udp[f], EPOLLIN);
        }
        return r < 0 ? r : 0;
}

static uint64_t raise_fd_limit(void)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return 0;
        if (rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void)setrlimit(RLIMIT_NOFILE, &rl);
                (void)getrlimit(RLIMIT_NOFILE, &rl);
        }
        return rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
}

void se_uproxy_fd_budget(const struct se_uproxy *up, uint64_t *ret_limit, uint64_t *ret_conns)
{
        /* listeners, epoll, logs; pooled pipes */
        uint64_t reserve = 64 + (8 + 2 * UPROXY_PIPE_POOL) * (uint64_t)up->n_workers;
        *ret_limit = up->fd_limit;
        *ret_conns = up->fd_limit > reserve ? (up->fd_limit - reserve) / 6 : 0;
}

int se_uproxy_start(const struct se_uproxy_config *cfg, struct se_uproxy **ret)
{
        if (cfg->udp_timeout_ns <= 0)
                return -EINVAL;
        struct se_uproxy *up = se_calloc(1, sizeof(*up));
        if (!up)
                return -ENOMEM;
        up->cfg = *cfg;
        if (up->cfg.penalty_ns <= 0)
                up->cfg.penalty_ns = 5000000000LL;
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        up->n_workers = cfg->threads ? cfg->threads : cpus > 0 ? (unsigned)cpus : 1;
        if (up->n_workers > 256)
                up->n_workers = 256;
        pthread_mutex_init(&up->mu, NULL);
        up->fd_limit = raise_fd_limit();
        int r = 0;
        if (!(up->workers = se_calloc(up->n_workers, sizeof(*up->workers))))
                r = -ENOMEM;
        for (unsigned i = 0; r == 0 && i < up->n_workers; i++)
                r = worker_init(&up->workers[i], up);
        for (unsigned i = 0; r == 0 && i < up->n_workers; i++) {
                struct uproxy_worker *w = &up->workers[i];
                if ((r = -pthread_create(&w->tid, NULL, worker_main, w)) == 0)
                        w->started = true;
        }
        if (r < 0) {
                se_uproxy_stop(up);
                return r;
        }
        *ret = up;
        return 0;
}

static void wake_all(struct se_uproxy *up)
{
        uint64_t one = 1;
        for (unsigned i = 0; i < up->n_workers; i++)
                (void)!write(up->workers[i].wake.fd, &one, sizeof(one));
}

int se_uproxy_update(struct se_uproxy *up, struct se_uproxy_snapshot *s)
{
        if (!s)
                return 0;
        struct uproxy_lookup *lk = se_calloc(1, sizeof(*lk));
        if (!lk || !(lk->svcs = se_calloc(s->n_svcs ? s->n_svcs : 1, sizeof(*lk->svcs)))) {
                free(lk);
                se_uproxy_snapshot_free(s);
                return -ENOMEM;
        }
        lk->snap = s;
        pthread_mutex_lock(&up->mu);
        uint64_t gen = ++up->gen;
        int r = 0;
        for (uint32_t i = 0; i < s->n_svcs; i++) {
                const struct se_uproxy_svc *sv = &s->svcs[i];
                struct uproxy_svc *st = se_hashmap_get(&up->svcs, sv->key);
                if (!st) {
                        if (!(st = uproxy_svc_new(sv->key)) ||
                            se_hashmap_put(&up->svcs, st->key, st, NULL) < 0) {
                                uproxy_svc_unref(st);
                                r = -ENOMEM;
                                continue;
                        }
                }
                if (uproxy_svc_set(st, sv) < 0)
                        r = -ENOMEM;
                st->gen = gen;
                lk->svcs[i] = uproxy_svc_ref(st);
        }
        /* service ports gone: their endpoints end (UDP sessions at once) */
        for (size_t it = 0;;) {
                const char *k;
                void *v;
                if (!se_hashmap_next(&up->svcs, &it, &k, &v))
                        break;
                struct uproxy_svc *st = v;
                if (st->gen == gen)
                        continue;
                se_hashmap_remove(&up->svcs, st->key);
                uproxy_svc_clear(st);
                uproxy_svc_unref(st);
                it = 0;
        }
        pthread_mutex_unlock(&up->mu);
        if (r < 0) { /* a service without its state would find no endpoint */
                for (uint32_t i = 0; i < s->n_svcs; i++)
                        if (!lk->svcs[i])
                                lk->svcs[i] = uproxy_svc_new(s->svcs[i].key);
        }
        for (uint32_t i = 0; i < s->n_svcs; i++)
                if (!lk->svcs[i]) { /* still out of memory: keep the old lookup */
                        lookup_free(lk);
                        return -ENOMEM;
                }
        struct uproxy_lookup *old = atomic_exchange(&up->cur, lk);
        uint64_t e = atomic_fetch_add(&up->epoch, 1) + 1;
        wake_all(up);
        for (unsigned i = 0; i < up->n_workers; i++)
                while (up->workers[i].started && atomic_load(&up->workers[i].seen) < e &&
                       !atomic_load(&up->stop)) {
                        struct timespec ts = { 0, 200000 };
                        nanosleep(&ts, NULL);
                }
        lookup_free(old);
        return r;
}

struct se_uproxy *se_uproxy_stop(struct se_uproxy *up)
{
        if (!up)
                return NULL;
        atomic_store(&up->stop, true);
        if (up->workers) {
                wake_all(up);
                for (unsigned i = 0; i < up->n_workers; i++)
                        if (up->workers[i].started)
                                pthread_join(up->workers[i].tid, NULL);
                for (unsigned i = 0; i < up->n_workers; i++)
                        worker_release(&up->workers[i]);
                free(up->workers);
        }
        lookup_free(atomic_load(&up->cur));
        for (size_t it = 0;;) {
                const char *k;
                void *v;
                if (!se_hashmap_next(&up->svcs, &it, &k, &v))
                        break;
                se_hashmap_remove(&up->svcs, k);
                uproxy_svc_unref(v);
                it = 0;
        }
        se_hashmap_release(&up->svcs);
        pthread_mutex_destroy(&up->mu);
        free(up);
        return NULL;
}

static const char *family_of(const char *key)
{
        size_t n = strlen(key);
        return n > 3 && strcmp(key + n - 3, "/v6") == 0 ? "IPv6" : "IPv4";
}

static const char *proto_of(int proto)
{
        return proto == IPPROTO_UDP ? "UDP" : "TCP";
}

int se_uproxy_metrics(struct se_uproxy *up, struct se_strbuf *out)
{
        static const struct {
                const char *name, *type, *help;
        } m[] = {
                { "svcenv_proxy_connections_active", "gauge",
                  "Open client connections (TCP) or sessions (UDP) of a service port." },
                { "svcenv_proxy_connections_total", "counter",
                  "Client connections (TCP) or sessions (UDP) accepted for a service port." },
                { "svcenv_proxy_connect_retries_total", "counter",
                  "Connect attempts to a further endpoint after one failed." },
                { "svcenv_proxy_connect_failures_total", "counter",
                  "Client connections closed because no endpoint could be connected." },
        };
        pthread_mutex_lock(&up->mu);
        for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
                se_strbuf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", m[k].name, m[k].help,
                                 m[k].name, m[k].type);
                for (size_t it = 0;;) {
                        const char *key;
                        void *v;
                        if (!se_hashmap_next(&up->svcs, &it, &key, &v))
                                break;
                        struct uproxy_svc *s = v;
                        atomic_ulong *c[] = { &s->conns_active, &s->conns_total, &s->retries,
                                              &s->failures };
                        se_strbuf_printf(out,
                                         "%s{service=\"%s\",protocol=\"%s\",ip_family=\"%s\"} "
                                         "%lu\n",
                                         m[k].name, s->spn, proto_of(s->proto), family_of(s->key),
                                         atomic_load(c[k]));
                }
        }
        se_strbuf_puts(out, "# HELP svcenv_proxy_endpoint_connections Connections per endpoint "
                            "as IPVS counts them (active: established; inactive: the others).\n"
                            "# TYPE svcenv_proxy_endpoint_connections gauge\n");
        for (size_t it = 0;;) {
                const char *key;
                void *v;
                if (!se_hashmap_next(&up->svcs, &it, &key, &v))
                        break;
                struct uproxy_svc *s = v;
                pthread_mutex_lock(&s->mu);
                for (uint32_t i = 0; i < s->n_eps; i++)
                        for (int st = 0; st < 2; st++)
                                se_strbuf_printf(
                                        out,
                                        "svcenv_proxy_endpoint_connections{service=\"%s\","
                                        "protocol=\"%s\",endpoint=\"%s\",state=\"%s\"} %ld\n",
                                        s->spn, proto_of(s->proto), s->eps[i]->str,
                                        st ? "inactive" : "active",
                                        atomic_load(st ? &s->eps[i]->inactive :
                                                         &s->eps[i]->active));
                pthread_mutex_unlock(&s->mu);
        }
        uproxy_decision_metrics(&up->svcs, out);
        pthread_mutex_unlock(&up->mu);
        uint64_t limit, conns;
        se_uproxy_fd_budget(up, &limit, &conns);
        se_strbuf_printf(out,
                         "# HELP svcenv_proxy_fd_limit The open-file limit of the proxy.\n"
                         "# TYPE svcenv_proxy_fd_limit gauge\nsvcenv_proxy_fd_limit %llu\n"
                         "# HELP svcenv_proxy_tcp_connections_max TCP connections the fd limit "
                         "allows (6 fds each).\n# TYPE svcenv_proxy_tcp_connections_max gauge\n"
                         "svcenv_proxy_tcp_connections_max %llu\n"
                         "# HELP svcenv_proxy_accept_emfile_total Accepts refused for want of "
                         "fds (accepting pauses 100 ms).\n"
                         "# TYPE svcenv_proxy_accept_emfile_total counter\n"
                         "svcenv_proxy_accept_emfile_total %lu\n",
                         (unsigned long long)limit, (unsigned long long)conns,
                         atomic_load(&up->accept_emfile));
        return se_strbuf_failed(out) ? -ENOMEM : 0;
}
