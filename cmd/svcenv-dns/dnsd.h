/* svcenv-dns internals: the daemon's parts and what they share.
 *
 * Threads: one worker per core (its own epoll, UDP and TCP sockets bound with
 * SO_REUSEPORT, answering from its own reference to the zone), a zone
 * builder (store change -> new snapshot, debounced), a pool of forwarders
 * (blocking upstream I/O, results handed back to the worker that owns the
 * client), the informers and the HTTP server. Workers never take a lock on
 * the answer path except the cache shard's. */
#ifndef SVCENV_DNSD_H
#define SVCENV_DNSD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <sys/socket.h>

#include <svcenv/dns.h>
#include <svcenv/dns_serve.h>
#include <svcenv/kube_watch.h>
#include <svcenv/store.h>

#define DNSD_MAX_WORKERS    64
#define DNSD_MAX_FORWARDERS 64

/* ---- metrics (metrics.c) ---- */

enum { DNSD_PROTO_UDP, DNSD_PROTO_TCP, DNSD_PROTOS };
enum { DNSD_FAM_4, DNSD_FAM_6, DNSD_FAMS };
enum {
        DNSD_PLUGIN_KUBERNETES,
        DNSD_PLUGIN_CACHE,
        DNSD_PLUGIN_FORWARD,
        DNSD_PLUGIN_AUTOPATH,
        DNSD_PLUGINS
};
#define DNSD_TYPES   19 /* CoreDNS's monitored types + "other" */
#define DNSD_RCODES  17 /* 0..15 + "other" */
#define DNSD_BUCKETS 16

struct dnsd_metrics {
        char server[80]; /* the `server` label: dns://ADDR */
        atomic_uint_fast64_t requests[DNSD_PROTOS][DNSD_FAMS][DNSD_TYPES];
        atomic_uint_fast64_t responses[DNSD_PLUGINS][DNSD_RCODES];
        atomic_uint_fast64_t duration[DNSD_TYPES][DNSD_BUCKETS + 1]; /* last: +Inf */
        atomic_uint_fast64_t duration_ns[DNSD_TYPES];
        atomic_uint_fast64_t dropped, forward_requests, forward_failures, forward_tcp,
                forward_queue_full, tcp_refused, zone_builds, zone_build_errors;
        atomic_uint_fast64_t zone_build_ns; /* the last build */
        atomic_uint_fast64_t zone_serial;
};

int dnsd_type_index(uint16_t qtype);
void dnsd_count_request(struct dnsd_metrics *m, int proto, int family, int type);
void dnsd_count_response(struct dnsd_metrics *m, int plugin, const uint8_t *resp, size_t len,
                         int type, uint64_t elapsed_ns);

/* ---- the daemon ---- */

struct dnsd;

struct dnsd_conn; /* a TCP client (serve.c) */

struct fwd_job {
        struct fwd_job *next;
        struct dnsd_worker *w;
        int proto;
        int family;
        int type;
        struct sockaddr_storage peer; /* UDP: where the answer goes */
        socklen_t peerlen;
        uint64_t conn_id; /* TCP: the connection it came on */
        size_t udp_max; /* UDP: the client's size */
        uint64_t start_ns;
        uint8_t *ap_query; /* autopath: the query the client sent (malloc'ed) */
        size_t ap_qlen, ap_udp_max;
        uint8_t *chase; /* ExternalName: the zone's CNAME answer (malloc'ed) */
        size_t chase_len;
        uint8_t *resp; /* filled by the forwarder (malloc'ed) */
        size_t rlen;
        size_t qlen;
        uint8_t query[];
};

/* A worker's buffers: allocated once per worker (not thread-local, which
 * every thread of the process would carry). */
struct dnsd_scratch {
        uint8_t in[SE_DNS_MAX_MSG]; /* a datagram */
        uint8_t out[SE_DNS_MAX_MSG]; /* the answer being written */
        uint8_t tmp[SE_DNS_MAX_MSG]; /* autopath and ExternalName lookups */
        uint8_t merged[SE_DNS_MAX_MSG];
        uint8_t done[SE_DNS_MAX_MSG]; /* finishing a forwarded answer */
        uint8_t cq[SE_DNS_MAX_NAME + 64]; /* a query made here */
};

