package agent

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/apollo-11/apollo"
)

// The spool is a directory of append-only NDJSON files, one event per line,
// exactly as the events go on the wire: an operator can read them, or POST
// one to /api/v1/events as application/x-ndjson by hand.
//
// A file is named <major>-<minor>-<token>.ndjson, the numbers in hex and
// <token> a short hash of the token its events were reported with (never
// the token itself). A client sends only the
// files of its own token: a program moved to another tenant on the same
// directory leaves the first tenant's events where they are, for a client
// with that token. Files named <major>-<minor>.ndjson were written by an
// SDK that did not record the token; the first client to open the
// directory sends them with its own.
//
// Sending order is (major, minor) order. New files take the next major.
// When the sender spills events it had already taken from memory while
// newer events were overflowing to disk, it writes them into a file named
// just before the first file with newer events (same major as its
// predecessor, next minor), so that a later process still sends every
// task's events oldest first.
//
// Every write is followed by fsync before the caller is told it is spooled.
// All methods are called with Client.mu held.

const (
	spoolExt = ".ndjson"
	// readChunk is how much of a file the reader takes at a time; an event
	// is at most a few KiB, so a line longer than this is corruption.
	readChunk = 64 << 10
)

var errSpoolFull = errors.New("spool size limit reached")

type spoolFile struct {
	major, minor uint64
	path         string
	size         int64    // bytes written and synced
	w            *os.File // open for appending while this is the tail
	r            *os.File // opened by the reader on first use
	readOff      int64    // bytes the reader has consumed
	// firstID and firstSord belong to the first event this process wrote
	// to the file; both are 0 for a file an earlier process left.
	firstID   uint64
	firstSord uint64
	lines     uint64 // lines this process wrote
	linesRead uint64
	sealed    bool // takes no more appends
	// held: its events were written from the sender's hands, so the reader
	// skips it; they are still on disk for the next process if need be.
	held        bool
	outstanding int // events the sender has and has not settled
	// broken: reading failed; the reader skips it and it is never deleted,
	// so that a later process may try again.
	broken bool
	// info is the file as listed or created: the reader reads that file
	// and no other that took its name since (openSpoolFile).
	info os.FileInfo
}

func (f *spoolFile) unread() bool { return !f.held && !f.broken && f.readOff < f.size }

// old reports whether an earlier process wrote the file.
func (f *spoolFile) old() bool { return f.firstSord == 0 && !f.held }

type spool struct {
	dir       string
	token     string   // tokenTag of the client's token
	others    int      // files of other tokens, left alone
	lock      *os.File // held while the spool is open (lockSpoolDir)
	limit     int64    // bytes on disk
	fileBytes int64    // rotate the tail past this
	files     []*spoolFile
	tail      *spoolFile
	bytes     int64
	nextSord  uint64
	nextMajor uint64
	buf       []byte
}

// tokenTag is the short hash of token that names its spool files.
func tokenTag(token string) string {
	sum := sha256.Sum256([]byte("apollo agent spool\x00" + token))
	return hex.EncodeToString(sum[:8])
}

// spoolName is the name of a file of the token with tag tag; "" gives
// the name an SDK without tags wrote.
func spoolName(major, minor uint64, tag string) string {
	if tag == "" {
		return fmt.Sprintf("%016x-%04x%s", major, minor, spoolExt)
	}
	return fmt.Sprintf("%016x-%04x-%s%s", major, minor, tag, spoolExt)
}

// parseSpoolName reads a name spoolName wrote, and only such a name: any
// other spelling (upper-case hex, an empty tag) is not a file of ours.
func parseSpoolName(name string) (major, minor uint64, tag string, ok bool) {
	base, found := strings.CutSuffix(name, spoolExt)
	a, rest, dash := strings.Cut(base, "-")
	b, tag, tagged := strings.Cut(rest, "-")
	if !found || !dash || len(a) != 16 || len(b) != 4 || (tagged && len(tag) != 16) ||
		!lowerHex(a) || !lowerHex(b) || !lowerHex(tag) {
		return 0, 0, "", false
	}
	major, _ = strconv.ParseUint(a, 16, 64) // 16 hex digits always fit
	minor, _ = strconv.ParseUint(b, 16, 64)
	return major, minor, tag, true
}

