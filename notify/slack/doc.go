// Package slack sends notifications to a Slack channel through an incoming
// webhook, as a header and a mrkdwn section.
package slack
