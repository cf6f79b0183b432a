/* The schedulers against traces worked out from the kernel's formulas
 * (net/netfilter/ipvs/ip_vs_*.c): each expected value below was computed by
 * an independent script of those formulas whose hsiphash reproduces the
 * kernel's own test vectors (lib/tests/siphash_kunit.c, 64-bit). */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/lb.h>

static struct se_lb_dest dest(const char *ip, uint16_t port, int weight)
{
        struct se_lb_dest d = { .port = port, .weight = weight };
        if (inet_pton(AF_INET, ip, d.addr) == 1)
                d.addr_len = 4;
        else {
                assert_int_equal(inet_pton(AF_INET6, ip, d.addr), 1);
                d.addr_len = 16;
        }
        return d;
}

static struct se_lb_key key(const char *src, uint16_t sport, const char *dst)
{
        struct se_lb_key k = { .sport = sport };
        if (inet_pton(AF_INET, src, k.saddr) == 1) {
                k.addr_len = 4;
                assert_int_equal(inet_pton(AF_INET, dst, k.daddr), 1);
        } else {
                k.addr_len = 16;
                assert_int_equal(inet_pton(AF_INET6, src, k.saddr), 1);
                assert_int_equal(inet_pton(AF_INET6, dst, k.daddr), 1);
        }
        return k;
}

static struct se_lb *make(enum se_lb_kind kind, unsigned flags, const struct se_lb_dest *d,
                          size_t n)
{
        struct se_lb *lb = se_lb_new(kind, flags, 42);
        assert_non_null(lb);
        assert_int_equal(se_lb_update(lb, d, n), 0);
        return lb;
}

/* A run of picks as letters, A for index 0; '-' for none. */
static void trace(struct se_lb *lb, const struct se_lb_dest *d, size_t n, const char *want)
{
        char got[64] = { 0 };
        size_t len = strlen(want);
        assert_true(len < sizeof(got));
        for (size_t i = 0; i < len; i++) {
                int at = se_lb_pick(lb, d, n, NULL);
                got[i] = at < 0 ? '-' : (char)('A' + at);
        }
        assert_string_equal(got, want);
}

static void test_hsiphash_kernel_vectors(void **state)
{
        (void)state;
        static const uint32_t want[] = {
                0x050fc4dc, 0x7d57ca93, 0x4dc7d44d, 0xe7ddf7fb, 0x88d38328,
                0x49533b67, 0xc59f22a7, 0x9bb11140, 0x8d299a8e, 0x6c063de4
        };
        uint8_t in[16];
        for (unsigned i = 0; i < sizeof(in); i++)
                in[i] = (uint8_t)i;
        for (size_t n = 0; n < sizeof(want) / sizeof(want[0]); n++)
                assert_int_equal(
                        se_lb_hsiphash(in, n, 0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL),
                        want[n]);
}

static void test_rr(void **state)
{
        (void)state;
        struct se_lb_dest d[3] = { dest("10.1.0.1", 80, 1), dest("10.1.0.2", 80, 1),
                                   dest("10.1.0.3", 80, 1) };
        struct se_lb *lb = make(SE_LB_RR, 0, d, 3);
        trace(lb, d, 3, "ABCABCA");
        /* quiesced (weight 0) and overloaded entries are passed over */
        d[1].weight = 0;
        trace(lb, d, 3, "CACA");
        d[1].weight = 1;
        d[2].overloaded = true;
        trace(lb, d, 3, "BABA");
        d[0].overloaded = d[1].overloaded = true;
        trace(lb, d, 3, "--");
        se_lb_free(lb);
}

/* Deleting the entry under the cursor steps the cursor back, so the walk
 * goes on with the entry after the deleted one (ip_vs_rr_del_dest). */
static void test_rr_keeps_its_place(void **state)
{
        (void)state;
        struct se_lb_dest d[4] = { dest("10.1.0.1", 80, 1), dest("10.1.0.2", 80, 1),
                                   dest("10.1.0.3", 80, 1), dest("10.1.0.4", 80, 1) };
        struct se_lb *lb = make(SE_LB_RR, 0, d, 4);
        trace(lb, d, 4, "AB"); /* cursor on B */
        struct se_lb_dest without_b[3] = { d[0], d[2], d[3] };
        assert_int_equal(se_lb_update(lb, without_b, 3), 0);
        trace(lb, without_b, 3, "BCA"); /* 10.1.0.3, .4, .1 */
        /* a new entry at the end is reached in turn */
        struct se_lb_dest more[4] = { d[0], d[2], d[3], dest("10.1.0.9", 80, 1) };
        assert_int_equal(se_lb_update(lb, more, 4), 0);
        trace(lb, more, 4, "BCDA");
        se_lb_free(lb);
}

