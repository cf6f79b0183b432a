/* A trace as readable text or as one JSON object. */
#include <stdio.h>
#include <string.h>

#include <svcenv/jsonstr.h>
#include <svcenv/proxy_trace.h>

static const char *dest_name(enum se_proxy_trace_dest d)
{
        switch (d) {
        case SE_PROXY_TRACE_DEST_CLUSTER_IP:
                return "clusterIP";
        case SE_PROXY_TRACE_DEST_EXTERNAL_IP:
                return "externalIP";
        case SE_PROXY_TRACE_DEST_LOAD_BALANCER:
                return "loadBalancerIP";
        case SE_PROXY_TRACE_DEST_NODE_PORT:
                return "nodePort";
        case SE_PROXY_TRACE_DEST_NONE:
        default:
                return "none";
        }
}

static const char *verdict_name(enum se_proxy_trace_verdict v)
{
        switch (v) {
        case SE_PROXY_TRACE_DNAT:
                return "DNAT";
        case SE_PROXY_TRACE_REJECT:
                return "REJECT";
        case SE_PROXY_TRACE_DROP:
                return "DROP";
        case SE_PROXY_TRACE_REDIRECT:
                return "REDIRECT";
        case SE_PROXY_TRACE_PASS:
        default:
                return "PASS";
        }
}

/* "ip:port/proto" of the packet's ends */
static void packet(const struct se_proxy_trace *tr, const struct se_proxy_trace_query *q,
                   char from[64], char to[80])
{
        char ip[64];
        se_ip_format(&q->from, from, 64);
        se_ip_format(&q->to, ip, sizeof(ip));
        snprintf(to, 80, q->to.family == SE_IPV6 ? "[%s]:%d/%s" : "%s:%d/%s", ip, q->port,
                 tr->protocol ? tr->protocol : "tcp");
}

int se_proxy_trace_text(const struct se_proxy_trace *tr, const struct se_proxy_trace_query *q,
                        struct se_strbuf *out)
{
        char from[64], to[80];
        packet(tr, q, from, to);
        se_strbuf_printf(out, "packet:     %s%s -> %s (%s)\n", from,
                         q->from_local ? " (a node address)" : "", to,
                         tr->backend == SE_PROXY_TRACE_NFTABLES ? "nftables" : "iptables");
        if (tr->service)
                se_strbuf_printf(out, "service:    %s (%s)\n", tr->service, dest_name(tr->dest));
        else
                se_strbuf_puts(out, "service:    none\n");
        if (tr->node_port_ips)
                se_strbuf_printf(out, "node ports: on %s\n", tr->node_port_ips);
        se_strbuf_puts(out, "path:\n");
        for (uint32_t i = 0; i < tr->n_steps; i++) {
                const struct se_proxy_trace_step *s = &tr->steps[i];
                se_strbuf_printf(out, "  %-3u %s %s\n        %s\n", i + 1, s->table, s->chain,
                                 s->rule);
        }
        se_strbuf_printf(out, "verdict:    %s%s%s\n", verdict_name(tr->verdict),
                         tr->verdict == SE_PROXY_TRACE_DNAT ? " " : ": ",
                         tr->reason ? tr->reason : "");
        if (tr->masquerade_reason)
                se_strbuf_printf(out, "masquerade: %s\n", tr->masquerade_reason);
        if (tr->affinity)
                se_strbuf_printf(
                        out,
                        "affinity:   ClientIP, %d s: a client that connected within "
                        "that time gets its endpoint again; a new one is spread as below\n",
                        tr->affinity_timeout);
        if (tr->affinity_read) {
                const char *pin = NULL;
                for (uint32_t i = 0; i < tr->n_endpoints && !pin; i++)
                        if (tr->endpoints[i].pinned)
                                pin = tr->endpoints[i].endpoint;
                if (pin)
                        se_strbuf_printf(out, "affinity:   this host's state holds %s for %s\n",
                                         from, pin);
                else
                        se_strbuf_printf(out, "affinity:   this host's state has no entry for %s\n",
                                         from);
        }
        if (tr->n_endpoints) {
                se_strbuf_puts(out, "endpoints:\n");
                for (uint32_t i = 0; i < tr->n_endpoints; i++) {
                        const struct se_proxy_trace_endpoint *e = &tr->endpoints[i];
                        char key[48];
                        if (e->of_buckets)
                                snprintf(key, sizeof(key), "%u of %u buckets", e->buckets,
                                         e->of_buckets);
                        else
                                snprintf(key, sizeof(key), "DNAT map key %u", i);
                        se_strbuf_printf(out, "  %-24s %7.3f%%  %s%s%s%s%s%s%s\n", e->endpoint,
                                         100.0 * e->probability, e->chain ? e->chain : key,
                                         e->chain && e->of_buckets ? ", " : "",
                                         e->chain && e->of_buckets ? key : "",
                                         e->local ? "  local" : "",
                                         e->ready       ? "" :
                                         e->terminating ? "  terminating" :
                                                          "",
                                         e->masquerade ? "  hairpin: masqueraded" : "",
                                         e->pinned ? "  pinned by affinity" : "");
                }
        }
        for (uint32_t i = 0; i < tr->n_notes; i++)
                se_strbuf_printf(out, "note:       %s\n", tr->notes[i]);
        return se_strbuf_failed(out);
}

