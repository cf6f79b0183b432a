/* The applier: iptables-restore / ip6tables-restore / nft run by fork+exec
 * with an argv and pipes (never a shell). iptables-restore and nft apply
 * their input as one transaction: when they fail, the previous rules stay. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <svcenv/proxy.h>
#include <svcenv/strbuf.h>

#include "proxy_internal.h"
#include "proxy_nlbatch.h"

#define ERR_CAP 4096 /* bytes of the tool's stderr kept */

static void close_fd(int *fd)
{
        if (*fd >= 0) {
                close(*fd);
                *fd = -1;
        }
}

/* stderr as one line: newlines and tabs become "; " and " " */
static void one_line(const char *in, size_t n, char *err, size_t errsize)
{
        size_t k = 0;
        if (!err || errsize == 0)
                return;
        while (n && (in[n - 1] == '\n' || in[n - 1] == ' '))
                n--;
        for (size_t i = 0; i < n && k + 3 < errsize; i++) {
                char c = in[i];
                if (c == '\n')
                        while (k > 0 && err[k - 1] == ' ')
                                k--;
                if (c == '\n' && k > 0 && err[k - 1] == ':') {
                        err[k++] = ' ';
                } else if (c == '\n') {
                        err[k++] = ';';
                        err[k++] = ' ';
                } else if ((unsigned char)c < 0x20 || c == 0x7f) {
                        err[k++] = ' ';
                } else {
                        err[k++] = c;
                }
        }
        err[k] = 0;
}

static void child(const char *const *argv, int in_fd, int err_fd, int out_fd, int report_fd)
{
        char *v[32] = { 0 };
        int e;
        for (size_t i = 0; i < SE_ARRAY_SIZE(v) - 1 && argv[i]; i++)
                v[i] = SE_UNCONST(char, argv[i]);
        if (dup2(in_fd, STDIN_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0 ||
            dup2(out_fd >= 0 ? out_fd : err_fd, STDOUT_FILENO) < 0)
                goto fail;
        execvp(v[0], v);
fail:
        e = errno;
        if (write(report_fd, &e, sizeof(e)) < 0) {
                /* nothing left to tell */
        }
        _exit(127);
}

/* Feeds data to in_fd and reads err_fd until both are done. */
static int pump(int in_fd, int err_fd, int out_fd, struct se_strbuf *capture, const char *data,
                size_t n, char *ebuf, size_t *elen)
{
        size_t off = 0;
        struct pollfd p[3] = { { .fd = in_fd, .events = POLLOUT },
                               { .fd = err_fd, .events = POLLIN },
                               { .fd = out_fd, .events = POLLIN } };
        if (n == 0) {
                close(in_fd);
                p[0].fd = -1;
        }
        while (p[0].fd >= 0 || p[1].fd >= 0 || p[2].fd >= 0) {
                if (poll(p, 3, -1) < 0) {
                        int e = errno;
                        if (e == EINTR)
                                continue;
                        if (p[0].fd >= 0)
                                close(in_fd);
                        return -e;
                }
                if (p[0].fd >= 0 && p[0].revents) {
                        ssize_t w =
                                (p[0].revents & POLLOUT) ? write(in_fd, data + off, n - off) : -1;
                        if (w < 0 && errno == EINTR)
                                continue;
                        if (w < 0) { /* EPIPE or POLLERR: the tool stopped reading */
                                close(in_fd);
                                p[0].fd = -1;
                        } else if ((off += (size_t)w) == n) {
                                close(in_fd);
                                p[0].fd = -1;
                        }
                }
                if (p[1].fd >= 0 && p[1].revents) {
                        char buf[1024];
                        ssize_t rd = read(err_fd, buf, sizeof(buf));
                        if (rd < 0 && errno == EINTR)
                                continue;
                        if (rd <= 0) {
                                p[1].fd = -1;
                                continue;
                        }
                        size_t take = (size_t)rd;
                        if (take > ERR_CAP - *elen)
                                take = ERR_CAP - *elen;
                        memcpy(ebuf + *elen, buf, take);
                        *elen += take;
                }
                if (p[2].fd >= 0 && p[2].revents) {
                        char buf[65536];
                        ssize_t rd = read(out_fd, buf, sizeof(buf));
                        if (rd < 0 && errno == EINTR)
                                continue;
                        if (rd <= 0) {
                                p[2].fd = -1;
                                continue;
                        }
                        se_strbuf_add(capture, buf, (size_t)rd); /* capped by its max */
                }
        }
        return 0;
}

/* Runs argv with data on stdin; stdout goes to capture (or joins stderr
 * when NULL); the exit status goes to *ret_status. */
static int run(const char *const *argv, const char *data, size_t n, struct se_strbuf *capture,
               char *err, size_t errsize, int *ret_status)
{
        int in[2] = { -1, -1 }, er[2] = { -1, -1 }, rep[2] = { -1, -1 }, ou[2] = { -1, -1 };
        char ebuf[ERR_CAP];
        size_t elen = 0;
        int r;
        if (err && errsize)
                err[0] = 0;
        if (pipe2(in, O_CLOEXEC) < 0 || pipe2(er, O_CLOEXEC) < 0 || pipe2(rep, O_CLOEXEC) < 0 ||
            (capture && pipe2(ou, O_CLOEXEC) < 0)) {
                r = -errno;
                goto out;
        }
        /* a tool that exits early must not kill us with SIGPIPE */
        struct sigaction ign = { .sa_handler = SIG_IGN }, old;
        sigaction(SIGPIPE, &ign, &old);
        pid_t pid = fork();
        if (pid < 0) {
                r = -errno;
                sigaction(SIGPIPE, &old, NULL);
                goto out;
        }
        if (pid == 0)
                child(argv, in[0], er[1], ou[1], rep[1]);
        close_fd(&in[0]);
        close_fd(&er[1]);
        close_fd(&rep[1]);
        close_fd(&ou[1]);
        r = pump(in[1], er[0], ou[0], capture, data, n, ebuf, &elen);
        in[1] = -1; /* closed by pump */
        int status = 0, exec_errno = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        sigaction(SIGPIPE, &old, NULL);
        if (read(rep[0], &exec_errno, sizeof(exec_errno)) == (ssize_t)sizeof(exec_errno)) {
                snprintf(err ? err : ebuf, err ? errsize : sizeof(ebuf), "%s: %s", argv[0],
                         strerror(exec_errno));
                r = exec_errno == ENOENT ? -ENOENT : -exec_errno;
                goto out;
        }
        if (r < 0)
                goto out;
        *ret_status = status;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                char line[ERR_CAP];
                one_line(ebuf, elen, line, sizeof(line));
                if (err && errsize)
                        snprintf(err, errsize, "%s failed (%s %d): %s", argv[0],
                                 WIFEXITED(status) ? "exit" : "signal",
                                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                                 line[0] ? line : "no message");
                r = -EPROTO;
        }
out:
        close_fd(&in[0]);
        close_fd(&in[1]);
        close_fd(&er[0]);
        close_fd(&er[1]);
        close_fd(&rep[0]);
        close_fd(&rep[1]);
        close_fd(&ou[0]);
        close_fd(&ou[1]);
        return r;
}

