/* svcenv endpoints: the Endpoints / EndpointSlices the controller would
 * write for a cluster read from manifests, or (--plan) what it would do. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/encode.h>
#include <svcenv/endpoints.h>
#include <svcenv/parse.h>
#include <svcenv/strbuf.h>
#include <svcenv/timeutil.h>
#include <svcenv/topology.h>

#include "cli.h"

static const char usage[] =
        "Usage: svcenv endpoints -f CLUSTER [-n NS | -A] [--slices] [-o json|yaml] [--plan]\n"
        "                        [--max-endpoints-per-slice N] [--managed-by VALUE]\n"
        "\n"
        "Prints the Endpoints (with --slices: the EndpointSlices) the controller would\n"
        "write for every Service with a selector, as a v1 List: objects it would create\n"
        "or update, and existing ones that are already right. Without -n every\n"
        "namespace is processed.\n"
        "\n"
        "  --plan                      one line per service instead: NS/NAME followed by\n"
        "                              create, update, unchanged or delete; with --slices\n"
        "                              also NS/NAME event TYPE REASON MESSAGE for the\n"
        "                              events the controller would record on the Service\n"
        "  --slices                    EndpointSlices instead of Endpoints\n"
        "  --max-endpoints-per-slice N 1..1000 (default 100)\n"
        "  --managed-by VALUE          the managed-by label value of the objects written\n"
        "                              (default endpoint-controller for Endpoints,\n"
        "                              endpointslice-controller.k8s.io for slices)\n"
        "\n"
        "The last-change-trigger-time annotation is the Service's creationTimestamp, as\n"
        "upstream writes on its first sync of a Service (none when the manifest has no\n"
        "creationTimestamp), so the output is the same on every run.\n"
        "\n"
        "Topology Aware Routing (service.kubernetes.io/topology-mode: Auto) hints use\n"
        "the Nodes of CLUSTER: zone label, Ready condition and allocatable cpu.\n";

struct run {
        struct se_store *store;
        struct se_topology_cache *topology;
        struct se_endpoints_opts opts;
        bool slices, plan;
        const char *ns; /* NULL: all */
        const struct se_object **out; /* items to print (new refs in owned) */
        size_t n_out;
        struct se_object **owned;
        size_t n_owned;
};

static const struct se_node *get_node(void *data, const char *name)
{
        return se_node_of(se_store_get(data, SE_KIND_NODE, "", name));
}

static int push(struct run *r, const struct se_object *o, bool own)
{
        const struct se_object **v = se_reallocarray(r->out, r->n_out + 1, sizeof(*v));
        if (!v)
                return -1;
        r->out = v;
        r->out[r->n_out++] = o;
        if (!own)
                return 0;
        struct se_object **w = se_reallocarray(r->owned, r->n_owned + 1, sizeof(*w));
        if (!w) {
                r->n_out--;
                return -1;
        }
        r->owned = w;
        r->owned[r->n_owned++] = se_object_ref(SE_UNCONST(struct se_object, o));
        return 0;
}

static int cmp_obj_name(const void *a, const void *b)
{
        return strcmp((*(const struct se_object *const *)a)->meta.name,
                      (*(const struct se_object *const *)b)->meta.name);
}

