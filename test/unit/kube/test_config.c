/* kubeconfig parsing and merging as kubectl does it; ExecCredential parsing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <svcenv/kube.h>
#include <svcenv/kube_client.h>

static int parse(size_t n, const char *const *texts, const char *context,
                 struct se_kube_config **ret, struct se_diag *d)
{
        static const char *const names[] = { "/etc/a/one", "/etc/b/two", "/etc/c/three" };
        size_t lens[3];
        for (size_t i = 0; i < n; i++)
                lens[i] = strlen(texts[i]);
        return se_kube_config_parse(names, texts, lens, n, context, ret, d);
}

static const char one[] =
        "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
        "clusters:\n"
        "- name: k\n  cluster: {server: 'https://one:6443/', certificate-authority: ca.crt}\n"
        "users:\n"
        "- name: u\n  user: {token: tok1}\n"
        "contexts:\n"
        "- name: a\n  context: {cluster: k, user: u, namespace: shop}\n";
static const char two[] = "current-context: b\n"
                          "clusters:\n"
                          "- name: k\n  cluster: {server: 'https://two:6443'}\n"
                          "- name: k2\n  cluster: {server: 'https://k2:6443', "
                          "certificate-authority-data: aGVsbG8=}\n"
                          "users:\n"
                          "- name: u\n  user: {token: tok2}\n"
                          "- name: u2\n  user: {tokenFile: /run/tok, client-certificate: c.pem, "
                          "client-key: /k.pem}\n"
                          "contexts:\n"
                          "- name: b\n  context: {cluster: k2, user: u2}\n";

static void test_config__single_file(void **state)
{
        (void)state;
        struct se_kube_config *c = NULL;
        struct se_diag d;
        const char *t[] = { one };
        assert_int_equal(parse(1, t, NULL, &c, &d), 0);
        assert_string_equal(c->server, "https://one:6443"); /* trailing '/' dropped */
        assert_string_equal(c->ca_file, "/etc/a/ca.crt"); /* relative to the file */
        assert_string_equal(c->token, "tok1");
        assert_string_equal(c->namespace, "shop");
        assert_string_equal(c->context, "a");
        assert_null(c->exec);
        se_kube_config_free(c);
}

static void test_config__merge_first_file_wins(void **state)
{
        (void)state;
        struct se_kube_config *c = NULL;
        struct se_diag d;
        const char *t[] = { one, two };
        /* current-context from the first file; cluster k and user u from it too */
        assert_int_equal(parse(2, t, NULL, &c, &d), 0);
        assert_string_equal(c->context, "a");
        assert_string_equal(c->server, "https://one:6443");
        assert_string_equal(c->token, "tok1");
        se_kube_config_free(c);
        /* --context picks a context only the second file has; its paths are
         * relative to the second file */
        assert_int_equal(parse(2, t, "b", &c, &d), 0);
        assert_string_equal(c->server, "https://k2:6443");
        assert_int_equal(c->ca_len, 5);
        assert_memory_equal(c->ca_data, "hello", 5);
        assert_string_equal(c->token_file, "/run/tok");
        assert_string_equal(c->cert_file, "/etc/b/c.pem");
        assert_string_equal(c->key_file, "/k.pem");
        assert_string_equal(c->namespace, "default");
        se_kube_config_free(c);
        /* reversed order: the second file's k and current-context win */
        const char *r[] = { two, one };
        assert_int_equal(parse(2, r, NULL, &c, &d), 0);
        assert_string_equal(c->context, "b");
        se_kube_config_free(c);
        const char *r2[] = { two, one };
        assert_int_equal(parse(2, r2, "a", &c, &d), 0);
        assert_string_equal(c->server, "https://two:6443"); /* cluster k from the first file */
        assert_string_equal(c->token, "tok2");
        se_kube_config_free(c);
}

static void expect_error(const char *text, const char *context, int err, const char *msg)
{
        struct se_kube_config *c = NULL;
        struct se_diag d;
        const char *t[] = { text };
        assert_int_equal(parse(1, t, context, &c, &d), err);
        assert_null(c);
        if (!strstr(d.text, msg))
                fail_msg("got \"%s\", want \"%s\"", d.text, msg);
}

