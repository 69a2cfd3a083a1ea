// Package apiclient is Apollo-11's REST API from the outside: the wire
// types of every answer and stream message, one table between error codes
// and HTTP statuses, and a Client with a method for each route the CLI and
// the dashboards call.
//
// The server (package httpapi) encodes these same types and answers errors
// through the same table, so a shape is written once and an error reads
// back as the *apollo.Error the server returned. It imports the standard
// library and the root package only: any Go program can use it.
package apiclient
