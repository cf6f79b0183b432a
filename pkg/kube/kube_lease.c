/* Lease leader election (see kube_lease.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <svcenv/alloc.h>
#include <svcenv/kube_lease.h>
#include <svcenv/timeutil.h>

#include "kube_internal.h"

#define MS 1000000ull

struct se_kube_leader {
        struct se_kube_client *c;
        struct se_kube_leader_opts o;
        char *ns, *name, *identity;
        pthread_t thread;
        bool started;
        atomic_bool stop;
        atomic_bool leading;
        pthread_mutex_t lock; /* observed */
        struct se_kube_lease_record observed;
        uint64_t observed_mono;
        uint64_t seed;
};

void se_kube_lease_record_release(struct se_kube_lease_record *rec)
{
        free(rec->holder);
        *rec = (struct se_kube_lease_record){ 0 };
}

static int64_t get_time(const json_t *spec, const char *key)
{
        int64_t t = 0;
        const char *s = json_string_value(json_object_get(spec, key));
        if (s && se_time_parse_rfc3339(s, &t) < 0)
                t = 0;
        return t;
}

int se_kube_lease_record_decode(const json_t *lease, struct se_kube_lease_record *ret)
{
        const json_t *spec = json_object_get(lease, "spec");
        if (!json_is_object(lease) || (spec && !json_is_object(spec)))
                return -EINVAL;
        struct se_kube_lease_record r = { 0 };
        const char *h = json_string_value(json_object_get(spec, "holderIdentity"));
        if (h && !(r.holder = se_strdup(h)))
                return -ENOMEM;
        r.duration_s = (int32_t)json_integer_value(json_object_get(spec, "leaseDurationSeconds"));
        r.transitions = (int32_t)json_integer_value(json_object_get(spec, "leaseTransitions"));
        r.acquire_ns = get_time(spec, "acquireTime");
        r.renew_ns = get_time(spec, "renewTime");
        *ret = r;
        return 0;
}

/* MicroTime: RFC 3339 with exactly six fractional digits. */
static json_t *micro_time(int64_t t)
{
        char base[48], buf[96];
        int64_t sec_ns = t - (t % 1000000000ll + 1000000000ll) % 1000000000ll;
        unsigned us = (unsigned)((t - sec_ns) / 1000) % 1000000u;
        se_time_format_rfc3339(sec_ns, 0, base, sizeof(base));
        base[strcspn(base, "Z")] = '\0';
        snprintf(buf, sizeof(buf), "%s.%06uZ", base, us);
        return json_string(buf);
}

int se_kube_lease_record_encode(const struct se_kube_lease_record *rec, json_t *lease)
{
        json_t *spec = json_object();
        if (!spec)
                return -ENOMEM;
        int r = 0;
        r |= json_object_set_new(spec, "holderIdentity",
                                 json_string(rec->holder ? rec->holder : ""));
        r |= json_object_set_new(spec, "leaseDurationSeconds", json_integer(rec->duration_s));
        if (rec->acquire_ns)
                r |= json_object_set_new(spec, "acquireTime", micro_time(rec->acquire_ns));
        if (rec->renew_ns)
                r |= json_object_set_new(spec, "renewTime", micro_time(rec->renew_ns));
        r |= json_object_set_new(spec, "leaseTransitions", json_integer(rec->transitions));
        r |= json_object_set_new(lease, "spec", spec);
        return r ? -ENOMEM : 0;
}

int se_kube_leader_new(struct se_kube_client *c, const struct se_kube_leader_opts *opts,
                       struct se_kube_leader **ret, struct se_diag *diag)
{
        struct se_kube_leader_opts o = *opts;
        if (!o.lease_ms)
                o.lease_ms = 15000;
        if (!o.renew_deadline_ms)
                o.renew_deadline_ms = 10000;
        if (!o.retry_ms)
                o.retry_ms = 2000;
        if (!o.ns || !*o.ns || !o.name || !*o.name || !o.identity || !*o.identity) {
                se_diag_set(diag, NULL, 0, 0,
                            "leader election: namespace, name and identity are required");
                return -EINVAL;
        }
        if (!(o.lease_ms > o.renew_deadline_ms) ||
            !((double)o.renew_deadline_ms > 1.2 * o.retry_ms)) {
                se_diag_set(diag, NULL, 0, 0,
                            "leader election: need lease duration > renew deadline > 1.2 x retry "
                            "period (%u > %u > 1.2 x %u)",
                            o.lease_ms, o.renew_deadline_ms, o.retry_ms);
                return -EINVAL;
        }
        struct se_kube_leader *l = se_calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->c = c;
        l->o = o;
        l->ns = se_strdup(o.ns);
        l->name = se_strdup(o.name);
        l->identity = se_strdup(o.identity);
        l->seed = se_now_mono_ns() | 1;
        pthread_mutex_init(&l->lock, NULL);
        if (!l->ns || !l->name || !l->identity)
                return se_kube_leader_free(l), -ENOMEM;
        *ret = l;
        return 0;
}

