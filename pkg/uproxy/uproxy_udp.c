/* UDP through the proxy: TPROXY hands the first datagram of a client to the
 * listener with its VIP:port (IP_ORIGDSTADDR). A session then has two
 * connected sockets: one to the endpoint, and a transparent one bound to
 * the VIP:port and connected to the client, which answers from the VIP and
 * (being the better socket match) receives the client's next datagrams.
 * Datagrams move in batches (recvmmsg/sendmmsg) of up to 64 KiB each; a
 * session idle for --udp-timeout ends, and so does one whose endpoint left. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <svcenv/alloc.h>

#include "uproxy_worker.h"

struct uproxy_usess {
        struct uproxy_worker *w;
        struct uproxy_handle hc, hb; /* client side (at the VIP), endpoint side */
        char key[128]; /* "client|vip" */
        struct uproxy_svc *svc;
        struct uproxy_ep *ep;
        int64_t last_ns;
        bool closed;
        struct uproxy_usess *prev, *next; /* LRU, then the dead list */
};

static void addr_key(const struct sockaddr_storage *a, char *buf, size_t size)
{
        char ip[INET6_ADDRSTRLEN];
        unsigned port;
        if (a->ss_family == AF_INET6) {
                const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)a;
                inet_ntop(AF_INET6, &a6->sin6_addr, ip, sizeof(ip));
                port = ntohs(a6->sin6_port);
        } else {
                const struct sockaddr_in *a4 = (const struct sockaddr_in *)a;
                inet_ntop(AF_INET, &a4->sin_addr, ip, sizeof(ip));
                port = ntohs(a4->sin_port);
        }
        snprintf(buf, size, "%s/%u", ip, port);
}

static void lru_unlink(struct uproxy_worker *w, struct uproxy_usess *s)
{
        if (s->prev)
                s->prev->next = s->next;
        else
                w->lru_head = s->next;
        if (s->next)
                s->next->prev = s->prev;
        else
                w->lru_tail = s->prev;
        s->prev = s->next = NULL;
}

static void lru_append(struct uproxy_worker *w, struct uproxy_usess *s)
{
        s->prev = w->lru_tail;
        s->next = NULL;
        if (w->lru_tail)
                w->lru_tail->next = s;
        else
                w->lru_head = s;
        w->lru_tail = s;
}

static void touch(struct uproxy_usess *s)
{
        s->last_ns = s->w->now_ns;
        if (s->w->lru_tail != s) {
                lru_unlink(s->w, s);
                lru_append(s->w, s);
        }
}

static void sess_close(struct uproxy_usess *s)
{
        struct uproxy_worker *w = s->w;
        if (s->closed)
                return;
        s->closed = true;
        lru_unlink(w, s);
        se_hashmap_remove(&w->udp_sessions, s->key);
        if (s->hc.fd >= 0)
                close(s->hc.fd);
        if (s->hb.fd >= 0)
                close(s->hb.fd);
        atomic_fetch_sub(&s->ep->active, 1);
        atomic_fetch_sub(&s->svc->conns_active, 1);
        s->next = w->udp_dead;
        w->udp_dead = s;
}

void uproxy_udp_reap(struct uproxy_worker *w)
{
        while (w->udp_dead) {
                struct uproxy_usess *s = w->udp_dead;
                w->udp_dead = s->next;
                uproxy_ep_unref(s->ep);
                uproxy_svc_unref(s->svc);
                free(s);
        }
}

