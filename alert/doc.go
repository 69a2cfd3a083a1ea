// Package alert turns rules and metrics into alerts and notifications.
//
// An Engine holds one rule set per tenant (SetRules). Rate rules are
// evaluated every Interval over metrics windows: one metrics.Table per
// distinct window and tenant per cycle, a prefix's jobs totalled with
// Table.Range and Table.Sum, or each job on its own with BY: name. Each
// (rule, group) moves inactive → pending → firing → resolved, as
// docs/rules.md describes. Event rules see every applied change through
// Apply (the engine is a bus.Observer): the first match of a group is
// notified at once, the rest fold into one follow-up at the end of each
// group window while the storm lasts.
//
// Before a notification goes to the Sender, the engine takes a dedup lock
// (Locker: in memory, or SET NX PX in Redis) so that two engines sharing
// the lock never both send it. Acks stop repeats; silences stop
// notifications but not state changes. Alerts, their "notified" marks,
// acks and silences are saved to a StateStore after every cycle that
// changed something and loaded by Start, so a restart does not notify
// twice; with them, the notifications decided (their alerts marked) and
// not yet handed to the Sender, which Start hands over, so a restart does
// not lose one either. An ack or a silence is saved before it is
// confirmed. The rules
// set through the API are kept in a RuleStore (FileRules, or Redis).
//
// Loader watches a rules file and hands every good version to a callback;
// a bad version is logged and the old rules keep running.
package alert