/* One service key: svc may be NULL (gone). */
static int sync_key(struct run *r, const char *ns, const char *name, const struct se_service *svc)
{
        struct se_endpoints_input in = { .namespace = ns,
                                         .name = name,
                                         .svc = svc,
                                         .get_node = get_node,
                                         .node_data = r->store,
                                         .topology = r->topology };
        const struct se_object **pods = NULL, **slices = NULL;
        long n_pods = 0, n_slices = 0;
        int64_t t;
        if (svc && se_meta_creation_timestamp(&svc->obj.meta) &&
            se_time_parse_rfc3339(se_meta_creation_timestamp(&svc->obj.meta), &t) == 0)
                in.trigger_time_ns = t;
        if (svc && se_endpoints_service_managed(svc)) {
                n_pods = se_store_select(r->store, SE_KIND_POD, ns, &svc->selector, &pods);
                if (n_pods < 0)
                        return -1;
        }
        in.pods = (const struct se_pod *const *)pods;
        in.n_pods = (size_t)n_pods;
        struct se_service_plan plan;
        r->opts.write = r->slices ? SE_EP_WRITE_SLICES : SE_EP_WRITE_ENDPOINTS;
        int rc = 0;
        if (r->slices &&
            (n_slices = se_store_list(r->store, SE_KIND_ENDPOINT_SLICE, ns, &slices)) < 0)
                rc = -1;
        const struct se_endpoints *existing =
                se_endpoints_of(se_store_get(r->store, SE_KIND_ENDPOINTS, ns, name));
        if (rc == 0)
                rc = se_service_plan(&in, existing, (const struct se_endpoint_slice *const *)slices,
                                     (size_t)n_slices, &r->opts, &plan);
        free(pods);
        free(slices);
        if (rc < 0)
                return -1;
        enum se_ep_action action = r->slices ? plan.slices.action : plan.endpoints.action;
        if (r->plan) {
                if (action != SE_EP_SKIP)
                        printf("%s/%s %s\n", ns, name, se_ep_action_name(action));
                for (uint32_t i = 0; r->slices && i < plan.slices.n_events; i++) {
                        const struct se_slices_event *e = &plan.slices.events[i];
                        printf("%s/%s event %s %s %s\n", ns, name,
                               e->warning ? "Warning" : "Normal", e->reason, e->message);
                }
                /* pods on unknown Nodes: the controller's event after the writes */
                char *errs = r->slices ? se_errors_join(&plan.slices.node_errors,
                                                        SE_SLICES_ERRORS_MAX_BYTES) :
                                         NULL;
                if (errs)
                        printf("%s/%s event Warning FailedToUpdateEndpointSlices "
                               "Error updating Endpoint Slices for Service %s/%s: %s\n",
                               ns, name, ns, name, errs);
                free(errs);
        } else if (!r->slices) {
                if (plan.endpoints.obj)
                        rc = push(r, &plan.endpoints.obj->obj, true);
                else if (action == SE_EP_UNCHANGED)
                        rc = push(r, &existing->obj, false);
        } else {
                size_t first = r->n_out;
                const struct se_slices_plan *p = &plan.slices;
                for (uint32_t i = 0; rc == 0 && i < p->n_unchanged; i++)
                        rc = push(r, &p->unchanged[i]->obj, false);
                for (uint32_t i = 0; rc == 0 && i < p->n_update; i++)
                        rc = push(r, &p->update[i]->obj, true);
                for (uint32_t i = 0; rc == 0 && i < p->n_create; i++)
                        rc = push(r, &p->create[i]->obj, true);
                if (rc == 0)
                        qsort(r->out + first, r->n_out - first, sizeof(*r->out), cmp_obj_name);
        }
        se_service_plan_release(&plan);
        return rc;
}

static bool in_list(const struct se_object **v, long n, const char *ns, const char *name)
{
        for (long i = 0; i < n; i++)
                if (strcmp(v[i]->meta.namespace, ns) == 0 && strcmp(v[i]->meta.name, name) == 0)
                        return true;
        return false;
}

/* Keys of objects whose Service is gone (for --plan's delete lines). */
static int orphan_keys(struct run *r, struct se_strv *keys)
{
        const struct se_object **objs;
        enum se_kind kind = r->slices ? SE_KIND_ENDPOINT_SLICE : SE_KIND_ENDPOINTS;
        long n = se_store_list(r->store, kind, r->ns, &objs);
        if (n < 0)
                return -1;
        int rc = 0;
        for (long i = 0; rc == 0 && i < n; i++) {
                const struct se_meta *m = &objs[i]->meta;
                const char *svc = r->slices ?
                                          se_kvlist_get(&m->labels, SE_SLICE_SERVICE_NAME_LABEL) :
                                          m->name;
                if (!svc || se_store_get(r->store, SE_KIND_SERVICE, m->namespace, svc))
                        continue;
                char key[600];
                snprintf(key, sizeof(key), "%s/%s", m->namespace, svc);
                if (!se_strv_contains(keys, key))
                        rc = se_strv_push(keys, key);
        }
        free(objs);
        return rc;
}

/* The controller's topology cache, from every Node of the cluster. */
static int load_topology(struct run *r)
{
        const struct se_object **nodes;
        long n = se_store_list(r->store, SE_KIND_NODE, NULL, &nodes);
        if (n < 0)
                return -1;
        r->topology = se_topology_cache_new();
        int rc = r->topology ? se_topology_cache_set_nodes(r->topology,
                                                           (const struct se_node *const *)nodes,
                                                           (size_t)n) :
                               -1;
        free(nodes);
        return rc < 0 ? -1 : 0;
}

