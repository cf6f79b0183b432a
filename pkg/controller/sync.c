/* One sync of a service key: plan under the store's read lock, write
 * without it (see controller.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <svcenv/alloc.h>
#include <svcenv/decode.h>
#include <svcenv/encode.h>
#include <svcenv/strv.h>
#include <svcenv/timeutil.h>

#include "controller_internal.h"

/* One API call the plan asks for. */
struct op {
        enum ctl_res res;
        enum ctl_op op;
        json_t *body; /* create/update */
        char *name; /* delete */
};

struct ops {
        struct op *v;
        size_t n, cap;
        /* the Service, for events about its slices (NULL: none) */
        const char *service; /* its name (borrowed from the key) */
        char *svc_uid, *svc_rv;
        /* the slices plan's events for the Service (owned) */
        struct se_slices_event *events;
        uint32_t n_events;
        /* the EndpointSlice sync's errors, upstream's texts: pods on
         * unknown nodes, then the failed write (one event carries them) */
        struct se_strv slice_errors;
};

static int ops_push(struct ops *o, enum ctl_res res, enum ctl_op op, json_t *body, const char *name)
{
        if (op != CTL_OP_DELETE && !body)
                return -ENOMEM;
        if (o->n == o->cap) {
                size_t cap = o->cap ? o->cap * 2 : 8;
                struct op *v = se_reallocarray(o->v, cap, sizeof(*v));
                if (!v) {
                        json_decref(body);
                        return -ENOMEM;
                }
                o->v = v;
                o->cap = cap;
        }
        char *n = name ? se_strdup(name) : NULL;
        if (name && !n) {
                json_decref(body);
                return -ENOMEM;
        }
        o->v[o->n++] = (struct op){ res, op, body, n };
        return 0;
}

static void ops_release(struct ops *o)
{
        for (size_t i = 0; i < o->n; i++) {
                json_decref(o->v[i].body);
                free(o->v[i].name);
        }
        free(o->v);
        free(o->svc_uid);
        free(o->svc_rv);
        for (uint32_t i = 0; i < o->n_events; i++)
                free(o->events[i].message);
        free(o->events);
        se_strv_release(&o->slice_errors);
}

/* A create's body must not carry a resourceVersion. */
static json_t *encode_for(const struct se_object *obj, enum ctl_op op)
{
        json_t *j = se_encode_object(obj);
        if (j && op == CTL_OP_CREATE)
                json_object_del(json_object_get(j, "metadata"), "resourceVersion");
        return j;
}

static const struct se_node *node_of(void *data, const char *name)
{
        return se_node_of(se_store_get(data, SE_KIND_NODE, "", name));
}

static long slice_endpoints(struct se_endpoint_slice *const *v, uint32_t n)
{
        long t = 0;
        for (uint32_t i = 0; i < n; i++)
                t += v[i]->n_endpoints;
        return t;
}

static long slice_endpoints_c(const struct se_endpoint_slice *const *v, uint32_t n)
{
        long t = 0;
        for (uint32_t i = 0; i < n; i++)
                t += v[i]->n_endpoints;
        return t;
}

/* Builds the API calls of one key under the read lock. *ret_missing_node
 * tells upstream's "pods on unknown nodes: retry" rule. */
