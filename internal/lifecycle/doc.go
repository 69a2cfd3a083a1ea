// Package lifecycle gives every long-running component of Apollo-11 one
// way to start and stop (docs/architecture.md, "Lifecycle"): Start once,
// Stop(ctx) stops the goroutines and waits for them or for ctx, errors are
// returned, and loops tick on the clock the component was given.
package lifecycle
