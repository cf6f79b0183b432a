// Command kpbench times kube-proxy v1.36's own iptables or nftables proxier
// generating its ruleset for the bench_proxy cluster (see cluster/), without
// running iptables-restore or nft. It is built and run by
// test/bench/kubeproxy_gen.sh, which copies the upstream proxier packages in
// at run time; it prints one line of key=value figures.
package main

import (
	"flag"
	"fmt"
	"os"

	"svcenv/kpbench/cluster"
	"svcenv/kpbench/iptables"
	"svcenv/kpbench/nftables"
)

func main() {
	backend := flag.String("backend", "iptables", "iptables or nftables")
	nSvc := flag.Int("services", 1000, "number of services")
	eps := flag.Int("eps", 10, "endpoints per service")
	dump := flag.String("dump", "", "write the first sync's ruleset to this file")
	flag.Parse()
	if *nSvc < 1 || *nSvc > 1000000 || *eps < 1 || *eps > 1000 {
		fmt.Fprintln(os.Stderr, "kpbench: -services 1..1000000, -eps 1..1000")
		os.Exit(2)
	}
	var r cluster.Result
	switch *backend {
	case "iptables":
		r = iptables.Run(*nSvc, *eps, *dump != "")
	case "nftables":
		r = nftables.Run(*nSvc, *eps, *dump != "")
	default:
		fmt.Fprintln(os.Stderr, "kpbench: -backend iptables|nftables")
		os.Exit(2)
	}
	if *dump != "" {
		if err := os.WriteFile(*dump, r.Ruleset, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "kpbench:", err)
			os.Exit(1)
		}
	}
	large := 0
	if r.LargeCluster {
		large = 1
	}
	fmt.Printf("backend=%s services=%d eps=%d handlers_ms=%.1f sync_ms=%.1f gen_cpu_ms=%.1f bytes=%d lines=%d "+
		"large=%d heap_mib=%.1f rss_mib=%.1f partial_ms=%.1f partial_bytes=%d\n",
		*backend, *nSvc, *eps, r.HandlersMs, r.SyncMs, r.GenCPUMs, r.Bytes, r.Lines, large, r.HeapMiB,
		cluster.PeakRSSMiB(), r.PartialMs, r.PartialBytes)
}
