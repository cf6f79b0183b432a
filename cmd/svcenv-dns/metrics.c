/* /metrics under CoreDNS's names and labels where the meaning is the same
 * (dashboards and alerts for CoreDNS keep working), svcenv_dns_* for the
 * rest. Counters are relaxed atomics bumped on the answer path. */
#include <inttypes.h>
#include <stdio.h>

#include <svcenv/strbuf.h>
#include <svcenv/timeutil.h>

#include "dnsd.h"

/* CoreDNS's monitored types (plugin/metrics/vars), in that order; the rest
 * is "other". */
static const struct {
        uint16_t code;
        const char *name;
} monitored[DNSD_TYPES - 1] = {
        { 1, "A" },       { 28, "AAAA" },  { 15, "MX" },   { 6, "SOA" },    { 5, "CNAME" },
        { 12, "PTR" },    { 16, "TXT" },   { 2, "NS" },    { 33, "SRV" },   { 43, "DS" },
        { 48, "DNSKEY" }, { 46, "RRSIG" }, { 47, "NSEC" }, { 50, "NSEC3" }, { 65, "HTTPS" },
        { 251, "IXFR" },  { 252, "AXFR" }, { 255, "ANY" },
};

static const char *const plugins[DNSD_PLUGINS] = { "kubernetes", "cache", "forward", "autopath" };

static const char *const rcodes[DNSD_RCODES] = {
        "NOERROR",  "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP",  "REFUSED",
        "YXDOMAIN", "YXRRSET", "NXRRSET",  "NOTAUTH",  "NOTZONE", "RCODE11",
        "RCODE12",  "RCODE13", "RCODE14",  "RCODE15",  "other",
};

int dnsd_type_index(uint16_t qtype)
{
        for (int i = 0; i < DNSD_TYPES - 1; i++)
                if (monitored[i].code == qtype)
                        return i;
        return DNSD_TYPES - 1;
}

static const char *type_label(int i)
{
        return i < DNSD_TYPES - 1 ? monitored[i].name : "other";
}

void dnsd_count_request(struct dnsd_metrics *m, int proto, int family, int type)
{
        atomic_fetch_add_explicit(&m->requests[proto][family][type], 1, memory_order_relaxed);
}

void dnsd_count_response(struct dnsd_metrics *m, int plugin, const uint8_t *resp, size_t len,
                         int type, uint64_t elapsed_ns)
{
        unsigned rcode = len >= 4 ? resp[3] & 0x0f : DNSD_RCODES - 1;
        atomic_fetch_add_explicit(&m->responses[plugin][rcode], 1, memory_order_relaxed);
        /* buckets 0.25 ms doubling 16 times (CoreDNS's plugin.TimeBuckets) */
        uint64_t bound = 250000;
        int b = 0;
        while (b < DNSD_BUCKETS && elapsed_ns > bound) {
                bound <<= 1;
                b++;
        }
        atomic_fetch_add_explicit(&m->duration[type][b], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&m->duration_ns[type], elapsed_ns, memory_order_relaxed);
}

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

