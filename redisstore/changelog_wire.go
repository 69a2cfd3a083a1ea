package redisstore

import (
	"encoding/json"
	"strconv"
)

// UnmarshalJSON reads a change as a bus of any release writes it. The
// next release's bus may write a record kind or a status this one has no
// name for (it did with flapping, which therefore went in a field of its
// own, changelog.go): read with the types' own decoding, one such change
// failed the whole batch it was in, and in a rolling upgrade every alert
// process not yet upgraded lost the failures of every batch that held
// one. So a change that does not read, for a name it does not know or
// anything else in it, is read with skip saying why, and the readers
// pass it over alone (ChangeFollower.entry, ChangeFollower.SubscribeChannel). Fields it
// does not know it ignores, as before.
func (w *wireChange) UnmarshalJSON(b []byte) error {
	type fields wireChange // the same fields, without this method
	var r struct {
		*fields
		Status string `json:"s"`
		Prev   string `json:"p"`
		Kind   string `json:"k"`
	}
	*w = wireChange{}
	r.fields = (*fields)(w)
	if err := json.Unmarshal(b, &r); err != nil {
		w.skip = clip(err.Error())
		return nil
	}
	switch {
	case w.Status.UnmarshalText([]byte(r.Status)) != nil:
		w.skip = "status " + strconv.Quote(clip(r.Status))
	case w.Prev.UnmarshalText([]byte(r.Prev)) != nil:
		w.skip = "previous status " + strconv.Quote(clip(r.Prev))
	case r.Kind != "" && w.Kind.UnmarshalText([]byte(r.Kind)) != nil:
		w.skip = "record kind " + strconv.Quote(clip(r.Kind))
	}
	return nil
}
