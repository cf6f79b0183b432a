/* kube_lease.h — leader election on a coordination.k8s.io/v1 Lease, as
 * client-go's leaderelection does it.
 *
 * A candidate tries to acquire or renew every retry period (with jitter
 * 1.2 while not leading). A lease held by someone else counts as expired
 * when its record has not changed for leaseDurationSeconds by our own
 * clock (not by the renewTime in the object, which avoids clock skew).
 * Taking over increments leaseTransitions. Writes use the lease's
 * resourceVersion, so two candidates cannot both win. A leader that cannot
 * renew within the renew deadline stops leading. On shutdown a leader
 * releases the lease (holder "", leaseDurationSeconds 1) so another
 * candidate takes over at once.
 *
 * RBAC: leases get, create, update in the lease's namespace. */
#ifndef SVCENV_KUBE_LEASE_H
#define SVCENV_KUBE_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include <svcenv/kube_client.h>

/* The spec of a Lease; strings owned by the record. */
struct se_kube_lease_record {
        char *holder; /* holderIdentity; NULL/"" = free */
        int32_t duration_s; /* leaseDurationSeconds */
        int64_t acquire_ns; /* acquireTime, wall clock; 0 unset */
        int64_t renew_ns; /* renewTime */
        int32_t transitions; /* leaseTransitions */
};

/* Reads spec of a Lease object (borrowed json). 0 or -EINVAL. */
int se_kube_lease_record_decode(const json_t *lease, struct se_kube_lease_record *ret);
/* Writes rec into lease's spec (times as MicroTime, RFC 3339 with
 * microseconds). 0 or -ENOMEM. */
int se_kube_lease_record_encode(const struct se_kube_lease_record *rec, json_t *lease);
void se_kube_lease_record_release(struct se_kube_lease_record *rec);

/* Pure rule of client-go's tryAcquireOrRenew: may identity take a Lease
 * held by holder (NULL/"": released or never held), whose record last
 * changed at observed_ns by the candidate's own monotonic clock, lasting
 * duration_ns, at now_ns? Its own lease it may always renew. */
bool se_kube_lease_can_acquire(const char *holder, const char *identity, uint64_t observed_ns,
                               uint64_t duration_ns, uint64_t now_ns);

typedef void (*se_kube_leader_fn)(void *data);
typedef void (*se_kube_new_leader_fn)(void *data, const char *identity);

struct se_kube_leader_opts {
        const char *ns; /* the Lease's namespace */
        const char *name; /* the Lease's name */
        const char *identity; /* this candidate (e.g. the pod name) */
        unsigned lease_ms; /* 0: 15 s */
        unsigned renew_deadline_ms; /* 0: 10 s */
        unsigned retry_ms; /* 0: 2 s */
        bool no_release; /* keep the lease on shutdown */
        se_kube_leader_fn on_started; /* became leader (elector's thread) */
        se_kube_leader_fn on_stopped; /* stopped leading: lost (elector's thread)
                                       * or shutdown (in se_kube_leader_free) */
        se_kube_new_leader_fn on_new_leader; /* observed holder changed; may be NULL */
        void *data;
};

struct se_kube_leader;

/* Validates (lease > renew deadline > 1.2 × retry, all > 0) and makes an
 * elector; c is borrowed. 0 or -EINVAL (diag) / -ENOMEM. */
int se_kube_leader_new(struct se_kube_client *c, const struct se_kube_leader_opts *opts,
                       struct se_kube_leader **ret, struct se_diag *diag);
/* Starts the election thread. 0 or -errno. */
int se_kube_leader_start(struct se_kube_leader *l);
/* True while this candidate holds the lease. */
bool se_kube_leader_is_leader(const struct se_kube_leader *l);
/* Identity of the last observed holder into buf ("" when none). */
void se_kube_leader_holder(struct se_kube_leader *l, char *buf, size_t size);
/* Stops the thread, releases the lease when leading (unless no_release),
 * calls on_stopped if it was leading, frees. NULL-safe; NULL. */
struct se_kube_leader *se_kube_leader_free(struct se_kube_leader *l);

#endif