bool se_kube_lease_can_acquire(const char *holder, const char *identity, uint64_t observed_ns,
                               uint64_t duration_ns, uint64_t now_ns)
{
        if (!holder || !*holder || strcmp(holder, identity) == 0)
                return true;
        return observed_ns + duration_ns <= now_ns;
}

static bool same_record(const struct se_kube_lease_record *a, const struct se_kube_lease_record *b)
{
        return strcmp(a->holder ? a->holder : "", b->holder ? b->holder : "") == 0 &&
               a->duration_s == b->duration_s && a->acquire_ns == b->acquire_ns &&
               a->renew_ns == b->renew_ns && a->transitions == b->transitions;
}

/* Remembers rec as observed now; reports a new holder. Consumes rec. */
static void observe(struct se_kube_leader *l, struct se_kube_lease_record *rec)
{
        pthread_mutex_lock(&l->lock);
        bool changed = !same_record(rec, &l->observed);
        bool new_holder = strcmp(rec->holder ? rec->holder : "",
                                 l->observed.holder ? l->observed.holder : "") != 0;
        if (changed) {
                se_kube_lease_record_release(&l->observed);
                l->observed = *rec;
                l->observed_mono = se_now_mono_ns();
                *rec = (struct se_kube_lease_record){ 0 };
        }
        char holder[256];
        snprintf(holder, sizeof(holder), "%s", l->observed.holder ? l->observed.holder : "");
        pthread_mutex_unlock(&l->lock);
        se_kube_lease_record_release(rec);
        if (new_holder && l->o.on_new_leader)
                l->o.on_new_leader(l->o.data, holder);
}

static json_t *new_lease(const struct se_kube_leader *l)
{
        return json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "coordination.k8s.io/v1", "kind",
                         "Lease", "metadata", "name", l->name, "namespace", l->ns);
}

/* One round of client-go's tryAcquireOrRenew: true when we hold the lease. */
static bool try_acquire_or_renew(struct se_kube_leader *l)
{
        int64_t now = se_now_real_ns();
        struct se_kube_lease_record want = { .holder = l->identity,
                                             .duration_s = (int32_t)((l->o.lease_ms + 999) / 1000),
                                             .acquire_ns = now,
                                             .renew_ns = now };
        json_t *lease = NULL;
        int r = se_kube_get_json(l->c, &se_kube_leases, l->ns, l->name, &lease, NULL);
        if (r == -ENOENT) {
                lease = new_lease(l);
                bool won = lease && se_kube_lease_record_encode(&want, lease) == 0 &&
                           se_kube_create(l->c, &se_kube_leases, l->ns, lease, NULL, NULL) == 0;
                json_decref(lease);
                if (won) {
                        struct se_kube_lease_record mine = want;
                        mine.holder = se_strdup(l->identity);
                        observe(l, &mine);
                }
                return won;
        }
        if (r < 0)
                return false;
        struct se_kube_lease_record old;
        if (se_kube_lease_record_decode(lease, &old) < 0) {
                json_decref(lease);
                return false;
        }
        bool ours = old.holder && strcmp(old.holder, l->identity) == 0;
        struct se_kube_lease_record seen = old;
        if (old.holder && !(seen.holder = se_strdup(old.holder))) {
                se_kube_lease_record_release(&old);
                json_decref(lease);
                return false;
        }
        observe(l, &seen);
        pthread_mutex_lock(&l->lock);
        uint64_t observed = l->observed_mono;
        pthread_mutex_unlock(&l->lock);
        if (!se_kube_lease_can_acquire(old.holder, l->identity, observed,
                                       (uint64_t)old.duration_s * 1000 * MS, se_now_mono_ns())) {
                se_kube_lease_record_release(&old);
                json_decref(lease);
                return false; /* someone else holds a valid lease */
        }
        if (ours) {
                want.acquire_ns = old.acquire_ns;
                want.transitions = old.transitions;
        } else
                want.transitions = old.transitions + 1;
        se_kube_lease_record_release(&old);
        bool won = se_kube_lease_record_encode(&want, lease) == 0 &&
                   se_kube_update(l->c, &se_kube_leases, l->ns, lease, NULL, NULL) == 0;
        json_decref(lease);
        if (won) {
                struct se_kube_lease_record mine = want;
                mine.holder = se_strdup(l->identity);
                observe(l, &mine);
        }
        return won;
}

