/* Unit tests for pkg/base: strbuf, strv, hashmap, parsers, hashes, time, arena. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include <svcenv/alloc.h>
#include <svcenv/arena.h>
#include <svcenv/backoff.h>
#include <svcenv/diag.h>
#include <svcenv/hash.h>
#include <svcenv/hashmap.h>
#include <svcenv/parse.h>
#include <svcenv/strbuf.h>
#include <svcenv/strv.h>
#include <svcenv/timeutil.h>

static void test_strbuf__append_and_detach(void **state)
{
        (void)state;
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        assert_string_equal(sb.buf, "");
        assert_int_equal(se_strbuf_puts(&sb, "abc"), 0);
        assert_int_equal(se_strbuf_printf(&sb, "-%d-", 42), 0);
        for (int i = 0; i < 1000; i++)
                se_strbuf_putc(&sb, 'x');
        assert_int_equal(sb.len, 7 + 1000);
        assert_memory_equal(sb.buf, "abc-42-x", 8);
        size_t len;
        char *s = se_strbuf_detach(&sb, &len);
        assert_non_null(s);
        assert_int_equal(len, 1007);
        assert_int_equal(strlen(s), 1007);
        assert_string_equal(sb.buf, "");
        free(s);
}

static void test_strbuf__cap_is_sticky(void **state)
{
        (void)state;
        struct se_strbuf sb;
        se_strbuf_init(&sb, 8);
        assert_int_equal(se_strbuf_puts(&sb, "12345678"), 0);
        assert_int_equal(se_strbuf_puts(&sb, "9"), -E2BIG);
        /* later appends fail too, and detach refuses a truncated result */
        assert_int_equal(se_strbuf_puts(&sb, ""), -E2BIG);
        assert_int_equal(se_strbuf_failed(&sb), -E2BIG);
        assert_null(se_strbuf_detach(&sb, NULL));
        se_strbuf_release(&sb);
}

