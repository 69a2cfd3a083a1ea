package tui

import (
	"context"
	"encoding/json"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/tui/components"
	"github.com/apollo-11/apollo/tui/pages"
)

// seriesWindow and seriesStep shape the selected job's sparklines: the
// last hour, a bar a minute.
const (
	seriesWindow = time.Hour
	seriesStep   = time.Minute
)

// Results of the REST calls.
type (
	refreshMsg struct{}
	healthMsg  struct {
		board apiclient.HealthBoard
		err   error
	}
	metricsMsg struct {
		page apiclient.MetricsPage
		err  error
	}
	seriesMsg struct {
		name   string
		points []apiclient.JobRow
		err    error
	}
	taskMsg struct {
		id   string
		task apollo.Task
		err  error
	}
	alertsMsg struct {
		listing int // Alerts.BeginListing
		alerts  []apollo.Alert
		total   int // the alerts the server has: it lists at most 10 000
		err     error
	}
	silencesMsg struct {
		silences []apollo.Silence
		err      error
	}
	systemMsg struct {
		stats json.RawMessage
		err   error
	}
	ackedMsg struct {
		alert apollo.Alert
		now   apollo.Alert // as the answer has it: acknowledged
		err   error
	}
	silencedMsg struct {
		req pages.SilenceAlert
		err error
	}
)

// tick schedules the next refresh of the REST data.
func (m *Model) tick() tea.Cmd {
	if m.opts.Refresh < 0 {
		return nil
	}
	clock, d := m.opts.Clock, m.opts.Refresh
	return m.run.cmd(func(ctx context.Context) tea.Msg {
		t := clock.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C():
			return refreshMsg{}
		case <-ctx.Done():
			return nil
		}
	})
}

// callTimeout bounds one REST call.
const callTimeout = 15 * time.Second

// call runs one REST call as a tracked command.
func (m *Model) call(f func(ctx context.Context, api *apiclient.Client) tea.Msg) tea.Cmd {
	api := m.api
	return m.run.cmd(func(ctx context.Context) tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		return f(ctx, api)
	})
}

func (m *Model) fetchHealth() tea.Cmd {
	if m.healthGone {
		return nil
	}
	return m.call(func(ctx context.Context, api *apiclient.Client) tea.Msg {
		b, err := api.JobsHealth(ctx, apiclient.HealthQuery{})
		return healthMsg{board: b, err: err}
	})
}

// fetchJobs reads every job's metrics for the Jobs tab, while it shows.
// The listing costs the server and the dashboard in proportion to the
// jobs: at 100 000 jobs, 11 pages and 23 MB every 10 s, about a twentieth
// of a core of the server's and a tenth of the terminal's, for a tab
// nobody looked at. The tab reads it at once when it opens (afterTab).
func (m *Model) fetchJobs() tea.Cmd {
	if m.tab != tabJobs {
		return nil
	}
	return m.fetchMetrics()
}

func (m *Model) fetchMetrics() tea.Cmd {
	window := m.opts.MetricsWindow
	return m.call(func(ctx context.Context, api *apiclient.Client) tea.Msg {
		p, err := api.Metrics(ctx, window, "")
		return metricsMsg{page: p, err: err}
	})
}

func (m *Model) fetchSeries(name string) tea.Cmd {
	m.seriesFor = name
	if name == "" {
		return nil
	}
	return m.call(func(ctx context.Context, api *apiclient.Client) tea.Msg {
		s, err := api.JobSeries(ctx, name, seriesWindow, seriesStep)
		return seriesMsg{name: name, points: s.Points, err: err}
	})
}

// fetchSeriesIfMoved asks for the selected job's series when the
// selection moved to another job.
func (m *Model) fetchSeriesIfMoved() tea.Cmd {
	if name := m.jobs.Selected(); name != m.seriesFor {
		return m.fetchSeries(name)
	}
	return nil
}

func (m *Model) fetchAlerts() tea.Cmd {
	if m.alertsGone {
		return nil
	}
	n := m.alerts.BeginListing()
	return m.call(func(ctx context.Context, api *apiclient.Client) tea.Msg {
		list, err := api.Alerts(ctx, "")
		views := list.Alerts
		var as []apollo.Alert
		for i := range views {
			as = append(as, views[i].Alert)
		}
		return alertsMsg{listing: n, alerts: as, total: list.Total, err: err}
	})
}

func (m *Model) fetchSilences() tea.Cmd {
	if m.silencesGone {
		return nil
	}
	return m.call(func(ctx context.Context, api *apiclient.Client) tea.Msg {
		ss, err := api.Silences(ctx)
		return silencesMsg{silences: ss, err: err}
	})
}

func (m *Model) fetchSystem() tea.Cmd {
	return m.call(func(ctx context.Context, api *apiclient.Client) tea.Msg {
		raw, err := api.System(ctx)
		return systemMsg{stats: raw, err: err}
	})
}

