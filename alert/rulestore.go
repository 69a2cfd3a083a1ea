package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/atomicfile"
	"github.com/apollo-11/apollo/internal/sourcefile"
)

// FileRules keeps the rules text of every tenant set through the API, in
// one file of the data directory. Each Save replaces the file atomically
// (atomicfile.Write: fsync, rename, fsync of the directory), so the API
// answers only once the rules are on disk, and a crash leaves the old
// version or the new. The write-ahead log is for events; rules change
// rarely, are read whole at start and are small, so a file of their own
// is simpler and keeps them readable (docs/architecture.md).
type FileRules struct {
	path string
	mu   sync.Mutex // serializes Save's read, change and write
}

// NewFileRules returns the store at path; its directory must exist.
func NewFileRules(path string) *FileRules { return &FileRules{path: path} }

// Path is the file's name: its modification time is when a tenant's text
// was last saved.
func (f *FileRules) Path() string { return f.path }

// rulesVersion is the file format; another version is refused rather
// than misread.
const rulesVersion = 1

// MaxRulesFileBytes bounds the file, at a write and at a read. Each
// tenant's text came in one request body (limits.body_bytes, 4 MiB by
// default), and a team's rules or expectations are kilobytes: 64 MiB is
// sixteen tenants each at the default limit. A Save past it is refused
// (413, nothing changed), so the server never writes a file it would
// refuse at its next start; a larger file was replaced or damaged, and
// reading it whole would fill memory before the start could say so.
const MaxRulesFileBytes = 64 << 20

type rulesFile struct {
	Version int               `json:"version"`
	Tenants map[string]string `json:"tenants"` // tenant -> rules text
}

// Load returns every tenant's saved rules text; a missing file is none.
func (f *FileRules) Load(ctx context.Context) (map[string][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.read()
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(m))
	for tenant, src := range m {
		out[tenant] = []byte(src)
	}
	return out, nil
}

// Save records src as the tenant's rules, durably, before it returns.
func (f *FileRules) Save(ctx context.Context, tenant string, src []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.read()
	if err != nil {
		return err
	}
	if m == nil {
		m = map[string]string{}
	}
	m[tenant] = string(src)
	b, err := json.MarshalIndent(rulesFile{Version: rulesVersion, Tenants: m}, "", "  ")
	if err != nil {
		return fmt.Errorf("alert: encode rules: %w", err)
	}
	if len(b)+1 > MaxRulesFileBytes {
		return &apollo.Error{Code: apollo.ETOOLARGE,
			Message: fmt.Sprintf("with this text the file %s, which keeps every tenant's, would hold %d bytes, over its limit of %d MiB", filepath.Base(f.path), len(b)+1, MaxRulesFileBytes>>20),
			Hint:    "nothing changed; send a shorter text, or have the other tenants' texts shortened"}
	}
	if err := atomicfile.Write(f.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("alert: save rules: %w", err)
	}
	return nil
}

func (f *FileRules) read() (map[string]string, error) {
	b, err := sourcefile.ReadOwn(f.path, filepath.Base(f.path), MaxRulesFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil && errors.Is(err, fs.ErrPermission) {
		return nil, fmt.Errorf("alert: load rules: %w", err) // the file is fine: its owner is not (chown)
	}
	if err != nil {
		return nil, fmt.Errorf("alert: load rules: %w (file %s: %s)", err, f.path, rulesRemedy)
	}
	m, err := decodeRules(b)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s: %s)", err, f.path, rulesRemedy)
	}
	return m, nil
}

// rulesRemedy is what to do about a file that does not read.
const rulesRemedy = "restore it from a backup, or move it away to start without what the API saved in it"

// decodeRules reads what Save wrote, strictly: an unknown field, another
// version or trailing data is an error, not rules silently lost.
func decodeRules(b []byte) (map[string]string, error) {
	var f rulesFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("alert: decode rules: %w", err)
	}
	if dec.More() {
		return nil, errors.New("alert: decode rules: data after the rules object")
	}
	if f.Version != rulesVersion {
		return nil, fmt.Errorf("alert: decode rules: version %d, this build reads %d", f.Version, rulesVersion)
	}
	return f.Tenants, nil
}