static void test_strbuf__long_printf(void **state)
{
        (void)state;
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        char big[1000];
        memset(big, 'q', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        assert_int_equal(se_strbuf_printf(&sb, "<%s>", big), 0);
        assert_int_equal(sb.len, 1001);
        assert_int_equal(sb.buf[0], '<');
        assert_int_equal(sb.buf[1000], '>');
        se_strbuf_release(&sb);
}

static void test_strbuf__allocation_failure(void **state)
{
        (void)state;
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        se_alloc_fail_at(1);
        assert_int_equal(se_strbuf_puts(&sb, "abc"), -ENOMEM);
        se_alloc_fail_at(0);
        assert_int_equal(se_strbuf_puts(&sb, "abc"), -ENOMEM); /* sticky */
        se_strbuf_reset(&sb);
        assert_int_equal(se_strbuf_puts(&sb, "abc"), 0);
        assert_string_equal(sb.buf, "abc");
        se_strbuf_release(&sb);
}

/* se_asprintf formats into a new string through the project allocator, so
 * the failure hook reaches it (it fails cleanly, *ret NULL). */
static void test_alloc__asprintf(void **state)
{
        (void)state;
        char *s = (char *)1;
        assert_int_equal(se_asprintf(&s, "%s/%d", "ns", 42), 5);
        assert_string_equal(s, "ns/42");
        free(s);
        se_alloc_fail_at(1);
        s = (char *)1;
        assert_int_equal(se_asprintf(&s, "%s", "x"), -1);
        assert_null(s);
        se_alloc_fail_at(0);
}

static void test_strbuf__numbers_and_inline_append(void **state)
{
        (void)state;
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        assert_int_equal(se_strbuf_add_uint(&sb, 0), 0);
        se_strbuf_lit(&sb, " ");
        se_strbuf_add_uint(&sb, 18446744073709551615ULL);
        se_strbuf_lit(&sb, " ");
        se_strbuf_add_int(&sb, -9223372036854775807LL - 1);
        se_strbuf_lit(&sb, " ");
        se_strbuf_add_int(&sb, 10800);
        assert_string_equal(sb.buf, "0 18446744073709551615 -9223372036854775808 10800");
        assert_int_equal(sb.len, strlen(sb.buf));
        se_strbuf_release(&sb);

        /* the inline path keeps the cap and the sticky error */
        se_strbuf_init(&sb, 8);
        assert_int_equal(se_strbuf_grow(&sb, 4), 0); /* room past the cap */
        assert_int_equal(se_strbuf_append(&sb, "1234567", 7), 0);
        assert_int_equal(se_strbuf_append(&sb, "89", 2), -E2BIG);
        assert_int_equal(se_strbuf_append(&sb, "", 0), -E2BIG);
        assert_string_equal(sb.buf, "1234567");
        se_strbuf_release(&sb);

        /* a big buffer (advised as huge pages) holds what was written */
        se_strbuf_init(&sb, 0);
        assert_int_equal(se_strbuf_grow(&sb, (size_t)12 << 20), 0);
        for (int i = 0; i < 100000; i++)
                se_strbuf_add_int(&sb, i % 10);
        assert_int_equal(sb.len, 100000);
        assert_int_equal(sb.buf[99999], '9');
        se_strbuf_release(&sb);
}

/* Buffers of SE_HUGE_MIN and more are 2 MiB aligned (whole huge pages); a
 * small buffer growing big keeps what it held, and so does a big one
 * growing further; an allocation failure on the way is sticky. */
static void test_strbuf__growing_big_keeps_contents(void **state)
{
        (void)state;
        void *p = se_malloc_huge(SE_HUGE_MIN);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % ((uintptr_t)2 << 20), 0);
        free(p);
        p = se_malloc_huge(100);
        assert_non_null(p);
        free(p);

        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        for (int i = 0; i < 1500000; i++) /* 64 B ... 2 MiB by doubling */
                se_strbuf_add_int(&sb, i % 7);
        assert_int_equal(se_strbuf_failed(&sb), 0);
        assert_int_equal(sb.len, 1500000);
        assert_true(sb.alloc >= SE_HUGE_MIN);
        for (int i = 0; i < 1500000; i += 9973)
                assert_int_equal(sb.buf[i], '0' + i % 7);
        assert_int_equal(sb.buf[sb.len], '\0');
        se_strbuf_release(&sb);

        se_strbuf_init(&sb, 0);
        se_strbuf_puts(&sb, "head");
        se_alloc_fail_at(1); /* the move to a big buffer fails */
        assert_int_equal(se_strbuf_grow(&sb, SE_HUGE_MIN), -ENOMEM);
        se_alloc_fail_at(0);
        assert_int_equal(se_strbuf_failed(&sb), -ENOMEM);
        assert_string_equal(sb.buf, "head"); /* the old buffer is still there */
        se_strbuf_release(&sb);
}

static void test_strv__push_sort_split(void **state)
{
        (void)state;
        struct se_strv sv = SE_STRV_INIT;
        assert_int_equal(se_strv_push(&sv, "b"), 0);
        assert_int_equal(se_strv_push(&sv, "a"), 0);
        assert_int_equal(se_strv_push(&sv, "c"), 0);
        se_strv_sort(&sv);
        assert_string_equal(sv.v[0], "a");
        assert_string_equal(sv.v[2], "c");
        assert_null(sv.v[3]);
        assert_true(se_strv_contains(&sv, "b"));
        assert_false(se_strv_contains(&sv, "d"));
        se_strv_release(&sv);
        assert_int_equal(se_strv_split(&sv, "a,,b", ',', false), 0);
        assert_int_equal(sv.n, 3);
        assert_string_equal(sv.v[1], "");
        se_strv_release(&sv);
        assert_int_equal(se_strv_split(&sv, ",a,,b,", ',', true), 0);
        assert_int_equal(sv.n, 2);
        assert_string_equal(sv.v[1], "b");
        se_strv_release(&sv);
}

