// svcenv benchmark hook. test/bench/kubeproxy_gen.sh copies kube-proxy's
// pkg/proxy/nftables (non-test files) from the module cache next to this file
// at run time, so this code can build a Proxier the way NewProxier does but
// with an nftables stand-in that only serialises what `nft -f -` would read.
package nftables

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/proxy"
	"k8s.io/kubernetes/pkg/proxy/conntrack"
	"k8s.io/kubernetes/pkg/proxy/healthcheck"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	"k8s.io/kubernetes/pkg/proxy/runner"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	netutils "k8s.io/utils/net"
	"sigs.k8s.io/knftables"

	"svcenv/kpbench/cluster"
)

// nftSink stands in for nft: knftables.Fake only supplies transactions bound
// to the kube-proxy table; Run turns a transaction into the text `nft -f -`
// would read (as the real Run does) and keeps its size, and the listings
// report an empty table, as on a node kube-proxy has not touched.
type nftSink struct {
	*knftables.Fake
	keep  bool
	bytes int
	lines int
	last  []byte
}

func (s *nftSink) Run(_ context.Context, tx *knftables.Transaction) error {
	text := tx.String()
	s.bytes = len(text)
	s.lines = bytes.Count([]byte(text), []byte{'\n'})
	if s.keep {
		s.last = []byte(text)
	}
	return nil
}

func (*nftSink) ListAll(context.Context) (map[string][]string, error) {
	return map[string][]string{}, nil
}

func (*nftSink) ListElements(context.Context, string, string) ([]*knftables.Element, error) {
	return nil, nil
}

// newBenchProxier mirrors NewProxier for the bench options (masquerade bit 14,
// all local addresses for NodePorts, detect-local by cluster CIDR, 30 s sync
// period) minus its system calls (nft probe, conntrack, health server).
func newBenchProxier(nft knftables.Interface) *Proxier {
	fam := v1.IPv4Protocol
	mark := fmt.Sprintf("%#08x", 1<<cluster.MasqBit) // as NewProxier computes it
	p := &Proxier{
		ipFamily:            fam,
		svcPortMap:          make(proxy.ServicePortMap),
		serviceChanges:      proxy.NewServiceChangeTracker(fam, newServiceInfo, nil),
		endpointsMap:        make(proxy.EndpointsMap),
		endpointsChanges:    proxy.NewEndpointsChangeTracker(fam, cluster.NodeName, newEndpointInfo, nil),
		needFullSync:        true,
		syncPeriod:          30 * time.Second,
		nftables:            nft,
		masqueradeMark:      mark,
		masqueradeRule:      "mark set mark or " + mark,
		conntrack:           conntrack.NewFake(),
		localDetector:       proxyutil.NewDetectLocalByCIDR(cluster.ClusterCIDR),
		nodeName:            cluster.NodeName,
		nodeIP:              netutils.ParseIPSloppy(cluster.NodeIP),
		serviceHealthServer: healthcheck.NewFakeServiceHealthServer(),
		nodePortAddresses:   proxyutil.NewNodePortAddresses(fam, nil),
		networkInterfacer:   proxyutil.RealNetwork{},
		staleChains:         make(map[string]time.Time),
		logRateLimiter:      rate.NewLimiter(rate.Every(24*time.Hour), 1),
		clusterIPs:          newNFTElementStorage("set", clusterIPsSet),
		serviceIPs:          newNFTElementStorage("map", serviceIPsMap),
		firewallIPs:         newNFTElementStorage("map", firewallIPsMap),
		noEndpointServices:  newNFTElementStorage("map", noEndpointServicesMap),
		noEndpointNodePorts: newNFTElementStorage("map", noEndpointNodePortsMap),
		serviceNodePorts:    newNFTElementStorage("map", serviceNodePortsMap),
		hairpinConnections:  newNFTElementStorage("set", hairpinConnectionsSet),
	}
	p.syncRunner = runner.NewBoundedFrequencyRunner("bench-sync-runner", p.syncProxyRules, time.Second, p.syncPeriod, proxyutil.FullSyncPeriod)
	return p
}

// Run times kube-proxy's nftables proxier on the bench cluster (see
// cluster.Drive).
func Run(nSvc, eps int, keep bool) cluster.Result {
	metrics.RegisterMetrics("nftables")
	sink := &nftSink{Fake: knftables.NewFake(knftables.IPv4Family, kubeProxyTable), keep: keep}
	p := newBenchProxier(sink)
	return cluster.Drive(p, func() { _ = p.syncProxyRules() }, nSvc, eps, func(r *cluster.Result) {
		r.Bytes = sink.bytes
		r.Lines = sink.lines
		r.Ruleset = sink.last
	}, func(r *cluster.Result) { r.PartialBytes = sink.bytes })
}
