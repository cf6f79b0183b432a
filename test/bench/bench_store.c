/* Store index benchmark: what the store itself allocates (name and label
 * indexes, namespace buckets) for the controller bench's pods: SERVICES
 * services of PODS pods each, 100 services per namespace, each pod labelled
 * app=s<service>. Objects are built first; the heap growth while they are
 * put and selected (the first select builds the label index) is the
 * store's own. Also times puts, gets and label selects (the first one
 * included).
 *
 * Usage: bench_store [SERVICES [PODS]] */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

#include <svcenv/model.h>
#include <svcenv/store.h>
#include <svcenv/timeutil.h>

static size_t heap_in_use(void)
{
        struct mallinfo2 mi = mallinfo2();
        return mi.uordblks + mi.hblkhd;
}

static struct se_object *make_pod(int svc, int i)
{
        char buf[32];
        struct se_object *o = se_object_new(SE_KIND_POD);
        if (!o)
                return NULL;
        snprintf(buf, sizeof(buf), "big-%d", svc / 100);
        o->meta.namespace = se_arena_strdup(&o->arena, buf);
        snprintf(buf, sizeof(buf), "s%d-%d", svc, i);
        o->meta.name = se_arena_strdup(&o->arena, buf);
        struct se_kv *kv = se_arena_alloc(&o->arena, sizeof(*kv));
        snprintf(buf, sizeof(buf), "s%d", svc);
        if (!o->meta.namespace || !o->meta.name || !kv ||
            !(kv->value = se_arena_strdup(&o->arena, buf))) {
                se_object_unref(o);
                return NULL;
        }
        kv->key = "app";
        o->meta.labels = (struct se_kvlist){ kv, 1 };
        return o;
}

int main(int argc, char **argv)
{
        int services = argc > 1 ? atoi(argv[1]) : 10000;
        int pods = argc > 2 ? atoi(argv[2]) : 15;
        size_t n = (size_t)services * (size_t)pods;
        struct se_object **objs = calloc(n, sizeof(*objs));
        if (!objs || services <= 0 || pods <= 0)
                return 1;
        for (int s = 0, k = 0; s < services; s++)
                for (int p = 0; p < pods; p++, k++)
                        if (!(objs[k] = make_pod(s, p)))
                                return 1;
        struct se_store *st = se_store_new();
        if (!st)
                return 1;
        size_t before = heap_in_use();
        uint64_t t0 = se_now_mono_ns();
        for (size_t k = 0; k < n; k++)
                if (se_store_put(st, objs[k]) < 0)
                        return 1;
        uint64_t t1 = se_now_mono_ns();
        size_t found = 0;
        for (size_t k = 0; k < n; k++)
                found += se_store_get(st, SE_KIND_POD, objs[k]->meta.namespace,
                                      objs[k]->meta.name) != NULL;
        uint64_t t2 = se_now_mono_ns();
        long selected = 0;
        for (int s = 0; s < services; s++) {
                char ns[32], app[32];
                snprintf(ns, sizeof(ns), "big-%d", s / 100);
                snprintf(app, sizeof(app), "s%d", s);
                struct se_kv want = { "app", app };
                struct se_kvlist sel = { &want, 1 };
                const struct se_object **out;
                long r = se_store_select(st, SE_KIND_POD, ns, &sel, &out);
                if (r < 0)
                        return 1;
                selected += r;
                free(out);
        }
        uint64_t t3 = se_now_mono_ns();
        size_t bytes = heap_in_use() - before;
        printf("bench_store: %zu pods in %d namespaces: store indexes %.2f MB (%.1f B per pod); "
               "put %.0f ns, get %.0f ns per pod; select %.0f ns per service (%zu found, %ld "
               "selected)\n",
               n, (services + 99) / 100, (double)bytes / 1e6, (double)bytes / (double)n,
               (double)(t1 - t0) / (double)n, (double)(t2 - t1) / (double)n,
               (double)(t3 - t2) / services, found, selected);
        se_store_free(st);
        free(objs);
        return found == n && selected == (long)n ? 0 : 1;
}
