package cluster

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/audit"
	"github.com/apollo-11/apollo/internal/testwait"
)

// Two nodes' audit logs share their entries, each tenant sees only its
// own, a tenant's entries are bounded (the oldest go), and an entry
// published on another tenant's subject is not listed as that tenant's.
func TestAuditSharedBoundedPerTenant(t *testing.T) {
	t.Parallel()
	s := runNATS(t)
	ctx := testwait.Context(t)
	open := func() *Audit {
		a, err := OpenAudit(ctx, AuditOptions{Conn: connect(t, s), Entries: 5, Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	a, b := open(), open()
	for i := range 8 {
		for _, tenant := range []string{"acme", "globex", "a.b%", ""} {
			a.Record(audit.Entry{Tenant: tenant, Actor: "x", Action: "task.correct", Target: fmt.Sprintf("%s-%d", tenant, i)})
		}
	}
	// Another tenant's entry on acme's subject: dropped by every reader.
	if err := connect(t, s).Publish(auditPrefix+TenantToken("acme"),
		[]byte(`{"at":"2026-01-01T00:00:00Z","tenant":"globex","actor":"x","action":"task.correct","target":"sneaked"}`)); err != nil {
		t.Fatal(err)
	}
	a.Record(audit.Entry{Tenant: "acme", Actor: "x", Action: "task.correct", Target: "acme-last"})
	for _, r := range []*Audit{a, b, open()} {
		for _, tenant := range []string{"acme", "globex", "a.b%", ""} {
			got := r.List(tenant, 100)
			// The sneaked entry took a place of acme's in the stream: a
			// node that reads it afresh has 4 of acme's.
			if len(got) != 5 && !(tenant == "acme" && len(got) == 4) {
				t.Fatalf("tenant %q: %d entries, want the bound, 5: %+v", tenant, len(got), got)
			}
			for _, e := range got {
				if e.Tenant != tenant || e.Target == "sneaked" {
					t.Errorf("tenant %q lists %+v", tenant, e)
				}
			}
			want := fmt.Sprintf("%s-7", tenant)
			if tenant == "acme" {
				want = "acme-last"
			}
			if got[0].Target != want {
				t.Errorf("tenant %q: newest %q, want %q", tenant, got[0].Target, want)
			}
		}
	}
}

// FuzzDecodeAuditEntry: whatever is stored on an audit subject, an entry
// read from it is its subject's tenant's, has a time, and has its fields
// within the log's limits.
func FuzzDecodeAuditEntry(f *testing.F) {
	f.Add("apollo.audit.acme", []byte(`{"at":"2026-01-01T00:00:00Z","tenant":"acme","actor":"a","action":"task.correct"}`))
	f.Add("apollo.audit._", []byte(`{"at":"2026-01-01T00:00:00Z","actor":"a","action":"x","count":-9223372036854775808}`))
	f.Add("apollo.audit.a%2Eb", []byte(`{"at":"2026-01-01T00:00:00Z","tenant":"a.b","detail":"\u0000\u001b"}`))
	f.Add("apollo.audit.globex", []byte(`{"at":"2026-01-01T00:00:00Z","tenant":"acme"}`))
	f.Add("apollo.audit.%", []byte(`null`))
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		e, err := decodeAuditEntry(subject, data)
		if err != nil {
			return
		}
		if subject != auditPrefix+TenantToken(e.Tenant) {
			t.Fatalf("an entry of tenant %q read from %q", e.Tenant, subject)
		}
		if e.At.IsZero() || len(e.Target) > 512 || len(e.Detail) > 1024 || len(e.Actor) > 128 || len(e.Action) > 128 || len(e.Remote) > 128 {
			t.Fatalf("%+v", e)
		}
	})
}

// A tenant's name longer than an entry keeps is cut in the entry and in
// its subject alike, so the entry is listed for the name it has.
func TestAuditLongTenantReadsBack(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("t", 300)
	a, err := OpenAudit(testwait.Context(t), AuditOptions{Conn: connect(t, runNATS(t)), Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Record(audit.Entry{Tenant: long, Actor: "x", Action: "task.correct"})
	capped := audit.Capped(audit.Entry{Tenant: long}).Tenant
	if got := a.List(capped, 10); len(got) != 1 {
		t.Errorf("the long tenant's entries: %+v, want 1", got)
	}
}
