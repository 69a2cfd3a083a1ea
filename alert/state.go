package alert

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/atomicfile"
	"github.com/apollo-11/apollo/internal/sourcefile"
)

// StateStore keeps what the engine must not forget across a restart:
// alerts with their "notified" marks and acks, and silences. The engine
// saves the whole State after each cycle that changed something and after
// handing over event notifications, one save at a time, and loads it once
// in Start. alerttest.RunStateStore
// is the conformance suite.
type StateStore interface {
	// Load returns the last saved State; an empty State when nothing was
	// saved yet.
	Load(ctx context.Context) (State, error)
	Save(ctx context.Context, s State) error
}

// State is the engine's memory, for a StateStore.
type State struct {
	Alerts   []StoredAlert `json:"alerts"`
	Silences []Silence     `json:"silences"`
	// Live is how far the event rules had heard of the bus; nil when the
	// engine keeps no mark (it was not restored with one: Restore).
	Live *LiveMark `json:"live,omitempty"`
	// Owed are the notifications decided (their alerts marked told) but
	// not yet handed to the Sender; Load hands them over again.
	Owed []OwedNotification `json:"owed,omitempty"`
}

// StoredAlert is an alert with what the engine needs to carry on with it.
type StoredAlert struct {
	apollo.Alert
	// FiringSent: the firing (or an event rule's first) notification went
	// out, or another engine holding the dedup lock sent it.
	FiringSent   bool      `json:"firingSent,omitempty"`
	ResolvedSent bool      `json:"resolvedSent,omitempty"`
	LastSentAt   time.Time `json:"lastSentAt,omitzero"` // for RepeatInterval
	// Rate rules: the last evaluation, and since when the condition has
	// been false while firing (KEEP).
	LastEval   time.Time `json:"lastEval,omitzero"`
	FalseSince time.Time `json:"falseSince,omitzero"`
	// Event rules: when the group window ends, the first match's event
	// time (part of the dedup key, the same in every engine), the
	// matches per job name, and how many matches messages have told.
	Event     bool             `json:"event,omitempty"`
	GroupEnds time.Time        `json:"groupEnds,omitzero"`
	FirstTs   int64            `json:"firstTs,omitempty"`
	Names     map[string]int64 `json:"names,omitempty"`
	Told      int              `json:"told,omitempty"`
}

// persist saves the state now. People's changes (acks, silences) call it
// before they answer, so that what the API confirmed survives a crash;
// the loop calls it (through save) after a cycle that changed something.
func (e *Engine) persist(ctx context.Context) error {
	e.saveMu.Lock()
	defer e.saveMu.Unlock()
	e.dirty.Store(false) // a change made during the save marks it again
	// The mark before the copy: every change it covers is in the copy.
	live := e.heard.at()
	s := e.snapshot()
	s.Live = live
	// What is owed goes on record before the marks it goes with: a state
	// store that keeps no owed list (Redis) would otherwise save an alert
	// told whose notification a kill -9 then loses.
	e.recordOwed()
	if err := e.opts.State.Save(ctx, s); err != nil {
		e.dirty.Store(true)
		e.st.saveErrors.Add(1)
		return err
	}
	return nil
}

// saveTimeout bounds the save a person's change waits for.
const saveTimeout = 10 * time.Second

// persistChange saves a person's change before it is confirmed. When the
// save fails, undo takes the change back and the answer says nothing
// changed; the cause goes to the log, not to the caller.
func (e *Engine) persistChange(what string, undo func()) error {
	ctx, cancel := context.WithTimeout(context.Background(), saveTimeout)
	defer cancel()
	err := e.persist(ctx)
	if err == nil {
		return nil
	}
	undo()
	e.log.Error("alert: a change could not be saved, so it was undone", "change", what, "err", err)
	return &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "the " + what + " could not be saved, so it was not made",
		Hint: "nothing changed; the server log says why (the data directory or Redis); try again"}
}

// MemoryState is a StateStore in memory: state survives an engine, not
// the process. Tests use it to restart an engine.
type MemoryState struct {
	mu    sync.Mutex
	saved []byte
}

var (
	_ StateStore = (*MemoryState)(nil)
	_ StateStore = (*FileState)(nil)
)

// NewMemoryState returns an empty MemoryState.
func NewMemoryState() *MemoryState { return &MemoryState{} }

// Load implements StateStore.
func (m *MemoryState) Load(ctx context.Context) (State, error) {
	m.mu.Lock()
	saved := m.saved
	m.mu.Unlock()
	if saved == nil {
		return State{}, nil
	}
	return decodeState(saved)
}

// Save implements StateStore. It keeps an encoded copy, so the caller's
// State may change afterwards, as with any other store.
func (m *MemoryState) Save(ctx context.Context, s State) error {
	b, err := encodeState(s)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.saved = b
	m.mu.Unlock()
	return nil
}

// FileState keeps the State in one JSON file, replaced atomically (a
// temporary file, fsync, rename, fsync of the directory), so a crash
// leaves the old file or the new one, never a torn one. The engine's
// LiveMark goes in a file of its own beside it (alerts.live.json for
// alerts.json), written after it and naming it by its SHA-256: the state
// file stays the one the release before reads (a downgrade keeps its
// alerts), and a mark that does not go with the state file beside it (a
// crash between the two writes, or a state file an older release wrote
// since) is not used: without one the replay tells the event rules
// nothing, as before marks were kept.
type FileState struct {
	path, markPath string
}

// NewFileState returns a FileState at path; its directory must exist.
func NewFileState(path string) *FileState {
	return &FileState{path: path, markPath: strings.TrimSuffix(path, ".json") + ".live.json"}
}

