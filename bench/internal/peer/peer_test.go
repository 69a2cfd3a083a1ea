package peer

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fake is a peer whose module does not exist: any attempt to build it
// would fail, so these tests show which paths never try.
var fake = Spec{Name: "fakepeer", Title: "Fake Peer", Module: "example.invalid/fakepeer", Version: "v0.0.1", Main: ".", Env: "APOLLO_BENCH_FAKEPEER"}

func TestGet(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", cache)
	given := filepath.Join(t.TempDir(), "given")
	if err := os.WriteFile(given, []byte("#!/bin/sh\necho 'fakepeer, version 9.9'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	t.Run("short without a build says why", func(t *testing.T) {
		_, err := Get(ctx, fake, "", false)
		if err == nil || !strings.Contains(err.Error(), "not built in -short") || !strings.Contains(err.Error(), fake.Env) {
			t.Fatalf("err = %v, want one naming -short and $%s", err, fake.Env)
		}
	})
	t.Run("a flag names the binary", func(t *testing.T) {
		b, err := Get(ctx, fake, given, false)
		if err != nil || b.Path != given || b.Version != "fakepeer, version 9.9" {
			t.Fatalf("Get = %+v, %v", b, err)
		}
	})
	t.Run("the environment names the binary", func(t *testing.T) {
		t.Setenv(fake.Env, given)
		b, err := Get(ctx, fake, "", false)
		if err != nil || b.Path != given {
			t.Fatalf("Get = %+v, %v", b, err)
		}
	})
	t.Run("a named binary that is missing is an error", func(t *testing.T) {
		_, err := Get(ctx, fake, filepath.Join(cache, "nothing"), true)
		if err == nil || !strings.Contains(err.Error(), fake.Env) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a cached build is used, even in -short", func(t *testing.T) {
		dir, err := cacheDir(fake)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(dir, cache) {
			t.Fatalf("cache dir %s is not under $XDG_CACHE_HOME %s", dir, cache)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(given)
		if err := os.WriteFile(filepath.Join(dir, fake.Name), data, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := Get(ctx, fake, "", false)
		if err != nil || b.Path != filepath.Join(dir, fake.Name) || !strings.Contains(b.From, fake.Module+"@"+fake.Version) {
			t.Fatalf("Get = %+v, %v", b, err)
		}
	})
}

func TestPlaceholder(t *testing.T) {
	root := t.TempDir()
	prep := Placeholder("ui/app/dist/index.html")
	if err := prep(root); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "ui/app/dist/index.html")
	if b, err := os.ReadFile(p); err != nil || !strings.Contains(string(b), "placeholder") {
		t.Fatalf("placeholder: %q, %v", b, err)
	}
	// A module that has the real file keeps it.
	if err := os.WriteFile(p, []byte("real"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := prep(root); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "real" {
		t.Fatalf("the real file was replaced: %q", b)
	}
}
