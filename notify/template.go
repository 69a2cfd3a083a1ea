package notify

import (
	"bytes"
	"embed"
	"fmt"
	htmltemplate "html/template"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"time"

	apollo "github.com/apollo-11/apollo"
)

//go:embed templates
var templateFS embed.FS

// Languages with default templates.
const (
	LangEnglish = "en"
	LangChinese = "zh-CN"
)

// Kinds lists every kind that has default templates, digest included.
var Kinds = []apollo.NotificationKind{
	apollo.NotifyFiring, apollo.NotifyResolved, apollo.NotifyStorm,
	apollo.NotifyRepeat, apollo.NotifyTest, apollo.NotifySelf, KindDigest,
}

// digestShown is how many folded messages a digest lists by title; the
// rest are counted. Robot APIs cap a message at a few KiB (and each
// channel cuts what is past its cap).
const digestShown = 20

// digestShownMail is digestShown for email: a mail has no size cap to keep
// under, and the one who reads a digest of an outage's backlog wants the
// list; a thousand titles take about 100 KB.
const digestShownMail = 1000

// TemplateData is what every template sees. Alert and Notification.Alert
// hold the alert with every text users supplied made inert (inert.go).
type TemplateData struct {
	Kind         apollo.NotificationKind
	Alert        apollo.Alert
	Notification apollo.Notification
	// ShowTenant says the message names the alert's tenant (Tenant, ""
	// for the default one): always for other tenants than the default,
	// and for every alert when tenants are in use; never for test, self
	// and digest messages, which are nobody's alert.
	ShowTenant  bool
	Tenant      string
	Channel     string
	Lang        string
	ExternalURL string
	// Link points at the alert in the web UI; empty without ExternalURL.
	Link string
	// Duration is how long the alert had been active at Notification.At,
	// or, once resolved, how long it was active.
	Duration time.Duration
	// Items is every message a digest stands for; Shown the first few,
	// More how many are left out of Shown.
	Items []*Message
	Shown []*Message
	More  int
	// Backlog says a digest holds what waited while the channel was down
	// or a process that stopped owed it (DigestBacklog), not for the rate
	// limit.
	Backlog bool
}

// renderer turns notifications into messages for one channel.
type renderer struct {
	channel, lang, externalURL string
	defaults                   *template.Template
	overrides                  map[apollo.NotificationKind]*override
	layout                     *htmltemplate.Template
	tenants                    bool // Options.Tenants
	shown                      int  // how many a digest lists by title
}

// override is one kind's template set after a channel's override source
// was parsed into a copy of the defaults.
type override struct {
	set     *template.Template
	hasBody bool                   // the source has text outside {{define}}: use it as text and markdown
	html    *htmltemplate.Template // the source's "html" block, if it has one
}

// newRenderer parses the defaults of lang and the channel's overrides, and
// renders each override once on sample data so that a template that would
// fail on every alert fails now, at start-up, naming channel and kind.
func newRenderer(channel, lang, externalURL string, loc *time.Location, src map[apollo.NotificationKind]string) (*renderer, error) {
	fm := TemplateFuncs(loc)
	if lang == LangChinese {
		fm["duration"] = durationZH
	}
	// missingkey=zero: a label the alert's rule does not have is shown as
	// nothing, not as text/template's "<no value>"; overrides are clones
	// and inherit it.
	defaults, err := template.New(lang).Funcs(fm).Option("missingkey=zero").ParseFS(templateFS, "templates/"+lang+".tmpl")
	if err != nil {
		return nil, fmt.Errorf("parse default %s templates: %w", lang, err)
	}
	layout, err := htmltemplate.New("email.html").ParseFS(templateFS, "templates/email.html")
	if err != nil {
		return nil, fmt.Errorf("parse email layout: %w", err)
	}
	r := &renderer{channel: channel, lang: lang, externalURL: strings.TrimRight(externalURL, "/"), shown: digestShown,
		defaults: defaults, layout: layout, overrides: map[apollo.NotificationKind]*override{}}
	for _, kind := range sortedKinds(src) {
		field := "templates." + string(kind)
		if !slices.Contains(Kinds, kind) {
			return nil, &apollo.Error{Code: apollo.EINVALID, Field: field,
				Message: fmt.Sprintf("no notification kind %q", kind), Hint: "use one of " + kindList()}
		}
		o, err := parseOverride(defaults, fm, src[kind])
		if err != nil {
			return nil, &apollo.Error{Code: apollo.EINVALID, Field: field,
				Message: "template does not parse: " + err.Error(), Hint: "fix the text/template syntax"}
		}
		r.overrides[kind] = o
		if _, err := r.renderWith(SampleNotification(kind), sampleItems(kind), o); err != nil {
			return nil, &apollo.Error{Code: apollo.EINVALID, Field: field,
				Message: "template fails on a sample alert: " + err.Error(),
				Hint:    "fields are those of notify.TemplateData, e.g. {{.Alert.Rule}}; see docs/notifications.md"}
		}
	}
	return r, nil
}

