/* The workers: one epoll loop per core, each with its own UDP and TCP
 * sockets on the same address (SO_REUSEPORT: the kernel spreads clients
 * over them), answering from the worker's own zone reference.
 *
 * TCP (RFC 7766): length-prefixed messages, several per connection, answered
 * in order; a connection idle longer than --tcp-idle-timeout is closed, and
 * so is any beyond --max-tcp-conns. While an answer waits for the socket to
 * take it, the connection's further queries wait too (bounded memory). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <svcenv/alloc.h>
#include <svcenv/log.h>
#include <svcenv/timeutil.h>

#include "dnsd.h"

#define BATCH    64 /* datagrams read per wake-up before looking at other sockets */
#define TAG_UDP  1ull
#define TAG_TCP  2ull
#define TAG_WAKE 3ull
/* a connection's epoll data is its pointer (aligned, so never 1..3) */

struct dnsd_conn {
        struct dnsd_conn *prev, *next;
        int fd;
        uint64_t id;
        int family;
        struct sockaddr_storage peer;
        socklen_t plen;
        uint64_t last_ns;
        unsigned in_flight; /* queries sent upstream, answers not yet back */
        size_t in_len;
        uint8_t in[2 + SE_DNS_MAX_MSG];
        uint8_t *out; /* answers the socket has not taken */
        size_t out_len, out_off;
};

static int family_index(int af)
{
        return af == AF_INET6 ? DNSD_FAM_6 : DNSD_FAM_4;
}

static void client_of(const struct sockaddr_storage *ss, struct se_dns_client *c)
{
        memset(c, 0, sizeof(*c));
        if (ss->ss_family == AF_INET6) {
                const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
                /* a v4 client on a dual-stack socket is a v4 client */
                if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
                        c->family = AF_INET;
                        memcpy(c->addr, s6->sin6_addr.s6_addr + 12, 4);
                } else {
                        c->family = AF_INET6;
                        memcpy(c->addr, s6->sin6_addr.s6_addr, 16);
                }
        } else if (ss->ss_family == AF_INET) {
                c->family = AF_INET;
                memcpy(c->addr, &((const struct sockaddr_in *)ss)->sin_addr, 4);
        }
}

static int query_type_index(const uint8_t *q, size_t len)
{
        char name[SE_DNS_MAX_NAME + 1];
        uint16_t qtype = 0, qclass;
        if (se_dns_question(q, len, name, sizeof(name), &qtype, &qclass) < 0)
                return DNSD_TYPES - 1;
        return dnsd_type_index(qtype);
}

/* ---- TCP output ---- */

