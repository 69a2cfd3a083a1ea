package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo/agent"
	"github.com/apollo-11/apollo/tui/components"
)

// apollo spool shows and sends what apollo exec left in its spool
// directory: events the server did not take in time, kept per token
// (spoolPartition) in slots (leaseSpool). Without it, events of a token
// no run uses any more could only be sent by hand (docs/cli.md).

func newSpoolCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "spool",
		Short: "Show and send the events apollo exec could not deliver: list, send",
		Long: `When the server cannot be reached, apollo exec keeps a run's events in its
spool directory (--spool, default $XDG_CACHE_HOME/apollo/spool or
~/.cache/apollo/spool), one part per token, and the next apollo exec with
the same token sends them first. apollo spool list shows what waits there;
apollo spool send sends it now, without running a command, and hands the
events of a token since rotated or revoked to another token of the same
tenant (--from).`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newSpoolListCmd(), newSpoolSendCmd())
	return cmd
}

// spoolFlags are what both subcommands take: the spool root, the server
// and the token (whose part of the spool is "yours").
type spoolFlags struct {
	cf   clientFlags
	root string
}

func (s *spoolFlags) register(cmd *cobra.Command) {
	s.cf.register(cmd)
	cmd.Flags().StringVar(&s.root, "spool", defaultSpoolDir(), "apollo exec's spool directory")
}

func (s *spoolFlags) resolve() error {
	if s.root == "" {
		return usageError("--spool: name apollo exec's spool directory")
	}
	if err := s.cf.resolveCLI(); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	return nil
}

// spoolPart is one token's part of the spool, as apollo spool list shows
// it.
type spoolPart struct {
	Name string `json:"name"` // no-token, or token- and a hash of the token
	Dir  string `json:"dir"`
	// Yours: the part of the token this command runs with.
	Yours  bool      `json:"yours"`
	Files  int       `json:"files"`
	Events int       `json:"events"`
	Bytes  int64     `json:"bytes"`
	Oldest time.Time `json:"oldest,omitzero"`
	Newest time.Time `json:"newest,omitzero"`
	// Sending counts the slots a running apollo exec holds: it sends
	// what they keep, and apollo spool send leaves them alone.
	Sending   int `json:"sending"`
	heldFiles int // the files of those slots
}

// strandedSpools lists the parts of tokens other than own under root
// whose free slots hold files: only a run with their token sends them,
// and a token rotated or gone never will (apollo exec warns of them).
func strandedSpools(root, own string) []spoolPart {
	parts, _ := readSpool(root, own, false)
	var out []spoolPart
	for _, p := range parts {
		if p.Name != own && p.Files > p.heldFiles {
			out = append(out, p)
		}
	}
	return out
}

