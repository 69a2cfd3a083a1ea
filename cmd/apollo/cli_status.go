package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

func newStatusCmd() *cobra.Command {
	var a apiCmd
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Health of the server and its parts",
		Long: `Ask the server whether it is alive (/healthz) and ready (/readyz: recovery
done), and print what it says about its parts (/api/v1/system, when the
server has it: the bus, the log, the stream...).

Exit codes: 0 ready, 1 not ready or unreachable, 2 bad flags.`,
		Example: `  apollo status
  apollo status --server https://apollo.example.com -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			health, err := c.Health(ctx)
			if err != nil {
				return err
			}
			ready, readyErr := c.Ready(ctx)
			var ae *apiclient.Error
			if readyErr != nil && !errors.As(readyErr, &ae) {
				return readyErr // not an answer at all
			}
			if ready.Status == "" && ae != nil {
				ready.Status = ae.Error()
			}
			// The parts are optional: an older server has no such route,
			// and a token may not be allowed to read it.
			system, sysErr := c.System(ctx)
			if a.json() {
				all := map[string]any{"server": c.Server(), "health": health, "ready": ready}
				if sysErr == nil {
					all["system"] = system
				}
				if err := printAnswer(cmd.OutOrStdout(), all); err != nil {
					return err
				}
			} else {
				printStatus(cmd.OutOrStdout(), c.Server(), health.Status, ready.Status, system, sysErr)
			}
			if readyErr != nil {
				return &exitError{code: exitServer, err: fmt.Errorf("the server at %s is not ready: %s", c.Server(), ready.Status)}
			}
			return nil
		},
	}
	a.register(cmd)
	return cmd
}

func printStatus(w io.Writer, base, health, ready string, system json.RawMessage, sysErr error) {
	t := newTable(w)
	t.row("server", base)
	t.row("health", health)
	t.row("ready", ready)
	switch code := apollo.ErrorCode(sysErr); {
	case sysErr == nil:
		var v any
		if json.Unmarshal(system, &v) == nil {
			for _, kv := range flatten("", v) {
				t.row(kv[0], kv[1])
			}
		}
	case errors.Is(sysErr, apiclient.ErrNoRoute):
		// an older server: nothing more to say
	case code == apollo.EUNAUTHORIZED || code == apollo.EFORBIDDEN:
		var ae *apollo.Error
		errors.As(sysErr, &ae)
		t.row("parts", "(this token may not read /api/v1/system: "+ae.Message+")")
	default:
		t.row("parts", "(unknown: "+sysErr.Error()+")")
	}
	t.flush()
}

// flatten turns nested JSON into sorted "a.b.c  value" pairs, so that
// whatever the server reports about its parts prints without this CLI
// knowing its shape.
func flatten(prefix string, v any) [][2]string {
	var out [][2]string
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out = append(out, flatten(p, x[k])...)
		}
	case []any:
		if len(x) == 0 {
			return [][2]string{{prefix, "[]"}}
		}
		for i, e := range x {
			out = append(out, flatten(fmt.Sprintf("%s[%d]", prefix, i), e)...)
		}
	case nil:
		out = append(out, [2]string{prefix, "-"})
	case float64: // 'f' with no fixed precision: 1000000, not 1e+06
		out = append(out, [2]string{prefix, strconv.FormatFloat(x, 'f', -1, 64)})
	default:
		out = append(out, [2]string{prefix, fmt.Sprint(x)})
	}
	return out
}