static void test_hashmap__hash_mem_equals_hash_str(void **state)
{
        (void)state;
        static const char *const keys[] = { "", "a", "ns/name", "kube-system/kube-dns" };
        for (size_t i = 0; i < SE_ARRAY_SIZE(keys); i++)
                assert_true(se_hash_mem(keys[i], strlen(keys[i])) == se_hash_str(keys[i]));
        /* the length counts, not a NUL: a prefix hashes differently */
        assert_true(se_hash_mem("ns/name", 2) == se_hash_str("ns"));
        assert_true(se_hash_mem("ns/name", 2) != se_hash_str("ns/name"));
}

static void test_hashmap__put_get_remove_many(void **state)
{
        (void)state;
        struct se_hashmap m = SE_HASHMAP_INIT;
        enum { N = 5000 };
        char(*keys)[16] = calloc(N, 16);
        assert_non_null(keys);
        for (int i = 0; i < N; i++) {
                snprintf(keys[i], 16, "k%d", i);
                assert_int_equal(se_hashmap_put(&m, keys[i], &keys[i], NULL), 0);
        }
        assert_int_equal(m.n, N);
        /* remove every third key; the rest must stay reachable (backward shift) */
        for (int i = 0; i < N; i += 3)
                assert_ptr_equal(se_hashmap_remove(&m, keys[i]), &keys[i]);
        for (int i = 0; i < N; i++) {
                void *v = se_hashmap_get(&m, keys[i]);
                if (i % 3 == 0)
                        assert_null(v);
                else
                        assert_ptr_equal(v, &keys[i]);
        }
        void *old = NULL;
        assert_int_equal(se_hashmap_put(&m, keys[1], NULL, &old), 0);
        assert_ptr_equal(old, &keys[1]);
        assert_ptr_equal(se_hashmap_get_hashed(&m, keys[4], se_hash_str(keys[4])), &keys[4]);
        assert_null(se_hashmap_get_hashed(&m, keys[3], se_hash_str(keys[3]))); /* removed */
        size_t count = 0;
        for (size_t it = 0; se_hashmap_next(&m, &it, NULL, NULL);)
                count++;
        assert_int_equal(count, m.n);
        assert_null(se_hashmap_remove(&m, "absent"));
        /* a copy answers alike and changes apart from the original */
        struct se_hashmap c = SE_HASHMAP_INIT;
        assert_int_equal(se_hashmap_copy(&c, &m), 0);
        assert_int_equal(c.n, m.n);
        for (int i = 0; i < N; i++)
                assert_ptr_equal(se_hashmap_get(&c, keys[i]), se_hashmap_get(&m, keys[i]));
        assert_ptr_equal(se_hashmap_remove(&c, keys[2]), &keys[2]);
        assert_ptr_equal(se_hashmap_get(&m, keys[2]), &keys[2]);
        assert_int_equal(se_hashmap_put(&c, "only-in-copy", &c, NULL), 0);
        assert_null(se_hashmap_get(&m, "only-in-copy"));
        se_hashmap_release(&c);
        struct se_hashmap empty = SE_HASHMAP_INIT;
        assert_int_equal(se_hashmap_copy(&c, &empty), 0);
        assert_null(se_hashmap_get(&c, "x"));
        se_hashmap_release(&m);
        free(keys);
}