struct dnsd_worker {
        struct dnsd *d;
        struct dnsd_scratch *s;
        unsigned idx;
        pthread_t thread;
        bool started;
        int ep, udp, tcp, wake;
        _Atomic(struct se_dns_zone *) next_zone; /* mailbox from the builder */
        struct se_dns_zone *zone; /* the worker's own reference */
        _Atomic(struct dnsd_podindex *) next_index; /* --autopath */
        struct dnsd_podindex *index;
        pthread_mutex_t done_lock; /* forwarders -> worker */
        struct fwd_job *done;
        struct dnsd_conn *conns;
        unsigned n_conns;
        uint64_t next_conn_id;
        atomic_uint_fast64_t queries; /* for the log at exit */
};

struct dnsd {
        /* options */
        struct se_dns_options zopts;
        struct sockaddr_storage listen;
        socklen_t listen_len;
        unsigned n_workers;
        unsigned max_tcp_conns; /* over all workers */
        uint64_t tcp_idle_ns;
        struct se_dns_upstream upstreams[SE_DNS_MAX_UPSTREAMS];
        unsigned n_upstreams;
        uint64_t upstream_timeout_ns;
        unsigned n_forwarders;
        unsigned max_forward_queue;
        bool autopath;
        char zone_name[256]; /* lower case, no final dot */

        struct se_store *store;
        struct dnsd_worker workers[DNSD_MAX_WORKERS];
        atomic_bool stopping;
        atomic_bool lameduck;
        atomic_bool synced; /* informers listed (or manifests loaded) */
        atomic_bool have_zone;

        /* zone builder (zone.c) */
        pthread_mutex_t build_lock;
        pthread_cond_t build_cond;
        bool dirty, build_stop;
        /* the Services changed since the last build (under build_lock),
         * and the set the running build reads (the builder's own) */
        struct se_dns_changes *changes, *building;
        pthread_t build_thread;
        bool build_started;
        struct se_dns_zone *latest; /* builder's own reference */
        struct dnsd_podindex *latest_index;

        /* forwarder (forward.c) */
        struct se_dns_cache *cache; /* NULL: no cache */
        /* with the cache: every reply's TTLs as CoreDNS's cache sets them */
        struct se_dns_ttl_bounds ttl_bounds;
        pthread_mutex_t fwd_lock;
        pthread_cond_t fwd_cond;
        struct fwd_job *fwd_head, *fwd_tail;
        unsigned fwd_queued, fwd_busy;
        bool fwd_stop;
        pthread_t fwd_threads[DNSD_MAX_FORWARDERS];
        unsigned fwd_started;
        atomic_uint next_upstream;

        struct dnsd_metrics m;
};

/* zone.c */
int dnsd_builder_start(struct dnsd *d);
void dnsd_builder_stop(struct dnsd *d);
/* Frees what dnsd_builder_start made (after dnsd_builder_stop, or when it
 * failed). */
void dnsd_builder_release(struct dnsd *d);
void dnsd_mark_dirty(struct dnsd *d);
/* Builds now and hands the zone to every worker (offline start, tests). */
int dnsd_build_now(struct dnsd *d);
void dnsd_on_store_change(void *data, enum se_store_event ev, const struct se_object *old,
                          const struct se_object *new_obj);

/* autopath.c */
struct dnsd_podindex;
int dnsd_podindex_build(const struct se_store *st, struct dnsd_podindex **ret);
struct dnsd_podindex *dnsd_podindex_ref(struct dnsd_podindex *x);
struct dnsd_podindex *dnsd_podindex_unref(struct dnsd_podindex *x);
/* The namespace of the pod with this address; NULL when none (or two). */
const char *dnsd_podindex_lookup(const struct dnsd_podindex *x, int family, const uint8_t *addr);

/* serve.c */
int dnsd_workers_start(struct dnsd *d);
void dnsd_workers_stop(struct dnsd *d);
/* A forwarded answer is ready: hand the job back to its worker. */
void dnsd_job_done(struct fwd_job *job);

/* forward.c */
int dnsd_forwarders_start(struct dnsd *d);
/* Waits up to deadline_ns (monotonic) for queued jobs, then stops. */
void dnsd_forwarders_stop(struct dnsd *d, uint64_t deadline_ns);
/* Takes job (false: queue full, the caller still owns it). */
bool dnsd_forward(struct dnsd *d, struct fwd_job *job);

/* metrics.c */
void dnsd_metrics_text(struct dnsd *d, struct se_strbuf *sb);

#endif