func lowerHex(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && (r < 'a' || r > 'f') }) < 0
}

// openSpool creates dir if needed and lists the files an earlier process
// left there for token, in sending order.
func openSpool(dir, token string, anyToken bool, limit, fileBytes int64) (*spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: spool: %w", err)
	}
	lock, locked, err := lockSpoolDir(dir)
	if err != nil {
		return nil, err
	}
	if !locked {
		return nil, &apollo.Error{Code: apollo.ECONFLICT, Field: "WithSpoolDir",
			Message: fmt.Sprintf("%s is used by another process", dir),
			Hint:    "give each process its own spool directory: two would send and delete each other's files"}
	}
	s := &spool{dir: dir, token: tokenTag(token), lock: lock, limit: limit, fileBytes: fileBytes, nextSord: 1, nextMajor: 1}
	entries, err := os.ReadDir(dir)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("agent: spool: %w", err)
	}
	for _, e := range entries {
		major, minor, tag, ok := parseSpoolName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue // not ours: leave it alone
		}
		// Every token's files share the numbering, so that no name is
		// taken twice.
		s.nextMajor = max(s.nextMajor, major+1)
		info, err := e.Info()
		if err != nil {
			s.close()
			return nil, fmt.Errorf("agent: spool: %w", err)
		}
		if tag != "" && tag != s.token && !anyToken {
			// Another token's: kept for a client with it, and counted
			// against the limit, which bounds what the directory holds.
			s.others++
			s.bytes += info.Size()
			continue
		}
		path := filepath.Join(dir, e.Name())
		if info.Size() == 0 {
			_ = os.Remove(path) // created but never written: nothing to send
			continue
		}
		s.files = append(s.files, &spoolFile{major: major, minor: minor, path: path, size: info.Size(), sealed: true, info: info})
		s.bytes += info.Size()
	}
	slices.SortFunc(s.files, func(a, b *spoolFile) int {
		return cmp.Or(cmp.Compare(a.major, b.major), cmp.Compare(a.minor, b.minor))
	})
	return s, nil
}

// fits reports whether items, and extra more bytes, fit under the limit.
func (s *spool) fits(items []item, extra int) bool {
	n := int64(extra)
	for _, it := range items {
		n += int64(len(it.data)) + 1
	}
	return s.bytes+n <= s.limit
}

func (s *spool) encode(items []item) []byte {
	buf := s.buf[:0]
	for _, it := range items {
		buf = append(buf, it.data...)
		buf = append(buf, '\n')
	}
	if cap(buf) <= 1<<20 {
		s.buf = buf // keep a modest buffer; let a huge one go
	}
	return buf
}

// append writes items at the end of the spool, where the reader will find
// them after everything already there.
func (s *spool) append(items []item) error {
	if !s.fits(items, 0) {
		return errSpoolFull
	}
	buf := s.encode(items)
	if s.tail == nil || s.tail.size >= s.fileBytes {
		s.sealTail()
		f, err := s.create(s.nextMajor, 0)
		if err != nil {
			return err
		}
		s.nextMajor++
		f.firstID, f.firstSord = items[0].id, s.nextSord
		s.files = append(s.files, f)
		s.tail = f
	}
	f := s.tail
	if err := writeSynced(f.w, buf, f.size); err != nil {
		return fmt.Errorf("agent: spool %s: %w", f.path, err)
	}
	f.size += int64(len(buf))
	f.lines += uint64(len(items))
	s.nextSord += uint64(len(items))
	s.bytes += int64(len(buf))
	return nil
}

