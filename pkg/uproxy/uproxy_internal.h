/* uproxy_internal.h — the userspace proxy's state shared by its files:
 * per service-port balancing state (lives across snapshots), endpoint
 * choice, affinity, the retry plan. */
#ifndef SVCENV_UPROXY_INTERNAL_H
#define SVCENV_UPROXY_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <svcenv/hashmap.h>
#include <svcenv/lb.h>
#include <svcenv/strbuf.h>
#include <svcenv/uproxy.h>

#define UPROXY_MAX_ATTEMPTS       4 /* kube-proxy v1.25's EndpointDialTimeouts */
#define UPROXY_DEFAULT_AFFINITY_S 10800
#define UPROXY_MAX_AFFINITY       65536 /* clients remembered per service port */

/* One endpoint of a service port. Referenced by the service and by every
 * connection to it; freed at the last reference. */
struct uproxy_ep {
        atomic_int refs;
        struct sockaddr_storage addr;
        socklen_t addr_len;
        char str[64];
        bool ready, serving, terminating; /* under the service's mutex */
        int64_t penalty_until_ns; /* under the service's mutex */
        atomic_bool removed; /* gone from the service: UDP sessions end */
        /* IPVS's counts: active = established, inactive = the others */
        atomic_long active, inactive;
        /* decisions (relaxed adds under the service's mutex): connections
         * the scheduler chose it for since the scheduler was made, and
         * retries round robin placed on it when the hash could not */
        atomic_ulong picked, fallback;
};

struct uproxy_aff {
        char key[48]; /* client IP text; the map's key */
        struct uproxy_ep *ep; /* borrowed: dropped before the ep leaves */
        int64_t last_used_ns;
};

/* One service port's balancing state, found by its key across snapshots. */
struct uproxy_svc {
        atomic_int refs;
        pthread_mutex_t mu; /* guards eps, cursor, affinity, penalties */
        char key[300], spn[300];
        char scheduler[SE_UPROXY_MAX_SCHED];
        int proto;
        bool affinity;
        int32_t affinity_timeout;
        struct uproxy_ep **eps;
        uint32_t n_eps;
        uint32_t cursor; /* the retry fallback's round robin: the next index */
        struct se_lb *lb; /* the scheduler, over eps in their order */
        struct se_lb_dest *lbd; /* its view of eps (n_eps of them) */
        char lb_spec[SE_UPROXY_MAX_SCHED]; /* the scheduler lb was made for */
        struct se_hashmap aff; /* client IP -> struct uproxy_aff */
        atomic_bool removed;
        uint64_t gen; /* the last update that had it (update thread only) */
        atomic_ulong conns_active, conns_total, retries, failures;
};

struct uproxy_ep *uproxy_ep_ref(struct uproxy_ep *ep);
void uproxy_ep_unref(struct uproxy_ep *ep);
struct uproxy_svc *uproxy_svc_new(const char *key);
struct uproxy_svc *uproxy_svc_ref(struct uproxy_svc *s);
void uproxy_svc_unref(struct uproxy_svc *s);
/* Replaces s's endpoints and settings with svc's (s->mu taken): endpoints
 * kept by their "ip:port" keep their counters; the others are marked
 * removed and their affinity entries dropped. 0 or -ENOMEM. */
int uproxy_svc_set(struct uproxy_svc *s, const struct se_uproxy_svc *svc);
/* Marks every endpoint removed and empties s (the service port is gone). */
void uproxy_svc_clear(struct uproxy_svc *s);

/* The endpoints already tried for one connection. */
struct uproxy_tried {
        struct uproxy_ep *ep[UPROXY_MAX_ATTEMPTS];
        unsigned n;
};

/* The endpoint choice: the endpoint for a new connection from client to
 * vip (the VIP:port it asked for; may be NULL), never one in tried,
 * preferring endpoints out of the penalty box. Affinity first unless reset
 * (a failed attempt); then the service's scheduler (pkg/lb; rr when the
 * annotation names none) over the ready endpoints (serving-terminating
 * ones only when none is ready, as kube-proxy's fallback). A retry that a
 * hashing scheduler cannot place (its endpoint was tried) goes round robin
 * to the ones left: the retry is the mode's promise. Takes s->mu. A new
 * reference, or NULL when no endpoint is left. */
struct uproxy_ep *uproxy_pick(struct uproxy_svc *s, const struct sockaddr *client,
                              const struct sockaddr *vip, const struct uproxy_tried *tried,
                              bool affinity_reset, int64_t now_ns);
/* Puts ep in the penalty box until now + penalty (s->mu taken). */
void uproxy_penalize(struct uproxy_svc *s, struct uproxy_ep *ep, int64_t now_ns,
                     int64_t penalty_ns);

/* Appends svcenv_proxy_scheduler_picks_total and
 * svcenv_proxy_scheduler_fallback_total for every service port of svcs
 * (key -> struct uproxy_svc; the caller keeps it from changing). */
void uproxy_decision_metrics(const struct se_hashmap *svcs, struct se_strbuf *out);

/* Upstream's balancer: an entry is alive while int(age in seconds) < ttl. */
bool uproxy_affinity_alive(int64_t last_used_ns, int64_t now_ns, int32_t ttl_s);
/* Drops entries with age >= ttl (CleanupStaleStickySessions). s->mu held. */
void uproxy_affinity_expire(struct uproxy_svc *s, int64_t now_ns);

/* The connect timeout of attempt k (0-based): 250 ms, 500 ms, 1 s, 2 s;
 * -1 when k is past the last attempt. */
int64_t uproxy_attempt_timeout_ns(unsigned k);

/* The client IP text of a sockaddr (affinity key). */
void uproxy_addr_ip(const struct sockaddr *sa, char *buf, size_t size);

#endif
