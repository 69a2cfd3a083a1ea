package tui

import "charm.land/bubbles/v2/key"

// keys are the dashboard's own keys; each page adds its own.
var keys = struct {
	Quit, Next, Prev, Jump, Help, Reconnect key.Binding
}{
	Quit:      key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
	Next:      key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next tab")),
	Prev:      key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "previous tab")),
	Jump:      key.NewBinding(key.WithKeys("1", "2", "3", "4", "5"), key.WithHelp("1-5", "go to tab")),
	Help:      key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
	Reconnect: key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reconnect now")),
}

// ctrlC quits even while a field has the keys.
var ctrlC = key.NewBinding(key.WithKeys("ctrl+c"))

// ctrlCHelp is the one key of ours that works while a field has the keys.
var ctrlCHelp = key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "quit"))

// helpKeys implements help.KeyMap over the page's keys and ours. While a
// field has the keys (typing), ours do not work and are not offered: the
// page's keys for the field are (tab moves between a form's fields then,
// not between tabs).
type helpKeys struct {
	page   []key.Binding
	typing bool
}

func (h helpKeys) ShortHelp() []key.Binding {
	if h.typing {
		return append(h.page, ctrlCHelp)
	}
	return append([]key.Binding{keys.Help, keys.Quit, keys.Next}, h.page...)
}

func (h helpKeys) FullHelp() [][]key.Binding {
	return [][]key.Binding{h.page, {keys.Next, keys.Prev, keys.Jump, keys.Reconnect, keys.Help, keys.Quit}}
}
