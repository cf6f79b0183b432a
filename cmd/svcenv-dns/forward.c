/* Forwarding names outside the cluster zone, as kubeadm's `forward .
 * /etc/resolv.conf`: upstreams taken in turn (the next one first for each
 * query, the others on failure), UDP first and TCP when the answer comes
 * back truncated, each try bounded by --upstream-timeout; SERVFAIL when none
 * answers. Answers go into the cache before they go back to the client.
 *
 * Upstream I/O is blocking, in a pool of threads: a worker's loop never
 * waits on an upstream. The queue is capped; a query that finds it full gets
 * SERVFAIL at once (counted). */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <svcenv/alloc.h>
#include <svcenv/log.h>
#include <svcenv/timeutil.h>

#include "dnsd.h"

#define RCODE_SERVFAIL 2

bool dnsd_forward(struct dnsd *d, struct fwd_job *job)
{
        pthread_mutex_lock(&d->fwd_lock);
        bool ok = !d->fwd_stop && d->fwd_queued < d->max_forward_queue;
        if (ok) {
                job->next = NULL;
                if (d->fwd_tail)
                        d->fwd_tail->next = job;
                else
                        d->fwd_head = job;
                d->fwd_tail = job;
                d->fwd_queued++;
                pthread_cond_signal(&d->fwd_cond);
        }
        pthread_mutex_unlock(&d->fwd_lock);
        return ok;
}

static int wait_fd(int fd, short events, uint64_t deadline)
{
        for (;;) {
                uint64_t now = se_now_mono_ns();
                if (now >= deadline)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = fd, .events = events };
                int ms = (int)((deadline - now + 999999) / 1000000);
                int r = poll(&p, 1, ms);
                if (r > 0)
                        return 0;
                if (r < 0 && errno != EINTR)
                        return -errno;
        }
}

/* Is resp the answer to q (sent with ID id)? */
static bool answers(const uint8_t *q, size_t qlen, const uint8_t *resp, size_t rlen)
{
        char qn[SE_DNS_MAX_NAME + 1], rn[SE_DNS_MAX_NAME + 1];
        uint16_t qt, qc, rt, rc;
        if (rlen < 12 || resp[0] != q[0] || resp[1] != q[1] || !(resp[2] & 0x80))
                return false;
        if (se_dns_question(q, qlen, qn, sizeof(qn), &qt, &qc) < 0 ||
            se_dns_question(resp, rlen, rn, sizeof(rn), &rt, &rc) < 0)
                return false;
        return qt == rt && qc == rc && strcmp(qn, rn) == 0;
}