// appendHeld writes events that the sender holds (they left memory before
// newer events overflowed to disk) into a sealed file placed before the
// first file with newer events, and returns that file: their home on disk.
func (s *spool) appendHeld(items []item) (*spoolFile, error) {
	if !s.fits(items, 0) {
		return nil, errSpoolFull
	}
	buf := s.encode(items)
	at := slices.IndexFunc(s.files, func(f *spoolFile) bool { return f.firstID > items[0].id })
	var major, minor uint64
	if at < 0 {
		s.sealTail()
		major, at = s.nextMajor, len(s.files)
		s.nextMajor++
	} else {
		major = s.files[at].major - 1
		for _, f := range s.files[:at] {
			if f.major == major {
				minor = max(minor, f.minor+1)
			}
		}
	}
	f, err := s.create(major, minor)
	if err != nil {
		return nil, err
	}
	err = writeSynced(f.w, buf, 0)
	f.w.Close()
	f.w = nil
	if err != nil {
		_ = os.Remove(f.path)
		return nil, fmt.Errorf("agent: spool %s: %w", f.path, err)
	}
	f.size, f.sealed, f.held, f.firstID = int64(len(buf)), true, true, items[0].id
	f.outstanding = len(items)
	s.files = slices.Insert(s.files, at, f)
	s.bytes += f.size
	return f, nil
}

func (s *spool) create(major, minor uint64) (*spoolFile, error) {
	path := filepath.Join(s.dir, spoolName(major, minor, s.token))
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("agent: spool: %w", err)
	}
	info, err := w.Stat()
	if err != nil {
		w.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("agent: spool: %w", err)
	}
	// The new name must survive a crash as well as the bytes in it.
	if d, err := os.Open(s.dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return &spoolFile{major: major, minor: minor, path: path, w: w, info: info}, nil
}

// openSpoolFile opens f for reading if its name still holds the regular
// file listed or written. Anyone else who can write in the directory may
// have put something else there since: a FIFO, whose open would wait for
// a writer with the client's lock held (every reporting call of the job
// would hang), or a symbolic link to another tenant's spool or any file
// this process may read, whose lines would be sent with this client's
// token. Neither is followed, waited on or read.
func openSpoolFile(f *spoolFile) (*os.File, error) {
	refused := func(what string) error {
		return fmt.Errorf("agent: spool %s %s: refused, not read; something else writes into the spool directory: "+
			"give the client a directory only its own user can write", f.path, what)
	}
	r, err := os.OpenFile(f.path, os.O_RDONLY|spoolReadFlags, 0)
	if err != nil {
		// O_NOFOLLOW fails on a link (ELOOP): say what stands there.
		if info, lerr := os.Lstat(f.path); lerr == nil && !info.Mode().IsRegular() {
			return nil, refused("is " + fileKind(info.Mode()) + ", not a regular file")
		}
		return nil, fmt.Errorf("agent: spool: %w", err)
	}
	info, err := r.Stat()
	switch {
	case err != nil:
		r.Close()
		return nil, fmt.Errorf("agent: spool %s: %w", f.path, err)
	case !info.Mode().IsRegular():
		r.Close()
		return nil, refused("is " + fileKind(info.Mode()) + ", not a regular file")
	case f.info != nil && !os.SameFile(info, f.info):
		r.Close()
		return nil, refused("is not the file this client listed or wrote: another took its name")
	}
	return r, nil
}

// fileKind names what a mode is, for a log line.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	}
	return "something other than a file"
}

// writeSynced writes buf and fsyncs; on failure it cuts the file back to
// size so that no torn line is left for the reader.
func writeSynced(w *os.File, buf []byte, size int64) error {
	_, err := w.Write(buf)
	if err == nil {
		err = w.Sync()
	}
	if err != nil {
		_ = w.Truncate(size)
	}
	return err
}

// sealTail closes the file being appended to; the next append starts a new
// one. Sealing lets a fully sent file be deleted.
func (s *spool) sealTail() {
	f := s.tail
	if f == nil {
		return
	}
	f.w.Close()
	f.w, f.sealed, s.tail = nil, true, nil
	s.maybeRemove(f)
}

func (s *spool) firstUnread() *spoolFile {
	for _, f := range s.files {
		if f.unread() {
			return f
		}
	}
	return nil
}

// pending counts unread events, up to limit. A file of an earlier process
// has an unknown count and counts as limit: it is backlog, send it now.
func (s *spool) pending(limit int) int {
	n := 0
	for _, f := range s.files {
		switch {
		case !f.unread():
		case f.old():
			return limit
		default:
			n += int(f.lines - f.linesRead)
		}
		if n >= limit {
			return limit
		}
	}
	return n
}