/* The LVS documentation's example: weights 4, 3, 2 give AABABCABC. */
static void test_wrr(void **state)
{
        (void)state;
        struct se_lb_dest d[3] = { dest("10.1.0.1", 80, 4), dest("10.1.0.2", 80, 3),
                                   dest("10.1.0.3", 80, 2) };
        struct se_lb *lb = make(SE_LB_WRR, 0, d, 3);
        trace(lb, d, 3, "AABABCABCAABABCABC");
        se_lb_free(lb);
        /* equal weights: plain round robin; a gcd step of 2 changes nothing */
        struct se_lb_dest e[3] = { dest("10.1.0.1", 80, 2), dest("10.1.0.2", 80, 2),
                                   dest("10.1.0.3", 80, 2) };
        lb = make(SE_LB_WRR, 0, e, 3);
        trace(lb, e, 3, "ABCABC");
        /* all quiesced: nothing */
        for (int i = 0; i < 3; i++)
                e[i].weight = 0;
        assert_int_equal(se_lb_update(lb, e, 3), 0);
        trace(lb, e, 3, "--");
        se_lb_free(lb);
}

static void test_lc(void **state)
{
        (void)state;
        struct se_lb_dest d[3] = { dest("10.1.0.1", 80, 1), dest("10.1.0.2", 80, 1),
                                   dest("10.1.0.3", 80, 1) };
        struct se_lb *lb = make(SE_LB_LC, 0, d, 3);
        /* one active weighs 256 inactive */
        d[0].active = 1;
        d[1].inactive = 255;
        d[2].inactive = 256;
        assert_int_equal(se_lb_pick(lb, d, 3, NULL), 1);
        d[1].inactive = 256; /* a three-way tie goes to the first in the list */
        assert_int_equal(se_lb_pick(lb, d, 3, NULL), 0);
        d[0].weight = 0; /* quiesced */
        assert_int_equal(se_lb_pick(lb, d, 3, NULL), 1);
        assert_int_equal(se_lb_overhead(&d[0]), 256);
        se_lb_free(lb);
}

static void test_wlc_sed_nq(void **state)
{
        (void)state;
        struct se_lb_dest d[3] = { dest("10.1.0.1", 80, 1), dest("10.1.0.2", 80, 2),
                                   dest("10.1.0.3", 80, 1) };
        struct se_lb *wlc = make(SE_LB_WLC, 0, d, 3);
        struct se_lb *sed = make(SE_LB_SED, 0, d, 3);
        struct se_lb *nq = make(SE_LB_NQ, 0, d, 3);
        /* wlc: 10/1 against 19/2: B (10*2 > 19*1) */
        d[0].inactive = 10;
        d[1].inactive = 19;
        d[2].inactive = 11;
        assert_int_equal(se_lb_pick(wlc, d, 3, NULL), 1);
        d[1].inactive = 20; /* 10*2 > 20*1 is false: A stays */
        assert_int_equal(se_lb_pick(wlc, d, 3, NULL), 0);
        /* sed ignores inactive: (0+1)/1 vs (0+1)/2: B */
        assert_int_equal(se_lb_pick(sed, d, 3, NULL), 1);
        d[0].active = 1; /* 2/1 */
        d[1].active = 3; /* 4/2: equal, the first kept */
        d[2].active = 2; /* 3/1 */
        assert_int_equal(se_lb_pick(sed, d, 3, NULL), 0);
        /* nq: the first idle entry wins, whatever the weights */
        d[2].active = 0;
        assert_int_equal(se_lb_pick(nq, d, 3, NULL), 2);
        d[2].active = 2; /* none idle: SED's choice */
        assert_int_equal(se_lb_pick(nq, d, 3, NULL), 0);
        d[1].active = 2; /* 3/2 beats 2/1 */
        assert_int_equal(se_lb_pick(nq, d, 3, NULL), 1);
        se_lb_free(wlc);
        se_lb_free(sed);
        se_lb_free(nq);
}