static void test_parse__numbers(void **state)
{
        (void)state;
        int v = 0;
        int64_t w = 0;
        assert_int_equal(se_parse_int("42", 0, 100, &v), 0);
        assert_int_equal(v, 42);
        assert_int_equal(se_parse_int("-5", -10, 10, &v), 0);
        assert_int_equal(v, -5);
        assert_int_equal(se_parse_int("101", 0, 100, &v), -ERANGE);
        assert_int_equal(se_parse_int("", 0, 100, &v), -EINVAL);
        assert_int_equal(se_parse_int(" 1", 0, 100, &v), -EINVAL);
        assert_int_equal(se_parse_int("+1", 0, 100, &v), -EINVAL);
        assert_int_equal(se_parse_int("1x", 0, 100, &v), -EINVAL);
        assert_int_equal(se_parse_i64("99999999999999999999", INT64_MIN, INT64_MAX, &w), -ERANGE);
        bool b = false;
        assert_int_equal(se_parse_bool("TRUE", &b), 0);
        assert_true(b);
        assert_int_equal(se_parse_bool("off", &b), 0);
        assert_false(b);
        assert_int_equal(se_parse_bool("maybe", &b), -EINVAL);
}

/* Go's time.ParseDuration forms (flags such as KCM's batch periods) */
static void test_parse__durations(void **state)
{
        (void)state;
        static const struct {
                const char *in;
                int64_t ns;
        } good[] = { { "0", 0 },
                     { "1s", 1000000000ll },
                     { "300ms", 300000000ll },
                     { "1m30s", 90000000000ll },
                     { "1.5h", 5400000000000ll },
                     { ".5s", 500000000ll },
                     { "10us", 10000ll },
                     { "10\u00b5s", 10000ll },
                     { "7ns", 7 },
                     { "+2s", 2000000000ll },
                     { "-0s", 0 } };
        for (size_t i = 0; i < SE_ARRAY_SIZE(good); i++) {
                int64_t v = -1;
                assert_int_equal(se_parse_duration(good[i].in, INT64_MAX / 2, &v), 0);
                assert_true(v == good[i].ns);
        }
        static const char *const bad[] = { "", "1", "s", "1x", "1.s2", ".s", "-", "1s ", " 1s" };
        for (size_t i = 0; i < SE_ARRAY_SIZE(bad); i++) {
                int64_t v;
                assert_int_equal(se_parse_duration(bad[i], INT64_MAX / 2, &v), -EINVAL);
        }
        int64_t v;
        assert_int_equal(se_parse_duration("-1s", INT64_MAX / 2, &v), -ERANGE);
        assert_int_equal(se_parse_duration("2h", 3600000000000ll, &v), -ERANGE);
}

static void test_parse__ips_and_cidrs(void **state)
{
        (void)state;
        struct se_ip ip;
        char buf[64];
        assert_int_equal(se_parse_ip("10.0.0.1", &ip), 0);
        assert_int_equal(ip.family, SE_IPV4);
        assert_int_equal(se_parse_ip("fd00::1", &ip), 0);
        assert_int_equal(ip.family, SE_IPV6);
        se_ip_format(&ip, buf, sizeof(buf));
        assert_string_equal(buf, "fd00::1");
        /* Go treats an IPv4-mapped IPv6 address as IPv4 */
        assert_int_equal(se_parse_ip("::ffff:10.1.2.3", &ip), 0);
        assert_int_equal(ip.family, SE_IPV4);
        se_ip_format(&ip, buf, sizeof(buf));
        assert_string_equal(buf, "10.1.2.3");
        assert_int_equal(se_parse_ip("010.0.0.1", &ip), -EINVAL);
        assert_int_equal(se_parse_ip("10.0.0", &ip), -EINVAL);
        /* what inet_pton takes as dotted quad, no more */
        static const char *const bad4[] = { "256.0.0.1",  "1.2.3.4.", "1.2.3.4.5", "1..2.3",
                                            "1.2.3.0004", " 1.2.3.4", "1.2.3.4 ",  "+1.2.3.4",
                                            "1.2.3.00",   "1.2.3.-4", ".1.2.3",    "1.2.3.4x" };
        for (size_t i = 0; i < SE_ARRAY_SIZE(bad4); i++)
                assert_int_equal(se_parse_ip(bad4[i], &ip), -EINVAL);
        assert_int_equal(se_parse_ip("0.0.0.0", &ip), 0);
        assert_int_equal(se_parse_ip("255.255.255.255", &ip), 0);
        assert_int_equal(ip.addr[3], 255);
        assert_int_equal(se_parse_ip("10.0.100.9", &ip), 0);
        assert_memory_equal(ip.addr, "\x0a\x00\x64\x09", 4);
        assert_int_equal(se_parse_ip("fe80::1%eth0", &ip), -EINVAL);
        assert_int_equal(se_parse_ip("", &ip), -EINVAL);
        assert_int_equal(se_ip_family_of("None"), SE_IP_NONE);
        struct se_cidr c;
        assert_int_equal(se_parse_cidr("10.0.0.7/8", &c), 0);
        assert_int_equal(c.prefix, 8);
        se_ip_format(&c.ip, buf, sizeof(buf));
        assert_string_equal(buf, "10.0.0.0");
        assert_int_equal(se_parse_ip("10.200.1.1", &ip), 0);
        assert_true(se_cidr_contains(&c, &ip));
        assert_int_equal(se_parse_ip("11.0.0.1", &ip), 0);
        assert_false(se_cidr_contains(&c, &ip));
        assert_int_equal(se_parse_cidr("10.0.0.0/33", &c), -EINVAL);
        assert_int_equal(se_parse_cidr("fd00::/64", &c), 0);
        assert_int_equal(se_parse_ip("fd00::5", &ip), 0);
        assert_true(se_cidr_contains(&c, &ip));
        assert_int_equal(se_parse_cidr("10.0.0.0", &c), -EINVAL);
}

