/* TCP through the proxy: accept, recover the VIP:port (SO_ORIGINAL_DST after
 * REDIRECT; getsockname otherwise), connect to an endpoint without blocking
 * (up to 4 attempts, 250 ms .. 2 s, never the same endpoint twice, a refusal
 * moves on at once), then move bytes both ways (recv/send while small,
 * splice through a pipe once bulk), carrying a half-close (shutdown(SHUT_WR)
 * once one side's EOF is through) and a reset (SO_LINGER 0 on the other side).
 *
 * Each socket is registered once, edge-triggered, for everything: the
 * readiness an event reports is remembered per side until a call says
 * EAGAIN, so no epoll_ctl follows the registration and a direction with
 * nothing to read costs no syscall. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6/ip6_tables.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <svcenv/alloc.h>

#include "uproxy_worker.h"

#define SPLICE_CHUNK  (1 << 16)
#define SPLICE_ROUNDS 8 /* per event, so one busy connection does not starve the rest */
#define ACCEPT_BATCH  64
#define COPY_SMALL    16384 /* a read this full turns a direction to splice */
#define CONN_EVENTS   (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET)
#define SIDE_CLIENT   0
#define SIDE_BACKEND  1
#define SIDE_BOTH     (-1)

struct pipe_dir {
        int p[2];
        size_t n; /* bytes in the pipe */
        bool eof, shut;
        bool bulk; /* splice from now on */
};

struct uproxy_conn {
        struct uproxy_worker *w;
        struct uproxy_handle hc, hb; /* client, backend */
        struct sockaddr_storage client, vip; /* vip: the address it asked for */
        struct uproxy_svc *svc;
        struct uproxy_ep *ep; /* the one connected to (or being tried) */
        struct uproxy_tried tried; /* a reference each */
        int64_t deadline_ns;
        bool connecting, established, counted_inactive, closed;
        struct pipe_dir d[2]; /* [0] client -> backend, [1] backend -> client */
        bool rd[2], wr[2]; /* per side: readable, writable until a call says EAGAIN */
        int bad; /* the side whose socket failed (SIDE_BOTH: ours); the other gets a reset */
        bool more; /* a pump stopped at its round limit: run again soon */
        bool queued; /* on the worker's busy list */
        struct uproxy_conn *busy_next;
        struct uproxy_conn *prev, *next; /* connecting list, then dead list */
        struct uproxy_conn *all_prev, *all_next; /* every open connection */
};

static void unlink_connecting(struct uproxy_conn *c)
{
        if (!c->connecting)
                return;
        if (c->prev)
                c->prev->next = c->next;
        else
                c->w->connecting = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->prev = c->next = NULL;
        c->connecting = false;
}

/* Leaves the endpoint's counts as they were before this connection. */
static void uncount(struct uproxy_conn *c)
{
        if (!c->ep)
                return;
        if (c->counted_inactive)
                atomic_fetch_sub(&c->ep->inactive, 1);
        else if (c->established)
                atomic_fetch_sub(&c->ep->active, 1);
        c->counted_inactive = false;
        c->established = false;
}

static void close_backend(struct uproxy_conn *c)
{
        if (c->hb.fd >= 0)
                close(c->hb.fd); /* also leaves the epoll set */
        c->hb.fd = -1;
        c->hb.events = UINT32_MAX;
}

/* A pipe for one direction: from the worker's pool when it has one. */
static int pipe_get(struct uproxy_worker *w, struct pipe_dir *d)
{
        if (w->n_pipes) {
                w->n_pipes--;
                d->p[0] = w->pipes[w->n_pipes][0];
                d->p[1] = w->pipes[w->n_pipes][1];
                return 0;
        }
        return pipe2(d->p, O_NONBLOCK | O_CLOEXEC);
}

/* Back to the pool if empty (bytes left in it would reach the next
 * connection), else closed. */
