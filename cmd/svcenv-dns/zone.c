/* Store changes -> a new zone snapshot -> every worker's mailbox.
 *
 * The builder waits for a change, lets a burst of changes settle (a relist
 * or a rollout touches many objects at once), builds a new zone (from the
 * previous one and the Services the store's callbacks said changed: no
 * pass over 10,000 Services for one of them), and
 * swaps it into each worker's mailbox with one atomic exchange. A worker
 * takes its mailbox at the top of its loop: readers never wait on the
 * builder, and a snapshot a worker never picked up is released by the
 * builder (the exchange hands it back), so no reference is lost. */
#include <errno.h>
#include <malloc.h>
#include <time.h>

#include <svcenv/log.h>
#include <svcenv/timeutil.h>

#include "dnsd.h"

/* changes that arrive within this window go into the same build (a
 * build after a few changes costs a few ms even at 10,000 Services, so
 * the window is short: it is part of every change's time to answer) */
#define SETTLE_NS 3000000ull /* 3 ms */
/* but a steady stream of changes still sees a build this often */
#define MAX_WAIT_NS 100000000ull /* 100 ms */

/* Something changed, what is not known: the next build passes over the
 * whole store. */
void dnsd_mark_dirty(struct dnsd *d)
{
        pthread_mutex_lock(&d->build_lock);
        se_dns_changes_note_all(d->changes);
        d->dirty = true;
        pthread_cond_signal(&d->build_cond);
        pthread_mutex_unlock(&d->build_lock);
}

void dnsd_on_store_change(void *data, enum se_store_event ev, const struct se_object *old,
                          const struct se_object *new_obj)
{
        (void)ev;
        struct dnsd *d = data;
        /* before the first list is complete a build would serve a partial
         * zone; the sync itself marks the store dirty */
        if (!atomic_load(&d->synced))
                return;
        pthread_mutex_lock(&d->build_lock);
        se_dns_changes_note(d->changes, old, new_obj);
        d->dirty = true;
        pthread_cond_signal(&d->build_cond);
        pthread_mutex_unlock(&d->build_lock);
}

static void publish(struct dnsd *d, struct se_dns_zone *z)
{
        for (unsigned i = 0; i < d->n_workers; i++) {
                struct se_dns_zone *old =
                        atomic_exchange(&d->workers[i].next_zone, se_dns_zone_ref(z));
                se_dns_zone_unref(old);
                /* a worker idle in epoll_wait picks it up on its next
                 * packet; that is soon enough (it answers nothing meanwhile) */
        }
        se_dns_zone_unref(d->latest);
        d->latest = z;
        atomic_store(&d->m.zone_serial, se_dns_zone_serial(z));
        atomic_store(&d->have_zone, true);
}

static void publish_index(struct dnsd *d, struct dnsd_podindex *x)
{
        for (unsigned i = 0; i < d->n_workers; i++)
                dnsd_podindex_unref(
                        atomic_exchange(&d->workers[i].next_index, dnsd_podindex_ref(x)));
        dnsd_podindex_unref(d->latest_index);
        d->latest_index = x;
}

int dnsd_build_now(struct dnsd *d)
{
        if (d->autopath) {
                struct dnsd_podindex *x = NULL;
                if (dnsd_podindex_build(d->store, &x) == 0)
                        publish_index(d, x);
                else
                        se_log_error("building the pod address index: out of memory");
        }
        struct se_dns_zone *z = NULL;
        struct se_diag diag = { 0 };
        /* what changed since the last build, taken whole: changes from
         * here on go to the next one */
        pthread_mutex_lock(&d->build_lock);
        struct se_dns_changes *ch = d->changes;
        d->changes = d->building;
        d->building = ch;
        pthread_mutex_unlock(&d->build_lock);
        bool full = !d->latest || se_dns_changes_everything(ch);
        uint64_t t0 = se_now_mono_ns();
        /* d->latest is only replaced here: the records of every Service
         * the change did not touch carry over from it */
        int r = se_dns_zone_update_changed(d->store, &d->zopts, d->latest, ch, &z, &diag);
        atomic_store(&d->m.zone_build_ns, se_now_mono_ns() - t0);
        se_dns_changes_clear(ch);
        if (r < 0) {
                /* the next build cannot know what this one missed */
                pthread_mutex_lock(&d->build_lock);
                se_dns_changes_note_all(d->changes);
                pthread_mutex_unlock(&d->build_lock);
                atomic_fetch_add(&d->m.zone_build_errors, 1);
                se_log_error("building the zone: %s", diag.text[0] ? diag.text : "out of memory");
                return r;
        }
        atomic_fetch_add(&d->m.zone_builds, 1);
        publish(d, z);
        /* a full build's scratch (and, the first time, the manifest
         * loader's JSON) back to the system: glibc keeps freed heap
         * otherwise; a build of a few Services frees little, and a trim
         * walks the whole heap */
        if (full)
                malloc_trim(0);
        se_log_info(4, "zone rebuilt (serial %u) in %.3f ms", se_dns_zone_serial(z),
                    (double)atomic_load(&d->m.zone_build_ns) / 1e6);
        return 0;
}

static void sleep_ns(uint64_t ns)
{
        struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
                               .tv_nsec = (long)(ns % 1000000000ull) };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static void *builder(void *data)
{
        struct dnsd *d = data;
        pthread_mutex_lock(&d->build_lock);
        for (;;) {
                while (!d->dirty && !d->build_stop)
                        pthread_cond_wait(&d->build_cond, &d->build_lock);
                if (d->build_stop)
                        break;
                uint64_t first = se_now_mono_ns();
                /* settle: wait while changes keep coming, up to MAX_WAIT_NS */
                do {
                        d->dirty = false;
                        pthread_mutex_unlock(&d->build_lock);
                        sleep_ns(SETTLE_NS);
                        pthread_mutex_lock(&d->build_lock);
                } while (d->dirty && !d->build_stop && se_now_mono_ns() - first < MAX_WAIT_NS);
                d->dirty = false;
                pthread_mutex_unlock(&d->build_lock);
                (void)dnsd_build_now(d);
                pthread_mutex_lock(&d->build_lock);
        }
        pthread_mutex_unlock(&d->build_lock);
        return NULL;
}

int dnsd_builder_start(struct dnsd *d)
{
        if (!(d->changes = se_dns_changes_new()) || !(d->building = se_dns_changes_new()))
                return -ENOMEM;
        int r = pthread_create(&d->build_thread, NULL, builder, d);
        if (r)
                return -r;
        d->build_started = true;
        return 0;
}

void dnsd_builder_stop(struct dnsd *d)
{
        if (!d->build_started)
                return;
        pthread_mutex_lock(&d->build_lock);
        d->build_stop = true;
        pthread_cond_signal(&d->build_cond);
        pthread_mutex_unlock(&d->build_lock);
        pthread_join(d->build_thread, NULL);
        d->build_started = false;
}

void dnsd_builder_release(struct dnsd *d)
{
        se_dns_changes_free(d->changes);
        se_dns_changes_free(d->building);
        d->changes = d->building = NULL;
}
