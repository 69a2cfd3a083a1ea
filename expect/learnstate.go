package expect

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// A Learner's samples go into the server's snapshot: they are learned
// from the runs the bus applies, and a restart replays only the log after
// the newest snapshot, so without them every restart would forget what
// was learned (a daily job's ten runs take ten days to see again).

// learnStateVersion is the first byte of WriteState's output.
const learnStateVersion = 1

// maxStateString bounds a tenant's or job's name read back: both are far
// shorter (config.MaxTenantLen, apollo.MaxNameBytes); a longer one is
// damage, not a name.
const maxStateString = 4096

// WriteState writes every job's sample: the version, the number of jobs,
// then per job its tenant and name, how many starts and durations were
// ever added, its latest run and the ring entries in use. The rings are
// written as they are, so that the next ones added overwrite the same
// entries as they would have.
func (l *Learner) WriteState(w io.Writer) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := binary.AppendUvarint([]byte{learnStateVersion}, uint64(len(l.jobs)))
	for k, s := range l.jobs {
		b = appendString(b, k.tenant)
		b = appendString(b, k.job)
		b = binary.AppendUvarint(b, uint64(s.ns))
		b = binary.AppendUvarint(b, uint64(s.nd))
		b = binary.LittleEndian.AppendUint32(b, s.seen)
		for _, v := range s.starts[:min(s.ns, SampleSize)] {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		for _, v := range s.durations[:min(s.nd, SampleSize)] {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		if len(b) >= 32<<10 {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	_, err := w.Write(b)
	return err
}

// ReadState replaces the samples with those WriteState wrote. Jobs beyond
// the Learner's limit are read and not kept.
func (l *Learner) ReadState(r io.Reader) error {
	br := bufio.NewReader(r)
	v, err := br.ReadByte()
	if err != nil {
		return fmt.Errorf("learner: %w", err)
	}
	if v != learnStateVersion {
		return fmt.Errorf("learner: state version %d, this binary reads %d", v, learnStateVersion)
	}
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return fmt.Errorf("learner: %w", err)
	}
	jobs := map[jobKey]*sample{}
	for i := uint64(0); i < n; i++ {
		var k jobKey
		s := &sample{}
		if k.tenant, err = readString(br); err != nil {
			return fmt.Errorf("learner: job %d: %w", i, err)
		}
		if k.job, err = readString(br); err != nil {
			return fmt.Errorf("learner: job %d: %w", i, err)
		}
		ns, err1 := binary.ReadUvarint(br)
		nd, err2 := binary.ReadUvarint(br)
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("learner: job %q: %w", k.job, err)
		}
		if ns > 1<<62 || nd > 1<<62 {
			return fmt.Errorf("learner: job %q: damaged counts", k.job)
		}
		s.ns, s.nd = int(ns), int(nd)
		if err := binary.Read(br, binary.LittleEndian, &s.seen); err != nil {
			return fmt.Errorf("learner: job %q: %w", k.job, err)
		}
		if err := binary.Read(br, binary.LittleEndian, s.starts[:min(s.ns, SampleSize)]); err != nil {
			return fmt.Errorf("learner: job %q: %w", k.job, err)
		}
		if err := binary.Read(br, binary.LittleEndian, s.durations[:min(s.nd, SampleSize)]); err != nil {
			return fmt.Errorf("learner: job %q: %w", k.job, err)
		}
		if len(jobs) < l.max {
			jobs[k] = s
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.jobs = jobs
	return nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func readString(r *bufio.Reader) (string, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return "", err
	}
	if n > maxStateString {
		return "", fmt.Errorf("a name of %d bytes: damaged", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}
