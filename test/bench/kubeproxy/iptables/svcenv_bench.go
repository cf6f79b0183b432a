// svcenv benchmark hook. test/bench/kubeproxy_gen.sh copies kube-proxy's
// pkg/proxy/iptables (non-test files) from the module cache next to this file
// at run time, so this code can build a Proxier the way NewProxier does but
// with an iptables stand-in that only keeps what iptables-restore would read.
package iptables

import (
	"bytes"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
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

// Run times kube-proxy's iptables proxier on the bench cluster (see
// cluster.Drive).
func Run(nSvc, eps int, keep bool) cluster.Result {
	metrics.RegisterMetrics("iptables")
	sink := &restoreSink{keep: keep}
	p := newBenchProxier(sink)
	return cluster.Drive(p, func() { _ = p.syncProxyRules() }, nSvc, eps, func(r *cluster.Result) {
		r.Bytes = sink.bytes
		r.Lines = bytes.Count(p.iptablesData.Bytes(), []byte{'\n'})
		r.LargeCluster = p.largeClusterMode
		r.Ruleset = sink.last
	}, func(r *cluster.Result) { r.PartialBytes = sink.bytes })
}
