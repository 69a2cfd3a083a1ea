package alert

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/atomicfile"
	"github.com/apollo-11/apollo/internal/sourcefile"
)

// FileRules keeps the rules text of every tenant set through the API, one
// file a tenant in a directory of the data directory. Each Save replaces
// its tenant's file alone, atomically (atomicfile.Write: fsync, rename,
// fsync of the directory), so the API answers only once the rules are on
// disk, a crash leaves the old version or the new, and one tenant's save
// neither rewrites nor is bounded by the others' texts. The write-ahead
// log is for events; rules change rarely, are read whole at start and are
// small, so files of their own are simpler and keep them readable
// (docs/architecture.md).
//
// Releases before kept every tenant's text in one file, the directory's
// name and ".json" (rules.json); the first Load or Save moves it into the
// directory (migrate).
type FileRules struct {
	dir    string
	legacy string     // the one file of the releases before
	mu     sync.Mutex // serializes the migration, and Load against Save
}

// NewFileRules returns the store in the directory dir, made at the first
// Save; dir's parent must exist.
func NewFileRules(dir string) *FileRules {
	dir = filepath.Clean(dir)
	return &FileRules{dir: dir, legacy: dir + ".json"}
}

// TenantPath is the file that keeps tenant's text: its modification time
// is when that text was last saved.
func (f *FileRules) TenantPath(tenant string) string {
	return filepath.Join(f.dir, tenantFileName(tenant))
}

// rulesVersion is the format of a tenant's file; another version is
// refused rather than misread. legacyRulesVersion is the one file's.
const (
	rulesVersion       = 2
	legacyRulesVersion = 1
)

// MaxRulesFileBytes bounds a tenant's file, at a write and at a read, and
// the one file of the releases before at its migration. A tenant's text
// came in one request body (limits.body_bytes, 4 MiB by default), and a
// team's rules or expectations are kilobytes; JSON escapes at most 6
// bytes for one, so 64 MiB holds any text a default body carries. A Save
// past it is refused (413, nothing changed), so the server never writes a
// file it would refuse at its next start; a larger file was replaced or
// damaged, and reading it whole would fill memory before the start could
// say so. Other tenants' texts do not count.
const MaxRulesFileBytes = 64 << 20

// tenantRules is a tenant's file. The tenant is in it, not only in the
// file's name: the name of a long tenant is a hash.
type tenantRules struct {
	Version int    `json:"version"`
	Tenant  string `json:"tenant"`
	Text    string `json:"text"`
}

// legacyRulesFile is the one file of the releases before.
type legacyRulesFile struct {
	Version int               `json:"version"`
	Tenants map[string]string `json:"tenants"` // tenant -> rules text
}

// maxNameTenant is the longest tenant whose file is named by its bytes
// (base64: 4/3 as long); a longer one's is named by its SHA-256, so that
// no name, nor atomicfile's temporary one beside it, passes the 255 bytes
// a file system allows.
const maxNameTenant = 150

// tenantFileName names tenant's file, safely for any tenant string: "t-"
// and the tenant in base64url (no '/', no '.', no NUL, never "." or
// ".."; the default tenant is "t-.json"), or "h-" and the SHA-256 of a
// long tenant in hex. It never begins with a dot, as atomicfile's
// temporary files do.
func tenantFileName(tenant string) string {
	if len(tenant) <= maxNameTenant {
		return "t-" + base64.RawURLEncoding.EncodeToString([]byte(tenant)) + ".json"
	}
	sum := sha256.Sum256([]byte(tenant))
	return "h-" + hex.EncodeToString(sum[:]) + ".json"
}

// Load returns every tenant's saved rules text; no directory is none.
func (f *FileRules) Load(ctx context.Context) (map[string][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.migrate(); err != nil {
		return nil, err
	}
	return f.loadLocked()
}

func (f *FileRules) loadLocked() (map[string][]byte, error) {
	entries, err := os.ReadDir(f.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string][]byte{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("alert: load rules: %w", err)
	}
	out := make(map[string][]byte, len(entries))
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue // atomicfile's temporary files, and what the server did not write
		}
		r, err := f.readTenant(filepath.Join(f.dir, name))
		if err != nil {
			return nil, err
		}
		out[r.Tenant] = []byte(r.Text)
	}
	return out, nil
}

