package httpapi

import (
	"net/http"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// Scheduler is what the job routes need of the scheduler running in this
// process. Its jobs belong to one tenant (Options.SchedulerTenant).
type Scheduler interface {
	JobList() []apollo.ScheduledJob
	Trigger(name string) (taskID string, err error)
	Pause(name string) error
	Resume(name string) error
}

func (s *Server) scheduler(p *Principal) (Scheduler, error) {
	if s.opts.Scheduler == nil || p.Tenant != s.opts.SchedulerTenant {
		return nil, &apollo.Error{Code: apollo.ENOTFOUND, Message: "no scheduler runs in this process for this tenant",
			Hint: "start the server (or the bus) with --jobs jobs.yaml to run the jobs here; a separate apollo sched has no API: pause its jobs with paused: true in its jobs file and SIGHUP"}
	}
	return s.opts.Scheduler, nil
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, p *Principal) error {
	sc, err := s.scheduler(p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiclient.JobList{Jobs: sc.JobList()})
	return nil
}

// jobAction runs, pauses or resumes a job, and audits it.
func (s *Server) jobAction(action string) handler {
	return func(w http.ResponseWriter, r *http.Request, p *Principal) error {
		sc, err := s.scheduler(p)
		if err != nil {
			return err
		}
		name, err := boundedPath(r, "name", "name", apollo.MaxNameBytes)
		if err != nil {
			return err
		}
		ans := apiclient.JobAction{Job: name}
		switch action {
		case "run":
			id, err := sc.Trigger(name)
			if err != nil {
				return err
			}
			ans.TaskID = id
		case "pause":
			err = sc.Pause(name)
		case "resume":
			err = sc.Resume(name)
		}
		if err != nil {
			return err
		}
		s.audit(r, p, "job."+action, name, "")
		writeJSON(w, http.StatusOK, ans)
		return nil
	}
}