/* Whether iptables-restore (ip6tables-restore when v6) is the nf_tables
 * build: its --version ends "(nf_tables)", the legacy one's "(legacy)".
 * Asked once per family (the node does not switch under us). */
static pthread_once_t backend_once[2] = { PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT };
static bool backend_nft[2];

static void ask_backend(int v6)
{
        const char *argv[] = { v6 ? "ip6tables-restore" : "iptables-restore", "--version", NULL };
        struct se_strbuf out;
        int status;
        se_strbuf_init(&out, 4096);
        if (run(argv, NULL, 0, &out, NULL, 0, &status) == 0 && !se_strbuf_failed(&out) &&
            out.len > 0)
                backend_nft[v6] = memmem(out.buf, out.len, "(nf_tables)", 11) != NULL;
        se_strbuf_release(&out);
}

static void ask_v4(void)
{
        ask_backend(0);
}

static void ask_v6(void)
{
        ask_backend(1);
}

static bool restore_is_nft(bool v6)
{
        pthread_once(&backend_once[v6], v6 ? ask_v6 : ask_v4);
        return backend_nft[v6];
}

int se_proxy_apply(enum se_proxy_tool tool, const char *data, size_t n, char *err, size_t errsize)
{
        /* nft scripts go over netlink first (proxy_nlbatch.c) unless set otherwise */
        if (tool == SE_PROXY_NFT)
                return se_proxy_nft_apply(se_proxy_nft_get_how(), data, n, NULL, 0, err, errsize);
        return proxy_apply_tool(tool, data, n, err, errsize);
}

int proxy_apply_tool(enum se_proxy_tool tool, const char *data, size_t n, char *err, size_t errsize)
{
        static const char *const ipt[] = {
                "iptables-restore", "--noflush", "--counters", "-w", "5", "-W", "100000", NULL
        };
        static const char *const ip6t[] = {
                "ip6tables-restore", "--noflush", "--counters", "-w", "5", "-W", "100000", NULL
        };
        static const char *const nft[] = { "nft", "-f", "-", NULL };
        const char *const *argv = tool == SE_PROXY_NFT               ? nft :
                                  tool == SE_PROXY_IP6TABLES_RESTORE ? ip6t :
                                                                       ipt;
        int status;
        if (tool != SE_PROXY_NFT && restore_is_nft(tool == SE_PROXY_IP6TABLES_RESTORE)) {
                /* iptables-nft's --noflush is quadratic in one large
                 * transaction (proxy_split.c) */
                struct se_strbuf split;
                se_strbuf_init(&split, 0);
                int r = proxy_restore_split(data, n, &split);
                if (r == 0)
                        r = run(argv, split.buf, split.len, NULL, err, errsize, &status);
                else if (err && errsize)
                        snprintf(err, errsize, "iptables-restore input: %s", strerror(-r));
                se_strbuf_release(&split);
                return r;
        }
        return run(argv, data, n, NULL, err, errsize, &status);
}

