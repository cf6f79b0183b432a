/* The proxier's runner on the real system: the tools by argv (never a
 * shell), nf_tables over netlink, the clocks. */
#include <svcenv/log.h>
#include <svcenv/proxy_proxier.h>
#include <svcenv/timeutil.h>

static int sys_apply(void *ctx, enum se_proxy_tool tool, const char *data, size_t n, char *err,
                     size_t errsize)
{
        char why[512];
        (void)ctx;
        if (tool != SE_PROXY_NFT)
                return se_proxy_apply(tool, data, n, err, errsize);
        int r = se_proxy_nft_apply(se_proxy_nft_get_how(), data, n, why, sizeof(why), err, errsize);
        /* every fallback, with why: netlink is the fast path, `nft -f`
         * costs seconds at 10,000 services */
        if (why[0])
                se_log_warn("nftables over netlink failed (%s): applied with nft -f instead (%s)",
                            why, r == 0 ? "done" : "failed too");
        return r;
}

static int sys_run(void *ctx, const char *const *argv, struct se_strbuf *out, char *err,
                   size_t errsize)
{
        (void)ctx;
        return se_proxy_run(argv, out, err, errsize);
}

static int sys_ensure_jumps(void *ctx, enum se_ip_family fam, char *err, size_t errsize)
{
        (void)ctx;
        return se_proxy_ensure_jumps(fam, err, errsize);
}

static int sys_nft_names(void *ctx, enum se_ip_family fam, struct se_strv *ret)
{
        (void)ctx;
        return se_proxy_nft_names(fam, ret);
}

static int sys_nft_chain_rules(void *ctx, enum se_ip_family fam, const char *chain, size_t *ret)
{
        (void)ctx;
        return se_proxy_nft_chain_rules(fam, chain, ret);
}

static void sys_now(void *ctx, struct se_proxy_instant *now)
{
        (void)ctx;
        now->real_ns = se_now_real_ns();
        now->mono_ns = (int64_t)se_now_mono_ns();
        now->start_mono_ns = 0;
}

static const struct se_proxy_runner system_runner = {
        .apply = sys_apply,
        .run = sys_run,
        .ensure_jumps = sys_ensure_jumps,
        .nft_names = sys_nft_names,
        .nft_chain_rules = sys_nft_chain_rules,
        .now = sys_now,
};

const struct se_proxy_runner *se_proxy_runner_system(void)
{
        return &system_runner;
}
