/* Builders of Services, Pods and EndpointSlices for the endpoints tests. */
#ifndef TEST_ENDPOINTS_FIXTURES_H
#define TEST_ENDPOINTS_FIXTURES_H

#include <stdio.h>
#include <string.h>

#include <svcenv/endpoints.h>
#include <svcenv/model.h>

static inline const char *fx_str(struct se_object *o, const char *s)
{
        return se_arena_strdup(&o->arena, s);
}

static inline void fx_kv(struct se_object *o, struct se_kvlist *l, const char *k, const char *v)
{
        /* appended in order; callers pass keys sorted */
        struct se_kv *items = se_arena_array(&o->arena, l->n + 1, sizeof(*items));
        if (l->n)
                memcpy(items, l->items, l->n * sizeof(*items));
        items[l->n] = (struct se_kv){ fx_str(o, k), fx_str(o, v) };
        l->items = items;
        l->n++;
}

static inline struct se_service *fx_service(const char *ns, const char *name,
                                            const char *cluster_ip)
{
        struct se_service *s = (struct se_service *)se_object_new(SE_KIND_SERVICE);
        struct se_object *o = &s->obj;
        o->meta.namespace = fx_str(o, ns);
        o->meta.name = fx_str(o, name);
        o->meta.uid = fx_str(o, "svc-uid-1");
        s->cluster_ip = cluster_ip ? fx_str(o, cluster_ip) : NULL;
        fx_kv(o, &s->selector, "app", name);
        fx_kv(o, &o->meta.labels, "app", name);
        return s;
}

static inline void fx_families(struct se_service *s, const char *f1, const char *f2)
{
        struct se_object *o = &s->obj;
        s->ip_families.v = se_arena_array(&o->arena, 2, sizeof(char *));
        s->ip_families.v[0] = fx_str(o, f1);
        s->ip_families.n = 1;
        if (f2) {
                s->ip_families.v[1] = fx_str(o, f2);
                s->ip_families.n = 2;
        }
}

/* target: a number as text ("8080") or a port name ("http") */
static inline void fx_port(struct se_service *s, const char *name, int port, const char *target,
                           enum se_protocol proto)
{
        struct se_object *o = &s->obj;
        struct se_service_port *p = se_arena_array(&o->arena, s->n_ports + 1, sizeof(*p));
        if (s->n_ports)
                memcpy(p, s->ports, s->n_ports * sizeof(*p));
        struct se_service_port *n = &p[s->n_ports];
        n->name = name ? fx_str(o, name) : NULL;
        n->port = port;
        n->protocol = proto;
        if (target && (target[0] < '0' || target[0] > '9')) {
                n->target_port.is_string = true;
                n->target_port.str = fx_str(o, target);
        } else if (target) {
                n->target_port.num = atoi(target);
        }
        s->ports = p;
        s->n_ports++;
}

/* A running pod labelled app=<app> with up to two IPs ("a,b"). */
static inline struct se_pod *fx_pod(const char *ns, const char *name, const char *app,
                                    const char *ips, bool ready, const char *node)
{
        struct se_pod *p = (struct se_pod *)se_object_new(SE_KIND_POD);
        struct se_object *o = &p->obj;
        char uid[128];
        snprintf(uid, sizeof(uid), "uid-%s", name);
        o->meta.namespace = fx_str(o, ns);
        o->meta.name = fx_str(o, name);
        o->meta.uid = fx_str(o, uid);
        fx_kv(o, &o->meta.labels, "app", app);
        p->node_name = node ? fx_str(o, node) : NULL;
        p->phase = fx_str(o, "Running");
        if (ips && *ips) {
                char buf[128];
                snprintf(buf, sizeof(buf), "%s", ips);
                char *comma = strchr(buf, ',');
                p->pod_ips.v = se_arena_array(&o->arena, 2, sizeof(char *));
                if (comma)
                        *comma = 0;
                p->pod_ips.v[p->pod_ips.n++] = fx_str(o, buf);
                if (comma)
                        p->pod_ips.v[p->pod_ips.n++] = fx_str(o, comma + 1);
                p->pod_ip = p->pod_ips.v[0];
        }
        p->conditions = se_arena_alloc(&o->arena, sizeof(*p->conditions));
        p->conditions[0].type = "Ready";
        p->conditions[0].status = ready ? "True" : "False";
        p->n_conditions = 1;
        return p;
}

static inline void fx_container_port(struct se_pod *p, bool init, const char *restart,
                                     const char *name, int port, enum se_protocol proto)
{
        struct se_object *o = &p->obj;
        struct se_container **cs = init ? &p->init_containers : &p->containers;
        uint32_t *n = init ? &p->n_init_containers : &p->n_containers;
        struct se_container *c = se_arena_array(&o->arena, *n + 1, sizeof(*c));
        if (*n)
                memcpy(c, *cs, *n * sizeof(*c));
        struct se_container *nc = &c[*n];
        nc->name = fx_str(o, init ? "init" : "main");
        nc->restart_policy = restart ? fx_str(o, restart) : NULL;
        nc->ports = se_arena_alloc(&o->arena, sizeof(*nc->ports));
        nc->ports[0].name = name ? fx_str(o, name) : NULL;
        nc->ports[0].container_port = port;
        nc->ports[0].protocol = proto;
        nc->n_ports = 1;
        *cs = c;
        (*n)++;
}

static inline void fx_free_all(struct se_object **objs, size_t n)
{
        for (size_t i = 0; i < n; i++)
                se_object_unref(objs[i]);
}

#endif
