package audit

import (
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/apollo-11/apollo/internal/sourcefile"
)

// The default tenant's entries go to fileName, every other tenant's to
// files of its own (tenantFileName), and the server's own (failures of
// unknown callers, counted per source and minute) to serverFileName. Were
// they one file, a caller with no token could rotate the tenants' entries
// off the disk, and out of the list after a restart or a restore, by
// failing once a minute with a long path; and a tenant's admin, by acting
// often, could rotate another tenant's. fileName held every tenant's
// entries before: those are read back as ever, and age out as the default
// tenant's own entries rotate it.
const (
	fileName       = "audit.jsonl"
	serverFileName = "server.jsonl"
)

// Tenant files are named "tenant-NAME.jsonl" when the name is plain (what
// most are: it reads in ls), otherwise "tenant.B32.jsonl" with the name in
// lower-case base32 (the extended hex alphabet: no '.' or '-'), which fits
// any name of at most 128 bytes in a file name on any filesystem, case
// sensitive or not.
var (
	plainTenant = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,99}$`)
	tenantB32   = base32.HexEncoding.WithPadding(base32.NoPadding)
)

// tenantFileName is the file of a tenant's entries.
func tenantFileName(tenant string) string {
	switch {
	case tenant == "":
		return fileName
	case plainTenant.MatchString(tenant):
		return "tenant-" + tenant + ".jsonl"
	}
	return "tenant." + strings.ToLower(tenantB32.EncodeToString([]byte(tenant))) + ".jsonl"
}

// tenantFiles returns the tenants' files found in dir (rotated ones by the
// file they were rotated from), by tenant, the default tenant's included.
func tenantFiles(dir string) (map[string]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	found := map[string]string{"": fileName}
	for _, e := range ents {
		name := e.Name()
		if i := strings.Index(name, ".jsonl"); i > 0 {
			name = name[:i+len(".jsonl")]
		}
		if tenant, ok := tenantOfFile(name); ok && tenantFileName(tenant) == name {
			found[tenant] = name
		}
	}
	return found, nil
}

// tenantOfFile is the tenant whose file name is, if it is one.
func tenantOfFile(name string) (string, bool) {
	base, ok := strings.CutSuffix(name, ".jsonl")
	if !ok {
		return "", false
	}
	if t, ok := strings.CutPrefix(base, "tenant-"); ok {
		return t, true
	}
	if enc, ok := strings.CutPrefix(base, "tenant."); ok {
		b, err := tenantB32.DecodeString(strings.ToUpper(enc))
		return string(b), err == nil && len(b) > 0
	}
	return "", false
}

// reserveFor is the free space the audit file leaves to the write-ahead
// log on a filesystem of size bytes: a tenth of it, at most 64 MiB. The
// audit file and the log share the data directory's disk; when it fills,
// the audit file stops first, so events are still stored.
func reserveFor(size uint64) uint64 { return min(size/10, 64<<20) }

// file is audit.jsonl, rotated by size, with the entries it could not
// write counted until it can again.
type file struct {
	dir     string
	name    string // fileName or serverFileName
	limit   int64  // rotate past this size
	keep    int    // rotated files kept
	f       *os.File
	size    int64
	space   func(dir string) (avail, size uint64, err error)
	log     *slog.Logger
	skipped int    // entries not written since the last one that was
	why     string // why the last of them was not
}

// pathOf is the path of the default tenant's file i (0: the one written
// now).
func pathOf(dir string, i int) string { return filePath(dir, fileName, i) }

func filePath(dir, name string, i int) string {
	if i == 0 {
		return filepath.Join(dir, name)
	}
	return filepath.Join(dir, name+"."+strconv.Itoa(i))
}

// openFile opens dir's audit file name for appending and gives keep the
// entries of the previous file and of this one, oldest first. A last line
// cut short by a crash is removed, so the next entry starts a line.
func openFile(o Options, name string, log *slog.Logger, keep func(*Entry)) (*file, error) {
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	bad := 0
	for _, i := range []int{1, 0} {
		whole, n, err := load(filePath(o.Dir, name, i), keep)
		if err != nil {
			return nil, err
		}
		bad += n
		if i == 0 && whole >= 0 {
			if err := os.Truncate(filePath(o.Dir, name, 0), whole); err != nil {
				return nil, fmt.Errorf("audit: %w", err)
			}
		}
	}
	if bad > 0 {
		log.Warn("audit: lines of the audit file that do not read as entries were skipped", "lines", bad, "file", filepath.Join(o.Dir, name))
	}
	f, err := os.OpenFile(filePath(o.Dir, name, 0), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("audit: %w", err)
	}
	return &file{dir: o.Dir, name: name, limit: o.FileBytes, keep: o.Files, f: f, size: st.Size(), space: o.space, log: log}, nil
}

// maxLine bounds a line of an audit file that load decodes. The longest
// the server writes is an entry with every field at its cap (capFields),
// each character escaped as \u00XX: about 12 KiB. A longer line is counted
// as one that does not decode, without being held.
const maxLine = 64 << 10

// load gives keep every entry of the file at path and returns the length
// of its whole lines (-1 when there is no file) and how many lines did not
// decode. It reads a line at a time: keep holds a bounded number of
// entries, so a file of any size costs the same memory, and only a
// regular file is read (a link to /dev/zero would never end).
func load(path string, keep func(*Entry)) (whole int64, bad int, err error) {
	f, err := sourcefile.OpenOwn(path, "audit file")
	if errors.Is(err, fs.ErrNotExist) {
		return -1, 0, nil
	}
	if err != nil && !errors.Is(err, fs.ErrPermission) { // a wrong owner: the file is fine (chown)
		err = fmt.Errorf("%w (move it away to start without the entries it holds)", err)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("audit: %w", err)
	}
	defer f.Close()
	err = sourcefile.ScanLines(f, maxLine, func(l sourcefile.Line) error {
		if !l.Ended {
			if l.Long {
				bad++ // too long to be a line a crash cut short: say so
			}
			return nil // removed, as a crash's torn last line is
		}
		whole = l.End
		var e Entry
		if l.Long || json.Unmarshal(l.Text, &e) != nil || e.At.IsZero() {
			bad++
			return nil
		}
		e.capFields()
		e.Count = max(e.Count, 0)
		keep(&e)
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("audit: %s: %w", path, err)
	}
	return whole, bad, nil
}

// write appends e. When the disk is short of the reserve, or a write
// fails, e is counted instead; the first entry written afterwards is a gap
// entry saying how many were not, which write returns.
func (f *file) write(e *Entry, now time.Time) (gap *Entry) {
	line := marshal(e)
	if why := f.noRoom(len(line)); why != "" {
		f.skip(why)
		return nil
	}
	if f.skipped > 0 {
		gap = &Entry{At: now, Actor: "apollo", Action: "audit.gap", Count: f.skipped,
			Detail: fmt.Sprintf("%d entries were not written to this file: %s", f.skipped, f.why)}
		if !f.append(marshal(gap)) {
			return nil
		}
		f.log.Info("audit: writing the audit file again", "not_written", gap.Count)
		f.skipped, f.why = 0, ""
	}
	f.append(line)
	return gap
}

func marshal(e *Entry) []byte {
	b, _ := json.Marshal(e) // an Entry always marshals
	return append(b, '\n')
}

// noRoom says why a line of n bytes must not be written now, or "".
func (f *file) noRoom(n int) string {
	avail, size, err := f.space(f.dir)
	if err != nil {
		return "" // cannot tell: the write itself will fail if it must
	}
	if r := reserveFor(size); avail < r+uint64(n) {
		return fmt.Sprintf("the disk has %d bytes free, under the %d kept for the write-ahead log", avail, r)
	}
	return ""
}

// append writes one line, rotating first if the file would pass its limit.
// A failed write leaves no half line behind.
func (f *file) append(line []byte) bool {
	if f.size > 0 && f.size+int64(len(line)) > f.limit {
		if err := f.rotate(); err != nil {
			f.skip(err.Error())
			return false
		}
	}
	n, err := f.f.Write(line)
	if err != nil {
		if n > 0 {
			f.f.Truncate(f.size) // best effort; the next open cuts a half line anyway
		}
		f.skip(err.Error())
		return false
	}
	f.size += int64(n)
	return true
}

// rotate renames audit.jsonl to audit.jsonl.1 (and .1 to .2, and so on,
// the oldest being overwritten) and starts an empty one.
func (f *file) rotate() error {
	f.f.Close()
	var err error
	for i := f.keep; i >= 1 && err == nil; i-- {
		if err = os.Rename(filePath(f.dir, f.name, i-1), filePath(f.dir, f.name, i)); errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	}
	// Whatever happened, append to whatever audit.jsonl now is: a failed
	// rename leaves the old file in place, to be rotated next time.
	nf, oerr := os.OpenFile(filePath(f.dir, f.name, 0), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if oerr == nil {
		st, serr := nf.Stat()
		if serr != nil {
			nf.Close()
			oerr = serr
		} else {
			f.f, f.size = nf, st.Size()
		}
	}
	if err = errors.Join(err, oerr); err != nil {
		return fmt.Errorf("rotating the audit file: %w", err)
	}
	return nil
}

func (f *file) skip(why string) {
	if f.skipped == 0 {
		f.log.Error("audit: entries are not written to the audit file until this clears; they are kept in memory", "reason", why)
	}
	f.skipped++
	f.why = why
}

func (f *file) close() error { return f.f.Close() }