func parseOverride(defaults *template.Template, fm template.FuncMap, src string) (*override, error) {
	set, err := defaults.Clone()
	if err != nil {
		return nil, err
	}
	body, err := set.New("override").Parse(src)
	if err != nil {
		return nil, err
	}
	o := &override{set: set, hasBody: hasBody(body.Tree)}
	if set.Lookup("html") != nil {
		h, err := htmltemplate.New("override").Funcs(htmltemplate.FuncMap(fm)).Option("missingkey=zero").Parse(src)
		if err != nil {
			return nil, err
		}
		o.html = h.Lookup("html")
	}
	return o, nil
}

// hasBody reports whether a parsed source has anything but blank text
// outside its {{define}} blocks.
func hasBody(t *parse.Tree) bool {
	if t == nil || t.Root == nil {
		return false
	}
	for _, n := range t.Root.Nodes {
		if tn, ok := n.(*parse.TextNode); ok && len(bytes.TrimSpace(tn.Text)) == 0 {
			continue
		}
		return true
	}
	return false
}

// render renders n (with items for a digest) with the channel's override
// for its kind, if any. When the override fails at run time it still
// returns the default rendering, with the error for the log: a broken
// template must not cost an alert.
func (r *renderer) render(n apollo.Notification, items []*Message) (*Message, error) {
	o := r.overrides[n.Kind]
	m, err := r.renderWith(n, items, o)
	if err == nil || o == nil {
		return m, err
	}
	m, derr := r.renderWith(n, items, nil)
	if derr != nil {
		return nil, derr
	}
	return m, fmt.Errorf("template override for %s failed, sent the default: %w", n.Kind, err)
}

func (r *renderer) renderWith(n apollo.Notification, items []*Message, o *override) (*Message, error) {
	kind := n.Kind
	if !slices.Contains(Kinds, kind) {
		kind = apollo.NotifyFiring // a kind newer than these templates still gets told
	}
	d := r.data(n, items)
	set, title, text, md := r.defaults, string(kind)+".title", string(kind)+".text", string(kind)+".markdown"
	if o != nil {
		set = o.set
		if set.Lookup("title") != nil {
			title = "title"
		}
		if o.hasBody {
			text, md = "override", "override"
		}
		if set.Lookup("text") != nil {
			text = "text"
		}
		if set.Lookup("markdown") != nil {
			md = "markdown"
		}
	}
	m := &Message{Notification: n, Digest: items}
	var err error
	if m.Title, err = execText(set, title, d); err != nil {
		return nil, err
	}
	m.Title = strings.Join(strings.Fields(m.Title), " ")
	if m.Text, err = execText(set, text, d); err != nil {
		return nil, err
	}
	if m.Markdown, err = execText(set, md, d); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if o != nil && o.html != nil {
		err = o.html.Execute(&b, d)
	} else {
		err = r.layout.Execute(&b, map[string]string{"Lang": r.lang, "Title": m.Title, "Text": m.Text, "Link": d.Link})
	}
	if err != nil {
		return nil, err
	}
	m.HTML = b.String()
	return m, nil
}

func execText(set *template.Template, name string, d *TemplateData) (string, error) {
	var b strings.Builder
	if err := set.ExecuteTemplate(&b, name, d); err != nil {
		return "", err
	}
	return strings.TrimSpace(b.String()), nil
}