static int client_socket(const struct sockaddr_storage *vip, const struct sockaddr_storage *client)
{
        int fam = vip->ss_family;
        int fd = socket(fam, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        int one = 1;
        socklen_t len = fam == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
        /* bound to the VIP (not ours: transparent) so that answers come from it */
        if (setsockopt(fd, fam == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP,
                       fam == AF_INET6 ? IPV6_TRANSPARENT : IP_TRANSPARENT, &one,
                       sizeof(one)) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            bind(fd, (const struct sockaddr *)vip, len) < 0 ||
            connect(fd, (const struct sockaddr *)client, len) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

static struct uproxy_usess *sess_new(struct uproxy_worker *w, const char *key,
                                     const struct sockaddr_storage *client,
                                     const struct sockaddr_storage *vip)
{
        struct uproxy_svc *svc = uproxy_find(w, (const struct sockaddr *)vip, IPPROTO_UDP);
        if (!svc)
                return NULL;
        struct uproxy_ep *ep = uproxy_pick(svc, (const struct sockaddr *)client,
                                           (const struct sockaddr *)vip, NULL, false, w->now_ns);
        struct uproxy_usess *s = ep ? se_calloc(1, sizeof(*s)) : NULL;
        if (!s) {
                atomic_fetch_add(&svc->failures, 1);
                uproxy_ep_unref(ep);
                return NULL;
        }
        s->w = w;
        s->ep = ep;
        s->svc = uproxy_svc_ref(svc);
        snprintf(s->key, sizeof(s->key), "%s", key);
        s->hc = (struct uproxy_handle){ UH_UDP_CLIENT, -1, UINT32_MAX, s };
        s->hb = (struct uproxy_handle){ UH_UDP_BACKEND, -1, UINT32_MAX, s };
        atomic_fetch_add(&ep->active, 1);
        atomic_fetch_add(&svc->conns_total, 1);
        atomic_fetch_add(&svc->conns_active, 1);
        s->last_ns = w->now_ns;
        lru_append(w, s);
        s->hb.fd = socket(ep->addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (s->hb.fd < 0 || connect(s->hb.fd, (struct sockaddr *)&ep->addr, ep->addr_len) < 0 ||
            (s->hc.fd = client_socket(vip, client)) < 0 ||
            se_hashmap_put(&w->udp_sessions, s->key, s, NULL) < 0 ||
            uproxy_watch(w, &s->hb, EPOLLIN) < 0 || uproxy_watch(w, &s->hc, EPOLLIN) < 0) {
                atomic_fetch_add(&svc->failures, 1);
                sess_close(s);
                return NULL;
        }
        return s;
}

static const struct sockaddr_storage *orig_dst(struct msghdr *mh)
{
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm))
                if ((cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_ORIGDSTADDR) ||
                    (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_ORIGDSTADDR))
                        return (const struct sockaddr_storage *)CMSG_DATA(cm);
        return NULL;
}

void uproxy_udp_listen(struct uproxy_worker *w, struct uproxy_handle *h)
{
        struct mmsghdr msgs[UPROXY_UDP_BATCH];
        struct iovec iov[UPROXY_UDP_BATCH];
        struct sockaddr_storage from[UPROXY_UDP_BATCH];
        union {
                char buf[CMSG_SPACE(sizeof(struct sockaddr_in6))];
                struct cmsghdr align;
        } ctl[UPROXY_UDP_BATCH];
        memset(msgs, 0, sizeof(msgs));
        memset(ctl, 0, sizeof(ctl));
        for (int i = 0; i < UPROXY_UDP_BATCH; i++) {
                iov[i].iov_base = w->udp_buf + (size_t)i * UPROXY_UDP_MAX;
                iov[i].iov_len = UPROXY_UDP_MAX;
                msgs[i].msg_hdr.msg_iov = &iov[i];
                msgs[i].msg_hdr.msg_iovlen = 1;
                msgs[i].msg_hdr.msg_name = &from[i];
                msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
                msgs[i].msg_hdr.msg_control = ctl[i].buf;
                msgs[i].msg_hdr.msg_controllen = sizeof(ctl[i].buf);
        }
        int n = recvmmsg(h->fd, msgs, UPROXY_UDP_BATCH, MSG_DONTWAIT, NULL);
        for (int i = 0; i < n; i++) {
                const struct sockaddr_storage *dst = orig_dst(&msgs[i].msg_hdr);
                if (!dst || (msgs[i].msg_hdr.msg_flags & MSG_TRUNC))
                        continue;
                struct sockaddr_storage vip;
                memcpy(&vip, dst,
                       dst->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
                                                    sizeof(struct sockaddr_in));
                char key[128], a[60], b[60];
                addr_key(&from[i], a, sizeof(a));
                addr_key(&vip, b, sizeof(b));
                snprintf(key, sizeof(key), "%s|%s", a, b);
                struct uproxy_usess *s = se_hashmap_get(&w->udp_sessions, key);
                if (!s && !(s = sess_new(w, key, &from[i], &vip)))
                        continue;
                touch(s);
                (void)!send(s->hb.fd, iov[i].iov_base, msgs[i].msg_len, MSG_DONTWAIT);
        }
}

/* One batch from a connected socket to the other. */
static void relay(struct uproxy_worker *w, int from, int to)
{
        struct mmsghdr msgs[UPROXY_UDP_BATCH];
        struct iovec iov[UPROXY_UDP_BATCH];
        memset(msgs, 0, sizeof(msgs));
        for (int i = 0; i < UPROXY_UDP_BATCH; i++) {
                iov[i].iov_base = w->udp_buf + (size_t)i * UPROXY_UDP_MAX;
                iov[i].iov_len = UPROXY_UDP_MAX;
                msgs[i].msg_hdr.msg_iov = &iov[i];
                msgs[i].msg_hdr.msg_iovlen = 1;
        }
        int n = recvmmsg(from, msgs, UPROXY_UDP_BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0)
                return; /* an ICMP error (ECONNREFUSED) included: datagrams are lost */
        for (int i = 0; i < n; i++)
                iov[i].iov_len = msgs[i].msg_len;
        (void)sendmmsg(to, msgs, (unsigned)n, MSG_DONTWAIT);
}

void uproxy_udp_event(struct uproxy_worker *w, struct uproxy_handle *h, uint32_t ev)
{
        struct uproxy_usess *s = h->owner;
        (void)ev;
        if (s->closed)
                return;
        touch(s);
        if (h->type == UH_UDP_BACKEND)
                relay(w, s->hb.fd, s->hc.fd);
        else
                relay(w, s->hc.fd, s->hb.fd);
}

int uproxy_udp_timers(struct uproxy_worker *w)
{
        int64_t timeout = w->up->cfg.udp_timeout_ns;
        while (w->lru_head && w->lru_head->last_ns + timeout <= w->now_ns)
                sess_close(w->lru_head);
        if (!w->lru_head)
                return -1;
        int64_t left = w->lru_head->last_ns + timeout - w->now_ns;
        return (int)(left / 1000000 + 1);
}

void uproxy_udp_sweep_removed(struct uproxy_worker *w)
{
        for (struct uproxy_usess *s = w->lru_head, *nx; s; s = nx) {
                nx = s->next;
                if (atomic_load(&s->ep->removed))
                        sess_close(s);
        }
}

void uproxy_udp_close_all(struct uproxy_worker *w)
{
        while (w->lru_head)
                sess_close(w->lru_head);
}