void dnsd_metrics_text(struct dnsd *d, struct se_strbuf *sb)
{
        struct dnsd_metrics *m = &d->m;
        const char *srv = m->server;
        static const char *const protos[] = { "udp", "tcp" };
        se_strbuf_puts(sb, "# HELP coredns_dns_requests_total Counter of DNS requests made per "
                           "zone, protocol and family.\n"
                           "# TYPE coredns_dns_requests_total counter\n");
        for (int p = 0; p < DNSD_PROTOS; p++)
                for (int f = 0; f < DNSD_FAMS; f++)
                        for (int t = 0; t < DNSD_TYPES; t++) {
                                uint64_t v = LOAD(m->requests[p][f][t]);
                                if (v)
                                        se_strbuf_printf(
                                                sb,
                                                "coredns_dns_requests_total{server=\"%s\",zone=\".\",view=\"\",proto=\"%s\",family=\"%d\",type=\"%s\"} %" PRIu64
                                                "\n",
                                                srv, protos[p], f + 1, type_label(t), v);
                        }
        se_strbuf_puts(sb, "# HELP coredns_dns_responses_total Counter of response status codes.\n"
                           "# TYPE coredns_dns_responses_total counter\n");
        for (int p = 0; p < DNSD_PLUGINS; p++)
                for (int r = 0; r < DNSD_RCODES; r++) {
                        uint64_t v = LOAD(m->responses[p][r]);
                        if (v)
                                se_strbuf_printf(
                                        sb,
                                        "coredns_dns_responses_total{server=\"%s\",zone=\".\",view=\"\",rcode=\"%s\",plugin=\"%s\"} %" PRIu64
                                        "\n",
                                        srv, rcodes[r], plugins[p], v);
                }
        se_strbuf_puts(sb, "# HELP coredns_dns_request_duration_seconds Histogram of the time (in "
                           "seconds) each request took per zone.\n"
                           "# TYPE coredns_dns_request_duration_seconds histogram\n");
        for (int t = 0; t < DNSD_TYPES; t++) {
                uint64_t cum = 0;
                uint64_t total = 0;
                for (int b = 0; b <= DNSD_BUCKETS; b++)
                        total += LOAD(m->duration[t][b]);
                if (!total)
                        continue;
                double bound = 0.00025;
                for (int b = 0; b < DNSD_BUCKETS; b++, bound *= 2) {
                        cum += LOAD(m->duration[t][b]);
                        se_strbuf_printf(
                                sb,
                                "coredns_dns_request_duration_seconds_bucket{server=\"%s\",zone=\".\",view=\"\",type=\"%s\",le=\"%g\"} %" PRIu64
                                "\n",
                                srv, type_label(t), bound, cum);
                }
                se_strbuf_printf(
                        sb,
                        "coredns_dns_request_duration_seconds_bucket{server=\"%s\",zone=\".\",view=\"\",type=\"%s\",le=\"+Inf\"} %" PRIu64
                        "\n"
                        "coredns_dns_request_duration_seconds_sum{server=\"%s\",zone=\".\",view=\"\",type=\"%s\"} %.9f\n"
                        "coredns_dns_request_duration_seconds_count{server=\"%s\",zone=\".\",view=\"\",type=\"%s\"} %" PRIu64
                        "\n",
                        srv, type_label(t), total, srv, type_label(t),
                        (double)LOAD(m->duration_ns[t]) / 1e9, srv, type_label(t), total);
        }
        if (d->cache) {
                struct se_dns_cache_stats cs;
                se_dns_cache_stats(d->cache, &cs);
                se_strbuf_printf(
                        sb,
                        "# HELP coredns_cache_entries The number of elements in the cache.\n"
                        "# TYPE coredns_cache_entries gauge\n"
                        "coredns_cache_entries{server=\"%s\",type=\"denial\",view=\"\",zones=\".\"} %" PRIu64
                        "\n"
                        "coredns_cache_entries{server=\"%s\",type=\"success\",view=\"\",zones=\".\"} %" PRIu64
                        "\n"
                        "# HELP coredns_cache_hits_total The count of cache hits.\n"
                        "# TYPE coredns_cache_hits_total counter\n"
                        "coredns_cache_hits_total{server=\"%s\",type=\"denial\",view=\"\",zones=\".\"} %" PRIu64
                        "\n"
                        "coredns_cache_hits_total{server=\"%s\",type=\"success\",view=\"\",zones=\".\"} %" PRIu64
                        "\n"
                        "# HELP coredns_cache_misses_total The count of cache misses.\n"
                        "# TYPE coredns_cache_misses_total counter\n"
                        "coredns_cache_misses_total{server=\"%s\",view=\"\",zones=\".\"} %" PRIu64
                        "\n"
                        "# HELP coredns_cache_evictions_total The count of cache evictions.\n"
                        "# TYPE coredns_cache_evictions_total counter\n"
                        "coredns_cache_evictions_total{server=\"%s\",type=\"any\",view=\"\",zones=\".\"} %" PRIu64
                        "\n",
                        srv, cs.entries_denial, srv, cs.entries_success, srv, cs.hits_denial, srv,
                        cs.hits_success, srv, cs.misses, srv, cs.evictions);
        }
        se_strbuf_printf(
                sb,
                "# HELP svcenv_dns_forward_requests_total Queries sent upstream.\n"
                "# TYPE svcenv_dns_forward_requests_total counter\n"
                "svcenv_dns_forward_requests_total %" PRIu64 "\n"
                "# HELP svcenv_dns_forward_failures_total Forwarded queries no upstream answered (SERVFAIL).\n"
                "# TYPE svcenv_dns_forward_failures_total counter\n"
                "svcenv_dns_forward_failures_total %" PRIu64 "\n"
                "# HELP svcenv_dns_forward_tcp_retries_total Truncated upstream answers asked again over TCP.\n"
                "# TYPE svcenv_dns_forward_tcp_retries_total counter\n"
                "svcenv_dns_forward_tcp_retries_total %" PRIu64 "\n"
                "# HELP svcenv_dns_forward_queue_full_total Queries answered SERVFAIL because the forward queue was full.\n"
                "# TYPE svcenv_dns_forward_queue_full_total counter\n"
                "svcenv_dns_forward_queue_full_total %" PRIu64 "\n"
                "# HELP svcenv_dns_dropped_total Packets given no answer (malformed, or responses).\n"
                "# TYPE svcenv_dns_dropped_total counter\n"
                "svcenv_dns_dropped_total %" PRIu64 "\n"
                "# HELP svcenv_dns_tcp_refused_total TCP connections closed at once over --max-tcp-conns.\n"
                "# TYPE svcenv_dns_tcp_refused_total counter\n"
                "svcenv_dns_tcp_refused_total %" PRIu64 "\n"
                "# HELP svcenv_dns_zone_builds_total Zone snapshots built.\n"
                "# TYPE svcenv_dns_zone_builds_total counter\n"
                "svcenv_dns_zone_builds_total %" PRIu64 "\n"
                "# HELP svcenv_dns_zone_build_errors_total Zone builds that failed (the old snapshot stays).\n"
                "# TYPE svcenv_dns_zone_build_errors_total counter\n"
                "svcenv_dns_zone_build_errors_total %" PRIu64 "\n"
                "# HELP svcenv_dns_zone_build_seconds Time the last zone build took.\n"
                "# TYPE svcenv_dns_zone_build_seconds gauge\n"
                "svcenv_dns_zone_build_seconds %.6f\n"
                "# HELP svcenv_dns_zone_serial SOA serial of the zone being served.\n"
                "# TYPE svcenv_dns_zone_serial gauge\n"
                "svcenv_dns_zone_serial %" PRIu64 "\n",
                LOAD(m->forward_requests), LOAD(m->forward_failures), LOAD(m->forward_tcp),
                LOAD(m->forward_queue_full), LOAD(m->dropped), LOAD(m->tcp_refused),
                LOAD(m->zone_builds), LOAD(m->zone_build_errors),
                (double)LOAD(m->zone_build_ns) / 1e9, LOAD(m->zone_serial));
}
