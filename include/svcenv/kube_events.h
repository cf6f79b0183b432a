/* kube_events.h — core/v1 Events, recorded as client-go's EventRecorder
 * does: asynchronously, correlated, rate-limited.
 *
 * se_kube_recorder_eventf() only queues (at most 1000 events; more are
 * dropped and counted), so callers on hot paths never wait for the API
 * server. One thread of the recorder writes them:
 *  - an event identical to one written before (same source, object, type,
 *    reason and message, among the last 4096 remembered) is not created
 *    again: the existing Event is patched with count + 1 and a new
 *    lastTimestamp (created anew when that Event is gone);
 *  - spam filter: per source and object and type, a bucket of 25 events
 *    refilled with one every 5 minutes; events beyond it are dropped;
 *  - a write failing with a server or transport error is tried again every
 *    10 s, 12 tries in all; other errors drop the event.
 * The Event's name is "<object name>.<hex unix nanoseconds>", its
 * namespace the object's ("default" for cluster-scoped objects).
 * Upstream also folds more than 10 events differing only in message into
 * one "(combined from similar events)" event; this recorder does not.
 *
 * RBAC: events create and patch in the objects' namespaces. */
#ifndef SVCENV_KUBE_EVENTS_H
#define SVCENV_KUBE_EVENTS_H

#include <stdbool.h>
#include <stdint.h>

#include <svcenv/kube_client.h>
#include <svcenv/macro.h>

#define SE_KUBE_EVENTS_MAX_QUEUED 1000
#define SE_KUBE_EVENT_MESSAGE_MAX 1024 /* longer messages are cut (UTF-8 safe) */

/* The object an event is about (involvedObject); strings borrowed for the
 * call only. uid and resource_version may be NULL. */
struct se_kube_objref {
        const char *kind;
        const char *api_version;
        const char *namespace;
        const char *name;
        const char *uid;
        const char *resource_version;
};

enum se_kube_event_severity { SE_KUBE_EVENT_NORMAL, SE_KUBE_EVENT_WARNING };

struct se_kube_recorder;

/* c is borrowed and must outlive the recorder; component is the event
 * source (source.component, reportingComponent), copied. Starts the writer
 * thread. NULL on -ENOMEM or when the thread cannot start. */
struct se_kube_recorder *se_kube_recorder_new(struct se_kube_client *c, const char *component);
/* Stops the writer (after the write in flight, if any; retry waits end at
 * once), drops what is still queued, frees. NULL-safe; returns NULL. */
struct se_kube_recorder *se_kube_recorder_free(struct se_kube_recorder *r);

/* Queues an event about ref. Never blocks on the network. Safe from any
 * thread. Returns 0, or -ENOMEM / -ENOBUFS (queue full; counted as
 * dropped). NULL r: does nothing, returns 0. */
int se_kube_recorder_eventf(struct se_kube_recorder *r, const struct se_kube_objref *ref,
                            enum se_kube_event_severity type, const char *reason, const char *fmt,
                            ...) SE_PRINTF(5, 6);

struct se_kube_recorder_stats {
        uint64_t created; /* Events created */
        uint64_t patched; /* repeats written as count + 1 */
        uint64_t dropped; /* queue full, spam-filtered or write failed */
};
void se_kube_recorder_stats(struct se_kube_recorder *r, struct se_kube_recorder_stats *ret);

/* Waits until the queue is empty and nothing is being written, or
 * timeout_ms passed. true when idle. For tests and shutdown. */
bool se_kube_recorder_flush(struct se_kube_recorder *r, unsigned timeout_ms);

#endif
