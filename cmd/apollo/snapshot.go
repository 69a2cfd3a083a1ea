package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// A snapshot is a sequence of named sections, each length-prefixed, so that
// each part of the state (bus, metrics) reads exactly its own bytes and a
// reader can say which part is damaged.
type section struct {
	name  string
	write func(io.Writer) error
	read  func(io.Reader) error
}

type snapshotBuffer = bytes.Buffer

func writeSnapshot(w *bytes.Buffer, secs []section) error {
	for _, s := range secs {
		var part bytes.Buffer
		if err := s.write(&part); err != nil {
			return fmt.Errorf("snapshot section %s: %w", s.name, err)
		}
		var hdr []byte
		hdr = binary.AppendUvarint(hdr, uint64(len(s.name)))
		hdr = append(hdr, s.name...)
		hdr = binary.AppendUvarint(hdr, uint64(part.Len()))
		w.Write(hdr)
		w.Write(part.Bytes())
	}
	return nil
}

func readSnapshot(r io.Reader, secs []section) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	byName := map[string][]byte{}
	for len(data) > 0 {
		nl, n := binary.Uvarint(data)
		if n <= 0 || nl > uint64(len(data)-n) {
			return fmt.Errorf("snapshot: damaged section header")
		}
		name := string(data[n : n+int(nl)])
		data = data[n+int(nl):]
		bl, m := binary.Uvarint(data)
		if m <= 0 || bl > uint64(len(data)-m) {
			return fmt.Errorf("snapshot: section %s is truncated", name)
		}
		byName[name] = data[m : m+int(bl)]
		data = data[m+int(bl):]
	}
	for _, s := range secs {
		b, ok := byName[s.name]
		if !ok {
			continue // written by a version without this part: it starts empty
		}
		if err := s.read(bytes.NewReader(b)); err != nil {
			return fmt.Errorf("snapshot section %s: %w", s.name, err)
		}
	}
	return nil
}