static void conn_close(struct dnsd_worker *w, struct dnsd_conn *c)
{
        epoll_ctl(w->ep, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        if (c->prev)
                c->prev->next = c->next;
        else
                w->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        w->n_conns--;
        free(c->out);
        free(c);
}

static void conn_want_write(struct dnsd_worker *w, struct dnsd_conn *c, bool on)
{
        struct epoll_event ev = { .events = on ? EPOLLOUT : EPOLLIN, .data.ptr = c };
        epoll_ctl(w->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Sends what is pending; false when the connection failed (closed). */
static bool conn_flush(struct dnsd_worker *w, struct dnsd_conn *c)
{
        while (c->out_off < c->out_len) {
                ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                        conn_want_write(w, c, true);
                        return true;
                }
                if (n <= 0) {
                        conn_close(w, c);
                        return false;
                }
                c->out_off += (size_t)n;
        }
        free(c->out);
        c->out = NULL;
        c->out_len = c->out_off = 0;
        conn_want_write(w, c, false);
        return true;
}

static bool conn_send(struct dnsd_worker *w, struct dnsd_conn *c, const uint8_t *msg, size_t len)
{
        size_t have = c->out_len - c->out_off;
        uint8_t *buf = se_malloc(have + 2 + len);
        if (!buf) {
                conn_close(w, c);
                return false;
        }
        if (have)
                memcpy(buf, c->out + c->out_off, have);
        buf[have] = (uint8_t)(len >> 8);
        buf[have + 1] = (uint8_t)len;
        memcpy(buf + have + 2, msg, len);
        free(c->out);
        c->out = buf;
        c->out_len = have + 2 + len;
        c->out_off = 0;
        c->last_ns = se_now_mono_ns();
        return conn_flush(w, c);
}

static struct dnsd_conn *conn_find(struct dnsd_worker *w, uint64_t id)
{
        for (struct dnsd_conn *c = w->conns; c; c = c->next)
                if (c->id == id)
                        return c;
        return NULL;
}

/* ---- one query ---- */

static void take_zone(struct dnsd_worker *w)
{
        struct se_dns_zone *z = atomic_exchange(&w->next_zone, NULL);
        if (z) {
                se_dns_zone_unref(w->zone);
                w->zone = z;
        }
        struct dnsd_podindex *x = atomic_exchange(&w->next_index, NULL);
        if (x) {
                dnsd_podindex_unref(w->index);
                w->index = x;
        }
}

/* ---- autopath ---- */

enum { AP_NONE, AP_ANSWERED, AP_QUEUED };

/* An rcode CoreDNS's autopath gives the client as it is (plugin.ClientWrite). */
static bool client_writes(unsigned rcode)
{
        return rcode != 1 && rcode != 2 && rcode != 4 && rcode != 5;
}

static struct fwd_job *new_job(struct dnsd_worker *w, int proto,
                               const struct sockaddr_storage *peer, socklen_t plen,
                               struct dnsd_conn *conn, size_t udp_max, uint64_t t0, int fam,
                               int type, const uint8_t *q, size_t qlen)
{
        struct fwd_job *job = se_malloc(sizeof(*job) + qlen);
        if (!job)
                return NULL;
        memset(job, 0, sizeof(*job));
        job->w = w;
        job->proto = proto;
        job->family = fam;
        job->type = type;
        job->peer = *peer;
        job->peerlen = plen;
        job->conn_id = conn ? conn->id : 0;
        job->udp_max = udp_max;
        job->start_ns = t0;
        job->qlen = qlen;
        memcpy(job->query, q, qlen);
        return job;
}

/* q got NXDOMAIN from the zone. When its name is <base>.<ns>.svc.<zone>
 * with <ns> the asking pod's namespace, walk the rest of that pod's search
 * path here (<base>.svc.<zone>, <base>.<zone>, then <base> itself through
 * the cache or upstream) and answer with the first that exists, behind a
 * CNAME from the asked name (CoreDNS's autopath). */
static int autopath(struct dnsd_worker *w, int proto, const struct sockaddr_storage *peer,
                    socklen_t plen, struct dnsd_conn *conn, const struct se_dns_client *client,
                    const uint8_t *q, size_t qlen, size_t udp_max, uint64_t t0, int fam, int type,
                    uint8_t *out, size_t cap, size_t *olen)
{
        struct dnsd *d = w->d;
        const char *ns = dnsd_podindex_lookup(w->index, client->family, client->addr);
        char name[SE_DNS_MAX_NAME + 1], suffix[SE_DNS_MAX_NAME + 1];
        uint16_t qtype, qclass;
        if (!ns || se_dns_question(q, qlen, name, sizeof(name), &qtype, &qclass) < 0)
                return AP_NONE;
        int sl = snprintf(suffix, sizeof(suffix), ".%s.svc.%s", ns, d->zone_name);
        size_t nl = strlen(name);
        if (sl <= 0 || nl <= (size_t)sl || strcmp(name + nl - (size_t)sl, suffix) != 0)
                return AP_NONE;
        name[nl - (size_t)sl] = '\0'; /* the base */
        char type_text[16];
        snprintf(type_text, sizeof(type_text), "TYPE%u", qtype);
        uint8_t *cq = w->s->cq, *tmp = w->s->tmp;
        struct se_dns_client whole = *client;
        whole.transport = SE_DNS_TCP; /* cut once, at the end */
        for (int i = 0; i < 3; i++) {
                char cand[2 * SE_DNS_MAX_NAME];
                if (i == 0)
                        snprintf(cand, sizeof(cand), "%s.svc.%s", name, d->zone_name);
                else if (i == 1)
                        snprintf(cand, sizeof(cand), "%s.%s", name, d->zone_name);
                else
                        snprintf(cand, sizeof(cand), "%s", name);
                int cl = se_dns_query_make(cand, type_text, 0, 0, cq, sizeof(w->s->cq), NULL);
                if (cl < 0)
                        continue;
                size_t tlen = 0;
                enum se_dns_verdict v =
                        se_dns_answer(w->zone, &whole, cq, (size_t)cl, tmp, SE_DNS_MAX_MSG, &tlen);
                if (v == SE_DNS_REPLY) {
                        unsigned rc = tlen >= 12 ? tmp[3] & 0x0f : 2;
                        if (rc == 3 || !client_writes(rc))
                                continue;
                        *olen = se_dns_autopath_reply(q, qlen, tmp, tlen, udp_max, out, cap);
                        return *olen ? AP_ANSWERED : AP_NONE;
                }
                if (v != SE_DNS_FORWARD || i != 2 || !d->n_upstreams)
                        continue;
                /* the bare name: the cache, else upstream */
                if (d->cache &&
                    (tlen = se_dns_cache_get(d->cache, cq, (size_t)cl, t0 / 1000000000ull, 0, tmp,
                                             SE_DNS_MAX_MSG)) > 0) {
                        if ((tmp[3] & 0x0f) != 0)
                                return AP_NONE;
                        *olen = se_dns_autopath_reply(q, qlen, tmp, tlen, udp_max, out, cap);
                        return *olen ? AP_ANSWERED : AP_NONE;
                }
                struct fwd_job *job =
                        new_job(w, proto, peer, plen, conn, 0, t0, fam, type, cq, (size_t)cl);
                if (job && (job->ap_query = se_malloc(qlen))) {
                        memcpy(job->ap_query, q, qlen);
                        job->ap_qlen = qlen;
                        job->ap_udp_max = udp_max;
                        if (dnsd_forward(d, job)) {
                                if (conn)
                                        conn->in_flight++;
                                return AP_QUEUED;
                        }
                        free(job->ap_query);
                }
                free(job);
        }
        return AP_NONE;
}

static void reply_udp(struct dnsd_worker *w, const struct sockaddr_storage *peer, socklen_t plen,
                      const uint8_t *msg, size_t len)
{
        while (sendto(w->udp, msg, len, MSG_DONTWAIT, (const struct sockaddr *)peer, plen) < 0 &&
               errno == EINTR)
                ;
}

/* ---- ExternalName targets outside the zone ---- */

/* The zone answered q (A or AAAA) with a CNAME to a name outside the zone:
 * the target's records come from the cache or upstream and are added to
 * the answer, as CoreDNS's kubernetes plugin does through its server's
 * chain. Upstream failing or denying: the CNAME alone (CoreDNS too). */
static int chase(struct dnsd_worker *w, int proto, const struct sockaddr_storage *peer,
                 socklen_t plen, struct dnsd_conn *conn, const uint8_t *q, size_t qlen,
                 size_t udp_max, uint64_t t0, int fam, int type, uint8_t *out, size_t cap,
                 size_t *olen)
{
        struct dnsd *d = w->d;
        char target[SE_DNS_MAX_NAME + 1], name[SE_DNS_MAX_NAME + 1];
        uint16_t qtype, qclass;
        if (!d->n_upstreams || *olen < 12 || (out[2] & 0x02) || (out[3] & 0x0f) != 0 ||
            se_dns_question(q, qlen, name, sizeof(name), &qtype, &qclass) < 0 ||
            (qtype != 1 && qtype != 28) ||
            se_dns_cname_target(out, *olen, target, sizeof(target)) < 0)
                return AP_NONE;
        size_t tl = strlen(target), zl = strlen(d->zone_name);
        if (tl == zl ? strcmp(target, d->zone_name) == 0 :
                       tl > zl && target[tl - zl - 1] == '.' &&
                               strcmp(target + tl - zl, d->zone_name) == 0)
                return AP_NONE; /* in the zone: pkg/dns followed it */
        uint8_t *cq = w->s->cq, *tmp = w->s->tmp, *merged = w->s->merged;
        int cl = se_dns_query_make(target, qtype == 1 ? "A" : "AAAA", 0, 0, cq, sizeof(w->s->cq),
                                   NULL);
        if (cl < 0)
                return AP_NONE;
        size_t tlen;
        if (d->cache && (tlen = se_dns_cache_get(d->cache, cq, (size_t)cl, t0 / 1000000000ull, 0,
                                                 tmp, SE_DNS_MAX_MSG)) > 0) {
                size_t n = (tmp[3] & 0x0f) == 0 ?
                                   se_dns_append_answers(out, *olen, tmp, tlen, udp_max, merged,
                                                         SE_DNS_MAX_MSG) :
                                   0;
                if (n && n <= cap) {
                        memcpy(out, merged, n);
                        *olen = n;
                }
                return AP_ANSWERED;
        }
        struct fwd_job *job = new_job(w, proto, peer, plen, conn, 0, t0, fam, type, cq, (size_t)cl);
        if (job && (job->chase = se_malloc(*olen))) {
                memcpy(job->chase, out, *olen);
                job->chase_len = *olen;
                job->ap_udp_max = udp_max;
                if (dnsd_forward(d, job)) {
                        if (conn)
                                conn->in_flight++;
                        return AP_QUEUED;
                }
                free(job->chase);
        }
        free(job);
        return AP_NONE;
}

/* Answers q from the zone, the cache, or hands it to a forwarder. For TCP
 * conn is the connection (its answers go out through it; NULL once it
 * failed). Returns false when conn was closed meanwhile. */
static bool handle_query(struct dnsd_worker *w, int proto, const struct sockaddr_storage *peer,
                         socklen_t plen, struct dnsd_conn *conn, const uint8_t *q, size_t qlen)
{
        struct dnsd *d = w->d;
        uint64_t t0 = se_now_mono_ns();
        uint8_t *out = w->s->out;
        struct se_dns_client client;
        client_of(peer, &client);
        client.transport = proto == DNSD_PROTO_TCP ? SE_DNS_TCP : SE_DNS_UDP;
        int fam = family_index(client.family);
        atomic_fetch_add_explicit(&w->queries, 1, memory_order_relaxed);

        size_t olen = 0;
        enum se_dns_verdict v;
        int plugin = DNSD_PLUGIN_KUBERNETES;
        if (w->zone) {
                v = se_dns_answer(w->zone, &client, q, qlen, out, SE_DNS_MAX_MSG, &olen);
        } else if (qlen >= 12 && !(q[2] & 0x80)) {
                /* not synced yet: SERVFAIL, as CoreDNS before its informers sync */
                olen = se_dns_error_reply(q, qlen, 2, out, SE_DNS_MAX_MSG);
                v = olen ? SE_DNS_REPLY : SE_DNS_DROP;
        } else {
                v = SE_DNS_DROP;
        }
        if (v == SE_DNS_DROP) {
                atomic_fetch_add_explicit(&d->m.dropped, 1, memory_order_relaxed);
                return true;
        }
        int type = query_type_index(q, qlen);
        dnsd_count_request(&d->m, proto, fam, type);
        size_t udp_max = proto == DNSD_PROTO_UDP ? se_dns_udp_size(q, qlen) : 0;
        if (v == SE_DNS_REPLY && (type == 0 || type == 1) &&
            chase(w, proto, peer, plen, conn, q, qlen, udp_max, t0, fam, type, out, SE_DNS_MAX_MSG,
                  &olen) == AP_QUEUED)
                return true;
        if (v == SE_DNS_REPLY && d->autopath && w->index && olen >= 12 && (out[3] & 0x0f) == 3) {
                size_t alen = 0;
                int ap = autopath(w, proto, peer, plen, conn, &client, q, qlen, udp_max, t0, fam,
                                  type, out + olen, SE_DNS_MAX_MSG - olen, &alen);
                if (ap == AP_QUEUED)
                        return true;
                if (ap == AP_ANSWERED) {
                        memmove(out, out + olen, alen);
                        olen = alen;
                        plugin = DNSD_PLUGIN_AUTOPATH;
                }
        }
        if (v == SE_DNS_FORWARD) {
                plugin = DNSD_PLUGIN_FORWARD;
                olen = 0;
                if (d->cache && (olen = se_dns_cache_get(d->cache, q, qlen, t0 / 1000000000ull,
                                                         udp_max, out, SE_DNS_MAX_MSG)) > 0) {
                        plugin = DNSD_PLUGIN_CACHE;
                } else if (d->n_upstreams) {
                        struct fwd_job *job = new_job(w, proto, peer, plen, conn, udp_max, t0, fam,
                                                      type, q, qlen);
                        if (job) {
                                if (dnsd_forward(d, job)) {
                                        if (conn)
                                                conn->in_flight++;
                                        return true;
                                }
                                free(job);
                                atomic_fetch_add_explicit(&d->m.forward_queue_full, 1,
                                                          memory_order_relaxed);
                        }
                }
                if (!olen) /* no upstream, or no room to ask one */
                        olen = se_dns_error_reply(q, qlen, 2, out, SE_DNS_MAX_MSG);
                if (!olen)
                        return true;
        }
        if (d->cache && plugin != DNSD_PLUGIN_CACHE) /* a hit has its aged TTLs */
                (void)se_dns_cache_ttls(out, olen, &d->ttl_bounds);
        dnsd_count_response(&d->m, plugin, out, olen, type, se_now_mono_ns() - t0);
        if (proto == DNSD_PROTO_UDP) {
                reply_udp(w, peer, plen, out, olen);
                return true;
        }
        return conn_send(w, conn, out, olen);
}

/* The upstream's answer for the bare name of an autopath walk: given to
 * the client as the answer to its question when it is NOERROR; otherwise
 * the client gets what the zone said to its own question (NXDOMAIN). */
static void autopath_done(struct dnsd_worker *w, struct fwd_job *job)
{
        uint8_t *buf = w->s->done;
        size_t n = 0;
        if ((job->resp[3] & 0x0f) == 0)
                n = se_dns_autopath_reply(job->ap_query, job->ap_qlen, job->resp, job->rlen,
                                          job->ap_udp_max, buf, SE_DNS_MAX_MSG);
        if (!n && w->zone) {
                struct se_dns_client c = { .transport = job->ap_udp_max ? SE_DNS_UDP : SE_DNS_TCP };
                if (se_dns_answer(w->zone, &c, job->ap_query, job->ap_qlen, buf, SE_DNS_MAX_MSG,
                                  &n) != SE_DNS_REPLY)
                        n = 0;
        }
        uint8_t *copy = n ? se_malloc(n) : NULL;
        free(job->resp);
        job->resp = copy;
        job->rlen = copy ? n : 0;
        if (copy)
                memcpy(copy, buf, n);
}

/* The upstream's answer for an ExternalName's target: its records after
 * the CNAME when it is NOERROR, else the CNAME alone. */
static void chase_done(struct fwd_job *job)
{
        uint8_t *buf = job->w->s->done;
        size_t n = job->rlen && (job->resp[3] & 0x0f) == 0 ?
                           se_dns_append_answers(job->chase, job->chase_len, job->resp, job->rlen,
                                                 job->ap_udp_max, buf, SE_DNS_MAX_MSG) :
                           0;
        const uint8_t *src = n ? buf : job->chase;
        size_t len = n ? n : job->chase_len;
        uint8_t *copy = se_malloc(len);
        free(job->resp);
        job->resp = copy;
        job->rlen = copy ? len : 0;
        if (copy)
                memcpy(copy, src, len);
}

/* Answers from forwarders, back on the worker that owns the client. */
static void drain_done(struct dnsd_worker *w)
{
        uint64_t v;
        while (read(w->wake, &v, sizeof(v)) < 0 && errno == EINTR)
                ;
        pthread_mutex_lock(&w->done_lock);
        struct fwd_job *list = w->done;
        w->done = NULL;
        pthread_mutex_unlock(&w->done_lock);
        while (list) {
                struct fwd_job *job = list;
                list = job->next;
                if (job->rlen && job->ap_query)
                        autopath_done(w, job);
                if (job->chase)
                        chase_done(job);
                if (job->rlen && w->d->cache && (job->chase || job->ap_query))
                        (void)se_dns_cache_ttls(job->resp, job->rlen, &w->d->ttl_bounds);
                if (job->rlen) {
                        int plugin = job->ap_query ? DNSD_PLUGIN_AUTOPATH :
                                     job->chase    ? DNSD_PLUGIN_KUBERNETES :
                                                     DNSD_PLUGIN_FORWARD;
                        dnsd_count_response(&w->d->m, plugin, job->resp, job->rlen, job->type,
                                            se_now_mono_ns() - job->start_ns);
                        if (job->proto == DNSD_PROTO_UDP) {
                                reply_udp(w, &job->peer, job->peerlen, job->resp, job->rlen);
                        } else {
                                struct dnsd_conn *c = conn_find(w, job->conn_id);
                                if (c) {
                                        c->in_flight--;
                                        (void)conn_send(w, c, job->resp, job->rlen);
                                }
                        }
                }
                free(job->ap_query);
                free(job->chase);
                free(job->resp);
                free(job);
        }
}

void dnsd_job_done(struct fwd_job *job)
{
        struct dnsd_worker *w = job->w;
        pthread_mutex_lock(&w->done_lock);
        job->next = w->done;
        w->done = job;
        pthread_mutex_unlock(&w->done_lock);
        uint64_t one = 1;
        (void)!write(w->wake, &one, sizeof(one));
}

/* ---- sockets ---- */

static void on_udp(struct dnsd_worker *w)
{
        uint8_t *buf = w->s->in;
        for (int i = 0; i < BATCH; i++) {
                struct sockaddr_storage peer;
                socklen_t plen = sizeof(peer);
                ssize_t n = recvfrom(w->udp, buf, SE_DNS_MAX_MSG, MSG_DONTWAIT,
                                     (struct sockaddr *)&peer, &plen);
                if (n < 0)
                        return;
                take_zone(w);
                handle_query(w, DNSD_PROTO_UDP, &peer, plen, NULL, buf, (size_t)n);
        }
}

static void on_accept(struct dnsd_worker *w)
{
        struct dnsd *d = w->d;
        unsigned cap = (d->max_tcp_conns + d->n_workers - 1) / d->n_workers;
        for (;;) {
                struct sockaddr_storage peer;
                socklen_t plen = sizeof(peer);
                int fd = accept4(w->tcp, (struct sockaddr *)&peer, &plen,
                                 SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0)
                        return;
                struct dnsd_conn *c = NULL;
                if (w->n_conns >= cap || atomic_load(&d->stopping) ||
                    !(c = se_calloc(1, sizeof(*c)))) {
                        atomic_fetch_add(&d->m.tcp_refused, 1);
                        close(fd);
                        continue;
                }
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                struct se_dns_client cl;
                client_of(&peer, &cl);
                c->fd = fd;
                c->id = ++w->next_conn_id;
                c->family = cl.family;
                c->peer = peer;
                c->plen = plen;
                c->last_ns = se_now_mono_ns();
                struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
                if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
                        close(fd);
                        free(c);
                        continue;
                }
                c->next = w->conns;
                if (w->conns)
                        w->conns->prev = c;
                w->conns = c;
                w->n_conns++;
        }
}

static void on_conn(struct dnsd_worker *w, struct dnsd_conn *c, uint32_t events)
{
        if (events & EPOLLOUT) {
                if (!conn_flush(w, c))
                        return;
                if (c->out)
                        return;
        }
        if (events & (EPOLLERR | EPOLLHUP) && !(events & EPOLLIN)) {
                conn_close(w, c);
                return;
        }
        if (c->out)
                return; /* answers pending: read more only once they left */
        ssize_t n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                conn_close(w, c);
                return;
        }
        if (n < 0)
                return;
        c->in_len += (size_t)n;
        c->last_ns = se_now_mono_ns();
        take_zone(w);
        size_t off = 0;
        while (c->in_len - off >= 2) {
                size_t mlen = (size_t)c->in[off] << 8 | c->in[off + 1];
                if (c->in_len - off - 2 < mlen)
                        break;
                uint64_t id = c->id;
                if (!handle_query(w, DNSD_PROTO_TCP, &c->peer, c->plen, c, c->in + off + 2, mlen))
                        return; /* closed */
                if (!conn_find(w, id))
                        return;
                off += 2 + mlen;
                if (c->out)
                        break; /* the socket is full: stop until it drains */
        }
        if (off) {
                memmove(c->in, c->in + off, c->in_len - off);
                c->in_len -= off;
        }
}

