/* svcenv admit: the AdmissionReview response the webhook would send. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include <svcenv/admission.h>
#include <svcenv/alloc.h>
#include <svcenv/hash.h>
#include <svcenv/parse.h>
#include <svcenv/strbuf.h>

#include "cli.h"

static const char usage[] =
        "Usage: svcenv admit -f CLUSTER [--failure-mode allow|deny] [--max-env-bytes N]\n"
        "                    [< review.json]\n"
        "\n"
        "Reads an AdmissionReview (admission.k8s.io/v1 or v1beta1) on stdin and prints\n"
        "the response svcenv-webhook would send for it against CLUSTER's services:\n"
        "every container and init container of a created pod gets the service\n"
        "variables the kubelet would give it, inserted before its own env (JSONPatch,\n"
        "base64). Same code as the daemon.\n"
        "\n"
        "  --failure-mode M   allow (default): an internal failure allows the pod\n"
        "                     unchanged with a warning; deny: it is refused (500)\n"
        "  --max-env-bytes N  size guard: a container whose environment would pass N\n"
        "                     bytes gets nothing and a warning (default 1048576)\n"
        "  --decode           print the decoded JSON patch instead of the response\n"
        "\n"
        "Exit status: 0 answered (allowed or denied), 3 the review is malformed (the\n"
        "daemon answers HTTP 400 with the same message), 4 system error.\n";

static int read_stdin(struct se_strbuf *sb)
{
        char buf[65536];
        for (;;) {
                ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return se_strbuf_failed(sb);
                se_strbuf_add(sb, buf, (size_t)n);
                if (se_strbuf_failed(sb))
                        return se_strbuf_failed(sb);
        }
}

/* The patch of a response, base64-decoded, on stdout. */
static int print_patch(const char *body, size_t len)
{
        const char *p = memmem(body, len, "\"patch\":\"", 9);
        if (!p) {
                puts("[]");
                return EXIT_OK;
        }
        p += 9;
        const char *end = strchr(p, '"');
        if (!end)
                return cli_fail(EXIT_SYSTEM, "malformed response");
        size_t n = (size_t)(end - p), out_len = 0;
        char *out = se_malloc(n / 4 * 3 + 1);
        if (!out)
                return cli_fail(EXIT_SYSTEM, "out of memory");
        if (se_base64_decode(p, n, out, &out_len) < 0) {
                free(out);
                return cli_fail(EXIT_SYSTEM, "malformed patch");
        }
        /* one operation per line, for reading and diffing */
        json_error_t je;
        json_t *ops = json_loadb(out, out_len, 0, &je);
        free(out);
        if (!json_is_array(ops)) {
                json_decref(ops);
                return cli_fail(EXIT_SYSTEM, "malformed patch");
        }
        size_t i;
        json_t *op;
        puts("[");
        json_array_foreach(ops, i, op) {
                char *line = json_dumps(op, JSON_COMPACT | JSON_PRESERVE_ORDER);
                printf("  %s%s\n", line ? line : "null", i + 1 < json_array_size(ops) ? "," : "");
                free(line);
        }
        puts("]");
        json_decref(ops);
        return EXIT_OK;
}

int cmd_admit(int argc, char **argv)
{
        static const struct option opts[] = { CLI_SOURCE_LONG_OPTIONS,
                                              { "failure-mode", required_argument, NULL, 'F' },
                                              { "max-env-bytes", required_argument, NULL, 'M' },
                                              { "decode", no_argument, NULL, 'd' },
                                              { "help", no_argument, NULL, 'h' },
                                              { 0 } };
        struct cli_source src = { .files = SE_STRV_INIT };
        struct se_admission_options ao = { 0 };
        bool decode = false;
        int c, r;
        while ((c = getopt_long(argc, argv, "f:n:Ah", opts, NULL)) != -1) {
                if ((r = cli_source_option(&src, c, optarg)) != 0) {
                        if (r < 0) {
                                cli_source_release(&src);
                                return cli_fail(EXIT_SYSTEM, "out of memory");
                        }
                        continue;
                }
                switch (c) {
                case 'F':
                        if (strcmp(optarg, "allow") != 0 && strcmp(optarg, "deny") != 0) {
                                cli_source_release(&src);
                                return cli_usage_error("admit", "--failure-mode must be allow "
                                                                "or deny");
                        }
                        ao.failure_deny = strcmp(optarg, "deny") == 0;
                        break;
                case 'M': {
                        int64_t v;
                        if (se_parse_i64(optarg, 1, INT64_MAX, &v) < 0) {
                                cli_source_release(&src);
                                return cli_usage_error("admit",
                                                       "--max-env-bytes: not a positive "
                                                       "integer: \"%s\"",
                                                       optarg);
                        }
                        ao.max_env_bytes = (size_t)v;
                        break;
                }
                case 'd':
                        decode = true;
                        break;
                case 'h':
                        return cli_help(&src, usage);
                default:
                        cli_source_release(&src);
                        return cli_usage_error("admit", "unknown option");
                }
        }
        if (optind < argc) {
                cli_source_release(&src);
                return cli_usage_error("admit", "unexpected argument \"%s\"", argv[optind]);
        }
        struct se_store *store = NULL;
        if ((r = cli_load(&src, &store)) != EXIT_OK) {
                cli_source_release(&src);
                return r;
        }
        cli_source_release(&src);

        struct se_strbuf in;
        se_strbuf_init(&in, SE_ADMISSION_MAX_BODY + 1);
        int err = read_stdin(&in);
        struct se_admission_result res;
        if (err == -E2BIG) {
                r = cli_fail(EXIT_INVALID, "request body is over the %zu-byte limit",
                             SE_ADMISSION_MAX_BODY);
        } else if (err < 0) {
                r = cli_fail(EXIT_SYSTEM, "reading stdin: %s", strerror(-err));
        } else if ((err = se_admission_review_store(store, &ao, in.buf, in.len, &res)) < 0) {
                r = cli_fail(EXIT_SYSTEM, "%s", strerror(-err));
        } else {
                if (res.http_status != 200)
                        r = cli_fail(EXIT_INVALID, "malformed review: %s", res.body);
                else if (decode)
                        r = print_patch(res.body, res.len);
                else
                        r = fwrite(res.body, 1, res.len, stdout) == res.len ? EXIT_OK : EXIT_SYSTEM;
                se_admission_result_release(&res);
        }
        se_strbuf_release(&in);
        se_store_free(store);
        return r;
}