static void key(struct se_strbuf *out, const char *k, bool first)
{
        if (!first)
                se_strbuf_puts(out, ",");
        se_json_put_string(out, k);
        se_strbuf_puts(out, ":");
}

static void str_or_null(struct se_strbuf *out, const char *s)
{
        if (s)
                se_json_put_string(out, s);
        else
                se_strbuf_puts(out, "null");
}

static const char *yes(bool b)
{
        return b ? "true" : "false";
}

int se_proxy_trace_json(const struct se_proxy_trace *tr, const struct se_proxy_trace_query *q,
                        struct se_strbuf *out)
{
        char from[64], to[64];
        se_ip_format(&q->from, from, sizeof(from));
        se_ip_format(&q->to, to, sizeof(to));
        se_strbuf_puts(out, "{");
        key(out, "backend", true);
        se_json_put_string(out, tr->backend == SE_PROXY_TRACE_NFTABLES ? "nftables" : "iptables");
        key(out, "from", false);
        se_json_put_string(out, from);
        key(out, "fromNode", false);
        se_strbuf_puts(out, yes(q->from_local));
        key(out, "to", false);
        se_json_put_string(out, to);
        key(out, "port", false);
        se_strbuf_printf(out, "%d", q->port);
        key(out, "protocol", false);
        str_or_null(out, tr->protocol);
        key(out, "service", false);
        str_or_null(out, tr->service);
        key(out, "destination", false);
        se_json_put_string(out, dest_name(tr->dest));
        key(out, "nodePortAddresses", false);
        str_or_null(out, tr->node_port_ips);
        key(out, "path", false);
        se_strbuf_puts(out, "[");
        for (uint32_t i = 0; i < tr->n_steps; i++) {
                const struct se_proxy_trace_step *s = &tr->steps[i];
                se_strbuf_puts(out, i ? ",{" : "{");
                key(out, "table", true);
                se_json_put_string(out, s->table);
                key(out, "chain", false);
                se_json_put_string(out, s->chain);
                key(out, "rule", false);
                se_json_put_string(out, s->rule);
                se_strbuf_puts(out, "}");
        }
        se_strbuf_puts(out, "]");
        key(out, "verdict", false);
        se_json_put_string(out, verdict_name(tr->verdict));
        key(out, "reason", false);
        str_or_null(out, tr->reason);
        key(out, "masquerade", false);
        se_strbuf_puts(out, yes(tr->masquerade));
        key(out, "masqueradeReason", false);
        str_or_null(out, tr->masquerade_reason);
        key(out, "affinity", false);
        if (tr->affinity)
                se_strbuf_printf(out,
                                 "{\"type\":\"ClientIP\",\"timeoutSeconds\":%d,\"stateRead\":%s}",
                                 tr->affinity_timeout, yes(tr->affinity_read));
        else
                se_strbuf_puts(out, "null");
        key(out, "endpoints", false);
        se_strbuf_puts(out, "[");
        for (uint32_t i = 0; i < tr->n_endpoints; i++) {
                const struct se_proxy_trace_endpoint *e = &tr->endpoints[i];
                se_strbuf_puts(out, i ? ",{" : "{");
                key(out, "endpoint", true);
                se_json_put_string(out, e->endpoint);
                key(out, "chain", false);
                str_or_null(out, e->chain);
                key(out, "probability", false);
                se_strbuf_printf(out, "%.10f", e->probability);
                key(out, "local", false);
                se_strbuf_puts(out, yes(e->local));
                key(out, "ready", false);
                se_strbuf_puts(out, yes(e->ready));
                key(out, "serving", false);
                se_strbuf_puts(out, yes(e->serving));
                key(out, "terminating", false);
                se_strbuf_puts(out, yes(e->terminating));
                key(out, "hairpin", false);
                se_strbuf_puts(out, yes(e->masquerade));
                key(out, "pinned", false);
                se_strbuf_puts(out, yes(e->pinned));
                if (e->of_buckets) {
                        key(out, "buckets", false);
                        se_strbuf_printf(out, "{\"count\":%u,\"of\":%u}", e->buckets,
                                         e->of_buckets);
                }
                se_strbuf_puts(out, "}");
        }
        se_strbuf_puts(out, "]");
        key(out, "notes", false);
        se_strbuf_puts(out, "[");
        for (uint32_t i = 0; i < tr->n_notes; i++) {
                if (i)
                        se_strbuf_puts(out, ",");
                se_json_put_string(out, tr->notes[i]);
        }
        se_strbuf_puts(out, "]}\n");
        return se_strbuf_failed(out);
}
