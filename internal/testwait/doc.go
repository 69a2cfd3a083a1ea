// Package testwait decides how long a test waits for something that must
// happen: a message, a signal, a process to end. The answer is long enough
// that a loaded machine (two cores shared by many builds, the race
// detector's slowdown) makes a test slower, never red, and short enough that
// a test waiting for something that never comes fails with its own message
// before go test's -timeout stops the whole binary. Tests import it instead
// of writing "10 * time.Second" guesses.
package testwait
