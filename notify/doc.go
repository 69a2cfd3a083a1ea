// Package notify delivers the alert engine's notifications to people.
//
// A Dispatcher owns one lane per configured channel. Send renders nothing
// and waits for nothing: it drops each notification into the bounded queue
// of every channel it names, one queue per tenant, taken from in turn.
// Each lane then runs the same short line of stages: rate limit
// (coalescing what waits into one digest), retry with backoff, and one
// attempt with a timeout. A slow or dead channel only ever slows its own
// lane. Duplicates are removed before Send, by the alert
// engine's dedup lock (keyed by tenant), and nowhere else.
//
// Channels (DingTalk, WeCom, Feishu, Slack, email, webhooks, console) live in
// the subpackages; each implements Notifier. Templates turn a Notification
// into a Message in English or Simplified Chinese, and a channel may
// override them.
package notify
