package components

import (
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// Styles are every style the dashboard draws with. The NO_COLOR set uses
// only bold, faint, underline and reverse: the selection and the emphasis
// stay visible, and every state is also spelled out in words, so nothing
// depends on color alone.
type Styles struct {
	NoColor bool
	// Cells is how the terminal counts the cells of text, which every
	// width on the screen is measured with. Bubble Tea lays the screen
	// out code point by code point (wcwidth), and so do most terminals,
	// until the terminal says it counts grapheme clusters (mode 2027):
	// text measured by clusters on such a terminal, a family emoji two
	// cells instead of eight, pushed the rest of its row out of line.
	Cells ansi.Method

	App       lipgloss.Style // the name in the header
	TabActive lipgloss.Style
	TabIdle   lipgloss.Style
	Head      lipgloss.Style // table column titles
	Selected  lipgloss.Style // the selected row
	Muted     lipgloss.Style
	Bold      lipgloss.Style
	Good      lipgloss.Style
	Warn      lipgloss.Style
	Bad       lipgloss.Style
	Info      lipgloss.Style
	Key       lipgloss.Style // a key in the help
	Input     lipgloss.Style // a field being edited
}

// NewStyles returns the colored styles, or with noColor the ones that use
// text attributes only.
func NewStyles(noColor bool) *Styles {
	s := &Styles{NoColor: noColor}
	plain := lipgloss.NewStyle()
	fg := func(c string) lipgloss.Style {
		if noColor {
			return plain
		}
		return plain.Foreground(lipgloss.Color(c))
	}
	s.App = fg("6").Bold(true)
	s.TabActive = plain.Bold(true).Reverse(true).Padding(0, 1)
	s.TabIdle = plain.Padding(0, 1)
	s.Head = plain.Bold(true).Underline(true)
	s.Selected = plain.Reverse(true)
	s.Muted = plain.Faint(true)
	s.Bold = plain.Bold(true)
	s.Good = fg("2")
	s.Warn = fg("3")
	s.Bad = fg("1").Bold(true)
	s.Info = fg("4")
	s.Key = fg("6").Bold(true)
	s.Input = plain.Underline(true)
	if noColor {
		s.Good = plain
		s.Warn = plain.Bold(true)
		s.Bad = plain.Bold(true)
		s.Info = plain
	}
	return s
}

// State returns the style of a task status, an alert state or a severity,
// by its wire name.
func (s *Styles) State(name string) lipgloss.Style {
	switch name {
	case "success", "resolved", "live":
		return s.Good
	case "failed", "timeout", "firing", "critical", "refused":
		return s.Bad
	case "pending", "manual_blocked", "warning", "reconnecting", "connecting":
		return s.Warn
	case "running", "info":
		return s.Info
	}
	return lipgloss.NewStyle()
}
