// Package cluster generates, as Kubernetes API objects, the cluster that
// test/bench/proxy_cluster.h generates as svcenv objects, so that kube-proxy
// and svcenv are timed on the same input; and holds the figures one timed
// run reports.
package cluster

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The proxy options bench_proxy uses.
const (
	NodeName    = "node-a"
	NodeIP      = "10.0.0.11"
	ClusterCIDR = "10.244.0.0/16"
	MasqBit     = 14
)

func names(i int) (ns, name string) {
	return fmt.Sprintf("bench-%d", i/1000), fmt.Sprintf("svc-%d", i)
}

// Service returns service i: ClusterIP 10.(96+i/65536).(i/256%256).(i%256),
// one TCP port "http" 80.
func Service(i int) *v1.Service {
	ns, name := names(i)
	ip := fmt.Sprintf("10.%d.%d.%d", 96+i/65536, (i/256)%256, i%256)
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  ip,
			ClusterIPs: []string{ip},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports: []v1.ServicePort{{
				Name: "http", Protocol: v1.ProtocolTCP, Port: 80,
				TargetPort: intstr.FromInt32(8080),
			}},
		},
	}
}

// Slice returns service i's EndpointSlice: eps ready endpoints numbered from
// first (address 10.128.0.0 + number), port "http" 8080, odd ones on node-a.
func Slice(i, eps, first int) *discovery.EndpointSlice {
	ns, name := names(i)
	port, proto, portName := int32(8080), v1.ProtocolTCP, "http"
	ready := true
	es := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{discovery.LabelServiceName: name},
		},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: &portName, Protocol: &proto, Port: &port}},
	}
	for e := 0; e < eps; e++ {
		k := first + e
		node := "node-b"
		if e%2 == 1 {
			node = "node-a"
		}
		es.Endpoints = append(es.Endpoints, discovery.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 128+k/65536, (k/256)%256, k%256)},
			Conditions: discovery.EndpointConditions{Ready: &ready},
			NodeName:   &node,
		})
	}
	return es
}

// Result is what one timed run measured.
type Result struct {
	HandlersMs   float64 // OnServiceAdd + OnEndpointSliceAdd for every object
	SyncMs       float64 // first (full) sync
	GenCPUMs     float64 // CPU time of handlers + first sync, all threads (GC included)
	Bytes        int     // ruleset text the first sync produced
	Lines        int
	LargeCluster bool
	PartialMs    float64 // sync after one service's endpoints changed
	PartialBytes int
	HeapMiB      float64 // live Go heap after the first sync
	Ruleset      []byte  // the first sync's text, kept only when dumping
}

// PeakRSSMiB is this process's VmHWM.
func PeakRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// CPUMs is the CPU time (user + system) this process has used so far.
func CPUMs() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}