/* dh hashes the destination address with hash_32(addr, 8): 10.96.0.10 ->
 * bucket 242, 10.0.0.1 -> 39; buckets are given one per entry in turn. */
static void test_dh(void **state)
{
        (void)state;
        struct se_lb_dest d[3] = { dest("10.1.0.1", 80, 1), dest("10.1.0.2", 80, 1),
                                   dest("10.1.0.3", 80, 1) };
        struct se_lb *lb = make(SE_LB_DH, 0, d, 3);
        struct se_lb_key k = key("192.168.0.5", 1234, "10.96.0.10");
        assert_int_equal(se_lb_pick(lb, d, 3, &k), 242 % 3);
        k = key("192.168.0.6", 999, "10.96.0.10"); /* the source does not matter */
        assert_int_equal(se_lb_pick(lb, d, 3, &k), 242 % 3);
        k = key("192.168.0.6", 999, "10.0.0.1");
        assert_int_equal(se_lb_pick(lb, d, 3, &k), 39 % 3);
        d[0].weight = 0; /* no fallback in dh */
        assert_int_equal(se_lb_pick(lb, d, 3, &k), -1);
        se_lb_free(lb);
}

/* sh: hash_32(port + addr, 8); 10.0.0.1 -> 39, 10.0.0.2 -> 137, 10.0.0.3 ->
 * 235, 10.0.0.1 port 40000 -> 203, fd00::1 -> 140. */
static void test_sh(void **state)
{
        (void)state;
        struct se_lb_dest d[3] = { dest("10.1.0.1", 80, 1), dest("10.1.0.2", 80, 1),
                                   dest("10.1.0.3", 80, 1) };
        struct se_lb *lb = make(SE_LB_SH, 0, d, 3);
        struct se_lb_key k1 = key("10.0.0.1", 40000, "10.96.0.1");
        struct se_lb_key k2 = key("10.0.0.2", 1, "10.96.0.1");
        struct se_lb_key k3 = key("10.0.0.3", 2, "10.96.0.1");
        struct se_lb_key k6 = key("fd00::1", 3, "fd00::96");
        assert_int_equal(se_lb_pick(lb, d, 3, &k1), 39 % 3);
        assert_int_equal(se_lb_pick(lb, d, 3, &k2), 137 % 3);
        assert_int_equal(se_lb_pick(lb, d, 3, &k3), 235 % 3);
        assert_int_equal(se_lb_pick(lb, d, 3, &k6), 140 % 3);
        se_lb_free(lb);
        /* sh-port: the port joins the hash */
        lb = make(SE_LB_SH, SE_LB_PORT, d, 3);
        assert_int_equal(se_lb_pick(lb, d, 3, &k1), 203 % 3);
        se_lb_free(lb);
        /* weights: A takes two consecutive buckets, then B one: AAB AAB ... */
        struct se_lb_dest w[2] = { dest("10.1.0.1", 80, 2), dest("10.1.0.2", 80, 1) };
        lb = make(SE_LB_SH, 0, w, 2);
        assert_int_equal(se_lb_pick(lb, w, 2, &k1), 39 % 3 == 2 ? 1 : 0);
        assert_int_equal(se_lb_pick(lb, w, 2, &k2), 137 % 3 == 2 ? 1 : 0);
        se_lb_free(lb);
        /* without fallback an unavailable entry fails the connection; with it,
         * the probe finds another */
        lb = make(SE_LB_SH, 0, d, 3);
        d[39 % 3].overloaded = true;
        assert_int_equal(se_lb_pick(lb, d, 3, &k1), -1);
        se_lb_free(lb);
        lb = make(SE_LB_SH, SE_LB_FALLBACK, d, 3);
        int at = se_lb_pick(lb, d, 3, &k1);
        assert_true(at >= 0 && at != 39 % 3);
        se_lb_free(lb);
}

/* Maglev with the kernel's 4093 slots: three equal entries share them
 * 1365/1364/1364; sources 10.0.0.1-4, 192.168.7.9 and fd00::5 land on
 * C, B, B, A, C, A; with B removed, every source that was not on B stays. */
