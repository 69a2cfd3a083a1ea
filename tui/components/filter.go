package components

import (
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
)

// Filter is the "/" prefix filter of a list: while active it takes the
// keys; enter keeps the text, esc clears it.
type Filter struct {
	input  textinput.Model
	active bool
	what   string // what the prefix is matched against, for the hint
}

// NewFilter returns an inactive, empty filter of the start of what ("job
// name"), which the hint beside the field names while it is typed.
func NewFilter(st *Styles, what string) Filter {
	return Filter{input: NewInput(st, "/", 64), what: what}
}

// NewInput is a one-line field with a steady cursor: a blinking one would
// redraw the screen twice a second for nothing.
func NewInput(st *Styles, prompt string, limit int) textinput.Model {
	in := textinput.New()
	in.Prompt = prompt
	in.CharLimit = limit
	s := in.Styles()
	s.Cursor.Blink = false
	s.Focused.Text = st.Input
	// The field's own defaults are grey and white: the dashboard's styles
	// instead, so that NO_COLOR sets no colour here either.
	s.Focused.Placeholder, s.Blurred.Placeholder = st.Muted, st.Muted
	s.Focused.Prompt, s.Blurred.Prompt = lipgloss.NewStyle(), lipgloss.NewStyle()
	s.Blurred.Text = st.Muted
	if st.NoColor {
		s.Cursor.Color = nil
	}
	in.SetStyles(s)
	return in
}

// Start makes the filter take the keys.
func (f *Filter) Start() tea.Cmd {
	f.active = true
	return f.input.Focus()
}

// Active reports whether the filter has the keys.
func (f *Filter) Active() bool { return f.active }

// Value is the prefix typed so far.
func (f *Filter) Value() string { return f.input.Value() }

// Clear empties the filter.
func (f *Filter) Clear() { f.input.SetValue("") }

// Update handles a key while active. done is set when the user left the
// field (enter or esc); the value then is the final filter.
func (f *Filter) Update(msg tea.KeyPressMsg) (done bool, cmd tea.Cmd) {
	switch msg.String() {
	case "enter":
		f.active = false
		f.input.Blur()
		return true, nil
	case "esc":
		f.active = false
		f.input.Blur()
		f.input.SetValue("")
		return true, nil
	}
	f.input, cmd = f.input.Update(msg)
	return false, cmd
}

// View is the field while typing, with a hint, or a reminder of the
// filter in force, or nothing; one line cut to width.
func (f *Filter) View(st *Styles, width int) string {
	switch {
	case f.active:
		return st.Truncate(f.input.View()+st.Muted.Render("  filter by the start of a "+f.what+" · enter keeps it · esc clears it"), width)
	case f.input.Value() != "":
		return st.Truncate(st.Muted.Render("filter: ")+st.Bold.Render(f.input.Value())+st.Muted.Render("  (/ to change, esc to clear)"), width)
	}
	return ""
}