static void pipe_put(struct uproxy_worker *w, struct pipe_dir *d)
{
        if (d->p[0] < 0)
                return;
        if (d->n == 0 && w->n_pipes < UPROXY_PIPE_POOL && !atomic_load(&w->up->stop)) {
                w->pipes[w->n_pipes][0] = d->p[0];
                w->pipes[w->n_pipes][1] = d->p[1];
                w->n_pipes++;
        } else {
                close(d->p[0]);
                close(d->p[1]);
        }
        d->p[0] = d->p[1] = -1;
}

static void conn_close(struct uproxy_conn *c)
{
        if (c->closed)
                return;
        c->closed = true;
        unlink_connecting(c);
        uncount(c);
        close_backend(c);
        if (c->hc.fd >= 0)
                close(c->hc.fd);
        c->hc.fd = -1;
        for (int i = 0; i < 2; i++)
                pipe_put(c->w, &c->d[i]);
        atomic_fetch_sub(&c->svc->conns_active, 1);
        if (c->all_prev)
                c->all_prev->all_next = c->all_next;
        else
                c->w->conns = c->all_next;
        if (c->all_next)
                c->all_next->all_prev = c->all_prev;
        c->next = c->w->dead; /* freed after this batch of events */
        c->w->dead = c;
}

void uproxy_tcp_reap(struct uproxy_worker *w)
{
        while (w->dead) {
                struct uproxy_conn *c = w->dead;
                w->dead = c->next;
                for (unsigned i = 0; i < c->tried.n; i++)
                        uproxy_ep_unref(c->tried.ep[i]);
                uproxy_svc_unref(c->svc);
                w->n_conns--;
                free(c);
        }
}

/* A socket failed (or we did): the other side learns it by a reset, as it
 * would through DNAT, rather than by a FIN that looks like a clean end.
 * It also spares the FIN/ACK exchange and the peer's TIME_WAIT. */
static void conn_abort(struct uproxy_conn *c)
{
        struct linger reset = { 1, 0 };
        for (int side = 0; side < 2; side++) {
                int fd = side == SIDE_BACKEND ? c->hb.fd : c->hc.fd;
                if (fd >= 0 && side != c->bad)
                        setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
        }
        conn_close(c);
}

static void fail(struct uproxy_conn *c)
{
        atomic_fetch_add(&c->svc->failures, 1);
        conn_close(c);
}

static int side_failed(struct uproxy_conn *c, int side)
{
        c->bad = side;
        return -1;
}

/* What an event says about one side, kept until a call says EAGAIN. An
 * error or hang-up shows as both, so the next call reports it. */
static void note_event(struct uproxy_conn *c, int side, uint32_t ev)
{
        if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                c->rd[side] = true;
        if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR))
                c->wr[side] = true;
}

/* Small transfers (a request, an answer) are cheaper by recv/send through
 * a buffer than by splice, which needs a pipe: a direction starts that
 * way and turns to splice once a read fills the buffer (haproxy's
 * splice-auto does much the same). What the destination does not take goes
 * into the pipe. 0 or -1 (c->bad says which side failed). */