// markFile is the file of a FileState's LiveMark.
type markFile struct {
	Version int    `json:"version"`
	State   string `json:"state"` // SHA-256 of the state file it goes with, hex
	LiveMark
}

const markVersion = 1

func stateHash(state []byte) string {
	h := sha256.Sum256(state)
	return hex.EncodeToString(h[:])
}

// decodeMark reads a mark file, strictly; nil when it does not read or
// does not go with the state file whose bytes are state.
func decodeMark(b, state []byte) *LiveMark {
	var f markFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if dec.Decode(&f) != nil || dec.More() || f.Version != markVersion || f.State != stateHash(state) {
		return nil
	}
	return &f.LiveMark
}

// stateVersion is the file format; a file of another version is refused
// rather than misread.
const stateVersion = 1

type stateFile struct {
	Version int       `json:"version"`
	SavedAt time.Time `json:"savedAt,omitzero"`
	State
}

func encodeState(s State) ([]byte, error) {
	b, err := json.Marshal(stateFile{Version: stateVersion, State: s})
	if err != nil {
		return nil, fmt.Errorf("alert: encode state: %w", err)
	}
	return b, nil
}

// decodeState reads what encodeState wrote, strictly: an unknown field
// or another version is an error, not silently lost state.
func decodeState(b []byte) (State, error) {
	var f stateFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return State{}, fmt.Errorf("alert: decode state: %w", err)
	}
	if dec.More() {
		return State{}, errors.New("alert: decode state: data after the state object")
	}
	if f.Version != stateVersion {
		return State{}, fmt.Errorf("alert: decode state: version %d, this build reads %d", f.Version, stateVersion)
	}
	for i := range f.Alerts {
		a := &f.Alerts[i]
		switch {
		case !validID(a.ID):
			return State{}, fmt.Errorf("alert: decode state: alerts[%d]: bad id %q", i, a.ID)
		case !slices.Contains([]apollo.AlertState{apollo.AlertPending, apollo.AlertFiring, apollo.AlertResolved}, a.State):
			return State{}, fmt.Errorf("alert: decode state: alerts[%d]: bad state %q", i, a.State)
		}
	}
	for i := range f.Silences {
		if !validID(f.Silences[i].ID) {
			return State{}, fmt.Errorf("alert: decode state: silences[%d]: bad id %q", i, f.Silences[i].ID)
		}
	}
	return f.State, nil
}

// MaxStateFileBytes bounds the state file and its live mark, at a write
// and at a read. The state's largest part is the silences, at most
// MaxSilences a tenant of about 2 KiB as people write them (42 KiB at
// most: a comment and 32 label values of 1 KiB); its alerts, acks and
// owed notifications are what the rules keep firing. 256 MiB is far past
// what a server holds in memory for them. A Save past it fails (logged;
// the file keeps the last state that fitted), so the server never writes
// a file it would refuse at its next start; a larger file was replaced or
// damaged, and reading it whole would fill memory before the start could
// say which file is wrong.
const MaxStateFileBytes = 256 << 20

// Load implements StateStore. A missing file is an empty State.
func (f *FileState) Load(ctx context.Context) (State, error) {
	b, err := sourcefile.ReadOwn(f.path, "alert state file", MaxStateFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, nil
	}
	if err != nil && !errors.Is(err, fs.ErrPermission) { // a wrong owner: the file is fine (chown)
		err = fmt.Errorf("%w (file %s; %s)", err, f.path, stateRemedy)
	}
	if err != nil {
		return State{}, fmt.Errorf("alert: load state: %w", err)
	}
	s, err := decodeState(b)
	if err != nil {
		return State{}, fmt.Errorf("%w (file %s; %s)", err, f.path, stateRemedy)
	}
	m, err := sourcefile.ReadOwn(f.markPath, "file of the event rules' place in the log", MaxStateFileBytes)
	switch {
	case err == nil:
		s.Live = decodeMark(m, b) // one that does not go with b is not used
	case errors.As(err, new(*sourcefile.TooLargeError)), errors.As(err, new(*sourcefile.NotFileError)):
		return State{}, fmt.Errorf("alert: load state: %w (move it away: the event rules then hear of none of the runs the log replays at this start)", err)
	}
	return s, nil
}

// stateRemedy is what to do about a state file that does not read.
const stateRemedy = "move it away to start with no alert state"

// Save implements StateStore.
func (f *FileState) Save(ctx context.Context, s State) error {
	live := s.Live
	s.Live = nil
	b, err := encodeState(s)
	if err != nil {
		return err
	}
	if len(b) > MaxStateFileBytes {
		return fmt.Errorf("alert: save state: %d bytes, over the %d MiB the file may hold (the silences and alerts of every tenant): the file keeps the last state that fitted", len(b), MaxStateFileBytes>>20)
	}
	if err := atomicfile.Write(f.path, b, 0o600); err != nil {
		return fmt.Errorf("alert: save state: %w", err)
	}
	if live == nil {
		return nil // a mark left beside goes with another state file: not used
	}
	m, err := json.Marshal(markFile{Version: markVersion, State: stateHash(b), LiveMark: *live})
	if err != nil {
		return fmt.Errorf("alert: encode the live mark: %w", err)
	}
	if len(m) > MaxStateFileBytes {
		return fmt.Errorf("alert: save the live mark: %d bytes, over the %d MiB the file may hold", len(m), MaxStateFileBytes>>20)
	}
	if err := atomicfile.Write(f.markPath, m, 0o600); err != nil {
		return fmt.Errorf("alert: save the live mark: %w", err)
	}
	return nil
}
