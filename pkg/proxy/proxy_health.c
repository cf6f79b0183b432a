/* kube-proxy's health answers, pure: the /healthz and /livez verdicts and bodies, the
 * health-check node port body, Go's time.Time text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <svcenv/proxy.h>

void se_proxy_health_init(struct se_proxy_health *h, int64_t timeout_ns)
{
        memset(h, 0, sizeof(*h));
        h->timeout_ns = timeout_ns;
}

void se_proxy_health_families(struct se_proxy_health *h, const enum se_ip_family *fams, unsigned n)
{
        h->n_fams = 0;
        for (unsigned i = 0; i < n && i < 2; i++)
                h->fams[h->n_fams++] = fams[i];
        /* encoding/json sorts map keys: "IPv4" before "IPv6" */
        if (h->n_fams == 2 && h->fams[0] == SE_IPV6) {
                h->fams[0] = SE_IPV4;
                h->fams[1] = SE_IPV6;
        }
}

void se_proxy_health_queued(struct se_proxy_health *h, const struct se_proxy_instant *now)
{
        if (!h->queued)
                h->oldest_queued = *now;
        h->queued = true;
}

void se_proxy_health_updated(struct se_proxy_health *h, const struct se_proxy_instant *now)
{
        h->queued = false;
        h->last_updated = *now;
        h->updated = true;
}

bool se_proxy_node_eligible(const struct se_node *node)
{
        return node && !node->obj.meta.deletion_timestamp && !node->to_be_deleted;
}

bool se_proxy_health_ok(const struct se_proxy_health *h, const struct se_proxy_instant *now)
{
        /* healthy while starting up (upstream only looks at proxiers that
         * synced once) and while no queued update is overdue */
        return !h->updated || !h->queued || now->mono_ns - h->oldest_queued.mono_ns < h->timeout_ns;
}

void se_proxy_go_time(const struct se_proxy_instant *t, char *out, size_t size)
{
        if (t->real_ns == 0 && t->mono_ns == 0) {
                snprintf(out, size, "0001-01-01T00:00:00Z");
                return;
        }
        time_t s = (time_t)(t->real_ns / 1000000000);
        long ns = (long)(t->real_ns % 1000000000);
        struct tm tm;
        localtime_r(&s, &tm);
        char frac[16] = "";
        if (ns) { /* Go's .999999999: trailing zeros dropped */
                snprintf(frac, sizeof(frac), ".%09ld", ns);
                size_t n = strlen(frac);
                while (frac[n - 1] == '0')
                        frac[--n] = 0;
        }
        char zone[16] = "Z";
        long off = labs(tm.tm_gmtoff) / 60 % (100 * 60); /* minutes; real zones are < 24 h */
        if (tm.tm_gmtoff) /* Go's Z07:00 */
                snprintf(zone, sizeof(zone), "%c%02d:%02d", tm.tm_gmtoff < 0 ? '-' : '+',
                         (int)(off / 60), (int)(off % 60));
        snprintf(out, size, "%04d-%02d-%02dT%02d:%02d:%02d%s%s", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac, zone);
}

bool se_proxy_health_body(const struct se_proxy_health *h, const struct se_proxy_instant *now,
                          bool livez, struct se_strbuf *body)
{
        bool healthy = se_proxy_health_ok(h, now);
        bool ok = healthy && (livez || h->node_eligible);
        static const struct se_proxy_instant zero = { 0, 0, 0 };
        char last[64], cur[64], fam_last[64];
        se_proxy_go_time(now, cur, sizeof(cur));
        se_proxy_go_time(h->updated ? &h->last_updated : &zero, fam_last, sizeof(fam_last));
        /* upstream reports "now" as the last update when it answers 200 */
        memcpy(last, ok ? cur : fam_last, sizeof(last));
        se_strbuf_printf(body, "{\"lastUpdated\":\"%s\",\"currentTime\":\"%s\"", last, cur);
        if (!livez)
                se_strbuf_printf(body, ",\"nodeEligible\":%s", h->node_eligible ? "true" : "false");
        se_strbuf_printf(body, ",\"healthy\":%s", healthy ? "true" : "false");
        /* only families that synced once are listed (none before) */
        for (unsigned i = 0; h->updated && i < h->n_fams; i++)
                se_strbuf_printf(body, "%s\"%s\":{\"lastUpdated\":\"%s\",\"healthy\":%s}",
                                 i ? "," : ",\"status\":{", h->fams[i] == SE_IPV6 ? "IPv6" : "IPv4",
                                 fam_last, healthy ? "true" : "false");
        se_strbuf_puts(body, h->updated && h->n_fams ? "}}" : "}");
        return ok;
}

bool se_proxy_hc_body(const char *ns, const char *name, unsigned local_endpoints,
                      bool proxy_healthy, struct se_strbuf *body)
{
        se_strbuf_printf(
                body,
                "{\n\t\"service\": {\n\t\t\"namespace\": \"%s\",\n\t\t\"name\": \"%s\"\n\t},\n"
                "\t\"localEndpoints\": %u,\n\t\"serviceProxyHealthy\": %s\n}",
                ns, name, local_endpoints, proxy_healthy ? "true" : "false");
        return local_endpoints != 0 && proxy_healthy;
}
