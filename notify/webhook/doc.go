// Package webhook posts notifications to any HTTP endpoint: Apollo-11's own
// JSON, a body an Alertmanager webhook receiver understands, or a body
// made from a template (how SMS gateways and in-house systems are reached).
package webhook