// updateData handles the REST results; ok is false for other messages.
func (m *Model) updateData(msg tea.Msg) (cmd tea.Cmd, ok bool) {
	switch msg := msg.(type) {
	case refreshMsg:
		cmds := []tea.Cmd{m.tick(), m.fetchHealth(), m.fetchJobs(), m.fetchSeries(m.jobs.Selected()), m.fetchAlerts(), m.fetchSilences()}
		// The stream sends the System tab the system stats every few
		// seconds; ask the API only when it has not (a server with them
		// switched off).
		if m.tab == tabSystem && m.now().Sub(m.lastSystem) > 2*m.opts.Refresh {
			cmds = append(cmds, m.fetchSystem())
		}
		m.paintTasks()
		return tea.Batch(cmds...), true
	case healthMsg:
		m.healthGone = notAvailable(msg.err)
		m.health.SetBoard(msg.board, msg.err)
		return nil, true
	case metricsMsg:
		m.jobs.SetJobs(msg.page.Window, msg.page.Total, msg.page.Jobs, msg.err)
		if name := m.openJob; name != "" && msg.err == nil {
			m.openJob = ""
			if !m.jobs.Select(name) {
				m.say(false, name+" had no run in the last "+components.Span(m.opts.MetricsWindow.String())+": the Jobs tab lists the jobs that ran in it.")
			}
		}
		return m.fetchSeriesIfMoved(), true
	case seriesMsg:
		if msg.name == m.seriesFor {
			m.jobs.SetSeries(msg.name, msg.points, msg.err)
		}
		return nil, true
	case taskMsg:
		m.tasks.ShowTask(msg.task, msg.err)
		return nil, true
	case alertsMsg:
		m.alertsGone = notAvailable(msg.err)
		m.alerts.SetListed(msg.listing, msg.alerts, msg.total, msg.err)
		m.resize()
		return nil, true
	case silencesMsg:
		m.silencesGone = notAvailable(msg.err)
		m.alerts.SetSilences(msg.silences, msg.err)
		return nil, true
	case systemMsg:
		if msg.err != nil {
			if !m.system.Loaded() {
				m.system.SetError(msg.err)
			}
		} else if !m.system.Loaded() || m.now().Sub(m.lastSystem) > 2*m.opts.Refresh {
			m.system.SetStats(msg.stats, m.now())
		}
		return nil, true
	case ackedMsg:
		if msg.err != nil {
			m.ackResult(msg.alert, false, apollo.ErrorMessage(msg.err))
			return nil, true
		}
		m.ackResult(msg.alert, true, "")
		// No stream tells the change: the answer does. Without a state it
		// says the alert resolved and was forgotten meanwhile.
		if msg.now.ID == msg.alert.ID && msg.now.State != "" {
			m.alerts.Upsert(msg.now)
		}
		return nil, true
	case silencedMsg:
		if msg.err != nil {
			if notAvailable(msg.err) {
				m.alerts.FormError(errNoSilences)
			} else {
				m.alerts.FormError(msg.err)
			}
			return nil, true
		}
		m.alerts.CloseForm()
		m.say(false, "Silenced "+msg.req.Alert.Rule+" ("+msg.req.Alert.Group+") for "+msg.req.For.String()+".")
		return m.fetchSilences(), true
	}
	return nil, false
}

var errNoSilences = &apollo.Error{Code: apollo.ENOTFOUND, Message: "silences are not available on this server"}

// notAvailable reports whether err says the server has no such route.
func notAvailable(err error) bool { return apollo.ErrorCode(err) == apollo.ENOTFOUND }

// updateIntent acts on what a page asked for.
func (m *Model) updateIntent(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case pages.OpenTask:
		id := msg.ID
		return m.call(func(ctx context.Context, api *apiclient.Client) tea.Msg {
			t, err := api.Task(ctx, id)
			t.TaskID = id
			return taskMsg{id: id, task: t, err: err}
		})
	case pages.OpenJob:
		// The jobs are read while their tab shows (fetchJobs): selected
		// in what the tab holds, and again in the answer.
		m.setTab(tabJobs)
		m.jobs.Select(msg.Name)
		m.openJob = msg.Name
		return tea.Batch(m.fetchMetrics(), m.fetchSeriesIfMoved())
	case pages.FilterTasks:
		if msg.Prefix == m.prefix {
			return nil
		}
		// A new filter starts from a new snapshot: the cursor belongs to
		// the old one.
		m.prefix, m.conn.cursor = msg.Prefix, ""
		if m.conn.state == stateLive {
			return m.subscribe()
		}
	case pages.AckAlert:
		a := msg.Alert
		if m.conn.state == stateLive {
			if m.conn.acks == nil {
				m.conn.acks = map[string]apollo.Alert{}
			}
			m.conn.acks[a.ID] = a
			m.say(false, "Acknowledging "+a.Rule+" ("+a.Group+")…")
			return m.send(ackJSON(a.ID))
		}
		// No stream: the API does the same.
		return m.call(func(ctx context.Context, api *apiclient.Client) tea.Msg {
			now, err := api.Ack(ctx, a.ID)
			return ackedMsg{alert: a, now: now.Alert, err: err}
		})
	case pages.SilenceAlert:
		start := m.now()
		req := apiclient.SilenceRequest{Rule: msg.Alert.Rule, Group: msg.Alert.Group, Labels: msg.Alert.Labels,
			StartsAt: start, EndsAt: start.Add(msg.For), Comment: msg.Comment}
		sa := msg
		return m.call(func(ctx context.Context, api *apiclient.Client) tea.Msg {
			_, err := api.AddSilence(ctx, req)
			return silencedMsg{req: sa, err: err}
		})
	}
	return nil
}
