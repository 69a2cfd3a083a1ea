package alert

import (
	"slices"

	"github.com/apollo-11/apollo"
)

// The engine's figures for GET /metrics (docs/monitoring.md describes
// each).
var (
	figEvaluations = &apollo.Family{Name: "apollo_rule_evaluations_total", Kind: apollo.FigureCounter,
		Help: "Evaluation cycles of the rate rules."}
	figEvaluationErrors = &apollo.Family{Name: "apollo_rule_evaluation_errors_total", Kind: apollo.FigureCounter,
		Help: "Evaluation cycles in which some metrics could not be read."}
	figEvaluationSeconds = &apollo.Family{Name: "apollo_rule_evaluation_seconds", Kind: apollo.FigureGauge,
		Help: "Wall time of the latest evaluation cycle."}
	figLastEvaluation = &apollo.Family{Name: "apollo_rule_last_evaluation_timestamp_seconds", Kind: apollo.FigureGauge,
		Help: "When the latest evaluation cycle ran, Unix seconds; 0 before the first."}
	figRules = &apollo.Family{Name: "apollo_rules", Kind: apollo.FigureGauge, Labels: []string{"kind"},
		Help: "Rules loaded, by kind: rate (evaluated every interval) or event (on each matching event)."}
	figAlerts = &apollo.Family{Name: "apollo_alerts", Kind: apollo.FigureGauge, Labels: []string{"state"},
		Help: "Alerts held, by state (resolved ones are kept a while for the API)."}
	figNotifications = &apollo.Family{Name: "apollo_alert_notifications_total", Kind: apollo.FigureCounter, Labels: []string{"result"},
		Help: "Notifications of the alert engine, by result: sent (handed to the dispatcher), deduplicated (held the dedup lock elsewhere), silenced, inhibited (the echo of another job's trouble), dropped (event-rule queue full)."}
	figLockErrors = &apollo.Family{Name: "apollo_alert_lock_errors_total", Kind: apollo.FigureCounter,
		Help: "Notifications sent without the dedup lock because taking it failed."}
	figSaveErrors = &apollo.Family{Name: "apollo_alert_state_save_errors_total", Kind: apollo.FigureCounter,
		Help: "Failed saves of the alert state."}
	figNotOpened = &apollo.Family{Name: "apollo_alerts_not_opened_total", Kind: apollo.FigureCounter,
		Help: "Alerts of rate rules not opened because their tenant had the most open alerts it may have (100 000)."}
	figOwed = &apollo.Family{Name: "apollo_alert_notifications_owed", Kind: apollo.FigureGauge,
		Help: "Notifications decided and not yet handed to the dispatcher (a save keeps them; a restart sends them first)."}
)

// figureStates are reported even at zero, so a firing-alerts panel or rule
// has a series before the first alert.
var figureStates = []apollo.AlertState{apollo.AlertInactive, apollo.AlertPending, apollo.AlertFiring, apollo.AlertResolved}

// Figures writes the engine's counters and gauges (GET /metrics).
func (s Stats) Figures(w apollo.FigureWriter) {
	w.Add(figEvaluations, float64(s.Evaluations))
	w.Add(figEvaluationErrors, float64(s.EvaluationErrors))
	w.Add(figEvaluationSeconds, s.LastDuration.Seconds())
	w.Add(figLastEvaluation, apollo.UnixSeconds(s.LastEvaluation))
	w.Add(figRules, float64(s.RateRules), "rate")
	w.Add(figRules, float64(s.EventRules), "event")
	for _, st := range figureStates {
		w.Add(figAlerts, float64(s.Alerts[st]), string(st))
	}
	for st, n := range s.Alerts {
		if !slices.Contains(figureStates, st) {
			w.Add(figAlerts, float64(n), string(st))
		}
	}
	w.Add(figNotifications, float64(s.Sent), "sent")
	w.Add(figNotifications, float64(s.Deduped), "deduplicated")
	w.Add(figNotifications, float64(s.Silenced), "silenced")
	w.Add(figNotifications, float64(s.Inhibited), "inhibited")
	w.Add(figNotifications, float64(s.Dropped), "dropped")
	w.Add(figLockErrors, float64(s.LockErrors))
	w.Add(figSaveErrors, float64(s.SaveErrors))
	w.Add(figNotOpened, float64(s.Refused))
	w.Add(figOwed, float64(s.Owed))
}
