package prefault

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Hold keeps the collector from running while a restore fills the block
// Heap made resident, and gives it back its settings at the first
// collection or at release, whichever comes first.
//
// A restore grows the heap from nothing to hundreds of megabytes. With
// gc_percent 200 the collector runs each time the heap triples (at 4, 12,
// 36, 108, 324 MB...) and marks everything built so far each time: about
// a tenth of a replay's CPU (docs/benchmarks.md, "The collector during a
// restore"). The pages of the block are resident already, and the restore
// fills them with what it keeps: collecting before they are full frees
// little. So the collector is off (gc_percent -1) and the soft memory
// limit is the memory the process holds now, the block included: the
// first collection comes when the heap grows out of the block, and as it
// ends the settings are put back, so that the rest of the restore, and
// everything after it, run as configured. A restore smaller than the
// block never collects before release.
//
// It does nothing for n <= 0 (Heap populated nothing), and never raises
// the memory limit the process had.
func Hold(n int64) (release func()) {
	if n <= 0 {
		return func() {}
	}
	percent := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(-1)
	debug.SetMemoryLimit(min(limit, held()+n/16)) // a sixteenth for what is not heap
	var once sync.Once
	release = func() {
		once.Do(func() {
			debug.SetGCPercent(percent)
			debug.SetMemoryLimit(limit)
		})
	}
	// A sentinel collected at the first collection puts the settings back:
	// the collector tells when it ran, no one has to watch.
	runtime.AddCleanup(new([16]byte), func(f func()) { f() }, release)
	return release
}

// held is the memory the soft limit counts: everything mapped by the Go
// runtime less what it returned to the system.
func held() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return math.MaxInt64
	}
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}
