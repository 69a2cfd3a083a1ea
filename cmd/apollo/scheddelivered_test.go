package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// A run of the in-process scheduler that ended, and whose end the bus
// has, is not reported lost after kill -9: the job list of the restarted
// scheduler does not show it failed. Before, the run left the
// scheduler's state file only at its next write, the next tick of a job
// (a year away here): a kill -9 before it had the restart settle the run
// as lost (logged so, and sent as a duplicate the bus ignored), and GET
// /api/v1/jobs showed its last run failed while the bus had its success.
// It is one way TestPausesSurviveKill failed under load: the paused job
// had run once before its pause, and that run came back failed after the
// kill.
func TestADeliveredRunIsNotSettledAfterKill(t *testing.T) {
	jobs := "jobs:\n  - name: once\n    schedule: \"@yearly\"\n    command: [\"true\"]\n"
	eachMode(t, deployOptions{jobs: jobs}, func(t *testing.T, d *deployment, h *hook) {
		var run struct{ TaskID string }
		d.do("", "POST", "/api/v1/jobs/once/run", "", &run, 200)
		eventually(t, 30*time.Second, "the run "+run.TaskID+" stored as success", func() bool {
			// 404 until the run's first event is in.
			req, _ := http.NewRequest("GET", "http://"+d.api.addr+"/api/v1/tasks/"+url.PathEscape(run.TaskID), nil)
			req.Header.Set("Authorization", "Bearer "+d.tokens[""])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var tk apollo.Task
			return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&tk) == nil && tk.Status == apollo.StatusSuccess
		})
		// The bus has the run's end: the scheduler's answer (the agent
		// client's Flush) follows, and with it the run leaves the file.
		state := filepath.Join(d.dir, "data", "sched", "sched-state.json")
		eventually(t, 30*time.Second, "the delivered run out of "+state, func() bool {
			b, err := os.ReadFile(state)
			return err == nil && !strings.Contains(string(b), run.TaskID)
		})
		d.crash()
		var l struct{ Jobs []apollo.ScheduledJob }
		d.do("", "GET", "/api/v1/jobs", "", &l, 200)
		for _, j := range l.Jobs {
			if j.Name == "once" && j.LastTaskID == run.TaskID && j.LastStatus != apollo.StatusSuccess {
				t.Errorf("after kill -9 the job list shows the run %s %s; the bus has it as success", j.LastTaskID, j.LastStatus)
			}
		}
	})
}