// Save records src as the tenant's rules, durably, before it returns. It
// writes the tenant's file alone.
func (f *FileRules) Save(ctx context.Context, tenant string, src []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.migrate(); err != nil {
		return err
	}
	if !utf8.ValidString(tenant) {
		// JSON would read it back as another tenant, and its file under
		// another name.
		return &apollo.Error{Code: apollo.EINVALID, Message: fmt.Sprintf("tenant %q is not UTF-8: its rules cannot be kept", tenant),
			Hint: "name the tenant in UTF-8 in the server's tokens"}
	}
	b, err := encodeTenantRules(tenant, string(src))
	if err != nil {
		return err
	}
	if len(b) > MaxRulesFileBytes {
		return &apollo.Error{Code: apollo.ETOOLARGE,
			Message: fmt.Sprintf("with this text the tenant's rules file would hold %d bytes, over its limit of %d MiB", len(b), MaxRulesFileBytes>>20),
			Hint:    "nothing changed; send a shorter text"}
	}
	return f.write(tenant, b)
}

func (f *FileRules) write(tenant string, b []byte) error {
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return fmt.Errorf("alert: save rules: %w", err)
	}
	if err := atomicfile.Write(f.TenantPath(tenant), b, 0o600); err != nil {
		return fmt.Errorf("alert: save rules: %w", err)
	}
	return nil
}

func encodeTenantRules(tenant, text string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // '<' and '>' as themselves: a third of \u003c's size
	enc.SetIndent("", "  ")
	if err := enc.Encode(tenantRules{Version: rulesVersion, Tenant: tenant, Text: text}); err != nil {
		return nil, fmt.Errorf("alert: encode rules: %w", err)
	}
	return buf.Bytes(), nil
}

// migrate moves the one file of the releases before into the directory:
// it writes every tenant's file from it (those that differ), then removes
// it. A crash in between leaves it in place, and the next Load or Save
// writes the tenants' files again from it: no Save came between (each
// migrates first), so its texts are the newest. The file WriteLegacy
// left for a rollback, unchanged since (its hash is the mark's), is only
// removed: the tenants' files hold what it does.
func (f *FileRules) migrate() error {
	b, err := sourcefile.ReadOwn(f.legacy, filepath.Base(f.legacy), MaxRulesFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	mark := filepath.Join(f.dir, legacyMark)
	if err == nil {
		if m, merr := os.ReadFile(mark); merr == nil && string(m) == legacyHash(b) {
			return f.removeLegacy()
		}
	}
	if err != nil && errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("alert: load rules: %w", err) // the file is fine: its owner is not (chown)
	}
	if err != nil {
		return fmt.Errorf("alert: load rules: %w (file %s: %s)", err, f.legacy, rulesRemedy)
	}
	m, err := decodeRules(b)
	if err != nil {
		return fmt.Errorf("%w (file %s: %s)", err, f.legacy, rulesRemedy)
	}
	for tenant, text := range m {
		b, err := encodeTenantRules(tenant, text)
		if err != nil {
			return err
		}
		if old, err := os.ReadFile(f.TenantPath(tenant)); err == nil && bytes.Equal(old, b) {
			continue // a move cut short wrote it, or a rollback changed another tenant's
		}
		if err := f.write(tenant, b); err != nil {
			return fmt.Errorf("%w (moving %s into %s)", err, f.legacy, f.dir)
		}
	}
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return fmt.Errorf("alert: moving %s into %s: %w", f.legacy, f.dir, err)
	}
	return f.removeLegacy()
}

// removeLegacy removes the one file, then the mark of the one WriteLegacy
// wrote: a crash between leaves a mark that no longer matches, and the
// file a release before writes next is moved.
func (f *FileRules) removeLegacy() error {
	if err := os.Remove(f.legacy); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("alert: moving %s into %s: %w", f.legacy, f.dir, err)
	}
	if err := syncDir(filepath.Dir(f.legacy)); err != nil {
		return fmt.Errorf("alert: moving %s into %s: %w", f.legacy, f.dir, err)
	}
	if err := os.Remove(filepath.Join(f.dir, legacyMark)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("alert: moving %s into %s: %w", f.legacy, f.dir, err)
	}
	return nil
}