static void fnv_hex(const char *const *parts, size_t n, char out[33])
{
        struct se_fnv128a h;
        uint8_t sum[16];
        se_fnv128a_init(&h);
        for (size_t i = 0; i < n; i++)
                se_fnv128a_update(&h, parts[i], strlen(parts[i]));
        se_fnv128a_sum(&h, sum);
        for (int i = 0; i < 16; i++)
                snprintf(out + 2 * i, 3, "%02x", sum[i]);
}

/* Go's hash/fnv New128a (its own test vectors), streamed in pieces. */
static void test_hash__fnv128a(void **state)
{
        (void)state;
        char hex[33];
        fnv_hex(NULL, 0, hex);
        assert_string_equal(hex, "6c62272e07bb014262b821756295c58d");
        const char *a[] = { "a" };
        fnv_hex(a, 1, hex);
        assert_string_equal(hex, "d228cb696f1a8caf78912b704e4a8964");
        const char *foobar[] = { "foo", "", "bar" };
        fnv_hex(foobar, 3, hex);
        assert_string_equal(hex, "343e1662793c64bf6f0d3597ba446f18");
}

static void test_hash__sha256_base32_chain_name(void **state)
{
        (void)state;
        /* kube-proxy names ns1/svc1:p80 tcp's chain KUBE-SVC-XPGD46QRK7WJZT7O */
        const char *in = "ns1/svc1:p80tcp";
        uint8_t digest[SE_SHA256_LEN];
        char b32[64];
        assert_int_equal(se_sha256(in, strlen(in), digest), 0);
        assert_int_equal(se_base32_encode(digest, sizeof(digest), b32, sizeof(b32)), 56);
        assert_memory_equal(b32, "XPGD46QRK7WJZT7O", 16);
        /* the same digest from parts */
        uint8_t parts_digest[SE_SHA256_LEN];
        const struct se_sha256_part parts[] = { { "ns1/svc1", 8 }, { "", 0 }, { ":p80tcp", 7 } };
        assert_int_equal(se_sha256_parts(parts, 3, parts_digest), 0);
        assert_memory_equal(parts_digest, digest, SE_SHA256_LEN);
        assert_int_equal(se_base32_encode("foobar", 6, b32, sizeof(b32)), 16);
        assert_string_equal(b32, "MZXW6YTBOI======");
        se_base32_encode("f", 1, b32, sizeof(b32));
        assert_string_equal(b32, "MY======");
        /* a short buffer is cut but still terminated */
        char small[5];
        assert_int_equal(se_base32_encode("foobar", 6, small, sizeof(small)), 16);
        assert_string_equal(small, "MZXW");
}

