/* The zone as a master file (`svcenv dns --zone`) and with the objects
 * behind each record (`--explain`). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dnstest.h"

static const char cluster[] =
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns1}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: ns1}\n"
        "spec: {clusterIP: 10.96.0.30, clusterIPs: [10.96.0.30, 'fd00::30'], ports: [{name: http, port: 80}]}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: ext, namespace: ns1}\n"
        "spec: {type: ExternalName, externalName: Example.COM.}\n---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: db, namespace: ns1}\n"
        "spec: {clusterIP: None}\n---\n"
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: db-1, namespace: ns1, labels: {kubernetes.io/service-name: db}}\n"
        "addressType: IPv4\n"
        "endpoints: [{addresses: [10.244.0.7], hostname: db-0}]\n"
        "ports: [{name: pg, port: 5432, protocol: TCP}]\n";

static void master_file(void **state)
{
        (void)state;
        struct se_dns_zone *z = t_zone(cluster, NULL);
        char *m = NULL;
        assert_int_equal(se_dns_zone_master(z, &m), 0);
        assert_string_equal(
                m,
                "cluster.local.\t5\tIN\tSOA\tns.dns.cluster.local. hostmaster.cluster.local. 1700000000 7200 1800 86400 5\n"
                "dns-version.cluster.local.\t28800\tIN\tTXT\t\"1.1.0\"\n"
                "db.ns1.svc.cluster.local.\t5\tIN\tA\t10.244.0.7\n"
                "db.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 100 5432 db-0.db.ns1.svc.cluster.local.\n"
                "_pg._tcp.db.ns1.svc.cluster.local.\t5\tIN\tA\t10.244.0.7\n"
                "_pg._tcp.db.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 100 5432 db-0.db.ns1.svc.cluster.local.\n"
                "db-0.db.ns1.svc.cluster.local.\t5\tIN\tA\t10.244.0.7\n"
                "db-0.db.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 100 5432 db-0.db.ns1.svc.cluster.local.\n"
                "ext.ns1.svc.cluster.local.\t5\tIN\tCNAME\texample.com.\n"
                "web.ns1.svc.cluster.local.\t5\tIN\tA\t10.96.0.30\n"
                "web.ns1.svc.cluster.local.\t5\tIN\tAAAA\tfd00::30\n"
                "web.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 50 80 web.ns1.svc.cluster.local.\n"
                "_http._tcp.web.ns1.svc.cluster.local.\t5\tIN\tA\t10.96.0.30\n"
                "_http._tcp.web.ns1.svc.cluster.local.\t5\tIN\tAAAA\tfd00::30\n"
                "_http._tcp.web.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 50 80 web.ns1.svc.cluster.local.\n"
                "in-addr.arpa.\t5\tIN\tSOA\tns.dns.in-addr.arpa. hostmaster.in-addr.arpa. 1700000000 7200 1800 86400 5\n"
                "7.0.244.10.in-addr.arpa.\t5\tIN\tPTR\tdb-0.db.ns1.svc.cluster.local.\n"
                "30.0.96.10.in-addr.arpa.\t5\tIN\tPTR\tweb.ns1.svc.cluster.local.\n"
                "ip6.arpa.\t5\tIN\tSOA\tns.dns.ip6.arpa. hostmaster.ip6.arpa. 1700000000 7200 1800 86400 5\n"
                "0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.\t5\tIN\tPTR\tweb.ns1.svc.cluster.local.\n");
        free(m);
        assert_int_equal(se_dns_zone_explain(z, &m), 0);
        assert_non_null(strstr(
                m,
                "db-0.db.ns1.svc.cluster.local.\t5\tIN\tA\t10.244.0.7\t; EndpointSlice ns1/db-1\n"));
        assert_non_null(strstr(
                m, "ext.ns1.svc.cluster.local.\t5\tIN\tCNAME\texample.com.\t; Service ns1/ext\n"));
        free(m);
        /* one name: its records and their objects */
        assert_int_equal(se_dns_name_explain(z, "_PG._tcp.db.ns1.svc.cluster.local.", &m), 0);
        assert_string_equal(m, "_pg._tcp.db.ns1.svc.cluster.local.\t5\tIN\tA\t10.244.0.7\t; "
                               "EndpointSlice ns1/db-1\n"
                               "_pg._tcp.db.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 100 5432 "
                               "db-0.db.ns1.svc.cluster.local.\t; EndpointSlice ns1/db-1\n");
        free(m);
        assert_int_equal(se_dns_name_explain(z, "pg.tcp.db.ns1.svc.cluster.local", &m), 0);
        assert_non_null(strstr(m, "IN\tSRV\t0 100 5432"));
        free(m);
        assert_int_equal(se_dns_name_explain(z, "in-addr.arpa", &m), 0);
        assert_string_equal(m, "in-addr.arpa.\t5\tIN\tSOA\tns.dns.in-addr.arpa. "
                               "hostmaster.in-addr.arpa. 1700000000 7200 1800 86400 5\n");
        free(m);
        assert_int_equal(se_dns_name_explain(z, "nope.ns1.svc.cluster.local", &m), 0);
        assert_string_equal(m, "");
        free(m);
        assert_int_equal(se_dns_zone_serial(z), 1700000000u);
        /* references: the zone lives until the last one goes */
        assert_ptr_equal(se_dns_zone_ref(z), z);
        assert_null(se_dns_zone_unref(z));
        assert_int_equal(se_dns_zone_serial(z), 1700000000u);
        assert_null(se_dns_zone_unref(z));
        assert_null(se_dns_zone_unref(NULL));
}

