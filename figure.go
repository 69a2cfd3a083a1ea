package apollo

import "time"

// Apollo-11 watches itself (docs/monitoring.md): every component counts
// what it does in its Stats, and its Stats' Figures method writes those
// numbers as figures, each of a Family declared beside the counter it
// reads. GET /metrics shows them in the Prometheus format (package
// selfmetrics); nothing there knows a component's type.

// FigureKind is how the figures of a family move.
type FigureKind uint8

const (
	FigureCounter FigureKind = iota + 1 // only grows while the process runs
	FigureGauge                         // goes up and down
	FigureSummary                       // a count of observations and their sum
)

// Family is one named figure: what it means, how it moves and the names
// of its labels. docs/monitoring.md describes every family.
type Family struct {
	Name   string
	Help   string
	Kind   FigureKind
	Labels []string
}

// FigureWriter takes a component's figures when they are read (a scrape).
type FigureWriter interface {
	// Add writes one value of a counter or gauge family, with a value for
	// each of its labels, in the family's order.
	Add(f *Family, v float64, labelValues ...string)
	// AddSummary writes a summary family: how many observations, and the
	// sum of their values.
	AddSummary(f *Family, count uint64, sum float64)
}

// UnixSeconds is a timestamp figure's value; 0 stands for "never", so that
// `time() - x > N` alerts on a component that never did the thing.
func UnixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}
