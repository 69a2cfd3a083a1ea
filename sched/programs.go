package sched

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
	return f.checkPrograms(hostProbe{program: programProblem, stat: os.Stat})
}

// hostProbe is what CheckPrograms asks of the host: what keeps a program
// from starting, and what a dir is.
type hostProbe struct {
	program func(name, dir string, env []string) (problem, hint string)
	stat    func(dir string) (fs.FileInfo, error)
}

// checkPrograms is CheckPrograms with the host's answers from probe. It
// asks each distinct question once: a generated file of 250 000 jobs that
// all run the same few programs searched the PATH for each job, 56 s and
// 1.1 GB for one check (TestCheckProgramsAsksOncePerProgram).
func (f *File) checkPrograms(probe hostProbe) error {
	set, issues := f.compile()
	if len(issues) > 0 {
		return fileError(issues)
	}
	c := &checker{f: f}
	programs := map[programKey]hostAnswer{}
	dirs := map[string]hostAnswer{}
	for i, s := range f.Jobs {
		j := set.byName[s.Name]
		if j == nil || len(s.Command) == 0 {
			continue // a shell job: /bin/sh is there, what it runs is its own
		}
		if j.dir != "" {
			d, ok := dirs[j.dir]
			if !ok {
				d = probeDir(probe.stat, j.dir)
				dirs[j.dir] = d
			}
			if d.problem != "" {
				c.add(j.name, i, "dir", d.hint, "%s", d.problem)
				continue
			}
		}
		k := keyOfProgram(j.argv[0], j.dir, j.env)
		a, ok := programs[k]
		if !ok {
			a.problem, a.hint = probe.program(j.argv[0], j.dir, j.env)
			programs[k] = a
		}
		if a.problem != "" {
			pos := f.where("jobs."+strconv.Itoa(i)+".command.0", "jobs."+strconv.Itoa(i)+".command", "jobs."+strconv.Itoa(i))
			c.issues = append(c.issues, &Issue{File: f.filename, Line: pos.Line, Col: pos.Col, Job: j.name, Field: "command", Message: a.problem, Hint: a.hint})
		}
	}
	if len(c.issues) > 0 {
		return fileError(c.issues)
	}
	return nil
}

// programKey is what a program's lookup depends on: a name without a '/'
// is found in the PATH (the env's, or the process's own), whatever the
// dir; a relative path is found from the dir; an absolute one needs
// neither.
type programKey struct {
	name, dir, path string
	pathSet         bool
}

func keyOfProgram(name, dir string, env []string) programKey {
	k := programKey{name: name}
	switch {
	case !strings.Contains(name, "/"):
		k.path, k.pathSet = envPath(env)
	case !filepath.IsAbs(name):
		k.dir = dir
	}
	return k
}

// hostAnswer is what keeps a program or a dir from serving a job, and
// what to do; "" when nothing does.
type hostAnswer struct{ problem, hint string }

// probeDir says what keeps dir from being a job's working directory.
func probeDir(stat func(string) (fs.FileInfo, error), dir string) hostAnswer {
	fi, err := stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return hostAnswer{strconv.Quote(dir) + " does not exist", "create it, or correct dir: the job's runs start in it"}
	case err != nil:
		return hostAnswer{err.Error(), "the job's runs start in it: the scheduler's user must be able to enter it"}
	case !fi.IsDir():
		return hostAnswer{strconv.Quote(dir) + " is not a directory", "name a directory: the job's runs start in it"}
	}
	return hostAnswer{}
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