/* Every length from 0 to 200 (one, two, three blocks, the padding on
 * either side of a block's end), whole and split in parts, against
 * libcrypto's EVP digest. */
static void test_hash__sha256_lengths(void **state)
{
        (void)state;
        uint8_t in[200], want[SE_SHA256_LEN], got[SE_SHA256_LEN];
        for (size_t i = 0; i < sizeof(in); i++)
                in[i] = (uint8_t)(i * 7 + 1);
        for (size_t n = 0; n <= sizeof(in); n++) {
                unsigned int wn = 0;
                assert_int_equal(EVP_Digest(in, n, want, &wn, EVP_sha256(), NULL), 1);
                assert_int_equal(wn, SE_SHA256_LEN);
                assert_int_equal(se_sha256(in, n, got), 0);
                assert_memory_equal(got, want, SE_SHA256_LEN);
                size_t a = n / 3, b = n / 2;
                const struct se_sha256_part parts[] = {
                        { in, a }, { in + a, b - a }, { "", 0 }, { in + b, n - b }
                };
                assert_int_equal(se_sha256_parts(parts, 4, got), 0);
                assert_memory_equal(got, want, SE_SHA256_LEN);
        }
}

/* Messages of every length to 600 (more blocks than the paired path
 * buffers), hashed together, each against libcrypto's EVP digest: pairs of
 * equal and of different block counts, and an odd one out at the end. */
static void test_hash__sha256_each(void **state)
{
        (void)state;
        enum { N = 601 };
        static uint8_t in[N], out[N][SE_SHA256_LEN];
        static struct se_sha256_part msgs[N];
        for (size_t i = 0; i < N; i++)
                in[i] = (uint8_t)(i * 13 + 5);
        /* lengths 0..600, shuffled so neighbours differ */
        for (size_t i = 0; i < N; i++)
                msgs[i] = (struct se_sha256_part){ in, (i * 271) % N };
        assert_int_equal(se_sha256_each(msgs, N, out), 0);
        for (size_t i = 0; i < N; i++) {
                uint8_t want[SE_SHA256_LEN];
                unsigned int wn = 0;
                assert_int_equal(EVP_Digest(in, msgs[i].n, want, &wn, EVP_sha256(), NULL), 1);
                assert_memory_equal(out[i], want, SE_SHA256_LEN);
        }
        /* neighbours of the same length, and a single message */
        for (size_t i = 0; i < N; i++)
                msgs[i] = (struct se_sha256_part){ in + i % 7, 40 + i / 2 % 3 };
        assert_int_equal(se_sha256_each(msgs, N, out), 0);
        for (size_t i = 0; i < N; i++) {
                uint8_t want[SE_SHA256_LEN];
                assert_int_equal(se_sha256(msgs[i].data, msgs[i].n, want), 0);
                assert_memory_equal(out[i], want, SE_SHA256_LEN);
        }
        assert_int_equal(se_sha256_each(msgs, 1, out), 0);
        assert_int_equal(se_sha256_each(msgs, 0, out), 0);
}

