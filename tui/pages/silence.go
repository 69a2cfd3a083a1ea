package pages

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/tui/components"
)

// formLines is the height of the silence form.
const formLines = 5

var formKeyMap = struct{ Next, Submit, Cancel key.Binding }{
	Next:   key.NewBinding(key.WithKeys("tab", "shift+tab", "down", "up"), key.WithHelp("tab", "next field")),
	Submit: key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "silence")),
	Cancel: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel")),
}

func formKeys() []key.Binding {
	return []key.Binding{formKeyMap.Next, formKeyMap.Submit, formKeyMap.Cancel}
}

// silenceForm asks for how long to silence an alert and why.
type silenceForm struct {
	alert   apollo.Alert
	st      *components.Styles
	dur     textinput.Model
	comment textinput.Model
	onDur   bool // the duration field has the keys
	err     string
	width   int
}

func newSilenceForm(a apollo.Alert, st *components.Styles) *silenceForm {
	f := &silenceForm{alert: a, st: st, onDur: true}
	f.dur = components.NewInput(st, "for:     ", 16)
	f.dur.Placeholder = "1h"
	f.dur.SetValue("1h")
	f.dur.CursorEnd()
	f.comment = components.NewInput(st, "comment: ", 200)
	f.comment.Placeholder = "why, for the others on call"
	return f
}

func (f *silenceForm) setWidth(w int) {
	f.width = w
	f.dur.SetWidth(max(w-len(f.dur.Prompt)-1, 4))
	f.comment.SetWidth(max(w-len(f.comment.Prompt)-1, 4))
}

func (f *silenceForm) focus() tea.Cmd {
	if f.onDur {
		f.comment.Blur()
		return f.dur.Focus()
	}
	f.dur.Blur()
	return f.comment.Focus()
}

// update handles a key: submit is set when the form is complete, cancel
// when the user left it.
func (f *silenceForm) update(msg tea.KeyPressMsg) (submit *SilenceAlert, cancel bool, cmd tea.Cmd) {
	switch {
	case key.Matches(msg, formKeyMap.Cancel):
		return nil, true, nil
	case key.Matches(msg, formKeyMap.Next):
		f.onDur = !f.onDur
		return nil, false, f.focus()
	case key.Matches(msg, formKeyMap.Submit):
		if f.onDur {
			f.onDur = false
			return nil, false, f.focus()
		}
		d, err := ParseSilenceDuration(f.dur.Value())
		if err != nil {
			f.err = err.Error()
			f.onDur = true
			return nil, false, f.focus()
		}
		if strings.TrimSpace(f.comment.Value()) == "" {
			f.err = "write a comment: the others on call will read it"
			return nil, false, nil
		}
		f.err = ""
		return &SilenceAlert{Alert: f.alert, For: d, Comment: strings.TrimSpace(f.comment.Value())}, false, nil
	}
	if f.onDur {
		f.dur, cmd = f.dur.Update(msg)
	} else {
		f.comment, cmd = f.comment.Update(msg)
	}
	return nil, false, cmd
}

func (f *silenceForm) view() string {
	what := " (enter to confirm, esc to cancel)"
	if f.alert.Group != "" {
		what = " for " + components.EscapeLine(f.alert.Group, f.width) + what
	}
	title := f.st.Bold.Render("Silence "+components.EscapeLine(f.alert.Rule, f.width)) + f.st.Muted.Render(what)
	status := f.st.Muted.Render("durations like 30m, 4h, 1d")
	if f.err != "" {
		status = f.st.Bad.Render(f.err)
	}
	return strings.Join([]string{"", f.st.Truncate(title, f.width), f.dur.View(), f.comment.View(),
		f.st.Truncate(status, f.width)}, "\n")
}

// ParseSilenceDuration reads "90m", "4h", "1h30m" or "2d" (days, which
// time.ParseDuration does not know). It must be positive and at most a
// year.
func ParseSilenceDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		n, err = strconv.Atoi(days)
		d = time.Duration(min(n, 367)) * 24 * time.Hour // no overflow
	} else {
		d, err = time.ParseDuration(s)
	}
	switch {
	case err != nil || s == "":
		return 0, errors.New("not a duration: write 30m, 4h or 1d")
	case d <= 0:
		return 0, errors.New("the duration must be positive")
	case d > 366*24*time.Hour:
		return 0, errors.New("at most a year")
	}
	return d, nil
}
