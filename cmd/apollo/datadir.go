package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/internal/atomicfile"
	"github.com/apollo-11/apollo/notify"
)

// makeDataDir creates the data directory and returns the outermost
// directory it had to create ("" when dir was there already): a start
// that fails removes that one again if nothing was kept in it
// (removeUnusedDataDir), so that a mistyped flag leaves no empty
// directories behind.
func makeDataDir(dir string) (created string, err error) {
	for p := filepath.Clean(dir); ; {
		_, err := os.Lstat(p)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
		created = p
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		p = parent
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return created, nil
}

// removeUnusedDataDir removes created (from makeDataDir) after a failed
// start, unless it holds something worth keeping: a file with data other
// than the write-ahead log's empty segments (logEmpty: no record was
// appended), or anything that is not a plain file or directory. A
// directory the start did not create is never touched.
func removeUnusedDataDir(created string, logEmpty bool) error {
	if created == "" {
		return nil
	}
	keep := errors.New("keep")
	err := filepath.WalkDir(created, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return keep
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Size() == 0 || logEmpty && strings.HasSuffix(path, ".wal") && filepath.Base(filepath.Dir(path)) == "wal" {
			return nil
		}
		return keep
	})
	switch {
	case errors.Is(err, keep):
		return nil
	case err != nil:
		return err
	}
	return os.RemoveAll(created)
}

// warnServerFiles tells a bus started on the data directory of an
// all-in-one server (the way from one process to three, docs/deploy.md)
// about the writes made through that server's API that it does not read:
// the alert processes keep rules, silences, acknowledgements and owed
// notifications in Redis, and the server's files are left as they are. Without it the tenants'
// rules and silences were gone without a word.
func warnServerFiles(dir string, log *slog.Logger) {
	ctx := context.Background()
	rulesPath := filepath.Join(dir, "rules")
	if saved, err := alert.NewFileRules(rulesPath).Load(ctx); err == nil {
		n := 0
		for _, src := range saved {
			if len(strings.TrimSpace(string(src))) > 0 {
				n++
			}
		}
		if n > 0 {
			log.Warn(fmt.Sprintf("%s holds the rules of %d tenants set through the API of an all-in-one server; "+
				"apollo bus does not read it, and the alert processes run none of them: apply each tenant's with "+
				"apollo rules apply FILE (with a token of that tenant), then move the directory away", rulesPath, n))
		}
	}
	outboxPath := filepath.Join(dir, outboxFile)
	if owed, err := notify.OwedIn(outboxPath); err == nil && len(owed) > 0 {
		log.Warn(fmt.Sprintf("%s holds %d notifications an all-in-one server still owed its channels; "+
			"apollo bus does not send them, and the alert processes do not know them: read them there "+
			"(one JSON line each), tell whom they were for, then move the file away", outboxPath, len(owed)))
	}
	statePath := filepath.Join(dir, "alerts.json")
	if st, err := alert.NewFileState(statePath).Load(ctx); err == nil {
		acked := 0
		for _, a := range st.Alerts {
			if a.AckedBy != "" {
				acked++
			}
		}
		if len(st.Silences) > 0 || acked > 0 {
			log.Warn(fmt.Sprintf("%s holds %d silences and %d acknowledged alerts of an all-in-one server; "+
				"apollo bus does not read it, and the alert processes do not know them: make the silences again "+
				"with apollo silence add, acknowledge the alerts again when they fire, then move the file away", statePath, len(st.Silences), acked))
		}
	}
}

// removeTempFiles removes the temporary files of the files replaced whole
// (alerts.json, outbox.jsonl, each tenant's in rules/ and expectations/,
// the scheduler's state in sched/) that a process killed in the middle of a
// replacement left in the data directory dir. Only the holder of the
// log's lock may call it.
func removeTempFiles(dir string, log *slog.Logger) {
	var removed []string
	for _, d := range []string{dir, filepath.Join(dir, "sched"), filepath.Join(dir, "rules"), filepath.Join(dir, "expectations")} {
		r, err := atomicfile.RemoveLeftovers(d)
		if err != nil {
			log.Warn("could not remove the temporary files a killed process left; remove them by hand", "dir", d, "err", err)
		}
		removed = append(removed, r...)
	}
	if len(removed) > 0 {
		log.Info(fmt.Sprintf("removed %d temporary files a process killed while replacing a file left", len(removed)), "files", removed)
	}
}

// warnOpenDataDir tells when any local user can read or enter the data
// directory dir or anything in it: a directory made by a release that
// made it 0755 and its log, snapshots and archive 0644, or restored under
// a permissive umask. What the server creates is its user's alone, but it
// leaves existing modes as they are, and every tenant's runs were open to
// every local user without a word. The group is left out: the systemd
// units give the directory to the service's group (StateDirectoryMode=0750)
// and make it so again at every start.
func warnOpenDataDir(dir string, log *slog.Logger) {
	var open []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.Mode().Perm()&0o007 != 0 {
			open = append(open, fmt.Sprintf("%s (%v)", path, fi.Mode().Perm()))
		}
		return nil
	})
	if len(open) == 0 {
		return
	}
	const shown = 5
	log.Warn(fmt.Sprintf("every local user can read the data directory: %d paths in it have modes for others, "+
		"and it holds every tenant's runs; close it with: chmod -R o= %s", len(open), dir),
		"paths", open[:min(shown, len(open))], "more", max(0, len(open)-shown))
}

// permissionHint adds what to do to a start that a file's permissions
// stopped: most often a data directory restored or made by another user
// (root) than the one the server runs as.
func permissionHint(err error, data string) error {
	if !errors.Is(err, fs.ErrPermission) {
		return err
	}
	who := "this user"
	if u, uerr := user.Current(); uerr == nil {
		who = "user " + u.Username
	}
	return fmt.Errorf("%w (%s cannot use a file in the data directory %s: it belongs to another user, a restore made as root perhaps; chown -R it to the user apollo runs as, or run apollo as its owner)", err, who, data)
}

// unusableDir is the hint for a directory of the data directory that
// could not be opened: move it away, when it is not one (a file in its
// place); nothing for a permission error, which permissionHint answers
// with chown: moving a restored archive or audit log away for it would
// lose what it holds.
func unusableDir(err error, dir string) string {
	if errors.Is(err, fs.ErrPermission) {
		return ""
	}
	return fmt.Sprintf(" (%s must be a directory this user can write: move it away)", dir)
}
