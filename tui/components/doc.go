// Package components holds the widgets of the terminal dashboard: a table
// that drops its least important columns when the terminal is narrow, a
// sparkline, the tab bar, the styles (with a NO_COLOR set), and the
// formatting of times, durations and rates. They draw strings and know
// nothing about Apollo-11's wire protocol; the pages feed them.
package components