static int plan_key(struct se_controller *ctl, const char *ns, const char *name, struct ops *ops,
                    bool *ret_missing_node)
{
        const struct se_service *svc =
                se_service_of(se_store_get(ctl->store, SE_KIND_SERVICE, ns, name));
        const struct se_endpoints *ep =
                se_endpoints_of(se_store_get(ctl->store, SE_KIND_ENDPOINTS, ns, name));
        unsigned w = ctl->opts.ep.write ? ctl->opts.ep.write :
                                          SE_EP_WRITE_ENDPOINTS | SE_EP_WRITE_SLICES;
        const struct se_object **pods = NULL, **slices = NULL;
        long n_pods = 0, n_slices = 0;
        int r = 0;
        int64_t trigger = 0;
        char key[512];
        snprintf(key, sizeof(key), "%s/%s", ns, name);

        if (svc) {
                ops->svc_uid = se_strdup(svc->obj.meta.uid ? svc->obj.meta.uid : "");
                ops->svc_rv = se_strdup(
                        svc->obj.meta.resource_version ? svc->obj.meta.resource_version : "");
        }
        if (svc && se_endpoints_service_managed(svc)) {
                n_pods = se_store_select(ctl->store, SE_KIND_POD, ns, &svc->selector, &pods);
                if (n_pods < 0)
                        return (int)n_pods;
                r = se_trigger_tracker_compute(ctl->tracker, svc,
                                               (const struct se_pod *const *)pods, (size_t)n_pods,
                                               &trigger);
        } else if (!svc) {
                /* the planner deletes the Endpoints left behind */
                se_trigger_tracker_forget(ctl->tracker, ns, name);
        }
        if (r == 0 && (w & SE_EP_WRITE_SLICES)) {
                struct se_kv kv = { SE_SLICE_SERVICE_NAME_LABEL, name };
                struct se_kvlist sel = { &kv, 1 };
                n_slices = se_store_select(ctl->store, SE_KIND_ENDPOINT_SLICE, ns, &sel, &slices);
                if (n_slices < 0)
                        r = (int)n_slices;
        }
        struct se_service_plan plan = { 0 };
        if (r == 0) {
                struct se_endpoints_input in = {
                        .namespace = ns,
                        .name = name,
                        .svc = svc,
                        .pods = (const struct se_pod *const *)pods,
                        .n_pods = (size_t)(n_pods > 0 ? n_pods : 0),
                        .get_node = node_of,
                        .node_data = ctl->store,
                        .trigger_time_ns = trigger,
                        .topology = ctl->topology,
                };
                struct se_endpoints_opts eo = ctl->opts.ep;
                eo.write = w;
                r = se_service_plan(&in, ep, (const struct se_endpoint_slice *const *)slices,
                                    (size_t)(n_slices > 0 ? n_slices : 0), &eo, &plan);
        }
        if (r < 0)
                goto done;
        const struct se_endpoints_plan *pe = &plan.endpoints;
        if (pe->action == SE_EP_CREATE || pe->action == SE_EP_UPDATE) {
                enum ctl_op op = pe->action == SE_EP_CREATE ? CTL_OP_CREATE : CTL_OP_UPDATE;
                r = ops_push(ops, CTL_RES_ENDPOINTS, op, encode_for(&pe->obj->obj, op), NULL);
        } else if (pe->action == SE_EP_DELETE) {
                r = ops_push(ops, CTL_RES_ENDPOINTS, CTL_OP_DELETE, NULL, name);
        }
        const struct se_slices_plan *ps = &plan.slices;
        /* upstream's order: creates, updates, deletes; no creates while the
         * Service is being deleted */
        bool deleting = svc && svc->obj.meta.deletion_timestamp;
        for (uint32_t i = 0; r == 0 && !deleting && i < ps->n_create; i++)
                r = ops_push(ops, CTL_RES_SLICES, CTL_OP_CREATE,
                             encode_for(&ps->create[i]->obj, CTL_OP_CREATE), NULL);
        for (uint32_t i = 0; r == 0 && i < ps->n_update; i++)
                r = ops_push(ops, CTL_RES_SLICES, CTL_OP_UPDATE,
                             encode_for(&ps->update[i]->obj, CTL_OP_UPDATE), NULL);
        for (uint32_t i = 0; r == 0 && i < ps->n_remove; i++)
                r = ops_push(ops, CTL_RES_SLICES, CTL_OP_DELETE, NULL,
                             ps->remove[i]->obj.meta.name);
        *ret_missing_node = ps->pods_missing_node > 0;
        /* the events go out after the writes, whatever their result */
        ops->events = plan.slices.events;
        ops->n_events = plan.slices.n_events;
        plan.slices.events = NULL;
        plan.slices.n_events = 0;
        ops->slice_errors = plan.slices.node_errors;
        plan.slices.node_errors = (struct se_strv)SE_STRV_INIT;
        if (r == 0 && svc && se_endpoints_service_managed(svc) && (w & SE_EP_WRITE_SLICES))
                ctl_gauges_set(ctl, key,
                               slice_endpoints(ps->create, ps->n_create) +
                                       slice_endpoints(ps->update, ps->n_update) +
                                       slice_endpoints_c(ps->unchanged, ps->n_unchanged),
                               (long)(ps->n_create + ps->n_update + ps->n_unchanged));
        else if (r == 0 && !svc)
                ctl_gauges_set(ctl, key, -1, -1);
done:
        se_service_plan_release(&plan);
        free(pods);
        free(slices);
        return r;
}

/* Puts what the server returned into the store, so the next sync plans
 * against it even before the watch delivers it; a slice's generation is
 * recorded first, so its events are known as ours. */
static void remember(struct se_controller *ctl, enum ctl_res res, const char *ns, json_t *obj)
{
        struct se_object *o = NULL;
        struct se_decode_error err;
        enum se_kind kind = res == CTL_RES_ENDPOINTS ? SE_KIND_ENDPOINTS : SE_KIND_ENDPOINT_SLICE;
        /* decoded as the informers store them */
        if (!obj || se_decode_object_flags(obj, kind, ns, ctl_decode_flags(kind), &o, &err) != 0 ||
            !o)
                return;
        if (kind == SE_KIND_ENDPOINT_SLICE)
                ctl_slice_written(ctl, ns, o->meta.name, se_meta_generation(&o->meta));
        (void)se_store_put(ctl->store, o);
}

