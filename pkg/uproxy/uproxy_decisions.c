/* The scheduler's decisions as Prometheus counters: per service port and
 * endpoint, the connections its scheduler chose that endpoint for, and the
 * retries round robin placed there because a hashing scheduler could not
 * (the retry is the mode's promise). */
#include <netinet/in.h>

#include "uproxy_internal.h"

static void one_metric(const struct se_hashmap *svcs, struct se_strbuf *out, bool fallback)
{
        const char *name = fallback ? "svcenv_proxy_scheduler_fallback_total" :
                                      "svcenv_proxy_scheduler_picks_total";
        const char *key;
        void *v;
        for (size_t it = 0; se_hashmap_next(svcs, &it, &key, &v);) {
                struct uproxy_svc *s = v;
                pthread_mutex_lock(&s->mu);
                for (uint32_t i = 0; s->lb && i < s->n_eps; i++) {
                        const struct uproxy_ep *ep = s->eps[i];
                        const atomic_ulong *c = fallback ? &ep->fallback : &ep->picked;
                        se_strbuf_printf(out,
                                         "%s{service=\"%s\",protocol=\"%s\",endpoint=\"%s\","
                                         "scheduler=\"%s\"} %lu\n",
                                         name, s->spn, s->proto == IPPROTO_UDP ? "UDP" : "TCP",
                                         ep->str, s->lb_spec,
                                         atomic_load_explicit(c, memory_order_relaxed));
                }
                pthread_mutex_unlock(&s->mu);
        }
}

void uproxy_decision_metrics(const struct se_hashmap *svcs, struct se_strbuf *out)
{
        se_strbuf_puts(out, "# HELP svcenv_proxy_scheduler_picks_total Connections (TCP) or "
                            "sessions (UDP) the service port's scheduler chose the endpoint "
                            "for (affinity hits and round-robin retries not counted).\n"
                            "# TYPE svcenv_proxy_scheduler_picks_total counter\n");
        one_metric(svcs, out, false);
        se_strbuf_puts(out, "# HELP svcenv_proxy_scheduler_fallback_total Retries placed on "
                            "the endpoint by round robin because the hashing scheduler "
                            "could not place them (its endpoint was tried).\n"
                            "# TYPE svcenv_proxy_scheduler_fallback_total counter\n");
        one_metric(svcs, out, true);
}