static void test_hash__base64(void **state)
{
        (void)state;
        char out[64];
        size_t n;
        assert_int_equal(se_base64_decode("aGVsbG8=", 8, out, &n), 0);
        assert_int_equal(n, 5);
        assert_string_equal(out, "hello");
        assert_int_equal(se_base64_decode("aGVsbG8", 7, out, &n), -EINVAL);
        assert_int_equal(se_base64_decode("aGV$bG8=", 8, out, &n), -EINVAL);
        assert_int_equal(se_base64_decode("aGVs\nbG8=", 9, out, &n), 0);
        assert_int_equal(se_base64_decode("aG==aGVs", 8, out, &n), -EINVAL);
        se_base64_encode("hello", 5, out);
        assert_string_equal(out, "aGVsbG8=");
        /* RFC 4648 section 10: every tail length */
        static const char *const want[] = { "",         "Zg==",     "Zm8=",    "Zm9v",
                                            "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy" };
        for (size_t i = 0; i < 7; i++) {
                se_base64_encode("foobar", i, out);
                assert_string_equal(out, want[i]);
        }
        static const unsigned char high[] = { 0xfb, 0xff, 0xbf };
        se_base64_encode(high, 3, out);
        assert_string_equal(out, "+/+/");
        /* the 6-byte fast path and its tails: every length up to 40 round-trips
         * and matches a bit-by-bit encoding */
        static const char alpha[] =
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        unsigned char in[40];
        char enc[64], ref[64], dec[48];
        for (size_t i = 0; i < sizeof(in); i++)
                in[i] = (unsigned char)(i * 97 + 13);
        for (size_t len = 0; len <= sizeof(in); len++) {
                size_t r = 0;
                for (size_t bit = 0; bit < len * 8; bit += 6) {
                        unsigned v = 0;
                        for (size_t b = bit; b < bit + 6; b++)
                                v = v << 1 | (b < len * 8 ? (in[b / 8] >> (7 - b % 8)) & 1 : 0);
                        ref[r++] = alpha[v];
                }
                while (r % 4)
                        ref[r++] = '=';
                ref[r] = '\0';
                se_base64_encode(in, len, enc);
                assert_string_equal(enc, ref);
                assert_int_equal(se_base64_decode(enc, strlen(enc), dec, &n), 0);
                assert_int_equal(n, len);
                assert_memory_equal(dec, in, len);
        }
}

static void test_time__rfc3339(void **state)
{
        (void)state;
        char buf[64];
        int64_t t;
        assert_int_equal(se_time_parse_rfc3339("2026-11-30T08:00:00Z", &t), 0);
        se_time_format_rfc3339(t, 0, buf, sizeof(buf));
        assert_string_equal(buf, "2026-11-30T08:00:00Z");
        assert_int_equal(se_time_parse_rfc3339("2026-11-30T09:00:00.5+01:00", &t), 0);
        se_time_format_rfc3339(t, 9, buf, sizeof(buf));
        assert_string_equal(buf, "2026-11-30T08:00:00.5Z");
        assert_int_equal(se_time_parse_rfc3339("2026-11-30 08:00:00Z", &t), -EINVAL);
        assert_int_equal(se_time_parse_rfc3339("2026-11-30T08:00:00", &t), -EINVAL);
}

static void test_arena__alignment_and_strings(void **state)
{
        (void)state;
        struct se_arena a = SE_ARENA_INIT;
        char *s = se_arena_strdup(&a, "abc");
        uint64_t *p = se_arena_alloc(&a, sizeof(uint64_t));
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 8, 0);
        *p = 7;
        /* many allocations spill into new chunks; earlier pointers stay valid */
        for (int i = 0; i < 1000; i++)
                assert_non_null(se_arena_strdup(&a, "some string that takes room"));
        void *big = se_arena_alloc(&a, 100000);
        assert_non_null(big);
        assert_string_equal(s, "abc");
        assert_int_equal(*p, 7);
        assert_null(se_arena_array(&a, SIZE_MAX / 4, 8));
        assert_true(a.total > 100000);
        /* the 32-bit counts saturate rather than wrap */
        a.requested = UINT32_MAX - 3;
        a.total = UINT32_MAX - 3;
        assert_non_null(se_arena_alloc(&a, 16));
        assert_non_null(se_arena_alloc(&a, 1 << 20)); /* a new chunk */
        assert_int_equal(a.requested, UINT32_MAX);
        assert_int_equal(a.total, UINT32_MAX);
        se_arena_release(&a);
        assert_int_equal(a.total, 0);
}

