package notify

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	apollo "github.com/apollo-11/apollo"
)

func mustRenderer(t *testing.T, lang, externalURL string, src map[apollo.NotificationKind]string) *renderer {
	t.Helper()
	r, err := newRenderer("oncall", lang, externalURL, time.UTC, src)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTemplatesRenderEveryKindInEveryLanguage(t *testing.T) {
	t.Parallel()
	// What each kind must show, by language. The sample alert is
	// batch_failures on batch_, 2 matches of batch_a and batch_b, resolved
	// at 03:04:05 when resolved.
	alertParts := map[string][]string{
		"en":    {"batch_failures", "batch_", "critical", "0.12", "2025-01-02 03:01:05 UTC", "team=data", "failed_rate 0.12 > 0.05", "https://apollo.example.com/alerts/sample-alert"},
		"zh-CN": {"batch_failures", "batch_", "严重", "0.12", "2025-01-02 03:01:05 UTC", "team=data", "failed_rate 0.12 > 0.05", "https://apollo.example.com/alerts/sample-alert", "规则"},
	}
	extra := map[apollo.NotificationKind]map[string][]string{
		apollo.NotifyResolved: {"en": {"Resolved", "2025-01-02 03:04:05 UTC", "1m0s"}, "zh-CN": {"恢复", "2025-01-02 03:04:05 UTC"}},
		apollo.NotifyStorm:    {"en": {"more matches of batch_failures", "batch_a, batch_b", "in all over 1m0s"}, "zh-CN": {"又命中 2 次", "batch_a、batch_b", "1分钟内"}},
		apollo.NotifyRepeat:   {"en": {"Still firing after", "1m0s"}, "zh-CN": {"仍未恢复"}},
		apollo.NotifySelf:     {"en": {"Apollo-11 reports"}, "zh-CN": {"Apollo-11 自身"}},
	}
	for _, lang := range []string{LangEnglish, LangChinese} {
		r := mustRenderer(t, lang, "https://apollo.example.com/", nil)
		for _, kind := range Kinds {
			t.Run(lang+"/"+string(kind), func(t *testing.T) {
				m, err := r.render(SampleNotification(kind), sampleItems(kind))
				if err != nil {
					t.Fatal(err)
				}
				if m.Title == "" || strings.ContainsAny(m.Title, "\n\r") {
					t.Fatalf("title %q", m.Title)
				}
				want := append([]string(nil), extra[kind][lang]...)
				switch kind {
				case apollo.NotifyTest:
					want = append(want, "oncall", "2025-01-02 03:04:05 UTC")
				case KindDigest:
					want = append(want, "sample one", "sample two", "2")
				default:
					want = append(want, alertParts[lang]...)
				}
				for _, body := range []string{m.Text, m.Markdown} {
					for _, w := range want {
						if !strings.Contains(body, w) {
							t.Errorf("%q missing from\n%s", w, body)
						}
					}
				}
				if !strings.Contains(m.HTML, "<h2") || !strings.Contains(m.HTML, `lang="`+lang+`"`) {
					t.Errorf("html:\n%s", m.HTML)
				}
			})
		}
	}
}

// Every string the zh-CN templates add is Chinese: rendered over data
// without a Latin letter, no message of any kind has one but the product's
// name. (A storm's follow-up once said "309 more after the first…".)
func TestChineseTemplatesAreChinese(t *testing.T) {
	t.Parallel()
	r, err := newRenderer("值班", LangChinese, "", time.FixedZone("+08", 8*3600), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.tenants = true // the default tenant is named too
	latin := regexp.MustCompile(`[A-Za-z]+`)
	for _, kind := range Kinds {
		n := SampleNotification(kind)
		a := &n.Alert
		a.ID, a.Rule, a.Group, a.Summary, a.Expr = "", "批处理失败", "批处理_", "失败率 0.12 ＞ 0.05", "失败率 ＞ 0.05"
		a.Labels, a.TopNames, a.Channels = map[string]string{"团队": "数据"}, []string{"任务甲", "任务乙"}, []string{"值班"}
		n.Channels = a.Channels
		items := sampleItems(kind)
		for _, it := range items {
			it.Title = "示例"
		}
		m, err := r.render(n, items)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{m.Title, m.Text, m.Markdown} {
			if words := latin.FindAllString(strings.ReplaceAll(s, "Apollo-11", ""), -1); len(words) > 0 {
				t.Errorf("%s: English %q in\n%s", kind, words, s)
			}
		}
	}
}

func TestDurationZH(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{0: "0秒", 400 * time.Millisecond: "0秒", 45 * time.Second: "45秒",
		time.Minute: "1分钟", 61*time.Minute + 5*time.Second: "1小时1分钟5秒", 26 * time.Hour: "26小时"} {
		if got := durationZH(d); got != want {
			t.Errorf("durationZH(%v) = %q, want %q", d, got, want)
		}
	}
}

// The exact default text of a firing alert, so that a whitespace slip in
// the template shows.
func TestFiringTextExact(t *testing.T) {
	t.Parallel()
	m, err := mustRenderer(t, "en", "", nil).render(SampleNotification(apollo.NotifyFiring), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `failed_rate 0.12 > 0.05 for batch_*

Rule:     batch_failures
Group:    batch_
Severity: critical
State:    firing
Value:    0.12
Started:  2025-01-02 03:01:05 UTC
Labels:   team=data`
	if m.Text != want {
		t.Fatalf("got\n%s\nwant\n%s", m.Text, want)
	}
	if m.Title != "[FIRING critical] batch_failures: batch_" {
		t.Fatalf("title %q", m.Title)
	}
}

// HTML is escaped on top of the inert text: "<" is already a full-width
// lookalike, html/template escapes the rest.
func TestHTMLIsEscaped(t *testing.T) {
	t.Parallel()
	n := SampleNotification(apollo.NotifyFiring)
	n.Alert.Summary = `<script>alert("x")</script>`
	for _, src := range []map[apollo.NotificationKind]string{nil, {"firing": `{{define "html"}}<p>{{.Alert.Summary}}</p>{{end}}`}} {
		m, err := mustRenderer(t, "en", "", src).render(n, nil)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(m.HTML, "<script>") || !strings.Contains(m.HTML, "＜script&gt;") {
			t.Fatalf("not escaped:\n%s", m.HTML)
		}
	}
}

func TestTemplateOverrides(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                      string
		kind                      apollo.NotificationKind
		src                       string
		title, text, md, htmlPart string
	}{
		{name: "body is text and markdown", kind: "firing", src: "ALERT {{.Alert.Rule}} on {{.Channel}}",
			title: "[FIRING critical] batch_failures: batch_", text: "ALERT batch_failures on oncall", md: "ALERT batch_failures on oncall", htmlPart: "ALERT batch_failures"},
		{name: "blocks", kind: "resolved",
			src:   `{{define "title"}}OK {{.Alert.Group}}{{end}}{{define "text"}}t {{duration .Duration}}{{end}}{{define "markdown"}}**m**{{end}}{{define "html"}}<i>{{.Alert.Rule}}</i>{{end}}`,
			title: "OK batch_", text: "t 1m0s", md: "**m**", htmlPart: "<i>batch_failures</i>"},
		{name: "blocks reuse defaults", kind: "storm", src: `{{define "title"}}S{{end}}{{template "storm.text" .}}`,
			title: "S", text: "2 more matches of batch_failures", md: "2 more matches of batch_failures"},
		{name: "digest", kind: KindDigest, src: `{{define "title"}}{{len .Items}} grouped{{end}}`,
			title: "2 grouped", text: "sample one", md: "sample one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRenderer(t, "en", "", map[apollo.NotificationKind]string{tc.kind: tc.src})
			m, err := r.render(SampleNotification(tc.kind), sampleItems(tc.kind))
			if err != nil {
				t.Fatal(err)
			}
			if m.Title != tc.title || !strings.Contains(m.Text, tc.text) || !strings.Contains(m.Markdown, tc.md) || !strings.Contains(m.HTML, tc.htmlPart) {
				t.Fatalf("title %q text %q md %q html %q", m.Title, m.Text, m.Markdown, m.HTML)
			}
			// Another kind keeps its default.
			other := apollo.NotifyTest
			if m, _ := r.render(SampleNotification(other), nil); !strings.HasPrefix(m.Title, "[TEST]") {
				t.Fatalf("test kind changed: %q", m.Title)
			}
		})
	}
}

func TestBrokenOverrideFallsBackToDefault(t *testing.T) {
	t.Parallel()
	// Passes on the sample alert, fails on a rule named boom.
	r := mustRenderer(t, "en", "", map[apollo.NotificationKind]string{
		"firing": `{{if eq .Alert.Rule "boom"}}{{.Alert.Labels.team.nope}}{{end}}custom`})
	n := SampleNotification(apollo.NotifyFiring)
	if m, err := r.render(n, nil); err != nil || m.Text != "custom" {
		t.Fatalf("%v %q", err, m.Text)
	}
	n.Alert.Rule = "boom"
	m, err := r.render(n, nil)
	if err == nil || m == nil || !strings.Contains(m.Text, "Rule:     boom") {
		t.Fatalf("want the default text and an error, got %v %+v", err, m)
	}
}

func TestDigestListsFirstTwenty(t *testing.T) {
	t.Parallel()
	var items []*Message
	for i := range 25 {
		items = append(items, &Message{Title: "alert " + strconv.Itoa(i)})
	}
	m, err := mustRenderer(t, "en", "", nil).render(apollo.Notification{Kind: KindDigest, At: t0}, items)
	if err != nil {
		t.Fatal(err)
	}
	if m.Title != "25 notifications" || !strings.Contains(m.Text, "alert 19\n… and 5 more") || strings.Contains(m.Text, "alert 20") {
		t.Fatalf("%q\n%s", m.Title, m.Text)
	}
}

func TestNoLinkWithoutExternalURL(t *testing.T) {
	t.Parallel()
	m, err := mustRenderer(t, "en", "", nil).render(SampleNotification(apollo.NotifyFiring), nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(m.Text, "Link:") || strings.Contains(m.Markdown, "](") || strings.Contains(m.HTML, "<a ") {
		t.Fatalf("link without ExternalURL:\n%s\n%s", m.Text, m.HTML)
	}
}

func TestFormatValue(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]string{0: "0", 12: "12", 0.05: "0.05", 0.123456: "0.1235", 1234.5678: "1235", -3: "-3"} {
		if got := formatValue(in); got != want {
			t.Errorf("formatValue(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestNormalizeLang(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": "en", "EN": "en", "zh": "zh-CN", "zh_CN": "zh-CN", "zh-cn": "zh-CN", "fr": ""} {
		if got, ok := normalizeLang(in); got != want || ok != (want != "") {
			t.Errorf("normalizeLang(%q) = %q %v", in, got, ok)
		}
	}
}

// FuzzTemplateOverride: whatever a channel's override says, building the
// renderer fails with an error naming the kind, or rendering gives a
// one-line title; nothing panics.
func FuzzTemplateOverride(f *testing.F) {
	f.Add("firing", "ALERT {{.Alert.Rule}}")
	f.Add("storm", `{{define "title"}}{{len .Items}}{{end}}{{template "storm.text" .}}`)
	f.Add("digest", `{{define "html"}}<a href="{{.Link}}">{{range .Shown}}{{.Title}}{{end}}</a>{{end}}`)
	f.Add("resolved", "{{.Alert.Nope")
	f.Add("test", `{{template "test.title" .}}{{define "title"}}a
b{{end}}`)
	f.Fuzz(func(t *testing.T, kind, src string) {
		if strings.Contains(strings.ReplaceAll(src, " ", ""), "range") && !strings.Contains(src, "range .") {
			return // {{range 1e12}} is a legal template that runs for hours
		}
		k := apollo.NotificationKind(kind)
		r, err := newRenderer("fz", LangEnglish, "https://a.example", time.UTC, map[apollo.NotificationKind]string{k: src})
		if err != nil {
			if !strings.Contains(err.Error(), "templates."+kind) {
				t.Fatalf("error does not name the kind: %v", err)
			}
			return
		}
		m, err := r.render(SampleNotification(k), sampleItems(k))
		if err != nil {
			t.Fatalf("passed the trial, failed the same sample: %v", err)
		}
		if strings.ContainsAny(m.Title, "\r\n") {
			t.Fatalf("title %q", m.Title)
		}
	})
}

// An alert without a group (an event rule on every job) has a title of
// its rule alone, in every kind and language: "hung_runs:" with nothing
// after it read as a missing value (issue 21).
func TestTitleWithoutGroup(t *testing.T) {
	t.Parallel()
	for _, lang := range []string{LangEnglish, LangChinese} {
		r := mustRenderer(t, lang, "", nil)
		for _, kind := range []apollo.NotificationKind{apollo.NotifyFiring, apollo.NotifyRepeat, apollo.NotifyResolved, apollo.NotifyStorm} {
			n := SampleNotification(kind)
			n.Alert.Group = ""
			m, err := r.render(n, sampleItems(kind))
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(m.Title, ":") || strings.Contains(m.Title, "：") || strings.HasSuffix(m.Title, " in") {
				t.Errorf("%s %s: title %q has an empty group's place", lang, kind, m.Title)
			}
			if !strings.Contains(m.Title, n.Alert.Rule) {
				t.Errorf("%s %s: title %q lacks the rule", lang, kind, m.Title)
			}
		}
	}
}
