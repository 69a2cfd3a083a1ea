// Package wecom sends notifications to a WeCom (企业微信) group through a
// group robot's webhook, as markdown or as text with mentions.
package wecom
