/* ctl_lease.h — leader election on a coordination.k8s.io/v1 Lease, as
 * client-go's leaderelection with a LeaseLock:
 *  - a candidate takes the Lease when it does not exist, when its holder is
 *    empty (released), or when the record has not changed for
 *    leaseDurationSeconds as seen on the candidate's own clock (no trust in
 *    the holder's timestamps);
 *  - the leader renews every retry period; when no renew succeeded for the
 *    renew deadline it has lost the lease (upstream then exits);
 *  - on a clean stop the leader releases: holderIdentity "", duration 1 s.
 * Writes are PUTs with the read resourceVersion, so two candidates never
 * both win. */
#ifndef SVCENV_CTL_LEASE_H
#define SVCENV_CTL_LEASE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <svcenv/kube_client.h>

struct se_ctl_lease_opts {
        const char *ns; /* required */
        const char *name; /* required */
        const char *identity; /* required: holderIdentity */
        uint64_t lease_ns; /* 0: 15 s */
        uint64_t renew_deadline_ns; /* 0: 10 s */
        uint64_t retry_ns; /* 0: 2 s */
};

/* Pure: may a candidate take a Lease whose holder is holder (NULL/"":
 * none), last seen changing at observed_ns, lasting duration_ns, at now_ns? */
bool se_ctl_lease_can_acquire(const char *holder, const char *identity, uint64_t observed_ns,
                              uint64_t duration_ns, uint64_t now_ns);

typedef void (*se_ctl_lease_fn)(void *data);

struct se_ctl_lease;

/* c is borrowed; opts strings are copied. NULL on -ENOMEM. */
struct se_ctl_lease *se_ctl_lease_new(struct se_kube_client *c, const struct se_ctl_lease_opts *o);
struct se_ctl_lease *se_ctl_lease_free(struct se_ctl_lease *l);

/* Campaigns until leader (calls started), renews until stop is set or the
 * lease is lost (then calls stopped). Blocks. Returns 0 after a clean stop
 * (the lease released when held), -ENOLCK when the lease was lost, or the
 * error of the release (se_ctl_lease_error() says why). */
int se_ctl_lease_run(struct se_ctl_lease *l, const atomic_bool *stop, se_ctl_lease_fn started,
                     se_ctl_lease_fn stopped, void *data);
bool se_ctl_lease_is_leader(const struct se_ctl_lease *l);
/* Counters for metrics: transitions to leader, failed renews. */
unsigned se_ctl_lease_acquired(const struct se_ctl_lease *l);
/* Why the last release failed ("" when it did not). Borrowed. */
const char *se_ctl_lease_error(const struct se_ctl_lease *l);

#endif
