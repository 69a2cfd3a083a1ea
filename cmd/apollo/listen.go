package main

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
)

// checkListen refuses to serve beyond loopback without tokens, unless told
// to (docs/security.md).
func checkListen(cfg config.Config) error {
	if len(cfg.Auth.Tokens) > 0 || cfg.Auth.InsecureNoAuth || isLoopback(cfg.Listen) {
		return nil
	}
	return fmt.Errorf(`refusing to listen on %s without tokens: anyone who can reach it could read and change everything.
Either:
  - make a token (apollo token create --role admin), add the printed line to apollo.yaml under auth.tokens,
    and start with --config apollo.yaml;
  - or listen on loopback (--listen 127.0.0.1:1969) behind a proxy that authenticates;
  - or, on a network you trust completely, pass --insecure-no-auth`, cfg.Listen)
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authenticator returns token authentication when tokens are configured,
// and the open local mode otherwise. The API records failed attempts in
// the audit log.
func (s *server) authenticator() (httpapi.Authenticator, error) {
	if len(s.cfg.Auth.Tokens) == 0 {
		return httpapi.OpenAuth{}, nil
	}
	toks, err := tokensFromConfig(s.cfg.Auth.Tokens)
	if err != nil {
		return nil, err
	}
	if s.cfg.Jobs != "" {
		// The in-process scheduler reports through the API like any
		// reporter, with an agent token of the default tenant of its own.
		secret, tok, err := httpapi.NewToken(schedTokenName, httpapi.RoleAgent, "")
		if err != nil {
			return nil, err
		}
		s.schedToken, toks = secret, append(toks, tok)
	}
	return httpapi.NewTokenAuth(toks), nil
}

// warnInsecure reminds, every minute until stop is closed, that anyone
// who reaches cfg.Listen can use this process: it serves beyond loopback
// without tokens (--insecure-no-auth). It does nothing otherwise.
func warnInsecure(cfg config.Config, log *slog.Logger, clock apollo.Clock, stop <-chan struct{}) {
	if !cfg.Auth.InsecureNoAuth || len(cfg.Auth.Tokens) > 0 {
		return
	}
	warn := func() {
		log.Warn("serving WITHOUT authentication beyond loopback (--insecure-no-auth): anyone who reaches " + cfg.Listen + " can read and change everything")
	}
	warn()
	t := clock.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			warn()
		case <-stop:
			return
		}
	}
}
