package sched_test

import (
	"errors"
	"fmt"

	"github.com/apollo-11/apollo/sched"
)

// Parse reports every problem of a jobs file at once, each with its line
// and column, job and field.
func ExampleParse() {
	src := `
jobs:
  - name: backup
    schedule: "30 25 * * *"
    command: ["/usr/local/bin/backup"]
    timeout: 30 minutes
  - name: report
    after: [backup, mail]
    shell: "make report"
`
	_, err := sched.Parse("jobs.yaml", []byte(src))
	var fe *sched.FileError
	if errors.As(err, &fe) {
		for _, issue := range fe.Issues {
			fmt.Println(issue)
		}
	}
	// Output:
	// jobs.yaml:4:15: job "backup": schedule: "30 25 * * *": hour field "25": "25" is not a number from 0 to 23 (see docs/scheduler.md for the forms a schedule takes)
	// jobs.yaml:6:14: job "backup": timeout: "30 minutes" is not a duration (write a number with a unit, like 30s, 10m or 1h30m, or 0)
	// jobs.yaml:8:21: job "report": after.1: unknown upstream "mail" (name a job defined in this file)
}
