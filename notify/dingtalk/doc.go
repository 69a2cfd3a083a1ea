// Package dingtalk sends notifications to a DingTalk group through a custom
// robot's webhook, as markdown, optionally signed and mentioning people.
package dingtalk