/* A reserved arena serves what fits from its one chunk, big ones included
 * (huge-page aligned), and grows past it. */
static void test_arena__reserve_big(void **state)
{
        (void)state;
        struct se_arena a = SE_ARENA_INIT;
        assert_int_equal(se_arena_reserve(&a, (size_t)3 << 20), 0);
        size_t total = a.total;
        char *first = se_arena_alloc(&a, 1000);
        assert_non_null(first);
        memset(first, 'x', 1000);
        for (int i = 0; i < 3000; i++)
                assert_non_null(se_arena_alloc(&a, 1000));
        assert_int_equal(a.total, total); /* all from the reserved chunk */
        assert_non_null(se_arena_alloc(&a, (size_t)1 << 20));
        assert_true(a.total > total);
        assert_int_equal(first[999], 'x');
        se_arena_release(&a);
}

static void test_backoff__grows_to_cap(void **state)
{
        (void)state;
        struct se_backoff b;
        se_backoff_init(&b, 800000000ull, 30000000000ull, 2.0, 0.0);
        assert_int_equal(se_backoff_next(&b), 800000000ull);
        assert_int_equal(se_backoff_next(&b), 1600000000ull);
        for (int i = 0; i < 10; i++)
                se_backoff_next(&b);
        assert_int_equal(se_backoff_next(&b), 30000000000ull);
        se_backoff_reset(&b);
        assert_int_equal(se_backoff_next(&b), 800000000ull);
        se_backoff_init(&b, 1000, 100000, 2.0, 1.0);
        for (int i = 0; i < 20; i++) {
                uint64_t d = se_backoff_next(&b);
                assert_true(d >= 1000 && d <= 100000);
        }
}

static void test_diag__format(void **state)
{
        (void)state;
        struct se_diag d;
        char buf[256];
        se_diag_set(&d, "a.yaml", 3, 1, "bad\nthing %d", 7);
        se_diag_format(&d, buf, sizeof(buf));
        assert_string_equal(buf, "a.yaml:3: bad thing 7");
        se_diag_set(&d, NULL, 0, 0, "plain");
        se_diag_format(&d, buf, sizeof(buf));
        assert_string_equal(buf, "plain");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_strbuf__append_and_detach),
                cmocka_unit_test(test_strbuf__cap_is_sticky),
                cmocka_unit_test(test_strbuf__long_printf),
                cmocka_unit_test(test_strbuf__allocation_failure),
                cmocka_unit_test(test_alloc__asprintf),
                cmocka_unit_test(test_strbuf__numbers_and_inline_append),
                cmocka_unit_test(test_strbuf__growing_big_keeps_contents),
                cmocka_unit_test(test_strv__push_sort_split),
                cmocka_unit_test(test_hashmap__hash_mem_equals_hash_str),
                cmocka_unit_test(test_hashmap__put_get_remove_many),
                cmocka_unit_test(test_parse__numbers),
                cmocka_unit_test(test_parse__ips_and_cidrs),
                cmocka_unit_test(test_parse__durations),
                cmocka_unit_test(test_hash__sha256_base32_chain_name),
                cmocka_unit_test(test_hash__fnv128a),
                cmocka_unit_test(test_hash__sha256_lengths),
                cmocka_unit_test(test_hash__sha256_each),
                cmocka_unit_test(test_hash__base64),
                cmocka_unit_test(test_time__rfc3339),
                cmocka_unit_test(test_arena__alignment_and_strings),
                cmocka_unit_test(test_arena__reserve_big),
                cmocka_unit_test(test_backoff__grows_to_cap),
                cmocka_unit_test(test_diag__format),
        };
        return cmocka_run_group_tests_name("base", tests, NULL, NULL);
}
