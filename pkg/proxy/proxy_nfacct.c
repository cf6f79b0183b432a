/* nfacct counters over netlink (kube-proxy makes localhost_nps_accepted_pkts
 * and ct_state_invalid_dropped_pkts this way before rules name them). */
#include <errno.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_acct.h>
#include <linux/netlink.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <svcenv/proxy.h>

int se_proxy_nfacct_ensure(const char *name)
{
        struct {
                struct nlmsghdr nh;
                struct nfgenmsg nf;
                struct nlattr attr;
                char name[NFACCT_NAME_MAX];
        } req;
        size_t n = strlen(name) + 1;
        if (n > NFACCT_NAME_MAX)
                return -ENAMETOOLONG;
        memset(&req, 0, sizeof(req));
        req.nh.nlmsg_type = (NFNL_SUBSYS_ACCT << 8) | NFNL_MSG_ACCT_NEW;
        req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK | NLM_F_EXCL;
        req.nh.nlmsg_seq = 1;
        req.nf.nfgen_family = AF_UNSPEC;
        req.nf.version = NFNETLINK_V0;
        req.attr.nla_type = NFACCT_NAME;
        req.attr.nla_len = (unsigned short)(NLA_HDRLEN + n);
        memcpy(req.name, name, n);
        req.nh.nlmsg_len =
                (unsigned)(NLMSG_LENGTH(sizeof(struct nfgenmsg)) + NLA_ALIGN(NLA_HDRLEN + n));
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
        if (fd < 0)
                return -errno;
        struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
        int r = 0;
        if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                r = -errno;
        } else {
                union {
                        char buf[512];
                        struct nlmsghdr align;
                } ans;
                ssize_t k = recv(fd, ans.buf, sizeof(ans.buf), 0);
                if (k < 0)
                        r = -errno;
                else if ((size_t)k < NLMSG_LENGTH(sizeof(struct nlmsgerr)) ||
                         ans.align.nlmsg_type != NLMSG_ERROR)
                        r = -EPROTO;
                else
                        r = ((struct nlmsgerr *)NLMSG_DATA(&ans.align))->error;
        }
        close(fd);
        return r == -EEXIST ? 0 : r; /* there already: fine */
}