func newSpoolListCmd() *cobra.Command {
	var (
		sf     spoolFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Show what waits in the spool, per token",
		Long: `Show each token's part of apollo exec's spool directory: how many events
and files wait there, how old they are, and how many slots a running
apollo exec holds (it is sending those). YOURS marks the part of the
token given (--token, $APOLLO_TOKEN or cli.yaml); a part named after no
token that runs any more waits for apollo spool send --from.

Exit codes: 0 ok (also when nothing waits), 2 bad flags.`,
		Example: `  apollo spool list
  apollo spool list --spool /var/cache/apollo/spool -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usageError("-o %q: use table or json", output)
			}
			if err := sf.resolve(); err != nil {
				return err
			}
			parts, err := readSpool(sf.root, spoolPartition(sf.cf.token), true)
			if err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			if output == "json" {
				if parts == nil {
					parts = []spoolPart{}
				}
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(parts)
			}
			return printSpool(cmd.OutOrStdout(), sf.root, parts)
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

func printSpool(w io.Writer, root string, parts []spoolPart) error {
	if len(parts) == 0 {
		_, err := fmt.Fprintf(w, "nothing waits in %s\n", components.Escape(root))
		return err
	}
	t := newTable(w, "PART", "YOURS", "EVENTS", "FILES", "BYTES", "OLDEST", "NEWEST", "SENDING")
	for _, p := range parts {
		yours := ""
		if p.Yours {
			yours = "yes"
		}
		t.row(p.Name, yours, p.Events, p.Files, p.Bytes, fmtSpoolTime(p.Oldest), fmtSpoolTime(p.Newest), p.Sending)
	}
	return t.flush()
}

func fmtSpoolTime(at time.Time) string {
	if at.IsZero() {
		return "-"
	}
	return at.Local().Format(time.DateTime)
}

func newSpoolSendCmd() *cobra.Command {
	var (
		sf   spoolFlags
		from string
		wait time.Duration
	)
	cmd := &cobra.Command{
		Use:   "send [--from PART]",
		Short: "Send what waits in the spool now",
		Long: `Send the events apollo exec left in the spool under your token (--token,
$APOLLO_TOKEN or cli.yaml), as the next apollo exec would, and delete what
the server took. Slots a running apollo exec holds are left to it.

--from PART sends another token's part instead (a name apollo spool list
shows, or its directory), with your token: for events reported with a
token since rotated or revoked. They land in your token's tenant, so give
a token of the tenant they were reported for.

Gives the server up to --wait; what it did not take stays in the spool.

Exit codes: 0 every event was sent (also when nothing waited), 1 events
are left (the server could not be reached, refused the token, or --wait
passed), 2 bad flags or no such part.`,
		Example: `  apollo spool send
  APOLLO_TOKEN=apl_new... apollo spool send --from token-3f2a9c01d4e5b6a7`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := sf.resolve(); err != nil {
				return err
			}
			if wait <= 0 {
				return usageError("--wait %v: give the server a positive time, e.g. 30s", wait)
			}
			own := spoolPartition(sf.cf.token)
			dir, other := filepath.Join(sf.root, own), false
			if from != "" {
				d, err := spoolPartDir(sf.root, from)
				if err != nil {
					return &exitError{code: exitUsage, err: err}
				}
				dir, other = d, filepath.Base(d) != own
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), wait)
			defer cancel()
			return sendSpool(ctx, sf.cf, dir, other, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	sf.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&from, "from", "", "send this part of the spool (another token's) with your token")
	fl.DurationVar(&wait, "wait", 30*time.Second, "give the server at most this long")
	return cmd
}

// spoolPartDir finds the part --from names: a name under root, or a
// directory.
func spoolPartDir(root, from string) (string, error) {
	for _, d := range []string{filepath.Join(root, from), from} {
		if info, err := os.Stat(d); err == nil && info.IsDir() {
			return d, nil
		}
	}
	return "", fmt.Errorf("--from %q: no such part in %s (apollo spool list shows them)", from, root)
}

// sendSpool sends every free slot of dir through a client of its own, as
// apollo exec sends an earlier run's leftovers. anyToken sends the files
// of the other tokens too (--from).
func sendSpool(ctx context.Context, cf clientFlags, dir string, anyToken bool, stdout, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(&prefixWriter{w: stderr, prefix: "apollo spool: "}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := []agent.Option{agent.WithToken(cf.token), agent.WithLogger(log)}
	if anyToken {
		opts = append(opts, agent.WithSpoolOfAnyToken())
	}
	var sum spoolSent
	err := eachFreeSlot(dir, func(slot string) error {
		c, err := agent.New(cf.server, append(opts, agent.WithSpoolDir(slot))...)
		if err != nil {
			return err
		}
		cerr := c.Close(ctx)
		st := c.Stats()
		sum.accepted += st.Accepted + st.Held + st.Waiting
		sum.duplicate += st.Duplicate
		sum.rejected += st.Rejected
		return cerr
	}, &sum)
	fmt.Fprintf(stdout, "sent %d events from %s (%d the server had already, %d it refused)\n",
		sum.accepted+sum.duplicate+sum.rejected, components.Escape(dir), sum.duplicate, sum.rejected)
	if sum.busy > 0 {
		fmt.Fprintf(stdout, "%d slot(s) held by a running apollo exec, which sends them\n", sum.busy)
	}
	if err != nil || sum.left > 0 {
		msg := fmt.Sprintf("%d spool file(s) left in %s", sum.left, dir)
		if err != nil {
			msg += ": " + err.Error()
		}
		return &exitError{code: exitServer, err: fmt.Errorf("%s (run apollo spool send again once the server takes them)", msg)}
	}
	return nil
}

// spoolSent is what apollo spool send did.
type spoolSent struct {
	accepted, duplicate, rejected uint64
	busy                          int // slots a running apollo exec holds
	left                          int // files still in the free slots after sending
}
