// svcenv benchmark hook. test/bench/kubeproxy_gen.sh copies kube-proxy's
// pkg/proxy/nftables (non-test files) from the module cache next to this file
// at run time, so this code can build a Proxier the way NewProxier does but
// with an nftables stand-in that only serialises what `nft -f -` would read.
package nftables

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
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

// Run: as the iptables one (see there).
func Run(nSvc, eps int, keep bool) cluster.Result {
	metrics.RegisterMetrics("nftables")
	sink := &nftSink{Fake: knftables.NewFake(knftables.IPv4Family, kubeProxyTable), keep: keep}
	p := newBenchProxier(sink)
	svcs := make([]*v1.Service, nSvc)
	for i := range svcs {
		svcs[i] = cluster.Service(i)
	}
	slices := make([]*discovery.EndpointSlice, nSvc)
	for i := range slices {
		slices[i] = cluster.Slice(i, eps, i*eps)
	}
	var r cluster.Result

	c0, t0 := cluster.CPUMs(), time.Now()
	for i := range svcs {
		p.OnServiceAdd(svcs[i])
		p.OnEndpointSliceAdd(slices[i])
	}
	p.OnServiceSynced() // not initialised yet: returns at once
	t1 := time.Now()
	p.OnEndpointSlicesSynced() // the start-up full sync
	t2, c2 := time.Now(), cluster.CPUMs()
	r.GenCPUMs = c2 - c0
	r.HandlersMs = ms(t1.Sub(t0))
	r.SyncMs = ms(t2.Sub(t1))
	r.Bytes = sink.bytes
	r.Lines = sink.lines
	r.Ruleset = sink.last
	svcs, slices = nil, nil
	r.HeapMiB = liveHeapMiB()

	old := cluster.Slice(0, eps, 0)
	changed := cluster.Slice(0, eps, 1000003) // endpoints nobody else uses
	t3 := time.Now()
	p.OnEndpointSliceUpdate(old, changed)
	p.syncProxyRules()
	t4 := time.Now()
	r.PartialMs = ms(t4.Sub(t3))
	r.PartialBytes = sink.bytes
	return r
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func liveHeapMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}
