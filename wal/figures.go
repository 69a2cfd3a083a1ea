package wal

import "github.com/apollo-11/apollo"

// The log's figures for GET /metrics (docs/monitoring.md describes each).
var (
	figAppends = &apollo.Family{Name: "apollo_wal_appends_total", Kind: apollo.FigureCounter,
		Help: "Records appended to the write-ahead log since open."}
	figBytes = &apollo.Family{Name: "apollo_wal_bytes_total", Kind: apollo.FigureCounter,
		Help: "Bytes appended to the write-ahead log since open, record headers included."}
	figSync = &apollo.Family{Name: "apollo_wal_sync_seconds", Kind: apollo.FigureSummary,
		Help: "Time spent in fsync of log segments; _count is the number of fsyncs."}
	figSyncLast = &apollo.Family{Name: "apollo_wal_sync_last_seconds", Kind: apollo.FigureGauge,
		Help: "Duration of the latest fsync."}
	figSyncMax = &apollo.Family{Name: "apollo_wal_sync_max_seconds", Kind: apollo.FigureGauge,
		Help: "Longest fsync since open."}
	figSegments = &apollo.Family{Name: "apollo_wal_segments", Kind: apollo.FigureGauge,
		Help: "Segment files of the log on disk."}
	figRepaired = &apollo.Family{Name: "apollo_wal_repaired_bytes", Kind: apollo.FigureGauge,
		Help: "Bytes cut from a torn tail when the log was opened."}
	figLastLSN = &apollo.Family{Name: "apollo_wal_last_lsn", Kind: apollo.FigureGauge,
		Help: "Sequence number of the last record appended."}
	figDurableLSN = &apollo.Family{Name: "apollo_wal_durable_lsn", Kind: apollo.FigureGauge,
		Help: "Sequence number up to which the log is durable."}
)

// Figures writes the log's counters and gauges (GET /metrics).
func (s Stats) Figures(w apollo.FigureWriter) {
	w.Add(figAppends, float64(s.Appends))
	w.Add(figBytes, float64(s.Bytes))
	w.AddSummary(figSync, s.Syncs, s.SyncLatencySum.Seconds())
	w.Add(figSyncLast, s.SyncLatencyLast.Seconds())
	w.Add(figSyncMax, s.SyncLatencyMax.Seconds())
	w.Add(figSegments, float64(s.Segments))
	w.Add(figRepaired, float64(s.Repaired))
	w.Add(figLastLSN, float64(s.LastLSN))
	w.Add(figDurableLSN, float64(s.DurableLSN))
}