static void test_config__errors_name_file_and_field(void **state)
{
        (void)state;
        expect_error(one, "zzz", -ENOENT, "kubeconfig /etc/a/one: context \"zzz\" does not exist");
        expect_error("clusters: []\n", NULL, -ENOENT, "current-context is not set");
        expect_error("current-context: a\ncontexts: [{name: a, context: {cluster: k, user: u}}]\n"
                     "clusters: [{name: k, cluster: {server: 'https://x'}}]\n"
                     "users: [{name: u, user: {exec: {command: x}}}]\n",
                     NULL, -EINVAL,
                     "kubeconfig /etc/a/one: users[0].user.exec: apiVersion is required");
        expect_error(
                "current-context: a\ncontexts: [{name: a, context: {cluster: k, user: u}}]\n"
                "clusters: [{name: k, cluster: {server: 'https://x'}}]\n"
                "users: [{name: v, user: {}}, {name: u, user: {client-certificate-data: '!!'}}]\n",
                NULL, -EINVAL, "users[1].user.client-certificate-data: not valid base64");
        expect_error("current-context: a\ncontexts: [{name: a, context: {cluster: k}}]\n"
                     "clusters: [{name: k, cluster: {server: ftp://x}}]\n",
                     NULL, -EINVAL,
                     "clusters[0].cluster.server: must be an http:// or https:// URL");
        expect_error("current-context: a\ncontexts: [{name: a, context: {cluster: nope}}]\n", NULL,
                     -EINVAL, "contexts[0].context.cluster: cluster \"nope\" not found");
        expect_error(
                "current-context: a\ncontexts: [{name: a, context: {cluster: k, user: u}}]\n"
                "clusters: [{name: k, cluster: {server: 'https://x', certificate-authority: a, "
                "certificate-authority-data: aGk=}}]\n",
                NULL, -EINVAL, "both certificate-authority and certificate-authority-data");
        expect_error("current-context: a\ncontexts: [{name: a, context: {cluster: k, user: u}}]\n"
                     "clusters: [{name: k, cluster: {server: 'https://x'}}]\n"
                     "users: [{name: u, user: {token: t, username: x}}]\n",
                     NULL, -EINVAL, "more than one authentication method");
        expect_error("current-context: a\ncontexts: [{name: a, context: {cluster: k, user: u}}]\n"
                     "clusters: [{name: k, cluster: {server: 'https://x'}}]\n"
                     "users: [{name: u, user: {client-certificate: c}}]\n",
                     NULL, -EINVAL, "needs both a certificate and a key");
        /* a line break in a token would end the Authorization header */
        expect_error("current-context: a\ncontexts: [{name: a, context: {cluster: k, user: u}}]\n"
                     "clusters: [{name: k, cluster: {server: 'https://x'}}]\n"
                     "users: [{name: u, user: {token: \"abc\\r\\nX-Injected: 1\"}}]\n",
                     NULL, -EINVAL,
                     "kubeconfig /etc/a/one: users[0].user.token: contains a control character "
                     "(such as CR or LF), which an HTTP header cannot carry");
        expect_error("clusters: {}\n", NULL, -EINVAL,
                     "kubeconfig /etc/a/one: clusters: expected a list");
        expect_error("a: [\n", NULL, -EINVAL, "kubeconfig /etc/a/one:");
}

static void test_config__exec_plugin(void **state)
{
        (void)state;
        struct se_kube_config *c = NULL;
        struct se_diag d;
        const char *t[] = { "current-context: a\n"
                            "contexts: [{name: a, context: {cluster: k, user: u}}]\n"
                            "clusters: [{name: k, cluster: {server: 'https://x'}}]\n"
                            "users: [{name: u, user: {exec: {apiVersion: "
                            "client.authentication.k8s.io/v1, command: bin/get-token, "
                            "args: [--a, b], env: [{name: X, value: '1'}, {name: ZZ}]}}}]\n" };
        if (parse(1, t, NULL, &c, &d) != 0)
                fail_msg("%s", d.text);
        assert_non_null(c->exec);
        assert_string_equal(c->exec->argv[0], "/etc/a/bin/get-token");
        assert_string_equal(c->exec->argv[1], "--a");
        assert_string_equal(c->exec->argv[2], "b");
        assert_null(c->exec->argv[3]);
        assert_string_equal(c->exec->env[0], "X=1");
        assert_string_equal(c->exec->env[1], "ZZ=");
        assert_null(c->exec->env[2]);
        assert_string_equal(c->user_path, "kubeconfig /etc/a/one: users[0].user");
        se_kube_config_free(c);
}