static void test_mh(void **state)
{
        (void)state;
        struct se_lb_dest d[3] = { dest("10.1.0.1", 8080, 1), dest("10.1.0.2", 8080, 1),
                                   dest("10.1.0.3", 8080, 1) };
        const char *src[] = { "10.0.0.1", "10.0.0.2",    "10.0.0.3",
                              "10.0.0.4", "192.168.7.9", "fd00::5" };
        const int want[] = { 2, 1, 1, 0, 2, 0 };
        const int want_without_b[] = { 1, 0, 1, 0, 1, 0 }; /* indexes in {A, C} */
        struct se_lb *lb = make(SE_LB_MH, 0, d, 3);
        for (size_t i = 0; i < 6; i++) {
                struct se_lb_key k = strchr(src[i], ':') ? key(src[i], 7, "fd00::96") :
                                                           key(src[i], 7, "10.96.0.1");
                assert_int_equal(se_lb_pick(lb, d, 3, &k), want[i]);
        }
        struct se_lb_dest ac[2] = { d[0], d[2] };
        assert_int_equal(se_lb_update(lb, ac, 2), 0);
        for (size_t i = 0; i < 6; i++) {
                struct se_lb_key k = strchr(src[i], ':') ? key(src[i], 7, "fd00::96") :
                                                           key(src[i], 7, "10.96.0.1");
                assert_int_equal(se_lb_pick(lb, ac, 2, &k), want_without_b[i]);
        }
        se_lb_free(lb);
        /* mh-port (kube-proxy's IPVS mode set it for mh): source port 1000..1005
         * of 10.0.0.1 go to B, A, B, C, A, C */
        lb = make(SE_LB_MH, SE_LB_PORT, d, 3);
        const int want_port[] = { 1, 0, 1, 2, 0, 2 };
        for (uint16_t p = 0; p < 6; p++) {
                struct se_lb_key k = key("10.0.0.1", (uint16_t)(1000 + p), "10.96.0.1");
                assert_int_equal(se_lb_pick(lb, d, 3, &k), want_port[p]);
        }
        se_lb_free(lb);
}

/* weights 3:1 share the table 3070:1023; counted by picking every slot's
 * worth of sources is not possible from outside, so count over many sources */
static void test_mh_weights(void **state)
{
        (void)state;
        struct se_lb_dest d[2] = { dest("10.1.0.1", 8080, 3), dest("10.1.0.2", 8080, 1) };
        struct se_lb *lb = make(SE_LB_MH, 0, d, 2);
        unsigned count[2] = { 0 };
        for (unsigned i = 0; i < 20000; i++) {
                struct se_lb_key k = { .addr_len = 4 };
                uint32_t a = htonl(0x0a000000u + i);
                memcpy(k.saddr, &a, 4);
                int at = se_lb_pick(lb, d, 2, &k);
                assert_true(at == 0 || at == 1);
                count[at]++;
        }
        /* 3070/4093 = 75 %: within a couple of points over 20,000 sources */
        assert_in_range(count[0], 14500, 15500);
        se_lb_free(lb);
}

/* The exported bucket tables: sh/dh give 256 buckets round robin over the
 * list (ABCABC...), sh with weights AAB...; mh its 4093 slots in the shares
 * test_mh counts (1365/1364/1364); other kinds and unbuilt tables none. */
