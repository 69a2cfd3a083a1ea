//go:build unix

package sched

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// checkStateOwner refuses a change to the state file in dir by a user who
// does not own it: the file is replaced whole, and the new one would be
// that user's, mode 0600, which the scheduler's user could not read at
// its next start (an apollo sched lost --drop run as root on
// /var/lib/apollo-sched stopped apollo-sched.service from starting).
func checkStateOwner(f *stateFile) error {
	fi, err := os.Stat(f.path())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) == os.Geteuid() {
		return nil
	}
	return fmt.Errorf("sched: %s belongs to the user with uid %d, not to this one (uid %d): written by this one, "+
		"the scheduler could not read it at its next start; run this as the scheduler's user (sudo -u USER apollo sched lost ...); nothing was changed",
		f.path(), st.Uid, os.Geteuid())
}