/* upstream's Warning events for a refused write: the endpoints
 * controller's on the Endpoints at once; the endpointslice controller's
 * text kept for the one event of the sync (record_slice_errors) */
static void record_failure(struct se_controller *ctl, const char *ns, struct ops *ops,
                           const struct op *op, const char *name, const struct se_diag *diag)
{
        const char *svc = name ? name : "";
        const char *err = diag->text[0] ? se_kube_diag_message(diag) : "unknown error";
        if (op->res == CTL_RES_ENDPOINTS) {
                if (op->op == CTL_OP_DELETE)
                        return;
                json_t *meta = json_object_get(op->body, "metadata");
                struct se_kube_objref ref = {
                        .kind = "Endpoints",
                        .api_version = "v1",
                        .namespace = ns,
                        .name = svc,
                        .uid = json_string_value(json_object_get(meta, "uid")),
                        .resource_version =
                                json_string_value(json_object_get(meta, "resourceVersion")),
                };
                if (op->op == CTL_OP_CREATE)
                        se_kube_recorder_eventf(ctl->ep_events, &ref, SE_KUBE_EVENT_WARNING,
                                                "FailedToCreateEndpoint",
                                                "Failed to create endpoint for service %s/%s: %s",
                                                ns, svc, err);
                else
                        se_kube_recorder_eventf(ctl->ep_events, &ref, SE_KUBE_EVENT_WARNING,
                                                "FailedToUpdateEndpoint",
                                                "Failed to update endpoint %s/%s: %s", ns, svc,
                                                err);
                return;
        }
        /* the slices' failure goes into the sync's one event (see
         * record_slice_errors), as upstream's reconciler returns it */
        const char *service = ops->service;
        char *msg;
        int n = op->op == CTL_OP_CREATE ?
                        se_asprintf(&msg, "failed to create EndpointSlice for Service %s/%s: %s",
                                    ns, service, err) :
                        se_asprintf(&msg, "failed to %s %s EndpointSlice for Service %s/%s: %s",
                                    op->op == CTL_OP_UPDATE ? "update" : "delete", svc, ns, service,
                                    err);
        if (n < 0 || se_strv_push_consume(&ops->slice_errors, msg) < 0)
                ctl_log(ctl, SE_CTL_LOG_ERROR, 0, "out of memory recording a failed write");
}

/* upstream's FailedToUpdateEndpointSlices: one Warning on the Service per
 * failed sync, with the reconciler's errors joined */
static void record_slice_errors(struct se_controller *ctl, const char *ns, const struct ops *ops)
{
        if (!ops->slice_errors.n || !ops->svc_uid)
                return; /* nothing failed, or no Service to tell */
        char *all = se_errors_join(&ops->slice_errors, SE_SLICES_ERRORS_MAX_BYTES);
        struct se_kube_objref ref = { .kind = "Service",
                                      .api_version = "v1",
                                      .namespace = ns,
                                      .name = ops->service,
                                      .uid = ops->svc_uid,
                                      .resource_version = ops->svc_rv };
        if (!all)
                ctl_log(ctl, SE_CTL_LOG_ERROR, 0, "%s/%s: event text too long or out of memory", ns,
                        ops->service);
        else
                se_kube_recorder_eventf(ctl->slice_events, &ref, SE_KUBE_EVENT_WARNING,
                                        "FailedToUpdateEndpointSlices",
                                        "Error updating Endpoint Slices for Service %s/%s: %s", ns,
                                        ops->service, all);
        free(all);
}