/* kube-proxy's iptablesJumpChains: table, built-in chain, our chain, whether
 * only NEW connections jump, comment. */
static const struct jump {
        const char *table, *from, *to;
        bool new_only;
        const char *comment;
} jumps[] = {
        { "filter", "INPUT", "KUBE-EXTERNAL-SERVICES", true,
          "kubernetes externally-visible service portals" },
        { "filter", "FORWARD", "KUBE-EXTERNAL-SERVICES", true,
          "kubernetes externally-visible service portals" },
        { "filter", "INPUT", "KUBE-NODEPORTS", false, "kubernetes health check service ports" },
        { "filter", "FORWARD", "KUBE-SERVICES", true, "kubernetes service portals" },
        { "filter", "OUTPUT", "KUBE-SERVICES", true, "kubernetes service portals" },
        { "filter", "FORWARD", "KUBE-FORWARD", false, "kubernetes forwarding rules" },
        { "filter", "INPUT", "KUBE-PROXY-FIREWALL", true, "kubernetes load balancer firewall" },
        { "filter", "OUTPUT", "KUBE-PROXY-FIREWALL", true, "kubernetes load balancer firewall" },
        { "filter", "FORWARD", "KUBE-PROXY-FIREWALL", true, "kubernetes load balancer firewall" },
        { "nat", "OUTPUT", "KUBE-SERVICES", false, "kubernetes service portals" },
        { "nat", "PREROUTING", "KUBE-SERVICES", false, "kubernetes service portals" },
        { "nat", "POSTROUTING", "KUBE-POSTROUTING", false, "kubernetes postrouting rules" },
};

static int ensure_one(const char *tool, const char *table, const char *from, const char *to,
                      bool new_only, const char *comment, char *err, size_t errsize)
{
        const char *argv[24];
        size_t k = 0;
        int status = 0;
        argv[k++] = tool;
        argv[k++] = "-w";
        argv[k++] = "5";
        argv[k++] = "-t";
        argv[k++] = table;
        size_t op = k;
        argv[k++] = "-C";
        argv[k++] = from;
        if (new_only) {
                argv[k++] = "-m";
                argv[k++] = "conntrack";
                argv[k++] = "--ctstate";
                argv[k++] = "NEW";
        }
        if (comment) {
                argv[k++] = "-m";
                argv[k++] = "comment";
                argv[k++] = "--comment";
                argv[k++] = comment;
        }
        argv[k++] = "-j";
        argv[k++] = to;
        argv[k] = NULL;
        int r = run(argv, NULL, 0, NULL, NULL, 0, &status);
        if (r == 0)
                return 0; /* present */
        if (r != -EPROTO)
                return r;
        argv[op] = "-I"; /* at the top, as kube-proxy's EnsureRule(Prepend) */
        return run(argv, NULL, 0, NULL, err, errsize, &status);
}

int se_proxy_ensure_jumps(enum se_ip_family family, char *err, size_t errsize)
{
        const char *tool = family == SE_IPV6 ? "ip6tables" : "iptables";
        int r, status = 0;
        for (size_t i = 0; i < SE_ARRAY_SIZE(jumps); i++) {
                const struct jump *j = &jumps[i];
                r = ensure_one(tool, j->table, j->from, j->to, j->new_only, j->comment, err,
                               errsize);
                if (r < 0)
                        return r;
        }
        /* kube-proxy's iptablesKubeletJumpChains, ensured in every family
         * (EnsureChain: `-N`, which fails when the chain is there) */
        const char *mk[] = { tool, "-w", "5", "-t", "filter", "-N", "KUBE-FIREWALL", NULL };
        r = run(mk, NULL, 0, NULL, NULL, 0, &status);
        if (r < 0 && r != -EPROTO)
                return r;
        static const char *const from[] = { "INPUT", "OUTPUT" };
        for (size_t i = 0; i < SE_ARRAY_SIZE(from); i++)
                if ((r = ensure_one(tool, "filter", from[i], "KUBE-FIREWALL", false, NULL, err,
                                    errsize)) < 0)
                        return r;
        return 0;
}

int se_proxy_save_nat(enum se_ip_family family, struct se_strbuf *out, char *err, size_t errsize)
{
        static const char *const v4[] = { "iptables-save", "-t", "nat", NULL };
        static const char *const v6[] = { "ip6tables-save", "-t", "nat", NULL };
        int status;
        int r = run(family == SE_IPV6 ? v6 : v4, NULL, 0, out, err, errsize, &status);
        return r < 0 ? r : se_strbuf_failed(out);
}

bool se_proxy_host_ipv6(bool nft)
{
        if (access("/proc/net/if_inet6", R_OK) != 0)
                return false;
        static const char *const v[] = { "ip6tables-restore", "--version", NULL };
        return nft || se_proxy_run(v, NULL, NULL, 0) == 0;
}

int se_proxy_run(const char *const *argv, struct se_strbuf *out, char *err, size_t errsize)
{
        int status;
        int r = run(argv, NULL, 0, out, err, errsize, &status);
        return r < 0 ? r : out ? se_strbuf_failed(out) : 0;
}
