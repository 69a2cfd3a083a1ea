package pages

import (
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/apollo-11/apollo/tui/components"
)

// listKeys move through a list; every list page uses them.
var listKeys = struct {
	Up, Down, Top, Bottom, PageUp, PageDown, Filter, Back key.Binding
}{
	Up:       key.NewBinding(key.WithKeys("k", "up"), key.WithHelp("k/↑", "up")),
	Down:     key.NewBinding(key.WithKeys("j", "down"), key.WithHelp("j/↓", "down")),
	Top:      key.NewBinding(key.WithKeys("g", "home"), key.WithHelp("g", "top")),
	Bottom:   key.NewBinding(key.WithKeys("G", "end"), key.WithHelp("G", "bottom")),
	PageUp:   key.NewBinding(key.WithKeys("pgup", "ctrl+u"), key.WithHelp("pgup", "page up")),
	PageDown: key.NewBinding(key.WithKeys("pgdown", "ctrl+d"), key.WithHelp("pgdn", "page down")),
	Filter:   key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
	Back:     key.NewBinding(key.WithKeys("esc", "backspace"), key.WithHelp("esc", "back / clear")),
}

// moveHelp stands for every movement key in the short help.
var moveHelp = key.NewBinding(key.WithKeys("j", "k"), key.WithHelp("j/k", "move"))

// withMoves puts the movement keys before a list page's own: all of them
// in the full help, one line for them in the short help.
func withMoves(full bool, own ...key.Binding) []key.Binding {
	if !full {
		return append([]key.Binding{moveHelp}, own...)
	}
	return append([]key.Binding{listKeys.Down, listKeys.Up, listKeys.Top, listKeys.Bottom, listKeys.PageDown, listKeys.PageUp}, own...)
}

// navigate moves t for a movement key and reports whether it was one.
func navigate(t *components.Table, msg tea.KeyPressMsg) bool {
	switch {
	case key.Matches(msg, listKeys.Down):
		t.Move(1)
	case key.Matches(msg, listKeys.Up):
		t.Move(-1)
	case key.Matches(msg, listKeys.Top):
		t.SetCursor(0)
	case key.Matches(msg, listKeys.Bottom):
		t.SetCursor(t.Len() - 1)
	case key.Matches(msg, listKeys.PageDown):
		t.Move(t.Page())
	case key.Matches(msg, listKeys.PageUp):
		t.Move(-t.Page())
	default:
		return false
	}
	return true
}

// filterLines is the lines a list page's prefix filter takes above the
// list: none, or one while it is typed or holds a prefix.
func filterLines(f *components.Filter) int {
	if f.Active() || f.Value() != "" {
		return 1
	}
	return 0
}

// filterKeys handles the keys of a list page's prefix filter: every key
// while it is typed, "/" to start it, esc to clear it. It reports whether
// it took the key; changed (the page's refilter and resize) follows each.
func filterKeys(f *components.Filter, msg tea.KeyPressMsg, changed func()) (tea.Cmd, bool) {
	var cmd tea.Cmd
	switch {
	case f.Active():
		_, cmd = f.Update(msg)
	case key.Matches(msg, listKeys.Filter):
		cmd = f.Start()
	case key.Matches(msg, listKeys.Back):
		f.Clear()
	default:
		return nil, false
	}
	changed()
	return cmd, true
}
