/* Lease leader election (see ctl_lease.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <svcenv/ctl_lease.h>
#include <svcenv/timeutil.h>

struct se_ctl_lease {
        struct se_kube_client *c;
        char *ns, *name, *identity;
        uint64_t lease_ns, renew_deadline_ns, retry_ns;
        /* the record as last read, and when (our clock) it last changed */
        char *seen; /* holder|renewTime|transitions */
        uint64_t observed_ns;
        atomic_bool leader;
        atomic_uint acquired;
        char error[512]; /* why the release failed */
};

bool se_ctl_lease_can_acquire(const char *holder, const char *identity, uint64_t observed_ns,
                              uint64_t duration_ns, uint64_t now_ns)
{
        if (!holder || !*holder || strcmp(holder, identity) == 0)
                return true;
        return observed_ns + duration_ns <= now_ns;
}

struct se_ctl_lease *se_ctl_lease_new(struct se_kube_client *c, const struct se_ctl_lease_opts *o)
{
        struct se_ctl_lease *l = calloc(1, sizeof(*l));
        if (!l)
                return NULL;
        l->c = c;
        l->ns = strdup(o->ns);
        l->name = strdup(o->name);
        l->identity = strdup(o->identity);
        if (!l->ns || !l->name || !l->identity)
                return se_ctl_lease_free(l);
        l->lease_ns = o->lease_ns ? o->lease_ns : 15000000000ull;
        l->renew_deadline_ns = o->renew_deadline_ns ? o->renew_deadline_ns : 10000000000ull;
        l->retry_ns = o->retry_ns ? o->retry_ns : 2000000000ull;
        return l;
}

struct se_ctl_lease *se_ctl_lease_free(struct se_ctl_lease *l)
{
        if (!l)
                return NULL;
        free(l->ns);
        free(l->name);
        free(l->identity);
        free(l->seen);
        free(l);
        return NULL;
}

bool se_ctl_lease_is_leader(const struct se_ctl_lease *l)
{
        return atomic_load(&l->leader);
}

unsigned se_ctl_lease_acquired(const struct se_ctl_lease *l)
{
        return atomic_load(&l->acquired);
}

static json_t *lease_body(const struct se_ctl_lease *l, const char *rv, const char *holder,
                          long duration_s, const char *acquire, long transitions)
{
        char now[48];
        se_time_format_rfc3339(se_now_real_ns(), 6, now, sizeof(now));
        json_t *meta = json_pack("{s:s, s:s}", "name", l->name, "namespace", l->ns);
        if (meta && rv)
                json_object_set_new(meta, "resourceVersion", json_string(rv));
        return json_pack("{s:s, s:s, s:o, s:{s:s, s:I, s:s, s:s, s:I}}", "apiVersion",
                         "coordination.k8s.io/v1", "kind", "Lease", "metadata", meta, "spec",
                         "holderIdentity", holder, "leaseDurationSeconds", (json_int_t)duration_s,
                         "acquireTime", acquire ? acquire : now, "renewTime", now,
                         "leaseTransitions", (json_int_t)transitions);
}

/* One attempt to take or renew the lease: 0 when we hold it now, -EBUSY
 * when another holder's lease is still valid, or an API error. */
