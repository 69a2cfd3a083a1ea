package rules

import (
	"fmt"
	"strings"
)

// Occurrence is something that job expectations find (docs/expectations.md)
// and an event rule can fire on, besides a run's status: ON: missed fires
// when a job's expected run did not start.
type Occurrence uint8

// The occurrences. Their names are those of the expect package's events;
// a run past max_runtime becomes a timeout, which ON: timeout covers.
const (
	OccurrenceMissed   Occurrence = iota + 1 // an expected run did not start within its grace
	OccurrenceTooShort                       // a run succeeded in less than min_runtime
	OccurrenceTooOften                       // a run started when max_runs had already started within runs_window
	OccurrenceFlapping                       // a job's runs keep switching between success and failure

	numOccurrences
)

var occurrenceNames = [numOccurrences]string{"", "missed", "too_short", "too_often", "flapping"}

// ParseOccurrence looks an occurrence up by name, ignoring case.
func ParseOccurrence(name string) (Occurrence, bool) {
	for o := OccurrenceMissed; o < numOccurrences; o++ {
		if strings.EqualFold(occurrenceNames[o], name) {
			return o, true
		}
	}
	return 0, false
}

// Occurrences lists every occurrence, in order.
func Occurrences() []Occurrence {
	os := make([]Occurrence, 0, numOccurrences-1)
	for o := OccurrenceMissed; o < numOccurrences; o++ {
		os = append(os, o)
	}
	return os
}

func (o Occurrence) String() string {
	if o > 0 && o < numOccurrences {
		return occurrenceNames[o]
	}
	return fmt.Sprintf("Occurrence(%d)", uint8(o))
}
