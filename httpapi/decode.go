package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/apollo-11/apollo"
)

// decodeEvents parses an ingest body: one JSON object, a JSON array of
// objects, or (ndjson) one object per line. A body that is not JSON at all
// fails as a whole (err, with the byte offset); an element that is JSON but
// not a valid event (a wrong type, an unknown status) fails on its own, in
// bad[i], and the others go on.
func decodeEvents(body []byte, ndjson bool) (evs []apollo.Event, bad []*apollo.Error, err error) {
	var elems [][]byte
	var offsets []int64
	if ndjson {
		off := 0
		for line := range bytes.Lines(body) {
			if t := bytes.TrimSpace(line); len(t) > 0 {
				elems = append(elems, t)
				offsets = append(offsets, int64(off+bytes.Index(line, t)))
			}
			off += len(line)
		}
	} else {
		trimmed := bytes.TrimLeft(body, " \t\r\n")
		lead := int64(len(body) - len(trimmed))
		if len(trimmed) > 0 && trimmed[0] == '[' {
			if !json.Valid(trimmed) {
				var v any
				return nil, nil, syntaxError(json.Unmarshal(trimmed, &v), lead)
			}
			dec := json.NewDecoder(bytes.NewReader(trimmed))
			if _, err := dec.Token(); err != nil { // the '['
				return nil, nil, syntaxError(err, lead)
			}
			for dec.More() {
				at := int(dec.InputOffset())
				for at < len(trimmed) && bytes.IndexByte([]byte(" \t\r\n,"), trimmed[at]) >= 0 {
					at++
				}
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					return nil, nil, syntaxError(err, lead)
				}
				elems = append(elems, trimmed[at:at+len(raw)])
				offsets = append(offsets, lead+int64(at))
			}
		} else {
			if !json.Valid(trimmed) {
				var v any
				return nil, nil, syntaxError(json.Unmarshal(trimmed, &v), lead)
			}
			elems, offsets = [][]byte{trimmed}, []int64{lead}
		}
	}
	if len(elems) == 0 {
		return nil, nil, &apollo.Error{Code: apollo.EINVALID, Message: "the body holds no event", Hint: "send one event object, a JSON array of them, or NDJSON"}
	}
	evs = make([]apollo.Event, len(elems))
	bad = make([]*apollo.Error, len(elems))
	for i, el := range elems {
		bad[i] = decodeEvent(el, offsets[i], &evs[i])
	}
	return evs, bad, nil
}

func decodeEvent(el []byte, off int64, e *apollo.Event) *apollo.Error {
	if len(el) == 0 || el[0] != '{' {
		return &apollo.Error{Code: apollo.EINVALID, Offset: off, Message: "an event must be a JSON object"}
	}
	if err := json.Unmarshal(el, e); err != nil {
		var te *json.UnmarshalTypeError
		var ae *apollo.Error
		var se *json.SyntaxError
		switch {
		case errors.As(err, &ae):
			ae.Offset = off
			return ae
		case errors.As(err, &te):
			return &apollo.Error{Code: apollo.EINVALID, Field: te.Field, Offset: off + te.Offset,
				Message: fmt.Sprintf("a JSON %s where a %s belongs", te.Value, te.Type)}
		case errors.As(err, &se):
			return &apollo.Error{Code: apollo.EINVALID, Offset: off + max(se.Offset-1, 0), Message: "malformed JSON: " + se.Error()}
		default:
			return &apollo.Error{Code: apollo.EINVALID, Offset: off, Message: err.Error()}
		}
	}
	e.Tenant = "" // never from the body; the credentials set it
	if len(e.Extra) > 0 && e.Extra[0] != '{' && string(e.Extra) != "null" {
		return &apollo.Error{Code: apollo.EINVALID, Field: "extra", Offset: off, Message: "extra must be a JSON object"}
	}
	if string(e.Extra) == "null" {
		e.Extra = nil
	}
	return nil
}

func syntaxError(err error, base int64) *apollo.Error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		at := base + max(se.Offset-1, 0) // encoding/json counts the bad byte as read
		return &apollo.Error{Code: apollo.EINVALID, Offset: at, Message: "malformed JSON: " + se.Error(),
			Hint: fmt.Sprintf("the problem is at byte %d of the body (counting from 0)", at)}
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &apollo.Error{Code: apollo.EINVALID, Offset: base + te.Offset, Message: "the body must be an event object or an array of them"}
	}
	return &apollo.Error{Code: apollo.EINVALID, Message: "malformed JSON: " + err.Error()}
}
