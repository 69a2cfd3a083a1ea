package rulebook

import (
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/rules"
)

// memEngine holds each tenant's rules in force.
type memEngine struct {
	mu   sync.Mutex
	srcs map[string][]byte
	rs   map[string][]*rules.Rule
}

func (e *memEngine) Rules(tenant string) []*rules.Rule {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rs[tenant]
}

func (e *memEngine) RulesSource(tenant string) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.srcs[tenant]
}

func (e *memEngine) SetRulesSource(tenant string, rs []*rules.Rule, src []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.srcs[tenant], e.rs[tenant] = src, rs
}

// Two PUTs of a tenant's rules at once: the rules in force are the ones
// saved last, which a restart loads (invariant 9). Before, a second PUT
// could be saved and put in force while the first, saved before it, had
// yet to be put in force, and then it was, over the second. The first
// save is held back once written, as a slow disk or Redis would.
func TestConcurrentPutsAgreeWithTheSaved(t *testing.T) {
	eng := &memEngine{srcs: map[string][]byte{}, rs: map[string][]*rules.Rule{}}
	var (
		mu         sync.Mutex
		saved      = map[string]string{}
		calls      int
		firstSaved = make(chan struct{})
		let        = make(chan struct{})
		nextBegins = make(chan struct{})
	)
	b := Book{Engine: eng, Save: func(tenant string, src []byte) error {
		mu.Lock()
		calls++
		n := calls
		if n == 2 {
			close(nextBegins)
		}
		saved[tenant] = string(src)
		mu.Unlock()
		if n == 1 {
			close(firstSaved)
			<-let
		}
		return nil
	}}
	first := "RULE a task_prefix: \"a\" ON: failed\n"
	second := "RULE b task_prefix: \"b\" ON: failed\n"
	put := func(src string, errs chan<- error) {
		_, problems, err := b.PutRules(t.Context(), "acme", []byte(src), "")
		if err == nil && problems != nil {
			t.Errorf("problems in %q: %v", src, problems)
		}
		errs <- err
	}
	errA, errB := make(chan error, 1), make(chan error, 1)
	go put(first, errA)
	<-firstSaved // saved, not yet in force
	go put(second, errB)
	select {
	case <-nextBegins: // the second reached the store while the first was not in force
		if err := <-errB; err != nil {
			t.Fatal(err)
		}
		close(let)
	case <-time.After(time.Second): // the second waits for the first
		close(let)
		if err := <-errB; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-errA; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := string(eng.RulesSource("acme")); got != saved["acme"] {
		t.Fatalf("in force %q, saved (what a restart loads) %q", got, saved["acme"])
	}
}

// While one tenant's PUT of rules is held in its save (a slow disk or
// Redis), another tenant's PUT goes through, is saved and in force.
// Before, one lock for the process made every PUT wait for the one
// before, whichever tenant it was for. Both are saved and in force once
// the held one goes on.
func TestOneTenantsHeldSaveHoldsUpNoOther(t *testing.T) {
	t.Parallel()
	eng := &memEngine{srcs: map[string][]byte{}, rs: map[string][]*rules.Rule{}}
	var (
		mu      sync.Mutex
		saved   = map[string]string{}
		holding = make(chan struct{})
		let     = make(chan struct{})
	)
	b := Book{Engine: eng, Save: func(tenant string, src []byte) error {
		if tenant == "acme" {
			close(holding)
			<-let
		}
		mu.Lock()
		saved[tenant] = string(src)
		mu.Unlock()
		return nil
	}}
	src := map[string]string{"acme": "RULE a task_prefix: \"a\" ON: failed\n", "globex": "RULE g task_prefix: \"g\" ON: failed\n"}
	put := func(tenant string, errs chan<- error) {
		_, problems, err := b.PutRules(t.Context(), tenant, []byte(src[tenant]), "")
		if err == nil && problems != nil {
			t.Errorf("problems in %q: %v", src[tenant], problems)
		}
		errs <- err
	}
	errA, errG := make(chan error, 1), make(chan error, 1)
	go put("acme", errA)
	<-holding
	go put("globex", errG)
	select {
	case err := <-errG:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testwait.Timeout(t)):
		close(let)
		t.Fatal("globex's PUT waited for acme's held save")
	}
	close(let)
	if err := <-errA; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for tenant, want := range src {
		if got := string(eng.RulesSource(tenant)); got != want || saved[tenant] != want {
			t.Errorf("tenant %s: in force %q, saved %q; want %q", tenant, got, saved[tenant], want)
		}
	}
}