// nextUnreadSord is the sord of the oldest unread event: 0 while files of an
// earlier process are unread, nextSord when everything has been read.
func (s *spool) nextUnreadSord() uint64 {
	f := s.firstUnread()
	switch {
	case f == nil:
		return s.nextSord
	case f.old():
		return 0
	}
	return f.firstSord + f.linesRead
}

// read appends up to n unread events to dst, from the first file that has
// any. Lines that are not JSON (a torn tail after a crash of an earlier
// process, or a damaged file) are skipped and counted in bad.
func (s *spool) read(dst []item, n int) (_ []item, bad int, err error) {
	f := s.firstUnread()
	if f == nil {
		return dst, 0, nil
	}
	defer func() {
		if err != nil {
			f.broken = true
		}
	}()
	if f.r == nil {
		if f.r, err = openSpoolFile(f); err != nil {
			return dst, 0, err
		}
	}
	for got := 0; got < n && f.readOff < f.size; {
		buf := make([]byte, min(f.size-f.readOff, readChunk))
		if _, err := f.r.ReadAt(buf, f.readOff); err != nil {
			return dst, bad, fmt.Errorf("agent: spool %s: %w", f.path, err)
		}
		used := 0
		for got < n {
			i := bytes.IndexByte(buf[used:], '\n')
			if i < 0 {
				break
			}
			line := buf[used : used+i : used+i]
			used += i + 1
			sord := uint64(0)
			if !f.old() {
				sord = f.firstSord + f.linesRead
			}
			f.linesRead++
			if !json.Valid(line) {
				bad++
				continue
			}
			dst = append(dst, item{data: line, sord: sord, file: f})
			f.outstanding++
			got++
		}
		if used == 0 {
			// No whole line in a chunk: a line no event could make (a
			// damaged stretch of the file), or a torn tail. Skip to the
			// next line: the events after the damage were spooled too.
			bad++
			skip, err := skipLine(f.r, f.readOff+int64(len(buf)), f.size)
			if err != nil {
				return dst, bad, fmt.Errorf("agent: spool %s: %w", f.path, err)
			}
			used = len(buf) + int(skip)
		}
		f.readOff += int64(used)
	}
	s.maybeRemove(f)
	return dst, bad, nil
}

// skipLine returns how many bytes from off up to size belong to the line
// under way: up to and including its newline, or all of them (a torn
// tail).
func skipLine(r *os.File, off, size int64) (int64, error) {
	buf := make([]byte, readChunk)
	for n := int64(0); off+n < size; {
		chunk := buf[:min(size-off-n, readChunk)]
		if _, err := r.ReadAt(chunk, off+n); err != nil {
			return 0, err
		}
		if i := bytes.IndexByte(chunk, '\n'); i >= 0 {
			return n + int64(i) + 1, nil
		}
		n += int64(len(chunk))
	}
	return size - off, nil
}

// done settles one event the sender took from f.
func (s *spool) done(f *spoolFile) error {
	f.outstanding--
	return s.maybeRemove(f)
}

// maybeRemove deletes f once nothing more will be appended, read or
// answered from it.
func (s *spool) maybeRemove(f *spoolFile) error {
	if !f.sealed || f.broken || f.outstanding > 0 || f.unread() {
		return nil
	}
	if f.r != nil {
		f.r.Close()
		f.r = nil
	}
	i := slices.Index(s.files, f)
	if i < 0 {
		return nil
	}
	s.files = slices.Delete(s.files, i, i+1)
	s.bytes -= f.size
	if err := os.Remove(f.path); err != nil {
		return fmt.Errorf("agent: spool: %w", err)
	}
	return nil
}

// close releases file handles; the files stay for the next process.
func (s *spool) close() {
	for _, f := range s.files {
		if f.w != nil {
			f.w.Close()
			f.w = nil
		}
		if f.r != nil {
			f.r.Close()
			f.r = nil
		}
	}
	s.tail = nil
	if s.lock != nil {
		unlockSpoolDir(s.lock)
		s.lock = nil
	}
}
