package main

import (
	"os"

	"github.com/spf13/cobra"
)

// clientFlags are shared by every command that talks to a server.
type clientFlags struct {
	server string
	token  string
}

// register adds --server and --token, whose defaults come from the
// environment and then cli.yaml (resolveCLI; docs/cli.md, "Finding the
// server").
func (c *clientFlags) register(cmd *cobra.Command) {
	c.registerAs(cmd, "server URL (default $APOLLO_SERVER, else cli.yaml's server:, else http://127.0.0.1:1969)",
		"API token (default $APOLLO_TOKEN, else cli.yaml's token:)")
}

// registerEnv adds --server and --token for a process that reads no
// cli.yaml, only the environment (resolve): apollo sched, a daemon.
func (c *clientFlags) registerEnv(cmd *cobra.Command) {
	c.registerAs(cmd, "server URL (default $APOLLO_SERVER, else http://127.0.0.1:1969)", "API token (default $APOLLO_TOKEN)")
}

func (c *clientFlags) registerAs(cmd *cobra.Command, server, token string) {
	fl := cmd.Flags()
	fl.StringVar(&c.server, "server", "", server)
	fl.StringVar(&c.token, "token", "", token)
}

// resolve fills the defaults from the environment.
func (c *clientFlags) resolve() {
	if c.server == "" {
		c.server = os.Getenv("APOLLO_SERVER")
	}
	if c.server == "" {
		c.server = "http://127.0.0.1:1969"
	}
	if c.token == "" {
		c.token = os.Getenv("APOLLO_TOKEN")
	}
}
