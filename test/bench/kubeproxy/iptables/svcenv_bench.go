// svcenv benchmark hook. test/bench/kubeproxy_gen.sh copies kube-proxy's
// pkg/proxy/iptables (non-test files) from the module cache next to this file
// at run time, so this code can build a Proxier the way NewProxier does but
// with an iptables stand-in that only keeps what iptables-restore would read.
package iptables

import (
	"bytes"
	"fmt"
	"runtime"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/kubernetes/pkg/proxy"
	"k8s.io/kubernetes/pkg/proxy/conntrack"
	"k8s.io/kubernetes/pkg/proxy/healthcheck"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	"k8s.io/kubernetes/pkg/proxy/runner"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
	netutils "k8s.io/utils/net"

	"svcenv/kpbench/cluster"
)

// restoreSink stands in for iptables: no command runs; RestoreAll keeps the
// byte count (and, when asked, a copy) of the input iptables-restore would get.
// iptables-save output is empty, as on a node kube-proxy has not touched.
type restoreSink struct {
	keep  bool
	bytes int
	last  []byte
}

func (*restoreSink) EnsureChain(utiliptables.Table, utiliptables.Chain) (bool, error) {
	return true, nil
}
func (*restoreSink) FlushChain(utiliptables.Table, utiliptables.Chain) error  { return nil }
func (*restoreSink) DeleteChain(utiliptables.Table, utiliptables.Chain) error { return nil }
func (*restoreSink) ChainExists(utiliptables.Table, utiliptables.Chain) (bool, error) {
	return true, nil
}
func (*restoreSink) EnsureRule(utiliptables.RulePosition, utiliptables.Table, utiliptables.Chain, ...string) (bool, error) {
	return true, nil
}
func (*restoreSink) DeleteRule(utiliptables.Table, utiliptables.Chain, ...string) error { return nil }
func (*restoreSink) IsIPv6() bool                                                       { return false }
func (*restoreSink) Protocol() utiliptables.Protocol                                    { return utiliptables.ProtocolIPv4 }
func (*restoreSink) SaveInto(utiliptables.Table, *bytes.Buffer) error                   { return nil }
func (*restoreSink) Restore(utiliptables.Table, []byte, utiliptables.FlushFlag, utiliptables.RestoreCountersFlag) error {
	return nil
}
func (s *restoreSink) RestoreAll(data []byte, _ utiliptables.FlushFlag, _ utiliptables.RestoreCountersFlag) error {
	s.bytes = len(data)
	if s.keep {
		s.last = bytes.Clone(data)
	}
	return nil
}
func (*restoreSink) Monitor(utiliptables.Chain, []utiliptables.Table, func(), time.Duration, <-chan struct{}) {
}
func (*restoreSink) HasRandomFully() bool { return true }
func (*restoreSink) Present() error       { return nil }

// newBenchProxier mirrors NewProxier for the bench options (masquerade bit 14,
// localhost NodePorts, all local addresses for NodePorts, detect-local by
// cluster CIDR, no nfacct, conntrack TCP-liberal off, 30 s sync period) minus
// its system calls (sysctls, conntrack, health server, iptables monitor).
func newBenchProxier(ipt utiliptables.Interface) *Proxier {
	fam := v1.IPv4Protocol
	mark := fmt.Sprintf("%#08x", 1<<cluster.MasqBit) // as NewProxier computes it
	p := &Proxier{
		ipFamily:                 fam,
		svcPortMap:               make(proxy.ServicePortMap),
		serviceChanges:           proxy.NewServiceChangeTracker(fam, newServiceInfo, nil),
		endpointsMap:             make(proxy.EndpointsMap),
		endpointsChanges:         proxy.NewEndpointsChangeTracker(fam, cluster.NodeName, newEndpointInfo, nil),
		needFullSync:             true,
		syncPeriod:               30 * time.Second,
		iptables:                 ipt,
		masqueradeMark:           mark,
		conntrack:                conntrack.NewFake(),
		localDetector:            proxyutil.NewDetectLocalByCIDR(cluster.ClusterCIDR),
		nodeName:                 cluster.NodeName,
		nodeIP:                   netutils.ParseIPSloppy(cluster.NodeIP),
		serviceHealthServer:      healthcheck.NewFakeServiceHealthServer(),
		precomputedProbabilities: make([]string, 0, 1001),
		iptablesData:             bytes.NewBuffer(nil),
		existingFilterChainsData: bytes.NewBuffer(nil),
		filterChains:             proxyutil.NewLineBuffer(),
		filterRules:              proxyutil.NewLineBuffer(),
		natChains:                proxyutil.NewLineBuffer(),
		natRules:                 proxyutil.NewLineBuffer(),
		localhostNodePorts:       true,
		nodePortAddresses:        proxyutil.NewNodePortAddresses(fam, nil),
		networkInterfacer:        proxyutil.RealNetwork{},
		nfAcctCounters: map[string]bool{
			metrics.IPTablesCTStateInvalidDroppedNFAcctCounter: false,
			metrics.LocalhostNodePortAcceptedNFAcctCounter:     false,
		},
	}
	p.syncRunner = runner.NewBoundedFrequencyRunner("bench-sync-runner", p.syncProxyRules, time.Second, p.syncPeriod, proxyutil.FullSyncPeriod)
	return p
}

// Run feeds nSvc services with eps endpoints each through the proxier's event
// handlers, times the first sync (what OnEndpointSlicesSynced triggers at
// start-up), then one service's endpoints change and a partial sync.
func Run(nSvc, eps int, keep bool) cluster.Result {
	metrics.RegisterMetrics("iptables")
	sink := &restoreSink{keep: keep}
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
	r.Lines = bytes.Count(p.iptablesData.Bytes(), []byte{'\n'})
	r.LargeCluster = p.largeClusterMode
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
