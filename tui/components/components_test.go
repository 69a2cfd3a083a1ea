package components

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

func TestLayout(t *testing.T) {
	t.Parallel()
	cols := []Column{
		{Title: "A", Min: 10},
		{Title: "B", Min: 10, Max: 20, Drop: 2},
		{Title: "C", Min: 5, Drop: 1},
		{Title: "D", Min: 10, Max: -1},
		{Title: "E", Min: 4, Max: 8, Drop: 3},
	}
	tests := []struct {
		width int
		want  []int
	}{
		{43, []int{10, 10, 5, 10, 4}}, // exactly the minimum: 39 + 4 gaps
		{45, []int{10, 12, 5, 10, 4}}, // 2 spare: B and E in proportion (10:4), rounding in order
		{57, []int{10, 20, 5, 10, 8}}, // 14 spare: the bounded ones reach their Max
		{60, []int{10, 20, 5, 13, 8}}, // and the rest goes to D
		{42, []int{10, 14, 5, 10, 0}}, // E (Drop 3) goes first; its room goes to B
		{30, []int{10, 0, 5, 13, 0}},  // then B
		{24, []int{10, 0, 0, 13, 0}},  // then C; A and D are never dropped
		{5, []int{10, 0, 0, 10, 0}},   // too narrow for what must stay: it stays
		{100, []int{10, 20, 5, 53, 8}},
	}
	for _, tt := range tests {
		if got := Layout(cols, tt.width); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Layout(%d) = %v, want %v", tt.width, got, tt.want)
		}
	}
}

func TestTableScrollsToCursor(t *testing.T) {
	t.Parallel()
	st := NewStyles(true)
	tb := Table{Columns: []Column{{Title: "N", Min: 3, Right: true}, {Title: "NAME", Min: 5, Max: -1}}}
	tb.SetSize(20, 4) // a title and 3 rows
	var rows [][]string
	for _, n := range []string{"1", "2", "3", "4", "5", "6"} {
		rows = append(rows, []string{n, "row " + n})
	}
	tb.SetRows(rows)
	visible := func() string {
		lines := strings.Split(ansi.Strip(tb.View(st)), "\n")
		var ns []string
		for _, l := range lines[1:] {
			ns = append(ns, strings.TrimSpace(l[:3]))
		}
		return strings.Join(ns, ",")
	}
	steps := []struct {
		move int
		want string
		cur  int
	}{
		{0, "1,2,3", 0}, {2, "1,2,3", 2}, {1, "2,3,4", 3}, {10, "4,5,6", 5}, {-3, "3,4,5", 2}, {-10, "1,2,3", 0},
	}
	for _, s := range steps {
		tb.Move(s.move)
		if got := visible(); got != s.want || tb.Cursor() != s.cur {
			t.Errorf("after Move(%d): rows %s cursor %d, want %s cursor %d", s.move, got, tb.Cursor(), s.want, s.cur)
		}
	}
	// The selected row is drawn in reverse video over the whole width.
	out := tb.View(st)
	if !strings.Contains(out, st.Selected.Render(st.Fit("  1 row 1", 20, false))) {
		t.Errorf("selected row not highlighted:\n%q", out)
	}
	// Fewer rows than before: the cursor stays in range.
	tb.SetRows(rows[:2])
	if tb.Cursor() != 0 || strings.Count(tb.View(st), "\n") != 2 {
		t.Errorf("after shrinking: cursor %d, view %q", tb.Cursor(), tb.View(st))
	}
	tb.SetRows(nil)
	if tb.Cursor() != 0 || tb.Len() != 0 {
		t.Errorf("empty table: cursor %d len %d", tb.Cursor(), tb.Len())
	}
}

