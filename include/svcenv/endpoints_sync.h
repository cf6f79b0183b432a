/* endpoints_sync.h — what the Endpoints controllers keep between syncs.
 *
 * Two pieces of upstream's controller state, pure and testable:
 *  - the trigger-time tracker behind the
 *    `endpoints.kubernetes.io/last-change-trigger-time` annotation
 *    (pkg/controller/util/endpoint's TriggerTimeTracker);
 *  - which Services a pod event must re-sync (GetServicesToUpdateOnPodChange).
 * Neither does I/O. */
#ifndef SVCENV_ENDPOINTS_SYNC_H
#define SVCENV_ENDPOINTS_SYNC_H

#include <stddef.h>
#include <stdint.h>

#include <svcenv/model.h>
#include <svcenv/store.h>
#include <svcenv/strv.h>

struct se_trigger_tracker;

/* New empty tracker; NULL on -ENOMEM. */
struct se_trigger_tracker *se_trigger_tracker_new(void);
/* NULL-safe; returns NULL. */
struct se_trigger_tracker *se_trigger_tracker_free(struct se_trigger_tracker *t);

/* The trigger time for a sync of svc with the pods it selects, and records
 * the state for the next call:
 *  - the first call for a Service (since start or since it was forgotten)
 *    gives its creationTimestamp;
 *  - later calls give the earliest trigger time that moved since the last
 *    call: a pod's Ready lastTransitionTime newer than recorded (or a pod not
 *    seen before), or a newer Service creationTimestamp; 0 when none moved
 *    (then the annotation is removed when the object is written).
 * Times are ns since the epoch. Safe to call from several threads for
 * different Services, never concurrently for the same one. 0 or -ENOMEM (the
 * state is then unchanged). */
int se_trigger_tracker_compute(struct se_trigger_tracker *t, const struct se_service *svc,
                               const struct se_pod *const *pods, size_t n_pods, int64_t *ret_ns);
/* Drops the state of ns/name (on Service delete). */
void se_trigger_tracker_forget(struct se_trigger_tracker *t, const char *ns, const char *name);

/* How a pod update matters to Endpoints (upstream's podEndpointsChanged). */
enum se_pod_change_flags {
        /* deletionTimestamp set on either side, Ready flipped, or podIPs changed */
        SE_POD_ENDPOINTS_CHANGED = 1 << 0,
        /* labels, hostname or subdomain changed: the Services it matches may differ */
        SE_POD_MEMBERSHIP_CHANGED = 1 << 1,
};

unsigned se_pod_change(const struct se_pod *old_pod, const struct se_pod *new_pod);

/* Appends to ret the keys ("ns/name", sorted, unique) of the Services a pod
 * event must sync: an add (old_pod NULL) or delete (new_pod NULL) syncs every
 * Service whose selector matches the pod; an update syncs nothing when the
 * resourceVersion did not move (a resync) or nothing relevant changed,
 * otherwise the Services of the new labels — and, when the labels changed,
 * the union of old and new Services if the endpoints also changed, else the
 * Services the pod joined or left. Services without a selector never match.
 * The caller holds the store's read lock. 0 or -ENOMEM. */
int se_endpoints_services_for_pod_event(const struct se_store *s, const struct se_pod *old_pod,
                                        const struct se_pod *new_pod, struct se_strv *ret);

#endif
