// Package termtext makes text that others chose (job names, summaries,
// error messages) safe to print on a terminal: the TUI, the CLI and the
// console notification channel all print such text.
package termtext