func (r *renderer) data(n apollo.Notification, items []*Message) *TemplateData {
	a := inertAlert(n.Alert)
	n.Alert = a
	d := &TemplateData{Kind: n.Kind, Alert: a, Notification: n, Channel: r.channel, Lang: r.lang,
		ExternalURL: r.externalURL, Items: items, Shown: items}
	switch n.Kind {
	case apollo.NotifyTest, apollo.NotifySelf, KindDigest:
	default:
		d.ShowTenant, d.Tenant = a.Tenant != "" || r.tenants, a.Tenant
	}
	if r.externalURL != "" && a.ID != "" {
		d.Link = r.externalURL + "/alerts/" + url.PathEscape(a.ID)
	}
	start := a.FiredAt
	if start.IsZero() {
		start = a.StartedAt
	}
	end := n.At
	if !a.ResolvedAt.IsZero() {
		end = a.ResolvedAt
	}
	if !start.IsZero() && end.After(start) {
		d.Duration = end.Sub(start)
	}
	if len(items) > r.shown {
		d.Shown, d.More = items[:r.shown], len(items)-r.shown
	}
	d.Backlog = n.Kind == KindDigest && n.DedupKey == DigestBacklog
	return d
}

// TemplateFuncs are the functions every template may call: time (in loc),
// duration, value (a number as people read it), join, upper and labels
// (k=v, sorted).
func TemplateFuncs(loc *time.Location) template.FuncMap {
	if loc == nil {
		loc = time.Local
	}
	return template.FuncMap{
		"time": func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return t.In(loc).Format("2006-01-02 15:04:05 MST")
		},
		"duration": func(d time.Duration) string { return d.Round(time.Second).String() },
		"value":    formatValue,
		"join":     strings.Join,
		"upper":    strings.ToUpper,
		"labels": func(m map[string]string) string {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for i, k := range keys {
				keys[i] = k + "=" + m[k]
			}
			return strings.Join(keys, ", ")
		},
	}
}

// durationZH writes a duration as Chinese text does, to the second:
// 1小时2分钟3秒.
func durationZH(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Second {
		return "0秒"
	}
	var b strings.Builder
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "小时"}, {time.Minute, "分钟"}, {time.Second, "秒"}} {
		if n := d / u.d; n > 0 {
			b.WriteString(strconv.FormatInt(int64(n), 10) + u.name)
			d -= n * u.d
		}
	}
	return b.String()
}

// formatValue shows whole numbers as such (counts) and others with four
// significant digits (rates, ratios).
func formatValue(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func sortedKinds(m map[apollo.NotificationKind]string) []apollo.NotificationKind {
	ks := make([]apollo.NotificationKind, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func kindList() string {
	s := make([]string, len(Kinds))
	for i, k := range Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// normalizeLang maps the spellings people use to a language with
// templates; ok is false for a language without them.
func normalizeLang(s string) (string, bool) {
	switch strings.ToLower(strings.ReplaceAll(s, "_", "-")) {
	case "", "en", "en-us", "en-gb":
		return LangEnglish, true
	case "zh", "zh-cn", "zh-hans", "zh-hans-cn":
		return LangChinese, true
	}
	return "", false
}

// SampleNotification is a notification of kind with every field set, for
// trying a template before it meets a real alert.
func SampleNotification(kind apollo.NotificationKind) apollo.Notification {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	a := apollo.Alert{
		ID: "sample-alert", Rule: "batch_failures", Group: "batch_", State: apollo.AlertFiring,
		Severity: apollo.SeverityCritical, Labels: map[string]string{"team": "data"},
		Summary: "failed_rate 0.12 > 0.05 for batch_*", Expr: "failed_rate > 0.05", Value: 0.12,
		Channels: []string{"sample"}, TopNames: []string{"batch_a", "batch_b"}, Count: 2,
		StartedAt: at.Add(-3 * time.Minute), FiredAt: at.Add(-time.Minute),
	}
	if kind == apollo.NotifyResolved {
		a.State, a.ResolvedAt = apollo.AlertResolved, at
	}
	return apollo.Notification{Kind: kind, Alert: a, Channels: []string{"sample"}, DedupKey: "sample", At: at}
}

func sampleItems(kind apollo.NotificationKind) []*Message {
	if kind != KindDigest {
		return nil
	}
	n := SampleNotification(apollo.NotifyFiring)
	return []*Message{{Notification: n, Title: "sample one"}, {Notification: n, Title: "sample two"}}
}
