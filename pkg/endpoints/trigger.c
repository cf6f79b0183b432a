/* The last-change-trigger-time tracker (see endpoints_sync.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/endpoints_sync.h>
#include <svcenv/hashmap.h>
#include <svcenv/timeutil.h>

/* A pod by the hash of its name: one service's pods never collide in
 * practice, and 150,000 pods need no copy of their names here. */
struct pod_time {
        uint64_t name_hash;
        int64_t t;
};

struct service_state {
        char *key; /* "ns/name", the map's key */
        int64_t service_time;
        struct pod_time *pods; /* sorted by name */
        size_t n_pods;
};

struct se_trigger_tracker {
        pthread_mutex_t lock; /* guards the map only: one key is never synced twice at once */
        struct se_hashmap states;
};

static void state_free(struct service_state *s)
{
        if (!s)
                return;
        free(s->pods);
        free(s->key);
        free(s);
}

struct se_trigger_tracker *se_trigger_tracker_new(void)
{
        struct se_trigger_tracker *t = se_calloc(1, sizeof(*t));
        if (t)
                pthread_mutex_init(&t->lock, NULL);
        return t;
}

struct se_trigger_tracker *se_trigger_tracker_free(struct se_trigger_tracker *t)
{
        if (!t)
                return NULL;
        void *v;
        for (size_t i = 0; se_hashmap_next(&t->states, &i, NULL, &v);)
                state_free(v);
        se_hashmap_release(&t->states);
        pthread_mutex_destroy(&t->lock);
        free(t);
        return NULL;
}

static int64_t parse_time(const char *s)
{
        int64_t t = 0;
        if (!s || se_time_parse_rfc3339(s, &t) < 0)
                return 0;
        return t;
}

/* Ready's lastTransitionTime, 0 when the pod has no Ready condition. */
static int64_t pod_trigger_time(const struct se_pod *pod)
{
        for (uint32_t i = 0; i < pod->n_conditions; i++)
                if (strcmp(pod->conditions[i].type, "Ready") == 0)
                        return parse_time(pod->conditions[i].last_transition_time);
        return 0;
}

static int cmp_pod_time(const void *a, const void *b)
{
        uint64_t x = ((const struct pod_time *)a)->name_hash,
                 y = ((const struct pod_time *)b)->name_hash;
        return x < y ? -1 : x > y;
}

static int64_t recorded(const struct service_state *s, uint64_t name_hash)
{
        if (!s || !s->n_pods)
                return 0;
        struct pod_time key = { name_hash, 0 };
        const struct pod_time *p =
                bsearch(&key, s->pods, s->n_pods, sizeof(*s->pods), cmp_pod_time);
        return p ? p->t : 0;
}

static int64_t earliest(int64_t current, int64_t t)
{
        return current == 0 || t < current ? t : current;
}

int se_trigger_tracker_compute(struct se_trigger_tracker *t, const struct se_service *svc,
                               const struct se_pod *const *pods, size_t n_pods, int64_t *ret_ns)
{
        char *key = NULL;
        if (se_asprintf(&key, "%s/%s", svc->obj.meta.namespace, svc->obj.meta.name) < 0)
                return -ENOMEM;
        pthread_mutex_lock(&t->lock);
        struct service_state *state = se_hashmap_get(&t->states, key);
        pthread_mutex_unlock(&t->lock);

        struct pod_time *times = n_pods ? se_calloc(n_pods, sizeof(*times)) : NULL;
        if (n_pods && !times) {
                free(key);
                return -ENOMEM;
        }
        size_t n = 0;
        int64_t min_changed = 0;
        for (size_t i = 0; i < n_pods; i++) {
                int64_t pt = pod_trigger_time(pods[i]);
                if (pt == 0)
                        continue;
                uint64_t h = se_hash_str(pods[i]->obj.meta.name);
                times[n++] = (struct pod_time){ h, pt };
                if (pt > recorded(state, h))
                        min_changed = earliest(min_changed, pt);
        }
        if (n > 1)
                qsort(times, n, sizeof(*times), cmp_pod_time);
        int64_t service_time = parse_time(se_meta_creation_timestamp(&svc->obj.meta));
        if (service_time > (state ? state->service_time : 0))
                min_changed = earliest(min_changed, service_time);

        bool known = state != NULL;
        if (!state) {
                state = se_calloc(1, sizeof(*state));
                if (!state) {
                        free(times);
                        free(key);
                        return -ENOMEM;
                }
                state->key = TAKE_PTR(key);
                pthread_mutex_lock(&t->lock);
                int r = se_hashmap_put(&t->states, state->key, state, NULL);
                pthread_mutex_unlock(&t->lock);
                if (r < 0) {
                        free(times);
                        state_free(state);
                        return r;
                }
        }
        free(key);
        free(state->pods);
        state->pods = times;
        state->n_pods = n;
        state->service_time = service_time;
        *ret_ns = known ? min_changed : service_time;
        return 0;
}

void se_trigger_tracker_forget(struct se_trigger_tracker *t, const char *ns, const char *name)
{
        char *key = NULL;
        if (se_asprintf(&key, "%s/%s", ns, name) < 0)
                return;
        pthread_mutex_lock(&t->lock);
        struct service_state *s = se_hashmap_remove(&t->states, key);
        pthread_mutex_unlock(&t->lock);
        state_free(s);
        free(key);
}
