/* kube-proxy's health answers, pure: the /healthz verdict and body, the
 * health-check node port body, Go's time.Time text. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <svcenv/proxy.h>

void se_proxy_health_init(struct se_proxy_health *h, int64_t timeout_ns)
{
        memset(h, 0, sizeof(*h));
        h->timeout_ns = timeout_ns;
        h->node_eligible = true; /* until a Node event says otherwise */
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
                snprintf(out, size, "0001-01-01 00:00:00 +0000 UTC");
                return;
        }
        time_t s = (time_t)(t->real_ns / 1000000000);
        long ns = (long)(t->real_ns % 1000000000);
        struct tm tm;
        gmtime_r(&s, &tm);
        char frac[16] = "";
        if (ns) { /* Go's .999999999: trailing zeros dropped */
                snprintf(frac, sizeof(frac), ".%09ld", ns);
                size_t n = strlen(frac);
                while (frac[n - 1] == '0')
                        frac[--n] = 0;
        }
        int64_t m = t->mono_ns - t->start_mono_ns;
        snprintf(out, size, "%04d-%02d-%02d %02d:%02d:%02d%s +0000 UTC m=%c%" PRId64 ".%09" PRId64,
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 frac, m < 0 ? '-' : '+', (m < 0 ? -m : m) / 1000000000,
                 (m < 0 ? -m : m) % 1000000000);
}

bool se_proxy_healthz(const struct se_proxy_health *h, const struct se_proxy_instant *now,
                      struct se_strbuf *body)
{
        bool ok = se_proxy_health_ok(h, now) && h->node_eligible;
        char last[96], cur[96];
        se_proxy_go_time(now, cur, sizeof(cur));
        if (ok) /* upstream reports "now" as the last update when healthy */
                memcpy(last, cur, sizeof(last));
        else
                se_proxy_go_time(&h->last_updated, last, sizeof(last));
        se_strbuf_printf(body,
                         "{\"lastUpdated\": \"%s\",\"currentTime\": \"%s\", \"nodeEligible\": %s}",
                         last, cur, h->node_eligible ? "true" : "false");
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
