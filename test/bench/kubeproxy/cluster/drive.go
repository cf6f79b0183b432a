package cluster

import (
	"runtime"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// Handlers are the kube-proxy proxier's event handlers Drive calls.
type Handlers interface {
	OnServiceAdd(*v1.Service)
	OnEndpointSliceAdd(*discovery.EndpointSlice)
	OnEndpointSliceUpdate(old, changed *discovery.EndpointSlice)
	OnServiceSynced()
	OnEndpointSlicesSynced()
}

// Drive feeds nSvc services with eps endpoints each through p's event
// handlers and times the first sync (what OnEndpointSlicesSynced triggers at
// start-up); afterFirst then reads what that sync wrote. Then one service's
// endpoints change and sync (the proxier's unexported syncProxyRules) runs a
// partial sync, which is timed too; afterPartial reads what it wrote.
func Drive(p Handlers, sync func(), nSvc, eps int, afterFirst, afterPartial func(*Result)) Result {
	svcs := make([]*v1.Service, nSvc)
	for i := range svcs {
		svcs[i] = Service(i)
	}
	slices := make([]*discovery.EndpointSlice, nSvc)
	for i := range slices {
		slices[i] = Slice(i, eps, i*eps)
	}
	var r Result

	c0, t0 := CPUMs(), time.Now()
	for i := range svcs {
		p.OnServiceAdd(svcs[i])
		p.OnEndpointSliceAdd(slices[i])
	}
	p.OnServiceSynced() // not initialised yet: returns at once
	t1 := time.Now()
	p.OnEndpointSlicesSynced() // the start-up full sync
	t2, c2 := time.Now(), CPUMs()
	r.GenCPUMs = c2 - c0
	r.HandlersMs = ms(t1.Sub(t0))
	r.SyncMs = ms(t2.Sub(t1))
	afterFirst(&r)
	svcs, slices = nil, nil
	r.HeapMiB = liveHeapMiB()

	old := Slice(0, eps, 0)
	changed := Slice(0, eps, 1000003) // endpoints nobody else uses
	t3 := time.Now()
	p.OnEndpointSliceUpdate(old, changed)
	sync()
	r.PartialMs = ms(time.Since(t3))
	afterPartial(&r)
	return r
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func liveHeapMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}
