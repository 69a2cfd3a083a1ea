// Package notifytest holds what the channels' tests share. Endpoint is a
// fake vendor endpoint (robot, bot or webhook) that records what a channel
// posts and answers as a test says; Send and CheckFailures check what a
// notifier makes of its answers. Hostile, Deliver and CheckInert prove that
// a message carries its tenant and that hostile text from reporters cannot
// forge links or mentions in it: Hostile makes such a notification, Deliver
// sends notifications through a real Dispatcher, and CheckInert reads what
// reached the channel.
package notifytest
