// Package rules is Apollo-11's alert rule language: a lexer, a
// recursive-descent parser, and expressions compiled into closures that
// the alert engine evaluates every 10 seconds without allocating.
//
// A rules file is either text in the seed's form
//
//	RULE task_prefix: "batch_" WINDOW: 5m THRESHOLD: failed_rate > 0.05 DURATION: 2m NOTIFY: dingtalk, email
//
// or the equivalent JSON, and inhibit rules, which hold the alerts that are
// echoes of a firing cause:
//
//	INHIBIT SOURCE: rule=warehouse_load_failed TARGET: task_prefix="report_" EQUAL: team
//
// ParseFile reads either form and returns every problem it found with
// file:line:col, what it expected and a hint; Parse returns the rules alone.
// The package does no I/O and keeps no state: the alert engine owns timing
// (DURATION, KEEP, GROUP_WINDOW), fetches the metrics an Expr asks for and
// asks Inhibit.Inhibits of its firing alerts before it notifies (a held
// alert is marked with the source's rule; InhibitedBy does the same over
// a list). docs/rules.md is the reference for
// users.
package rules