static void test_config__exec_credential(void **state)
{
        (void)state;
        struct se_kube_exec_cred cr;
        struct se_diag d;
        static const char v1[] = "client.authentication.k8s.io/v1";
        const char *ok1 = "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
                          "\"ExecCredential\",\"status\":{\"token\":\"abc\","
                          "\"expirationTimestamp\":\"2030-01-02T03:04:05Z\"}}";
        assert_int_equal(se_kube_exec_parse(ok1, strlen(ok1), v1, &cr, &d), 0);
        assert_string_equal(cr.token, "abc");
        assert_true(cr.expiry_ns == 1893553445ll * 1000000000ll);
        se_kube_exec_cred_release(&cr);
        const char *cert = "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
                           "\"ExecCredential\",\"status\":{\"clientCertificateData\":\"C\","
                           "\"clientKeyData\":\"K\"}}";
        assert_int_equal(se_kube_exec_parse(cert, strlen(cert), v1, &cr, &d), 0);
        assert_null(cr.token);
        assert_string_equal(cr.cert_pem, "C");
        assert_string_equal(cr.key_pem, "K");
        assert_true(cr.expiry_ns == 0);
        se_kube_exec_cred_release(&cr);
        const char *wrongv = "{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":"
                             "\"ExecCredential\",\"status\":{\"token\":\"abc\"}}";
        assert_int_equal(se_kube_exec_parse(wrongv, strlen(wrongv), v1, &cr, &d), -EINVAL);
        assert_non_null(strstr(d.text, "apiVersion: expected client.authentication.k8s.io/v1"));
        const char *half = "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
                           "\"ExecCredential\",\"status\":{\"clientKeyData\":\"K\"}}";
        assert_int_equal(se_kube_exec_parse(half, strlen(half), v1, &cr, &d), -EINVAL);
        assert_int_equal(se_kube_exec_parse("nope", 4, v1, &cr, &d), -EINVAL);
        const char *crlf = "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
                           "\"ExecCredential\",\"status\":{\"token\":\"abc\\r\\nX-Injected: 1\"}}";
        assert_int_equal(se_kube_exec_parse(crlf, strlen(crlf), v1, &cr, &d), -EINVAL);
        assert_string_equal(d.text, "plugin output: status.token: contains a control character "
                                    "(such as CR or LF), which an HTTP header cannot carry");
}

/* se_kube_client_load: both steps in one call, and each step's error comes
 * back with words, for the daemons to print as is. */
static void write_text(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static void test_config__client_load(void **state)
{
        (void)state;
        char dir[] = "/tmp/svcenv-test-config-XXXXXX";
        assert_non_null(mkdtemp(dir));
        char path[sizeof(dir) + 16];
        snprintf(path, sizeof(path), "%s/kubeconfig", dir);
        struct se_kube_config_opts o = { .kubeconfig = path, .master = "http://127.0.0.1:9" };
        struct se_kube_client_opts co = { .qps = 20, .burst = 40 };
        struct se_kube_client *c = NULL;
        struct se_diag d;

        /* first step: no such file */
        assert_true(se_kube_client_load(&o, &co, &c, &d) < 0);
        assert_null(c);
        assert_non_null(strstr(d.text, path));

        /* second step: the CA file the config names is missing */
        write_text(path, one);
        assert_true(se_kube_client_load(&o, &co, &c, &d) < 0);
        assert_null(c);
        assert_non_null(strstr(d.text, "certificate-authority"));

        /* both steps pass; --master wins over the file's server */
        write_text(path, "clusters:\n- name: k\n  cluster: {server: 'https://one:6443'}\n"
                         "contexts:\n- name: a\n  context: {cluster: k}\n"
                         "current-context: a\n");
        assert_int_equal(se_kube_client_load(&o, &co, &c, &d), 0);
        assert_non_null(c);
        assert_string_equal(se_kube_client_config(c)->server, "http://127.0.0.1:9");
        se_kube_client_free(c);
        unlink(path);
        rmdir(dir);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_config__single_file),
                cmocka_unit_test(test_config__merge_first_file_wins),
                cmocka_unit_test(test_config__errors_name_file_and_field),
                cmocka_unit_test(test_config__exec_plugin),
                cmocka_unit_test(test_config__exec_credential),
                cmocka_unit_test(test_config__client_load),
        };
        return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