static int try_acquire(struct se_ctl_lease *l)
{
        struct se_diag diag = { 0 };
        json_t *cur = NULL;
        int r = se_kube_get_json(l->c, &se_kube_leases, l->ns, l->name, &cur, &diag);
        uint64_t now = se_now_mono_ns();
        if (r == -ENOENT) {
                json_t *body = lease_body(l, NULL, l->identity, (long)(l->lease_ns / 1000000000ull),
                                          NULL, 0);
                if (!body)
                        return -ENOMEM;
                r = se_kube_create(l->c, &se_kube_leases, l->ns, body, NULL, &diag);
                json_decref(body);
                if (r == 0)
                        l->observed_ns = now;
                return r;
        }
        if (r < 0)
                return r;
        const json_t *spec = json_object_get(cur, "spec");
        const char *holder = json_string_value(json_object_get(spec, "holderIdentity"));
        const char *renew = json_string_value(json_object_get(spec, "renewTime"));
        const char *acquire = json_string_value(json_object_get(spec, "acquireTime"));
        json_int_t dur = json_integer_value(json_object_get(spec, "leaseDurationSeconds"));
        json_int_t transitions = json_integer_value(json_object_get(spec, "leaseTransitions"));
        const char *rv = json_string_value(
                json_object_get(json_object_get(cur, "metadata"), "resourceVersion"));
        char *seen = NULL;
        if (asprintf(&seen, "%s|%s|%lld", holder ? holder : "", renew ? renew : "",
                     (long long)transitions) < 0) {
                json_decref(cur);
                return -ENOMEM;
        }
        if (!l->seen || strcmp(seen, l->seen) != 0) {
                free(l->seen);
                l->seen = seen;
                l->observed_ns = now;
        } else {
                free(seen);
        }
        uint64_t dur_ns = dur > 0 ? (uint64_t)dur * 1000000000ull : l->lease_ns;
        if (!se_ctl_lease_can_acquire(holder, l->identity, l->observed_ns, dur_ns, now)) {
                json_decref(cur);
                return -EBUSY;
        }
        bool ours = holder && strcmp(holder, l->identity) == 0;
        json_t *body = lease_body(l, rv, l->identity, (long)(l->lease_ns / 1000000000ull),
                                  ours ? acquire : NULL, ours ? transitions : transitions + 1);
        json_decref(cur);
        if (!body)
                return -ENOMEM;
        r = se_kube_update(l->c, &se_kube_leases, l->ns, body, NULL, &diag);
        json_decref(body);
        if (r == 0)
                l->observed_ns = now;
        return r;
}

static int release_once(struct se_ctl_lease *l, struct se_diag *diag)
{
        json_t *cur = NULL;
        int r = se_kube_get_json(l->c, &se_kube_leases, l->ns, l->name, &cur, diag);
        if (r < 0)
                return r;
        const json_t *spec = json_object_get(cur, "spec");
        const char *holder = json_string_value(json_object_get(spec, "holderIdentity"));
        if (holder && strcmp(holder, l->identity) == 0) {
                json_t *body = lease_body(
                        l,
                        json_string_value(json_object_get(json_object_get(cur, "metadata"),
                                                          "resourceVersion")),
                        "", 1, NULL, json_integer_value(json_object_get(spec, "leaseTransitions")));
                r = body ? se_kube_update(l->c, &se_kube_leases, l->ns, body, NULL, diag) : -ENOMEM;
                json_decref(body);
        }
        json_decref(cur);
        return r;
}

/* Gives the lease up (a few tries: the server may just have restarted). */
static int release(struct se_ctl_lease *l)
{
        struct se_diag diag = { 0 };
        int r = 0;
        for (int i = 0; i < 3; i++) {
                if ((r = release_once(l, &diag)) == 0)
                        return 0;
                struct timespec ts = { 0, 200 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
        snprintf(l->error, sizeof(l->error), "%s", diag.text[0] ? diag.text : strerror(-r));
        return r;
}

const char *se_ctl_lease_error(const struct se_ctl_lease *l)
{
        return l->error;
}

/* Sleeps up to ns, waking early (every 50 ms) when stop is set. */
static void nap(uint64_t ns, const atomic_bool *stop)
{
        uint64_t end = se_now_mono_ns() + ns;
        while (!atomic_load(stop)) {
                uint64_t now = se_now_mono_ns();
                if (now >= end)
                        return;
                uint64_t d = end - now < 50000000ull ? end - now : 50000000ull;
                struct timespec ts = { 0, (long)d };
                nanosleep(&ts, NULL);
        }
}

int se_ctl_lease_run(struct se_ctl_lease *l, const atomic_bool *stop, se_ctl_lease_fn started,
                     se_ctl_lease_fn stopped, void *data)
{
        while (!atomic_load(stop)) {
                if (try_acquire(l) == 0)
                        break;
                nap(l->retry_ns, stop);
        }
        if (atomic_load(stop))
                return 0;
        atomic_store(&l->leader, true);
        atomic_fetch_add(&l->acquired, 1);
        if (started)
                started(data);
        uint64_t last_ok = se_now_mono_ns();
        int ret = 0;
        while (!atomic_load(stop)) {
                nap(l->retry_ns, stop);
                if (atomic_load(stop))
                        break;
                if (try_acquire(l) == 0) {
                        last_ok = se_now_mono_ns();
                } else if (se_now_mono_ns() - last_ok > l->renew_deadline_ns) {
                        ret = -ENOLCK;
                        break;
                }
        }
        atomic_store(&l->leader, false);
        if (stopped)
                stopped(data);
        if (ret == 0)
                ret = release(l);
        return ret;
}
