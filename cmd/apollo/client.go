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

func (c *clientFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&c.server, "server", "", "server URL (default $APOLLO_SERVER, else http://127.0.0.1:1969)")
	fl.StringVar(&c.token, "token", "", "API token (default $APOLLO_TOKEN)")
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