// legacyMark is the file in the directory that holds legacyHash of the
// one file WriteLegacy wrote last.
const legacyMark = "rollback.sha256"

func legacyHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// WriteLegacy writes every tenant's text into the one file of the
// releases before as well, for a rollback to the release just before
// this one (docs/deploy.md): the server calls it at a clean stop, when
// no Save can come. The next Load or Save of this release removes that
// file again, or moves it if a release before changed it meanwhile. The
// one file is bounded as it was, at MaxRulesFileBytes for every tenant's
// texts together: past it, nothing is written and the error says that
// the release before cannot read them.
func (f *FileRules) WriteLegacy() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.migrate(); err != nil {
		return err
	}
	m, err := f.loadLocked()
	if err != nil || len(m) == 0 {
		return err
	}
	texts := make(map[string]string, len(m))
	for tenant, src := range m {
		texts[tenant] = string(src)
	}
	b, err := json.MarshalIndent(legacyRulesFile{Version: legacyRulesVersion, Tenants: texts}, "", "  ")
	if err != nil {
		return fmt.Errorf("alert: encode rules: %w", err)
	}
	b = append(b, '\n')
	if len(b) > MaxRulesFileBytes {
		return fmt.Errorf("alert: %s not written: every tenant's texts together are %d bytes, over the %d MiB a release before this one reads; a rollback to it starts without them",
			filepath.Base(f.legacy), len(b), MaxRulesFileBytes>>20)
	}
	if err := atomicfile.Write(f.legacy, b, 0o600); err != nil {
		return fmt.Errorf("alert: writing %s for a rollback: %w", f.legacy, err)
	}
	if err := atomicfile.Write(filepath.Join(f.dir, legacyMark), []byte(legacyHash(b)), 0o600); err != nil {
		return fmt.Errorf("alert: writing %s for a rollback: %w", f.legacy, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// readTenant reads and checks the tenant's file at path.
func (f *FileRules) readTenant(path string) (tenantRules, error) {
	b, err := sourcefile.ReadOwn(path, filepath.Base(path), MaxRulesFileBytes)
	if err != nil && errors.Is(err, fs.ErrPermission) {
		return tenantRules{}, fmt.Errorf("alert: load rules: %w", err) // the file is fine: its owner is not (chown)
	}
	if err != nil {
		return tenantRules{}, fmt.Errorf("alert: load rules: %w (file %s: %s)", err, path, rulesRemedy)
	}
	r, err := decodeTenantRules(b)
	if err != nil {
		return tenantRules{}, fmt.Errorf("%w (file %s: %s)", err, path, rulesRemedy)
	}
	if want := tenantFileName(r.Tenant); want != filepath.Base(path) {
		return tenantRules{}, fmt.Errorf("alert: load rules: the file of tenant %q is named %s, not %s: it was copied or renamed (file %s: %s)",
			r.Tenant, filepath.Base(path), want, path, rulesRemedy)
	}
	return r, nil
}

// rulesRemedy is what to do about a file that does not read.
const rulesRemedy = "restore it from a backup, or move it away to start without what the API saved in it"

// decodeTenantRules reads what Save wrote, strictly: an unknown field,
// another version or trailing data is an error, not rules silently lost.
func decodeTenantRules(b []byte) (tenantRules, error) {
	var r tenantRules
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return tenantRules{}, fmt.Errorf("alert: decode rules: %w", err)
	}
	if dec.More() {
		return tenantRules{}, errors.New("alert: decode rules: data after the rules object")
	}
	if r.Version != rulesVersion {
		return tenantRules{}, fmt.Errorf("alert: decode rules: version %d, this build reads %d", r.Version, rulesVersion)
	}
	return r, nil
}

// decodeRules reads the one file of the releases before, as strictly.
func decodeRules(b []byte) (map[string]string, error) {
	var f legacyRulesFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("alert: decode rules: %w", err)
	}
	if dec.More() {
		return nil, errors.New("alert: decode rules: data after the rules object")
	}
	if f.Version != legacyRulesVersion {
		return nil, fmt.Errorf("alert: decode rules: version %d, this build reads %d", f.Version, legacyRulesVersion)
	}
	return f.Tenants, nil
}
