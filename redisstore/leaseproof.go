package redisstore

import (
	"fmt"
	"strconv"
	"strings"
)

// A lease's value may carry a proof of the process that holds it, after
// its ID and a space: `proc:<host>/<boot id>/<PID namespace>/<PID>/<start>`,
// <start> being when the process started, in clock ticks since boot
// (/proc/<pid>/stat). A process on the same host, boot and PID namespace
// can then tell whether the holder still runs: if no process has that PID
// with that start time, the holder is dead and will never renew, so its
// lease can be taken at once rather than when it expires — a process
// restarted after a kill -9 leads at once. Anywhere else (another host,
// another container, a value without a proof: a process of an older
// build, or where /proc does not say), the lease runs out as before.
//
// Why these parts: the PID alone is reused, so the start time goes with
// it; both mean something only on one boot (boot id) and within one PID
// namespace (two containers may share a host name and a boot id, and each
// have its own PID 7). The host name is a check more, for readers.
type procProof struct {
	host, boot, pidNS string
	pid               int
	start             uint64
}

func (p procProof) String() string {
	return fmt.Sprintf("proc:%s/%s/%s/%d/%d", p.host, p.boot, p.pidNS, p.pid, p.start)
}

// parseProof reads the proof of a lease value; ok is false when it has
// none that reads.
func parseProof(value string) (p procProof, ok bool) {
	_, rest, found := strings.Cut(value, " ")
	if !found {
		return p, false
	}
	rest, found = strings.CutPrefix(rest, "proc:")
	if !found {
		return p, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 5 {
		return p, false
	}
	pid, err1 := strconv.Atoi(parts[3])
	start, err2 := strconv.ParseUint(parts[4], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return p, false
	}
	return procProof{host: parts[0], boot: parts[1], pidNS: parts[2], pid: pid, start: start}, true
}

// leaseID is the ID part of a lease value.
func leaseID(value string) string {
	id, _, _ := strings.Cut(value, " ")
	return id
}

// provablyDead says whether the holder's proof names a process that this
// one can see is gone: same host, boot and PID namespace, and no live
// process with its PID and start time. Anything it cannot tell is
// "alive".
func provablyDead(self, holder procProof, alive func(pid int, start uint64) bool) bool {
	if self.host != holder.host || self.boot != holder.boot || self.pidNS != holder.pidNS {
		return false
	}
	if holder.pid == self.pid && holder.start == self.start {
		return false // this very process
	}
	return !alive(holder.pid, holder.start)
}

// prover is a lease holder's side of the proof, shared by every lease
// that carries one (the leader lease, the outbox's): the value this
// process writes, and the judgement of the value another holder left.
type prover struct {
	self   procProof
	proves bool // false where /proc gives no proof: leases run out as before
	alive  func(pid int, start uint64) bool
}

// newProver returns this process's prover.
func newProver() prover {
	self, ok := selfProof()
	return prover{self: self, proves: ok, alive: processAlive}
}

// value is the lease value of id: id and this process's proof, or id
// alone where there is none (or id holds a space, which would read as
// the start of a proof).
func (p prover) value(id string) string {
	if !p.proves || strings.Contains(id, " ") {
		return id
	}
	return id + " " + p.self.String()
}

// deadHolder says whether the holder named by a lease value is provably
// dead (provablyDead), and returns its proof.
func (p prover) deadHolder(value string) (procProof, bool) {
	if !p.proves {
		return procProof{}, false
	}
	holder, ok := parseProof(value)
	return holder, ok && provablyDead(p.self, holder, p.alive)
}
