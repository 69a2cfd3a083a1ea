//go:build !unix

package sched

import (
	"errors"

	apollo "github.com/apollo-11/apollo"
)

// execRunner needs process groups; on other systems every run fails to
// start, and is reported failed with that reason.
type execRunner struct{ clock apollo.Clock }

func (execRunner) start(*runSpec) (proc, error) {
	return nil, errors.New("sched: running jobs needs a Unix system (process groups)")
}

// programProblem finds nothing to say: no job runs here at all, and each
// run says so.
func programProblem(name, dir string, env []string) (problem, hint string) { return "", "" }