static void test_buckets(void **state)
{
        (void)state;
        struct se_lb_dest d[3] = { dest("10.1.0.1", 80, 1), dest("10.1.0.2", 80, 1),
                                   dest("10.1.0.3", 80, 1) };
        size_t size = 99;
        struct se_lb *lb = se_lb_new(SE_LB_SH, 0, 1);
        assert_non_null(lb);
        assert_null(se_lb_buckets(lb, &size)); /* not built yet */
        assert_int_equal(size, 0);
        assert_int_equal(se_lb_update(lb, d, 3), 0);
        const int32_t *b = se_lb_buckets(lb, &size);
        assert_non_null(b);
        assert_int_equal(size, 256);
        for (size_t i = 0; i < size; i++)
                assert_int_equal(b[i], (int32_t)(i % 3));
        /* the bucket a key hashes to is the destination pick gives: 10.0.0.1
         * hashes to bucket 39 (test_sh) */
        struct se_lb_key k = key("10.0.0.1", 40000, "10.96.0.1");
        assert_int_equal(se_lb_pick(lb, d, 3, &k), b[39]);
        struct se_lb_dest w[2] = { dest("10.1.0.1", 80, 2), dest("10.1.0.2", 80, 1) };
        assert_int_equal(se_lb_update(lb, w, 2), 0);
        b = se_lb_buckets(lb, &size);
        assert_int_equal(size, 256);
        assert_int_equal(b[0], 0);
        assert_int_equal(b[1], 0);
        assert_int_equal(b[2], 1);
        assert_int_equal(b[3], 0);
        se_lb_free(lb);

        lb = make(SE_LB_DH, 0, d, 2);
        b = se_lb_buckets(lb, &size);
        assert_int_equal(size, 256);
        for (size_t i = 0; i < size; i++)
                assert_int_equal(b[i], (int32_t)(i % 2));
        se_lb_free(lb);

        lb = make(SE_LB_MH, 0, d, 3);
        b = se_lb_buckets(lb, &size);
        assert_int_equal(size, 4093);
        unsigned count[3] = { 0 };
        for (size_t i = 0; i < size; i++) {
                assert_in_range(b[i], 0, 2);
                count[b[i]]++;
        }
        assert_int_equal(count[0] + count[1] + count[2], 4093);
        assert_in_range(count[0], 1364, 1365);
        assert_in_range(count[1], 1364, 1365);
        assert_in_range(count[2], 1364, 1365);
        se_lb_free(lb);

        lb = make(SE_LB_RR, 0, d, 3);
        assert_null(se_lb_buckets(lb, &size));
        assert_int_equal(size, 0);
        se_lb_free(lb);
}

static void test_random_and_p2c(void **state)
{
        (void)state;
        struct se_lb_dest d[3] = { dest("10.1.0.1", 80, 1), dest("10.1.0.2", 80, 1),
                                   dest("10.1.0.3", 80, 1) };
        struct se_lb *lb = make(SE_LB_RANDOM, 0, d, 3);
        unsigned count[3] = { 0 };
        for (int i = 0; i < 3000; i++)
                count[se_lb_pick(lb, d, 3, NULL)]++;
        for (int i = 0; i < 3; i++)
                assert_in_range(count[i], 850, 1150);
        d[1].overloaded = true;
        for (int i = 0; i < 100; i++)
                assert_int_not_equal(se_lb_pick(lb, d, 3, NULL), 1);
        se_lb_free(lb);
        d[1].overloaded = false;
        /* p2c never picks the busiest of three when the other two are idle:
         * any pair drawn holds an idle one */
        lb = make(SE_LB_P2C, 0, d, 3);
        d[2].active = 100;
        for (int i = 0; i < 300; i++)
                assert_int_not_equal(se_lb_pick(lb, d, 3, NULL), 2);
        se_lb_free(lb);
}

static void test_parse(void **state)
{
        (void)state;
        enum se_lb_kind k;
        unsigned f;
        assert_int_equal(se_lb_parse("rr", &k, &f), 0);
        assert_int_equal(k, SE_LB_RR);
        assert_int_equal(f, 0);
        assert_int_equal(se_lb_parse("sh:port,fallback", &k, &f), 0);
        assert_int_equal(k, SE_LB_SH);
        assert_int_equal(f, SE_LB_PORT | SE_LB_FALLBACK);
        assert_int_equal(se_lb_parse("mh,mh-port", &k, &f), 0);
        assert_int_equal(k, SE_LB_MH);
        assert_int_equal(f, SE_LB_PORT);
        assert_string_equal(se_lb_name(SE_LB_P2C), "p2c");
        const char *bad[] = { "",         "r",        "rrr",        "lc:port", "sh:",
                              "sh:port,", "sh:ports", "sh,mh-port", "xyz" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(se_lb_parse(bad[i], &k, &f), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_hsiphash_kernel_vectors),
                cmocka_unit_test(test_rr),
                cmocka_unit_test(test_rr_keeps_its_place),
                cmocka_unit_test(test_wrr),
                cmocka_unit_test(test_lc),
                cmocka_unit_test(test_wlc_sed_nq),
                cmocka_unit_test(test_dh),
                cmocka_unit_test(test_sh),
                cmocka_unit_test(test_mh),
                cmocka_unit_test(test_mh_weights),
                cmocka_unit_test(test_buckets),
                cmocka_unit_test(test_random_and_p2c),
                cmocka_unit_test(test_parse),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
