package webhook

import (
	"fmt"
	"hash/fnv"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/notify"
)

// AMPayload is the body Alertmanager's webhook receiver sends (version 4),
// so that receivers written for Alertmanager take Apollo-11's alerts.
type AMPayload struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []AMAlert         `json:"alerts"`
}

// AMAlert is one alert in an AMPayload.
type AMAlert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// alertmanagerPayload maps a message, or each message of a digest, to
// Alertmanager alerts: the rule is alertname, the group and severity are
// labels next to the alert's own, the summary and rendered text are
// annotations. A digest lists its first messages only (see listed) and
// counts the rest in truncatedAlerts, as Alertmanager does past a
// receiver's max_alerts; the status is firing if any of them all is.
func alertmanagerPayload(m *notify.Message, receiver, externalURL string) AMPayload {
	msgs := []*notify.Message{m}
	if len(m.Digest) > 0 {
		msgs = m.Digest
	}
	p := AMPayload{Version: "4", Status: "resolved", Receiver: receiver, ExternalURL: externalURL}
	for _, d := range msgs {
		if !resolved(d.Notification) {
			p.Status = "firing"
			break
		}
	}
	alerts := listed(msgs, func(d *notify.Message) AMAlert { return amAlert(d, externalURL) })
	p.TruncatedAlerts = len(msgs) - len(alerts)
	for i, a := range alerts {
		if i == 0 {
			p.CommonLabels, p.CommonAnnotations = maps.Clone(a.Labels), maps.Clone(a.Annotations)
		} else {
			keepCommon(p.CommonLabels, a.Labels)
			keepCommon(p.CommonAnnotations, a.Annotations)
		}
		p.Alerts = append(p.Alerts, a)
	}
	// The tenant groups too: receivers key incidents on groupKey, and two
	// tenants' rules may share a name and a group.
	p.GroupLabels = map[string]string{}
	for _, k := range []string{"alertname", "group", "tenant"} {
		if v, ok := p.CommonLabels[k]; ok {
			p.GroupLabels[k] = v
		}
	}
	p.GroupKey = "{}:" + labelString(p.GroupLabels)
	return p
}

func amAlert(m *notify.Message, externalURL string) AMAlert {
	n, al := m.Notification, m.Notification.Alert
	labels := maps.Clone(al.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels["alertname"] = al.Rule
	labels["group"] = al.Group
	if al.Severity != "" {
		labels["severity"] = string(al.Severity)
	}
	if al.Tenant != "" {
		labels["tenant"] = al.Tenant
	}
	ann := map[string]string{"summary": al.Summary, "description": m.Text, "value": strconv.FormatFloat(al.Value, 'g', -1, 64)}
	if al.Expr != "" {
		ann["expr"] = al.Expr
	}
	if n.Kind == apollo.NotifyStorm {
		ann["count"] = strconv.Itoa(al.Count)
		ann["top_names"] = strings.Join(al.TopNames, ",")
	}
	a := AMAlert{Status: "firing", Labels: labels, Annotations: ann, StartsAt: al.FiredAt, Fingerprint: fingerprint(labels)}
	if a.StartsAt.IsZero() {
		a.StartsAt = al.StartedAt
	}
	if resolved(n) {
		a.Status, a.EndsAt = "resolved", al.ResolvedAt
	}
	if externalURL != "" && al.ID != "" {
		a.GeneratorURL = strings.TrimRight(externalURL, "/") + "/alerts/" + url.PathEscape(al.ID)
	}
	return a
}

func resolved(n apollo.Notification) bool {
	return n.Kind == apollo.NotifyResolved || n.Alert.State == apollo.AlertResolved
}

// keepCommon deletes from common what other does not have the same.
func keepCommon(common, other map[string]string) {
	for k, v := range common {
		if other[k] != v {
			delete(common, k)
		}
	}
}

// labelString writes labels the way Alertmanager writes a label set:
// {a="1", b="2"}, sorted.
func labelString(l map[string]string) string {
	parts := make([]string, 0, len(l))
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+strconv.Quote(l[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// fingerprint identifies a label set: 16 hex digits, as Alertmanager's.
func fingerprint(l map[string]string) string {
	h := fnv.New64a()
	for _, k := range slices.Sorted(maps.Keys(l)) {
		fmt.Fprintf(h, "%s\xff%s\xff", k, l[k])
	}
	return fmt.Sprintf("%016x", h.Sum64())
}