func TestSparkline(t *testing.T) {
	t.Parallel()
	nan := math.NaN()
	tests := []struct {
		name   string
		values []float64
		width  int
		max    float64
		want   string
	}{
		{"scaled to the largest", []float64{0, 1, 2, 4, 8}, 5, 0, "▁▃▄▅█"},
		{"a little is not nothing", []float64{0, 0.01, 100}, 3, 0, "▁▂█"},
		{"no data is blank", []float64{1, nan, 1}, 3, 0, "█ █"},
		{"short series padded on the left", []float64{1, 1}, 4, 0, "  ██"},
		{"long series keeps the newest", []float64{9, 9, 9, 0, 1}, 2, 0, "▁█"},
		{"fixed scale", []float64{0.5, 1, 2}, 3, 1, "▅██"},
		{"all zero", []float64{0, 0}, 2, 0, "▁▁"},
		{"no width", []float64{1}, 0, 0, ""},
	}
	for _, tt := range tests {
		if got := Sparkline(tt.values, tt.width, tt.max); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestFormats(t *testing.T) {
	st := NewStyles(true)
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	checks := []struct{ got, want string }{
		{Ago(now, now.Add(-500*time.Millisecond)), "now"},
		{Ago(now, now.Add(-42*time.Second)), "42s"},
		{Ago(now, now.Add(-5*time.Minute)), "5m"},
		{Ago(now, now.Add(-47*time.Hour)), "47h"},
		{Ago(now, now.Add(-72*time.Hour)), "3d"},
		{Ago(now, time.Time{}), "-"},
		{AgoMs(now, 0), "-"},
		{Millis(850), "850ms"},
		{Millis(12_400), "12.4s"},
		{Millis(185_000), "3m05s"},
		{Millis(7_800_000), "2h10m"},
		{Millis(0), "-"},
		{Percent(0), "0%"},
		{Percent(0.0714), "7.1%"},
		{Percent(0.333), "33%"},
		{Percent(math.NaN()), "-"},
		{Number(2.0), "2"},
		{Number(0.25), "0.2"},
		{Count(1234567), "1 234 567"},
		{Count(-1234), "-1 234"},
		{Count(12), "12"},
		{Span("5m0s"), "5m"},
		{Span("1h0m0s"), "1h"},
		{Span("1h30m0s"), "1h30m"},
		{Span("90s"), "1m30s"},
		{Span("soon"), "soon"},
		{st.Fit("abcdef", 4, false), "abc…"},
		{st.Fit("ab", 4, true), "  ab"},
		{st.Fit("ab", 4, false), "ab  "},
		{st.Truncate("abc", 0), ""},
	}
	for i, c := range checks {
		if c.got != c.want {
			t.Errorf("check %d: %q, want %q", i, c.got, c.want)
		}
	}
}

// TestNoColorStyles: the NO_COLOR set sets no color at all; the other one
// does.
func TestNoColorStyles(t *testing.T) {
	t.Parallel()
	hasColor := func(st lipgloss.Style) bool {
		_, noFg := st.GetForeground().(lipgloss.NoColor)
		_, noBg := st.GetBackground().(lipgloss.NoColor)
		return !noFg || !noBg
	}
	for _, noColor := range []bool{true, false} {
		s := NewStyles(noColor)
		v := reflect.ValueOf(*s)
		colored := 0
		for i := range v.NumField() {
			if st, ok := v.Field(i).Interface().(lipgloss.Style); ok && hasColor(st) {
				colored++
				if noColor {
					t.Errorf("NO_COLOR style %s sets a color", v.Type().Field(i).Name)
				}
			}
		}
		for _, name := range []string{"failed", "success", "running", "pending", "firing"} {
			if hasColor(s.State(name)) && noColor {
				t.Errorf("NO_COLOR state %s sets a color", name)
			}
		}
		if !noColor && colored == 0 {
			t.Error("the colored styles set no color")
		}
	}
}

func TestTabs(t *testing.T) {
	t.Parallel()
	st := NewStyles(true)
	got := ansi.Strip(Tabs([]string{"Tasks", "Jobs"}, 1, st, 80))
	if got != " 1 Tasks  2 Jobs " {
		t.Errorf("%q", got)
	}
	if w := ansi.StringWidth(Tabs([]string{"Tasks", "Jobs", "Alerts", "System"}, 0, st, 10)); w > 10 {
		t.Errorf("tabs %d cells wide in 10", w)
	}
}

func TestFitLeft(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		w    int
		want string
	}{
		{"etl_extract@20261201T200610Z#1", 13, "…01T200610Z#1"},
		// A wide character at the cut goes whole, with a space to make up
		// the cell: before, it stayed, the ellipsis made the text one cell
		// too wide, and the end was cut off instead ("…据同步_…_生成…"), so
		// that a job's runs looked alike.
		{"任务_数据同步_每日汇总报表_生成-1", 26, "…同步_每日汇总报表_生成-1 "},
		{"ｆｕｌｌｗｉｄｔｈ＿ｊｏｂ-17", 13, "…＿ｊｏｂ-17 "},
		{"short", 8, "short   "},
		{"exactly8", 8, "exactly8"},
		{"anything", 0, ""},
	} {
		st := NewStyles(true)
		if got := st.FitLeft(tt.in, tt.w); got != tt.want || lipgloss.Width(got) != tt.w {
			t.Errorf("FitLeft(%q, %d) = %q, want %q", tt.in, tt.w, got, tt.want)
		}
	}
}

// A family emoji is eight cells to a terminal that counts code points
// (and to Bubble Tea's renderer on it), two to one that counts grapheme
// clusters: text is fitted as the terminal counts, and cut between
// clusters.
func TestFitCountsCellsAsTheTerminalDoes(t *testing.T) {
	t.Parallel()
	const family = "👨\u200d👩\u200d👧\u200d👦"
	for _, tt := range []struct {
		cells                  ansi.Method
		in                     string
		w                      int
		fit, fitRight, fitLeft string
	}{
		{ansi.WcWidth, family + "_job", 10, family + "_…", family + "_…", "…_job     "},
		{ansi.GraphemeWidth, family + "_job", 10, family + "_job    ", "    " + family + "_job", family + "_job    "},
		{ansi.WcWidth, "job_" + family, 6, "job_… ", " job_…", "…     "},
		{ansi.GraphemeWidth, "job_" + family, 6, "job_" + family, "job_" + family, "job_" + family},
		{ansi.WcWidth, "🇯🇵🇫🇷_a", 5, "🇯🇵🇫🇷…", "🇯🇵🇫🇷…", "…🇫🇷_a"},
		{ansi.GraphemeWidth, "🇯🇵🇫🇷_a", 5, "🇯🇵🇫🇷…", "🇯🇵🇫🇷…", "…🇫🇷_a"},
		{ansi.WcWidth, "e\u0301e\u0301e\u0301x", 3, "e\u0301e\u0301…", "e\u0301e\u0301…", "…e\u0301x"},
	} {
		st := NewStyles(true)
		st.Cells = tt.cells
		for _, got := range []struct{ name, got, want string }{
			{"Fit", st.Fit(tt.in, tt.w, false), tt.fit},
			{"Fit right", st.Fit(tt.in, tt.w, true), tt.fitRight},
			{"FitLeft", st.FitLeft(tt.in, tt.w), tt.fitLeft},
		} {
			if got.got != got.want || tt.cells.StringWidth(got.got) != tt.w {
				t.Errorf("%s(%q, %d) counting %v = %q (%d cells), want %q", got.name, tt.in, tt.w, tt.cells, got.got, tt.cells.StringWidth(got.got), got.want)
			}
		}
	}
}

// A run strip is a cell a run, newest last, cut to the newest that fit;
// the statuses differ in shape, not only in color.
func TestRunStrip(t *testing.T) {
	t.Parallel()
	plain := NewStyles(true)
	statuses := []string{"success", "failed", "timeout", "running", "pending", "manual_blocked"}
	if got := ansi.Strip(RunStrip(plain, statuses, nil, 10)); got != "▁█▓▄▂▒" {
		t.Errorf("strip %q", got)
	}
	if got := ansi.Strip(RunStrip(plain, statuses, nil, 3)); got != "▄▂▒" {
		t.Errorf("cut to 3: %q, want the newest 3", got)
	}
	colored := NewStyles(false)
	s := RunStrip(colored, []string{"success", "success", "failed"}, []bool{false, true, false}, 10)
	if ansi.Strip(s) != "▁▁█" || s == ansi.Strip(s) {
		t.Errorf("colored strip %q", s)
	}
	if strings.Contains(RunLegend(plain), "late") || !strings.Contains(RunLegend(colored), "started late") {
		t.Errorf("legends: %q / %q", RunLegend(plain), RunLegend(colored))
	}
}
