// Package components holds the widgets of the terminal dashboard: a table
// that drops its least important columns when the terminal is narrow, a
// sparkline, the tab bar, the styles (with a NO_COLOR set), the
// formatting of times, durations and rates, and Escape, which the CLI
// uses too, for text from the server. They draw strings and know
// nothing about Apollo-11's wire protocol; the pages feed them.
package components