static ssize_t ask_udp(const struct se_dns_upstream *u, const uint8_t *q, size_t qlen,
                       uint8_t *resp, size_t cap, uint64_t deadline)
{
        int fd = socket(u->addr.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        ssize_t r = -EIO;
        /* connected: the kernel drops datagrams from anyone else */
        if (connect(fd, (const struct sockaddr *)&u->addr, u->len) < 0 ||
            send(fd, q, qlen, 0) != (ssize_t)qlen) {
                r = -errno;
                goto out;
        }
        for (;;) {
                if ((r = wait_fd(fd, POLLIN, deadline)) < 0)
                        goto out;
                ssize_t n = recv(fd, resp, cap, 0);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                if (n < 0) {
                        r = -errno; /* e.g. ECONNREFUSED: nobody there */
                        goto out;
                }
                if (answers(q, qlen, resp, (size_t)n)) {
                        r = n;
                        goto out;
                }
                /* a stray or spoofed datagram: keep waiting for ours */
        }
out:
        close(fd);
        return r;
}

static int io_all(int fd, bool wr, uint8_t *buf, size_t len, uint64_t deadline)
{
        size_t done = 0;
        while (done < len) {
                int r = wait_fd(fd, wr ? POLLOUT : POLLIN, deadline);
                if (r < 0)
                        return r;
                ssize_t n = wr ? send(fd, buf + done, len - done, MSG_NOSIGNAL) :
                                 recv(fd, buf + done, len - done, 0);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -ECONNRESET;
                done += (size_t)n;
        }
        return 0;
}

static ssize_t ask_tcp(const struct se_dns_upstream *u, const uint8_t *q, size_t qlen,
                       uint8_t *resp, size_t cap, uint64_t deadline)
{
        int fd = socket(u->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        ssize_t r;
        uint8_t *framed = se_malloc(qlen + 2);
        if (!framed) {
                close(fd);
                return -ENOMEM;
        }
        framed[0] = (uint8_t)(qlen >> 8);
        framed[1] = (uint8_t)qlen;
        memcpy(framed + 2, q, qlen);
        if (connect(fd, (const struct sockaddr *)&u->addr, u->len) < 0 && errno != EINPROGRESS) {
                r = -errno;
                goto out;
        }
        uint8_t lenb[2];
        if ((r = io_all(fd, true, framed, qlen + 2, deadline)) < 0 ||
            (r = io_all(fd, false, lenb, 2, deadline)) < 0)
                goto out;
        size_t n = (size_t)lenb[0] << 8 | lenb[1];
        if (n > cap) {
                r = -EMSGSIZE;
                goto out;
        }
        if ((r = io_all(fd, false, resp, n, deadline)) < 0)
                goto out;
        r = answers(q, qlen, resp, n) ? (ssize_t)n : -EPROTO;
out:
        free(framed);
        close(fd);
        return r;
}

static void forward_one(struct dnsd *d, struct fwd_job *job, uint8_t *buf, size_t cap)
{
        atomic_fetch_add(&d->m.forward_requests, 1);
        uint8_t *q = se_malloc(job->qlen);
        if (!q)
                goto fail;
        memcpy(q, job->query, job->qlen);
        /* our own ID upstream: the client's may be guessed or repeated */
        uint16_t id;
        if (getrandom(&id, sizeof(id), 0) != sizeof(id))
                id = (uint16_t)se_now_mono_ns();
        q[0] = (uint8_t)(id >> 8);
        q[1] = (uint8_t)id;
        unsigned start = atomic_fetch_add(&d->next_upstream, 1);
        ssize_t n = -EIO;
        for (unsigned k = 0; k < d->n_upstreams && n < 0 && !atomic_load(&d->stopping); k++) {
                const struct se_dns_upstream *u = &d->upstreams[(start + k) % d->n_upstreams];
                uint64_t deadline = se_now_mono_ns() + d->upstream_timeout_ns;
                n = ask_udp(u, q, job->qlen, buf, cap, deadline);
                if (n >= 12 && (buf[2] & 0x02)) {
                        atomic_fetch_add(&d->m.forward_tcp, 1);
                        ssize_t t = ask_tcp(u, q, job->qlen, buf, cap,
                                            se_now_mono_ns() + d->upstream_timeout_ns);
                        /* no TCP there: the truncated answer is still an answer */
                        if (t >= 12)
                                n = t;
                        else
                                n = ask_udp(u, q, job->qlen, buf, cap, deadline);
                }
                if (n < 0)
                        se_log_info(3, "upstream %s: %s", u->text, strerror((int)-n));
        }
        free(q);
        if (n < 12)
                goto fail;
        if (d->cache) {
                /* what CoreDNS's cache writes and keeps: one TTL for all */
                (void)se_dns_cache_ttls(buf, (size_t)n, &d->ttl_bounds);
                (void)se_dns_cache_put(d->cache, buf, (size_t)n, se_now_mono_ns() / 1000000000ull);
        }
        buf[0] = job->query[0];
        buf[1] = job->query[1];
        size_t len = (size_t)n;
        if (job->udp_max && len > job->udp_max)
                len = se_dns_truncate(buf, len, job->udp_max);
        if ((job->resp = se_malloc(len))) {
                memcpy(job->resp, buf, len);
                job->rlen = len;
        }
        return;
fail:
        atomic_fetch_add(&d->m.forward_failures, 1);
        job->rlen = se_dns_error_reply(job->query, job->qlen, RCODE_SERVFAIL, buf, cap);
        if (job->rlen && (job->resp = se_malloc(job->rlen)))
                memcpy(job->resp, buf, job->rlen);
        else
                job->rlen = 0;
}

static void *forwarder(void *data)
{
        struct dnsd *d = data;
        uint8_t *buf = se_malloc(SE_DNS_MAX_MSG);
        pthread_mutex_lock(&d->fwd_lock);
        for (;;) {
                while (!d->fwd_head && !d->fwd_stop)
                        pthread_cond_wait(&d->fwd_cond, &d->fwd_lock);
                struct fwd_job *job = d->fwd_head;
                if (!job)
                        break; /* stopping and nothing left */
                d->fwd_head = job->next;
                if (!d->fwd_head)
                        d->fwd_tail = NULL;
                d->fwd_queued--;
                d->fwd_busy++;
                pthread_mutex_unlock(&d->fwd_lock);
                if (buf)
                        forward_one(d, job, buf, SE_DNS_MAX_MSG);
                else
                        job->rlen = 0; /* no memory: the worker drops it */
                dnsd_job_done(job);
                pthread_mutex_lock(&d->fwd_lock);
                d->fwd_busy--;
                pthread_cond_broadcast(&d->fwd_cond);
        }
        pthread_mutex_unlock(&d->fwd_lock);
        free(buf);
        return NULL;
}

int dnsd_forwarders_start(struct dnsd *d)
{
        for (unsigned i = 0; i < d->n_forwarders; i++) {
                int r = pthread_create(&d->fwd_threads[i], NULL, forwarder, d);
                if (r)
                        return -r;
                d->fwd_started++;
        }
        return 0;
}

void dnsd_forwarders_stop(struct dnsd *d, uint64_t deadline_ns)
{
        pthread_mutex_lock(&d->fwd_lock);
        /* let queued and running queries finish, up to the deadline */
        while ((d->fwd_head || d->fwd_busy) && se_now_mono_ns() < deadline_ns) {
                pthread_mutex_unlock(&d->fwd_lock);
                struct timespec ts = { 0, 20000000 };
                nanosleep(&ts, NULL);
                pthread_mutex_lock(&d->fwd_lock);
        }
        d->fwd_stop = true;
        /* what is still queued fails at once (SERVFAIL) instead of waiting */
        atomic_store(&d->stopping, true);
        pthread_cond_broadcast(&d->fwd_cond);
        pthread_mutex_unlock(&d->fwd_lock);
        for (unsigned i = 0; i < d->fwd_started; i++)
                pthread_join(d->fwd_threads[i], NULL);
        d->fwd_started = 0;
}
