// Package notifytest holds what every channel's tests share to prove that
// a message carries its tenant and that hostile text from reporters cannot
// forge links or mentions in it: Hostile makes such a notification,
// Deliver sends notifications through a real Dispatcher, and CheckInert
// reads what reached the channel.
package notifytest
