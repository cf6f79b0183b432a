/* Fuzz target: a manifest (Services, EndpointSlices, Namespaces, Pods) into
 * the DNS zone builder under every pods mode, the zone's master file, a
 * query of every owner it lists, and the same zone made by an update from
 * the previous one, with a pass over the store or told that every Service
 * changed (it must list the same). */
#include <stdlib.h>
#include <string.h>

#include <svcenv/dns.h>
#include <svcenv/manifest.h>
#include <svcenv/store.h>

#include "fuzz.h"

/* Every Service and EndpointSlice noted as changed: each block is made
 * again (or found unchanged) and merged into the previous zone's list. */
static struct se_dns_changes *all_noted(struct se_store *s)
{
        struct se_dns_changes *ch = se_dns_changes_new();
        static const enum se_kind kinds[] = { SE_KIND_SERVICE, SE_KIND_ENDPOINT_SLICE };
        for (size_t k = 0; ch && k < sizeof(kinds) / sizeof(kinds[0]); k++) {
                const struct se_object **v = NULL;
                long n = se_store_list(s, kinds[k], NULL, &v);
                for (long i = 0; i < n; i++)
                        se_dns_changes_note(ch, NULL, v[i]);
                free(v);
        }
        return ch;
}

/* A query for the dotted name (no escapes; long labels are cut). */
static size_t query(const char *name, size_t n, uint16_t type, uint8_t *q)
{
        size_t o = 12;
        memset(q, 0, 12);
        q[5] = 1;
        while (n > 0 && o < 12 + 250) {
                const char *dot = memchr(name, '.', n);
                size_t l = dot ? (size_t)(dot - name) : n;
                if (l > 63)
                        l = 63;
                if (l > 0 && o + 1 + l < 12 + 254) {
                        q[o++] = (uint8_t)l;
                        memcpy(q + o, name, l);
                        o += l;
                }
                size_t skip = dot ? (size_t)(dot - name) + 1 : n;
                name += skip;
                n -= skip;
        }
        q[o++] = 0;
        q[o++] = (uint8_t)(type >> 8);
        q[o++] = (uint8_t)type;
        q[o++] = 0;
        q[o++] = 1;
        return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static uint8_t q[300], out[SE_DNS_MAX_MSG];
        struct se_store *s = se_store_new();
        struct se_diag d;
        if (!s)
                return 0;
        if (se_manifest_load_buffer(s, "fuzz", (const char *)data, size, NULL, NULL, &d) == 0) {
                for (int pods = 0; pods < 3; pods++) {
                        struct se_dns_options o = { .ttl = 5,
                                                    .serial = 1,
                                                    .pods = (enum se_dns_pods)pods,
                                                    .endpoint_pod_names = pods == 1 };
                        struct se_dns_zone *z = NULL;
                        char *m = NULL;
                        if (se_dns_zone_build(s, &o, &z, &d) < 0)
                                continue;
                        if (se_dns_zone_explain(z, &m) == 0) {
                                /* every owner, as A and SRV: at most 200 */
                                int lines = 0;
                                for (char *l = m; l && *l && lines < 200; lines++) {
                                        char *tab = strchr(l, '\t'), *nl = strchr(l, '\n');
                                        if (!tab || !nl)
                                                break;
                                        struct se_dns_client c = { .transport = SE_DNS_UDP };
                                        size_t outlen;
                                        size_t n = query(l, (size_t)(tab - l), 1, q);
                                        (void)se_dns_answer(z, &c, q, n, out, sizeof(out), &outlen);
                                        n = query(l, (size_t)(tab - l), 33, q);
                                        c.transport = SE_DNS_TCP;
                                        (void)se_dns_answer(z, &c, q, n, out, sizeof(out), &outlen);
                                        l = nl + 1;
                                }
                        }
                        /* made from z (every block carries over) and from
                         * nothing (after a change of options), it must
                         * list the same */
                        struct se_dns_zone *u = NULL, *u2 = NULL, *un = NULL;
                        char *mu = NULL, *mu2 = NULL, *mun = NULL;
                        if (m && se_dns_zone_update(s, &o, z, &u, &d) == 0 &&
                            se_dns_zone_explain(u, &mu) == 0 && strcmp(m, mu) != 0)
                                abort();
                        struct se_dns_changes *ch = m ? all_noted(s) : NULL;
                        if (ch && se_dns_zone_update_changed(s, &o, z, ch, &un, &d) == 0 &&
                            se_dns_zone_explain(un, &mun) == 0 && strcmp(m, mun) != 0)
                                abort();
                        se_dns_changes_free(ch);
                        free(mun);
                        se_dns_zone_unref(un);
                        struct se_dns_options o2 = o;
                        o2.ttl = 6; /* (other options: nothing carries over) */
                        if (m && se_dns_zone_update(s, &o2, u, &u2, &d) == 0 &&
                            se_dns_zone_explain(u2, &mu2) == 0 && strlen(m) != strlen(mu2))
                                abort();
                        free(mu);
                        free(mu2);
                        free(m);
                        se_dns_zone_unref(u);
                        se_dns_zone_unref(u2);
                        se_dns_zone_unref(z);
                }
        }
        se_store_free(s);
        return 0;
}