static int copy_small(struct uproxy_conn *c, struct pipe_dir *p, int s, int t)
{
        char buf[COPY_SMALL];
        int src = s == SIDE_BACKEND ? c->hb.fd : c->hc.fd;
        int dst = t == SIDE_BACKEND ? c->hb.fd : c->hc.fd;
        ssize_t r = recv(src, buf, sizeof(buf), MSG_DONTWAIT);
        if (r == 0) {
                p->eof = true;
                return 0;
        }
        if (r < 0) {
                if (errno != EAGAIN)
                        return side_failed(c, s);
                c->rd[s] = false;
                return 0;
        }
        if ((size_t)r == sizeof(buf))
                p->bulk = true;
        ssize_t sent = 0;
        if (c->wr[t]) {
                sent = send(dst, buf, (size_t)r, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (sent < 0) {
                        if (errno != EAGAIN)
                                return side_failed(c, t);
                        c->wr[t] = false;
                        sent = 0;
                }
        }
        if (sent < r) { /* the rest waits in the pipe (empty, 64 KiB: it fits) */
                if (p->p[0] < 0 && pipe_get(c->w, p) < 0)
                        return side_failed(c, SIDE_BOTH);
                ssize_t k = write(p->p[1], buf + sent, (size_t)(r - sent));
                if (k != r - sent)
                        return side_failed(c, SIDE_BOTH);
                p->n += (size_t)k;
        }
        return 0;
}

/* Bulk: socket to the (empty) pipe. A short splice does not mean the socket
 * is drained (the pipe's slots may be what ran out), so only EAGAIN clears
 * its readiness. */
static int splice_in(struct uproxy_conn *c, struct pipe_dir *p, int s)
{
        int src = s == SIDE_BACKEND ? c->hb.fd : c->hc.fd;
        if (p->p[0] < 0 && pipe_get(c->w, p) < 0)
                return side_failed(c, SIDE_BOTH);
        ssize_t r =
                splice(src, NULL, p->p[1], NULL, SPLICE_CHUNK, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (r > 0)
                p->n += (size_t)r;
        else if (r == 0)
                p->eof = true;
        else if (errno == EAGAIN)
                c->rd[s] = false;
        else
                return side_failed(c, s);
        return 0;
}

/* Moves what it can of one direction (0: client -> backend); -1 when a
 * socket failed. */
static int pump(struct uproxy_conn *c, int dir)
{
        struct pipe_dir *p = &c->d[dir];
        int s = dir, t = !dir; /* the source and destination sides */
        int dst = t == SIDE_BACKEND ? c->hb.fd : c->hc.fd;
        for (int round = 0; round < SPLICE_ROUNDS; round++) {
                if (p->n > 0) {
                        if (!c->wr[t])
                                return 0;
                        ssize_t r = splice(p->p[0], NULL, dst, NULL, p->n,
                                           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (r > 0) {
                                p->n -= (size_t)r;
                                continue;
                        }
                        if (r < 0 && errno == EAGAIN) {
                                c->wr[t] = false;
                                return 0;
                        }
                        return side_failed(c, t);
                }
                if (p->eof) {
                        if (!p->shut) {
                                /* the half-close goes through: the peer may still answer */
                                shutdown(dst, SHUT_WR);
                                p->shut = true;
                                if (c->established && !c->counted_inactive) {
                                        /* IPVS: a connection past FIN is inactive */
                                        atomic_fetch_sub(&c->ep->active, 1);
                                        atomic_fetch_add(&c->ep->inactive, 1);
                                        c->counted_inactive = true;
                                }
                        }
                        return 0;
                }
                if (!c->rd[s])
                        return 0;
                int r = p->bulk ? splice_in(c, p, s) : copy_small(c, p, s, t);
                if (r < 0)
                        return r;
        }
        c->more = true; /* edge-triggered: no event will say there is more */
        return 0;
}

/* Both directions as far as they go; the connection ends when both are
 * shut, is reset when a socket failed, and waits on the busy list when a
 * pump stopped at its round limit. */
static void io(struct uproxy_conn *c)
{
        c->more = false;
        if (pump(c, 0) < 0 || pump(c, 1) < 0) {
                conn_abort(c);
                return;
        }
        if (c->d[0].shut && c->d[1].shut) {
                conn_close(c);
                return;
        }
        if (c->more && !c->queued) {
                c->queued = true;
                c->busy_next = c->w->busy;
                c->w->busy = c;
        }
}

static void established(struct uproxy_conn *c)
{
        unlink_connecting(c);
        atomic_fetch_sub(&c->ep->inactive, 1);
        c->counted_inactive = false;
        atomic_fetch_add(&c->ep->active, 1);
        c->established = true; /* pipes come when needed (copy_small) */
        c->wr[SIDE_BACKEND] = true; /* just connected: its send buffer is empty */
        int one = 1; /* as haproxy: what the client sent goes out at once */
        setsockopt(c->hb.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        io(c); /* the client may have sent already: no new edge will say so */
}

/* Tries endpoints until one connects or is under way; 4 at most. */
static void attempt(struct uproxy_conn *c)
{
        struct uproxy_worker *w = c->w;
        while (c->tried.n < UPROXY_MAX_ATTEMPTS) {
                /* after a failure the affinity is reset, as kube-proxy's */
                struct uproxy_ep *ep = uproxy_pick(c->svc, (struct sockaddr *)&c->client,
                                                   (struct sockaddr *)&c->vip, &c->tried,
                                                   c->tried.n > 0, w->now_ns);
                if (!ep)
                        break;
                if (c->tried.n > 0)
                        atomic_fetch_add(&c->svc->retries, 1);
                c->tried.ep[c->tried.n++] = ep;
                c->ep = ep;
                c->deadline_ns = w->now_ns + uproxy_attempt_timeout_ns(c->tried.n - 1);
                int fd = socket(ep->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (fd < 0)
                        break; /* out of fds: no other endpoint will do better */
                c->hb.fd = fd;
                c->rd[SIDE_BACKEND] = c->wr[SIDE_BACKEND] = false;
                atomic_fetch_add(&ep->inactive, 1);
                c->counted_inactive = true;
                /* registered after connect: an unconnected socket polls as hung up */
                int r = connect(fd, (struct sockaddr *)&ep->addr, ep->addr_len);
                if (r == 0 && uproxy_watch(w, &c->hb, CONN_EVENTS) == 0) {
                        established(c);
                        return;
                }
                if (r < 0 && errno == EINPROGRESS && uproxy_watch(w, &c->hb, CONN_EVENTS) == 0) {
                        c->connecting = true;
                        c->prev = NULL;
                        c->next = w->connecting;
                        if (c->next)
                                c->next->prev = c;
                        w->connecting = c;
                        return;
                }
                /* refused at once (a local endpoint): the next one, no wait */
                uproxy_penalize(c->svc, ep, w->now_ns, w->up->cfg.penalty_ns);
                uncount(c);
                close_backend(c);
        }
        fail(c);
}

static void attempt_failed(struct uproxy_conn *c)
{
        uproxy_penalize(c->svc, c->ep, c->w->now_ns, c->w->up->cfg.penalty_ns);
        unlink_connecting(c);
        uncount(c);
        close_backend(c);
        attempt(c);
}

static bool original_dst(int fd, bool v6, struct sockaddr_storage *dst)
{
        socklen_t len = sizeof(*dst);
        if (getsockopt(fd, v6 ? SOL_IPV6 : SOL_IP, v6 ? IP6T_SO_ORIGINAL_DST : SO_ORIGINAL_DST, dst,
                       &len) == 0)
                return true;
        len = sizeof(*dst); /* not NATed: TPROXY or a direct connection */
        return getsockname(fd, (struct sockaddr *)dst, &len) == 0;
}

void uproxy_tcp_accept(struct uproxy_worker *w, struct uproxy_handle *h)
{
        for (int i = 0; i < ACCEPT_BATCH; i++) {
                struct sockaddr_storage client, dst;
                socklen_t len = sizeof(client);
                int fd = accept4(h->fd, (struct sockaddr *)&client, &len,
                                 SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == EMFILE || errno == ENFILE) {
                                /* kube-proxy panicked here; we pause accepting */
                                atomic_fetch_add(&w->up->accept_emfile, 1);
                                w->accept_paused_until = w->now_ns + 100000000LL;
                                for (int f = 0; f < 2; f++)
                                        if (w->tcp[f].fd >= 0)
                                                uproxy_watch(w, &w->tcp[f], 0);
                        }
                        return;
                }
                struct uproxy_svc *svc = NULL;
                if (original_dst(fd, h == &w->tcp[1], &dst))
                        svc = uproxy_find(w, (struct sockaddr *)&dst, IPPROTO_TCP);
                struct uproxy_conn *c = svc ? se_calloc(1, sizeof(*c)) : NULL;
                if (!c) {
                        close(fd); /* not a service of ours (or no memory) */
                        continue;
                }
                c->w = w;
                c->client = client;
                c->vip = dst;
                c->svc = uproxy_svc_ref(svc);
                c->hc = (struct uproxy_handle){ UH_TCP_CLIENT, fd, UINT32_MAX, c };
                c->hb = (struct uproxy_handle){ UH_TCP_BACKEND, -1, UINT32_MAX, c };
                c->bad = SIDE_BOTH;
                for (int d = 0; d < 2; d++)
                        c->d[d].p[0] = c->d[d].p[1] = -1;
                w->n_conns++;
                c->all_next = w->conns;
                if (c->all_next)
                        c->all_next->all_prev = c;
                w->conns = c;
                atomic_fetch_add(&svc->conns_total, 1);
                atomic_fetch_add(&svc->conns_active, 1);
                if (uproxy_watch(w, &c->hc, CONN_EVENTS) < 0)
                        fail(c);
                else
                        attempt(c);
        }
}

void uproxy_tcp_event(struct uproxy_worker *w, struct uproxy_handle *h, uint32_t ev)
{
        struct uproxy_conn *c = h->owner;
        (void)w;
        if (c->closed)
                return;
        int side = h->type == UH_TCP_BACKEND ? SIDE_BACKEND : SIDE_CLIENT;
        note_event(c, side, ev);
        if (c->connecting) {
                if (side == SIDE_CLIENT) {
                        /* the client went away before we reached an endpoint */
                        if (ev & (EPOLLERR | EPOLLHUP))
                                conn_close(c);
                        return;
                }
                /* the connect's outcome, without asking SO_ERROR: a failure
                 * (refused, reset) always raises EPOLLERR */
                if (ev & (EPOLLERR | EPOLLHUP))
                        attempt_failed(c);
                else if (ev & EPOLLOUT)
                        established(c);
                return;
        }
        if (!c->established && !c->counted_inactive)
                return;
        io(c);
        /* a socket in error whose error no call met (its direction was
         * done): one event only, edge-triggered, so end it now */
        if (!c->closed && (ev & EPOLLERR)) {
                c->bad = side;
                conn_abort(c);
        }
}

void uproxy_tcp_more(struct uproxy_worker *w)
{
        struct uproxy_conn *c = w->busy;
        w->busy = NULL;
        while (c) {
                struct uproxy_conn *next = c->busy_next;
                c->queued = false;
                c->busy_next = NULL;
                if (!c->closed)
                        io(c);
                c = next;
        }
}

int uproxy_tcp_timers(struct uproxy_worker *w)
{
        int64_t next = -1;
        for (struct uproxy_conn *c = w->connecting, *nx; c; c = nx) {
                nx = c->next;
                if (c->deadline_ns <= w->now_ns) {
                        attempt_failed(c); /* may relink c at the head: next is kept */
                        continue;
                }
                int64_t left = c->deadline_ns - w->now_ns;
                if (next < 0 || left < next)
                        next = left;
        }
        /* a new attempt made above may be due sooner than what was seen */
        for (struct uproxy_conn *c = w->connecting; c; c = c->next) {
                int64_t left = c->deadline_ns - w->now_ns;
                if (next < 0 || left < next)
                        next = left < 0 ? 0 : left;
        }
        return next < 0 ? -1 : (int)(next / 1000000 + 1);
}

void uproxy_tcp_close_all(struct uproxy_worker *w)
{
        w->busy = NULL;
        while (w->conns)
                conn_close(w->conns);
}
