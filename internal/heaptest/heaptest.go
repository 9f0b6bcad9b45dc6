// Package heaptest measures the memory a piece of code holds at its peak, for tests
// that bound what a flood of input may cost.
package heaptest

import (
	"runtime"
	"sync/atomic"
	"time"
)

// PeakHeap runs f and reports the largest HeapAlloc seen while it ran.
func PeakHeap(f func()) uint64 {
	runtime.GC()
	var peak atomic.Uint64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(done)
	<-stopped
	return peak.Load()
}