static void close_idle(struct dnsd_worker *w, uint64_t now)
{
        for (struct dnsd_conn *c = w->conns, *next; c; c = next) {
                next = c->next;
                if (!c->in_flight && now - c->last_ns > w->d->tcp_idle_ns)
                        conn_close(w, c);
        }
}

static void *worker_main(void *data)
{
        struct dnsd_worker *w = data;
        struct epoll_event evs[64];
        uint64_t last_sweep = se_now_mono_ns();
        while (!atomic_load(&w->d->stopping)) {
                int n = epoll_wait(w->ep, evs, 64, 500);
                take_zone(w);
                for (int i = 0; i < n; i++) {
                        uint64_t tag = evs[i].data.u64;
                        if (tag == TAG_UDP)
                                on_udp(w);
                        else if (tag == TAG_TCP)
                                on_accept(w);
                        else if (tag == TAG_WAKE)
                                drain_done(w);
                        else
                                on_conn(w, evs[i].data.ptr, evs[i].events);
                }
                uint64_t now = se_now_mono_ns();
                if (now - last_sweep > 500000000ull) {
                        close_idle(w, now);
                        last_sweep = now;
                }
        }
        return NULL;
}

static int bound_socket(struct dnsd *d, int type)
{
        int fd = socket(d->listen.ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        int one = 1, zero = 0;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
        if (d->listen.ss_family == AF_INET6)
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        if (bind(fd, (struct sockaddr *)&d->listen, d->listen_len) < 0 ||
            (type == SOCK_STREAM && listen(fd, 1024) < 0)) {
                int e = errno;
                close(fd);
                return -e;
        }
        return fd;
}

static int add_fd(int ep, int fd, uint64_t tag)
{
        struct epoll_event ev = { .events = EPOLLIN, .data.u64 = tag };
        return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

int dnsd_workers_start(struct dnsd *d)
{
        /* all sockets first: a port 0 listen address is fixed by the first */
        for (unsigned i = 0; i < d->n_workers; i++) {
                struct dnsd_worker *w = &d->workers[i];
                w->d = d;
                w->idx = i;
                if (!w->s && !(w->s = se_malloc(sizeof(*w->s))))
                        return -ENOMEM;
                w->ep = w->udp = w->tcp = w->wake = -1;
                pthread_mutex_init(&w->done_lock, NULL);
                int r;
                if ((w->ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
                    (w->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
                        return -errno;
                if ((r = w->udp = bound_socket(d, SOCK_DGRAM)) < 0 ||
                    (r = w->tcp = bound_socket(d, SOCK_STREAM)) < 0)
                        return r;
                if (i == 0) {
                        /* later workers bind the very port the first got */
                        socklen_t l = d->listen_len;
                        getsockname(w->udp, (struct sockaddr *)&d->listen, &l);
                }
                if ((r = add_fd(w->ep, w->udp, TAG_UDP)) < 0 ||
                    (r = add_fd(w->ep, w->tcp, TAG_TCP)) < 0 ||
                    (r = add_fd(w->ep, w->wake, TAG_WAKE)) < 0)
                        return r;
        }
        for (unsigned i = 0; i < d->n_workers; i++) {
                struct dnsd_worker *w = &d->workers[i];
                int r = pthread_create(&w->thread, NULL, worker_main, w);
                if (r)
                        return -r;
                w->started = true;
        }
        return 0;
}

/* Stops accepting, lets the loops end, closes everything. */
void dnsd_workers_stop(struct dnsd *d)
{
        atomic_store(&d->stopping, true);
        for (unsigned i = 0; i < d->n_workers; i++) {
                struct dnsd_worker *w = &d->workers[i];
                if (w->d && w->wake >= 0) {
                        uint64_t one = 1;
                        (void)!write(w->wake, &one, sizeof(one));
                }
        }
        for (unsigned i = 0; i < d->n_workers; i++) {
                struct dnsd_worker *w = &d->workers[i];
                if (!w->d)
                        continue; /* never set up (start failed early) */
                if (w->started)
                        pthread_join(w->thread, NULL);
                w->started = false;
                while (w->conns)
                        conn_close(w, w->conns);
                drain_done(w); /* answers that came too late: freed */
                if (w->udp >= 0)
                        close(w->udp);
                if (w->tcp >= 0)
                        close(w->tcp);
                if (w->wake >= 0)
                        close(w->wake);
                if (w->ep >= 0)
                        close(w->ep);
                w->udp = w->tcp = w->wake = w->ep = -1;
                se_dns_zone_unref(atomic_exchange(&w->next_zone, NULL));
                w->zone = se_dns_zone_unref(w->zone);
                dnsd_podindex_unref(atomic_exchange(&w->next_index, NULL));
                w->index = dnsd_podindex_unref(w->index);
                free(w->s);
                w->s = NULL;
                pthread_mutex_destroy(&w->done_lock);
        }
}
