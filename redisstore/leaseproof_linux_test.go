package redisstore

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// processAlive on real processes: this one lives; a child that exited
// and was reaped is gone; one that exited and was not reaped (a zombie,
// as a kill -9 leaves until the parent waits) is dead too; a live PID
// with another start time is another process.
func TestProcessAlive(t *testing.T) {
	self, ok := selfProof()
	if !ok {
		t.Fatal("no proof of this process")
	}
	if !processAlive(self.pid, self.start) {
		t.Fatal("this process is not alive")
	}
	if processAlive(self.pid, self.start+1) {
		t.Fatal("this PID with another start time is alive")
	}
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	pid := zombie.Process.Pid
	_, start, _, ok := readStat(strconv.Itoa(pid))
	if !ok {
		t.Fatal("no stat of the child")
	}
	deadline := time.Now().Add(testwait.Timeout(t))
	for processAlive(pid, start) { // exits on its own; not reaped yet
		if time.Now().After(deadline) {
			t.Fatal("a zombie is alive")
		}
		time.Sleep(time.Millisecond) // polling a state with a deadline
	}
	if _, _, state, ok := readStat(strconv.Itoa(pid)); !ok || state != 'Z' {
		t.Fatalf("the child, exited and not reaped, is in state %c (%v): want a zombie", state, ok)
	}
	zombie.Wait()
	if processAlive(pid, start) {
		t.Fatal("a reaped process is alive")
	}
}

// A lease whose holder this process proves dead is taken at once; one
// whose holder lives, or that it cannot judge, is not.
func TestLeaseTakenFromTheDead(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	self, _ := selfProof()
	dead := exec.Command("true")
	dead.Run()
	deadProof := self
	deadProof.pid = dead.Process.Pid
	parent := self
	parent.pid = os.Getppid()
	_, parent.start, _, _ = readStat(strconv.Itoa(parent.pid))
	otherBoot := deadProof
	otherBoot.boot = "another-boot"
	for _, tc := range []struct {
		name, holder string
		take         bool
	}{
		{"a dead process of this host", "dead-1 " + deadProof.String(), true},
		{"a live process of this host", "parent-1 " + parent.String(), false},
		{"a process of another boot", "old-1 " + otherBoot.String(), false},
		{"a holder of an older build, without a proof", "vm-1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := prefix + ":alert:leader"
			c.Set(ctx, key, tc.holder, time.Hour)
			l := NewLease(c, prefix, "me", time.Minute).WithProcessProof()
			l.Renew(ctx)
			defer l.Stop(ctx)
			v := c.Get(ctx, key).Val()
			if l.Held() != tc.take || (v == tc.holder) == tc.take {
				t.Fatalf("held %v, value %q: want taken %v", l.Held(), v, tc.take)
			}
			if tc.take && l.TookFrom() != leaseID(tc.holder) {
				t.Fatalf("took from %q", l.TookFrom())
			}
			c.Del(ctx, key)
		})
	}
}

// The outbox's lease carries the same proof: what a process this one
// proves dead owed (each tenant's entry) is taken over at once, its lease
// an hour from running out; what a live process, one of another boot, or
// one of an older build (a lease without a proof) owes is not, nor what
// an owner whose lease is a key of another type owes.
func TestOutboxTakenFromTheDead(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	self, _ := selfProof()
	dead := exec.Command("true")
	dead.Run()
	deadProof := self
	deadProof.pid = dead.Process.Pid
	parent := self
	parent.pid = os.Getppid()
	_, parent.start, _, _ = readStat(strconv.Itoa(parent.pid))
	reused := self // this PID, started at another time: another process
	reused.start++
	otherBoot := deadProof
	otherBoot.boot = "another-boot"
	b := newOutbox(t, c, prefix, nil)
	// Beside them, an owner whose lease is a key of another type: taken
	// for alive, and no hindrance to the others.
	c.SAdd(ctx, b.owners, "wrongtype-1")
	c.HSet(ctx, b.keyAlive("wrongtype-1"), "not", "a string")
	for _, tc := range []struct {
		name, holder string
		take         bool
	}{
		{"a dead process of this host", deadProof.String(), true},
		{"a dead process whose PID this one has now", reused.String(), true},
		{"a live process of this host", parent.String(), false},
		{"a process of another boot", otherBoot.String(), false},
		{"a holder of an older build, without a proof", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newOutbox(t, c, prefix, nil)
			mustOwe(t, a, "acme", "a-"+a.opts.ID)
			mustOwe(t, a, "globex", "g-"+a.opts.ID)
			a.halt()
			holder := "1"
			if tc.holder != "" {
				holder = a.opts.ID + " " + tc.holder
			}
			c.Set(ctx, a.alive, holder, time.Hour)
			got, _ := b.adopt(ctx)
			want := "acme/a-" + a.opts.ID + ",globex/g-" + a.opts.ID
			if !tc.take {
				want = ""
			}
			if alertIDs(got) != want {
				t.Fatalf("lease %q: taken over %q, want %q", holder, alertIDs(got), want)
			}
			if n, _ := c.Exists(ctx, a.alive).Result(); (n == 0) != tc.take {
				t.Fatalf("lease %q: %d left after the takeover", holder, n)
			}
			c.Del(ctx, a.alive)
			b.adopt(ctx) // what was not taken, now that its lease is gone
		})
	}
}