static int run_op(struct se_controller *ctl, const char *ns, struct ops *ops, struct op *op,
                  bool *ret_drop)
{
        const struct se_kube_resource *res = se_kube_resource_of(
                op->res == CTL_RES_ENDPOINTS ? SE_KIND_ENDPOINTS : SE_KIND_ENDPOINT_SLICE);
        struct se_diag diag = { 0 };
        json_t *out = NULL;
        int r;
        switch (op->op) {
        case CTL_OP_CREATE:
                r = se_kube_create(ctl->client, res, ns, op->body, &out, &diag);
                break;
        case CTL_OP_UPDATE:
                r = se_kube_update(ctl->client, res, ns, op->body, &out, &diag);
                break;
        default:
                r = se_kube_delete(ctl->client, res, ns, op->name, NULL, &diag);
                if (r == -ENOENT)
                        r = 0;
                break;
        }
        if (r == 0 && out)
                remember(ctl, op->res, ns, out);
        if (r == 0 && op->op == CTL_OP_DELETE && op->res == CTL_RES_SLICES)
                ctl_slice_written(ctl, ns, op->name, -1);
        if (r == 0 && !out && op->op == CTL_OP_DELETE)
                (void)se_store_delete(ctl->store,
                                      op->res == CTL_RES_ENDPOINTS ? SE_KIND_ENDPOINTS :
                                                                     SE_KIND_ENDPOINT_SLICE,
                                      ns, op->name);
        json_decref(out);
        enum ctl_result result = r == 0                       ? CTL_OK :
                                 r == -ESTALE || r == -EEXIST ? CTL_CONFLICT :
                                                                CTL_ERROR;
        atomic_fetch_add(&ctl->writes[op->res][op->op][result], 1);
        if (r < 0) {
                const char *what = op->res == CTL_RES_ENDPOINTS ? "Endpoints" : "EndpointSlice";
                const char *name = op->name ?
                                           op->name :
                                           json_string_value(json_object_get(
                                                   json_object_get(op->body, "metadata"), "name"));
                if (op->op == CTL_OP_CREATE && se_controller_namespace_terminating(r, diag.text)) {
                        *ret_drop = true;
                        ctl_log(ctl, SE_CTL_LOG_INFO, 2,
                                "namespace %s is terminating: not creating %s %s", ns, what,
                                name ? name : "");
                        return 0;
                }
                record_failure(ctl, ns, ops, op, name, &diag);
                ctl_log(ctl, result == CTL_CONFLICT ? SE_CTL_LOG_INFO : SE_CTL_LOG_WARN,
                        result == CTL_CONFLICT ? 2 : 0, "%s %s %s/%s: %s",
                        op->op == CTL_OP_CREATE ? "creating" :
                        op->op == CTL_OP_UPDATE ? "updating" :
                                                  "deleting",
                        what, ns, name ? name : "", diag.text[0] ? diag.text : strerror(-r));
        }
        return r;
}

/* upstream's topology events on the Service (TopologyAwareHintsEnabled /
 * TopologyAwareHintsDisabled) */
static void record_events(struct se_controller *ctl, const char *ns, const struct ops *ops)
{
        if (!ops->svc_uid)
                return;
        struct se_kube_objref ref = { .kind = "Service",
                                      .api_version = "v1",
                                      .namespace = ns,
                                      .name = ops->service,
                                      .uid = ops->svc_uid,
                                      .resource_version = ops->svc_rv };
        for (uint32_t i = 0; i < ops->n_events; i++) {
                const struct se_slices_event *e = &ops->events[i];
                ctl_log(ctl, SE_CTL_LOG_INFO, 2, "%s/%s: %s: %s", ns, ops->service, e->reason,
                        e->message);
                (void)se_kube_recorder_eventf(ctl->slice_events, &ref,
                                              e->warning ? SE_KUBE_EVENT_WARNING :
                                                           SE_KUBE_EVENT_NORMAL,
                                              e->reason, "%s", e->message);
        }
}

int ctl_sync(struct se_controller *ctl, const char *key)
{
        uint64_t t0 = se_now_mono_ns();
        char buf[512];
        const char *ns, *name;
        if (se_controller_split_key(key, buf, sizeof(buf), &ns, &name) < 0)
                return 0; /* not a key of ours: nothing to retry */
        struct ops ops = { .service = name };
        bool missing_node = false;
        se_store_rdlock(ctl->store);
        int r = plan_key(ctl, ns, name, &ops, &missing_node);
        se_store_unlock(ctl->store);
        bool drop = false;
        /* as upstream's two controllers: a failed Endpoints write does not
         * keep the slices from being written; the first error is returned */
        int r_ep = 0;
        for (size_t i = 0; r == 0 && i < ops.n; i++) {
                int ri = run_op(ctl, ns, &ops, &ops.v[i], &drop);
                if (drop)
                        break;
                if (ri < 0 && ops.v[i].res == CTL_RES_ENDPOINTS && !r_ep)
                        r_ep = ri;
                else if (ri < 0)
                        r = ri;
        }
        if (r == 0)
                r = r_ep;
        record_events(ctl, ns, &ops);
        record_slice_errors(ctl, ns, &ops);
        if (r == 0 && ops.n) {
                uint64_t since = ctl_take_pod_change(ctl, key);
                if (since)
                        se_histogram_observe_ns(&ctl->change_to_write, se_now_mono_ns() - since);
        } else if (r == 0) {
                atomic_fetch_add(&ctl->skipped_writes, 1);
                (void)ctl_take_pod_change(ctl, key);
        }
        ctl_log(ctl, SE_CTL_LOG_INFO, 4, "synced %s: %zu writes (%s)", key, ops.n,
                r == 0 ? "ok" : strerror(-r));
        ops_release(&ops);
        if (r == 0 && missing_node && !drop)
                r = -EAGAIN; /* upstream: slices written, then retried */
        atomic_fetch_add(&ctl->syncs[r == 0 ? CTL_SYNC_SUCCESS : CTL_SYNC_ERROR], 1);
        se_histogram_observe_ns(&ctl->sync_duration, se_now_mono_ns() - t0);
        return r;
}
