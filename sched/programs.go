package sched

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// CheckPrograms looks for every job's program, and its working directory,
// as the scheduler would start them here and now, and returns a
// *FileError with every one that is missing or not executable (nil when
// all are there). It is apollo sched check's, not the scheduler's: a
// program may be installed after the jobs file, and a run that cannot
// start is reported failed with the reason, so loading the file does not
// depend on it. A file with problems of its own returns those instead.
func (f *File) CheckPrograms() error {
	set, issues := f.compile()
	if len(issues) > 0 {
		return fileError(issues)
	}
	c := &checker{f: f}
	for i, s := range f.Jobs {
		j := set.byName[s.Name]
		if j == nil || len(s.Command) == 0 {
			continue // a shell job: /bin/sh is there, what it runs is its own
		}
		if j.dir != "" {
			fi, err := os.Stat(j.dir)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				c.add(j.name, i, "dir", "create it, or correct dir: the job's runs start in it", "%s does not exist", strconv.Quote(j.dir))
				continue
			case err != nil:
				c.add(j.name, i, "dir", "the job's runs start in it: the scheduler's user must be able to enter it", "%v", err)
				continue
			case !fi.IsDir():
				c.add(j.name, i, "dir", "name a directory: the job's runs start in it", "%s is not a directory", strconv.Quote(j.dir))
				continue
			}
		}
		if problem, hint := programProblem(j.argv[0], j.dir, j.env); problem != "" {
			pos := f.where("jobs."+strconv.Itoa(i)+".command.0", "jobs."+strconv.Itoa(i)+".command", "jobs."+strconv.Itoa(i))
			c.issues = append(c.issues, &Issue{File: f.filename, Line: pos.Line, Col: pos.Col, Job: j.name, Field: "command", Message: problem, Hint: hint})
		}
	}
	if len(c.issues) > 0 {
		return fileError(c.issues)
	}
	return nil
}

// notFoundHint is what to do about a program that is not in the PATH.
const notFoundHint = "install it, give its full path, or set the PATH it is found in with env: {PATH: ...}; the scheduler looks in its own PATH, which may differ from this shell's"

// pathProblem says that name is not in the PATH that env sets, or the
// process's own.
func pathProblem(name string, env []string) string {
	if path, set := envPath(env); set {
		return fmt.Sprintf("program %q not found in the PATH of its env (%s)", name, path)
	}
	return fmt.Sprintf("program %q not found in the PATH (%s)", name, os.Getenv("PATH"))
}

// envPath is the PATH that env sets, if it sets one.
func envPath(env []string) (path string, set bool) {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path, set = v, true // the last one is the one the process gets
		}
	}
	return path, set
}
