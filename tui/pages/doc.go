// Package pages holds the four screens of the terminal dashboard (Tasks,
// Jobs, Alerts, System) and the task detail view. A page draws the data the
// dashboard hands it and turns keys into intents (open a task, acknowledge
// an alert, silence it, filter, pick a job) that it returns as messages; it
// does no I/O itself. The dashboard (package tui) does the I/O in commands
// and feeds the results back.
package pages