static int run(struct run *r, const char *output)
{
        if (r->slices && load_topology(r) < 0)
                return cli_fail(EXIT_SYSTEM, "out of memory");
        const struct se_object **svcs;
        long n = se_store_list(r->store, SE_KIND_SERVICE, r->ns, &svcs);
        if (n < 0)
                return cli_fail(EXIT_SYSTEM, "out of memory");
        struct se_strv gone = SE_STRV_INIT;
        int rc = orphan_keys(r, &gone);
        /* services and orphans in one sorted pass */
        for (long i = 0; rc == 0 && i < n; i++)
                rc = sync_key(r, svcs[i]->meta.namespace, svcs[i]->meta.name,
                              se_service_of(svcs[i]));
        se_strv_sort(&gone);
        for (size_t i = 0; rc == 0 && i < gone.n; i++) {
                char *slash = strchr(gone.v[i], '/');
                *slash = 0;
                if (!in_list(svcs, n, gone.v[i], slash + 1))
                        rc = sync_key(r, gone.v[i], slash + 1, NULL);
        }
        free(svcs);
        se_strv_release(&gone);
        if (rc < 0)
                return cli_fail(EXIT_SYSTEM, "out of memory");
        if (r->plan)
                return EXIT_OK;
        return cli_print_list((const struct se_object *const *)r->out, r->n_out, output);
}

int cmd_endpoints(int argc, char **argv)
{
        static const struct option opts[] = { CLI_SOURCE_LONG_OPTIONS,
                                              { "output", required_argument, NULL, 'o' },
                                              { "slices", no_argument, NULL, 'S' },
                                              { "plan", no_argument, NULL, 'P' },
                                              { "max-endpoints-per-slice", required_argument, NULL,
                                                'M' },
                                              { "managed-by", required_argument, NULL, 'B' },
                                              { "help", no_argument, NULL, 'h' },
                                              { 0 } };
        struct cli_source src = { .files = SE_STRV_INIT };
        struct run r = { 0 };
        const char *output = "json", *managed_by = NULL;
        int c, rc, max = 0;
        optind = 1;
        while ((c = getopt_long(argc, argv, "f:n:Ao:h", opts, NULL)) != -1) {
                if ((rc = cli_source_option(&src, c, optarg)) != 0) {
                        if (rc < 0) {
                                cli_source_release(&src);
                                return cli_fail(EXIT_SYSTEM, "out of memory");
                        }
                        continue;
                }
                rc = EXIT_OK;
                switch (c) {
                case 'o':
                        output = optarg;
                        break;
                case 'S':
                        r.slices = true;
                        break;
                case 'P':
                        r.plan = true;
                        break;
                case 'M':
                        if (se_parse_int(optarg, 1, SE_SLICES_MAX_ENDPOINTS, &max) < 0)
                                rc = cli_usage_error("endpoints",
                                                     "--max-endpoints-per-slice must be 1..1000, "
                                                     "not \"%s\"",
                                                     optarg);
                        break;
                case 'B':
                        managed_by = optarg;
                        if (!*managed_by)
                                rc = cli_usage_error("endpoints", "--managed-by is empty");
                        break;
                case 'h':
                        return cli_help(&src, usage);
                default:
                        rc = cli_usage_error("endpoints", "unknown option");
                }
                if (rc != EXIT_OK) {
                        cli_source_release(&src);
                        return rc;
                }
        }
        if (strcmp(output, "json") != 0 && strcmp(output, "yaml") != 0)
                rc = cli_usage_error("endpoints", "-o must be json or yaml, not \"%s\"", output);
        else if (optind < argc)
                rc = cli_usage_error("endpoints", "unexpected argument \"%s\"", argv[optind]);
        else
                rc = cli_load(&src, &r.store);
        if (rc == EXIT_OK) {
                r.ns = src.all_ns ? NULL : src.ns;
                r.opts.max_endpoints_per_slice = (uint32_t)max;
                if (r.slices)
                        r.opts.slices_managed_by = managed_by;
                else
                        r.opts.endpoints_managed_by = managed_by;
                rc = run(&r, output);
        }
        for (size_t i = 0; i < r.n_owned; i++)
                se_object_unref(r.owned[i]);
        free(r.owned);
        free(r.out);
        se_topology_cache_free(r.topology);
        se_store_free(r.store);
        cli_source_release(&src);
        return rc;
}