static void empty_store(void **state)
{
        (void)state;
        struct se_store *st = se_store_new();
        struct se_dns_zone *z = NULL;
        assert_int_equal(se_dns_zone_build(st, NULL, &z, NULL), 0);
        assert_true(se_dns_zone_serial(z) > 0); /* the time of the build */
        char *got = t_ask(z, "kubernetes.default.svc.cluster.local", 1);
        assert_non_null(strstr(got, "NXDOMAIN qr aa rd\nNS cluster.local. 5 SOA"));
        free(got);
        se_dns_zone_unref(z);
        se_store_free(st);
}

/* One name's records, found as a query finds them: an endpoint's name, PTR
 * names of both families and missing names of each sort; and for every
 * owner of the zone, exactly its lines of the whole zone's listing. */
static void name_explain_finds_one_name(void **state)
{
        (void)state;
        struct se_dns_zone *z = t_zone(cluster, NULL);
        char *m = NULL;
        assert_int_equal(se_dns_name_explain(z, "DB-0.db.ns1.svc.cluster.local", &m), 0);
        assert_string_equal(m, "db-0.db.ns1.svc.cluster.local.\t5\tIN\tA\t10.244.0.7\t; "
                               "EndpointSlice ns1/db-1\n"
                               "db-0.db.ns1.svc.cluster.local.\t5\tIN\tSRV\t0 100 5432 "
                               "db-0.db.ns1.svc.cluster.local.\t; EndpointSlice ns1/db-1\n");
        free(m);
        assert_int_equal(se_dns_name_explain(z, "7.0.244.10.in-addr.arpa.", &m), 0);
        assert_string_equal(m, "7.0.244.10.in-addr.arpa.\t5\tIN\tPTR\t"
                               "db-0.db.ns1.svc.cluster.local.\t; EndpointSlice ns1/db-1\n");
        free(m);
        assert_int_equal(
                se_dns_name_explain(
                        z,
                        "0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.D.F.ip6.arpa",
                        &m),
                0);
        assert_string_equal(
                m, "0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.\t5\t"
                   "IN\tPTR\tweb.ns1.svc.cluster.local.\t; Service ns1/web\n");
        free(m);
        static const char *const missing[] = {
                "db-9.db.ns1.svc.cluster.local",    "8.0.244.10.in-addr.arpa",
                "07.0.244.10.in-addr.arpa",         "_nope._tcp.db.ns1.svc.cluster.local",
                "_pg.tcp.db.ns1.svc.cluster.local", "x._pg._tcp.db.ns1.svc.cluster.local",
                "nope.ns1.svc.cluster.local",       "example.com",
        };
        for (size_t i = 0; i < sizeof(missing) / sizeof(*missing); i++) {
                assert_int_equal(se_dns_name_explain(z, missing[i], &m), 0);
                if (*m)
                        fail_msg("%s: want nothing, got %s", missing[i], m);
                free(m);
        }

        char *all = NULL;
        assert_int_equal(se_dns_zone_explain(z, &all), 0);
        size_t owners = 0;
        for (const char *line = all; *line;) {
                const char *tab = strchr(line, '\t');
                assert_non_null(tab);
                size_t olen = (size_t)(tab - line);
                /* this owner's run of lines */
                const char *end = line;
                while (*end && strncmp(end, line, olen) == 0 && end[olen] == '\t')
                        end = strchr(end, '\n') + 1;
                char owner[300];
                assert_true(olen < sizeof(owner));
                memcpy(owner, line, olen);
                owner[olen] = '\0';
                assert_int_equal(se_dns_name_explain(z, owner, &m), 0);
                if (strlen(m) != (size_t)(end - line) || memcmp(m, line, strlen(m)) != 0)
                        fail_msg("%s: got\n%swant\n%.*s", owner, m, (int)(end - line), line);
                free(m);
                owners++;
                line = end;
        }
        assert_int_equal(owners, 13);
        free(all);
        se_dns_zone_unref(z);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(master_file),
                cmocka_unit_test(empty_store),
                cmocka_unit_test(name_explain_finds_one_name),
        };
        return cmocka_run_group_tests_name("dns_master", tests, NULL, NULL);
}