/* Gives the lease up: holder "", duration 1 s, so others need not wait.
 * 0 (also when someone else holds it by now) or -errno. */
static int release_once(struct se_kube_leader *l)
{
        json_t *lease = NULL;
        int r = se_kube_get_json(l->c, &se_kube_leases, l->ns, l->name, &lease, NULL);
        if (r < 0)
                return r;
        struct se_kube_lease_record old;
        r = se_kube_lease_record_decode(lease, &old);
        if (r == 0) {
                if (old.holder && strcmp(old.holder, l->identity) == 0) {
                        int64_t now = se_now_real_ns();
                        struct se_kube_lease_record rel = { NULL, 1, now, now, old.transitions };
                        r = se_kube_lease_record_encode(&rel, lease);
                        if (r == 0)
                                r = se_kube_update(l->c, &se_kube_leases, l->ns, lease, NULL, NULL);
                }
                se_kube_lease_record_release(&old);
        }
        json_decref(lease);
        return r;
}

/* A few tries: the API server may just have restarted. */
static void release(struct se_kube_leader *l)
{
        for (int i = 0; i < 3 && release_once(l) < 0; i++) {
                struct timespec ts = { 0, 200 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
}

static uint64_t jittered(struct se_kube_leader *l, uint64_t base_ns, double factor)
{
        l->seed ^= l->seed << 13;
        l->seed ^= l->seed >> 7;
        l->seed ^= l->seed << 17;
        double f = (double)(l->seed >> 11) / (double)(1ull << 53);
        return base_ns + (uint64_t)((double)base_ns * factor * f);
}

static void *run(void *arg)
{
        struct se_kube_leader *l = arg;
        uint64_t retry = (uint64_t)l->o.retry_ms * MS;
        while (!atomic_load(&l->stop)) {
                /* acquire */
                while (!atomic_load(&l->stop) && !try_acquire_or_renew(l))
                        (void)kube_sleep(l->c, jittered(l, retry, 1.2), &l->stop);
                if (atomic_load(&l->stop))
                        break;
                atomic_store(&l->leading, true);
                if (l->o.on_started)
                        l->o.on_started(l->o.data);
                /* renew until the deadline passes without success */
                uint64_t last = se_now_mono_ns();
                while (!atomic_load(&l->stop)) {
                        if (kube_sleep(l->c, retry, &l->stop) < 0)
                                break;
                        if (try_acquire_or_renew(l)) {
                                last = se_now_mono_ns();
                                continue;
                        }
                        if (se_now_mono_ns() - last >= (uint64_t)l->o.renew_deadline_ms * MS)
                                break;
                }
                if (atomic_load(&l->stop))
                        break;
                atomic_store(&l->leading, false);
                if (l->o.on_stopped)
                        l->o.on_stopped(l->o.data);
        }
        return NULL;
}

int se_kube_leader_start(struct se_kube_leader *l)
{
        int r = pthread_create(&l->thread, NULL, run, l);
        if (r != 0)
                return -r;
        l->started = true;
        return 0;
}

bool se_kube_leader_is_leader(const struct se_kube_leader *l)
{
        return atomic_load(&l->leading);
}

void se_kube_leader_holder(struct se_kube_leader *l, char *buf, size_t size)
{
        pthread_mutex_lock(&l->lock);
        snprintf(buf, size, "%s", l->observed.holder ? l->observed.holder : "");
        pthread_mutex_unlock(&l->lock);
}

struct se_kube_leader *se_kube_leader_free(struct se_kube_leader *l)
{
        if (!l)
                return NULL;
        atomic_store(&l->stop, true);
        if (l->started)
                pthread_join(l->thread, NULL);
        if (atomic_load(&l->leading)) {
                if (!l->o.no_release)
                        release(l);
                atomic_store(&l->leading, false);
                if (l->o.on_stopped)
                        l->o.on_stopped(l->o.data);
        }
        se_kube_lease_record_release(&l->observed);
        pthread_mutex_destroy(&l->lock);
        free(l->ns);
        free(l->name);
        free(l->identity);
        free(l);
        return NULL;
}
