package cluster

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// An answer between nodes is one NATS message while it fits under the
// server's max_payload (1 MiB by default). A page of 1 000 tasks whose IDs
// and names are control characters (six bytes each in JSON), or a task of
// 64 records whose extra is 4 KiB of '<' (also six each), does not: such
// an answer goes in pieces, each with the header piecesHeader, which the
// asker joins. A question sent with request-reply (ask) gets only the
// first message of its answer, so an answer too large for one is replied
// to it as a short rpcReply with Pieces set, and ask asks again on an
// inbox of its own, saying so with the header acceptsPieces: the common
// answer costs no subscription.

const (
	// acceptsPieces, on a question, says that the asker joins pieces.
	acceptsPieces = "Apollo-Pieces"
	// piecesHeader is "<answer ID> <index> <count>" on each piece.
	piecesHeader = "Apollo-Piece"
	// maxPieces bounds what an asker keeps of one answer: 64 MiB at the
	// default max_payload.
	maxPieces = 64
	// pieceHeadroom is kept under max_payload for the headers.
	pieceHeadroom = 512
)

var answerSeq atomic.Uint64

// respond sends data, the answer to m, in as many messages as it needs.
// It reports false when data does not fit one message and m's asker does
// not join pieces (it is then told to ask again).
func (n *Node) respond(m *nats.Msg, data []byte) bool {
	limit := int(n.opts.Conn.MaxPayload()) - pieceHeadroom
	if len(data) <= limit {
		if err := m.Respond(data); err != nil {
			n.warn("answering a query failed", "subject", m.Subject, "err", err)
		}
		return true
	}
	if m.Header.Get(acceptsPieces) == "" {
		return false
	}
	count := (len(data) + limit - 1) / limit
	if count > maxPieces {
		n.warn("an answer is too large even in pieces", "subject", m.Subject, "bytes", len(data))
		return true // the asker waits and says that nobody answered
	}
	id := n.instance + "-" + strconv.FormatUint(answerSeq.Add(1), 10)
	for i := range count {
		piece := &nats.Msg{Subject: m.Reply, Data: data[i*limit : min((i+1)*limit, len(data))], Header: nats.Header{}}
		piece.Header.Set(piecesHeader, fmt.Sprintf("%s %d %d", id, i, count))
		if err := n.opts.Conn.PublishMsg(piece); err != nil {
			n.warn("answering a query failed", "subject", m.Subject, "err", err)
			return true
		}
	}
	return true
}

// joiner puts answers sent in pieces back together, for one question.
type joiner struct {
	open map[string]*joining
}

type joining struct {
	pieces [][]byte
	got    int
}

// add takes one message of an answer and returns the whole answer once it
// has every piece of it (a message without pieces is whole).
func (j *joiner) add(m *nats.Msg) (data []byte, whole bool, err error) {
	h := m.Header.Get(piecesHeader)
	if h == "" {
		return m.Data, true, nil
	}
	f := strings.Fields(h)
	bad := fmt.Errorf("cluster: a node's answer has a bad %s header %q", piecesHeader, h)
	if len(f) != 3 {
		return nil, false, bad
	}
	i, err1 := strconv.Atoi(f[1])
	count, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || count < 1 || count > maxPieces || i < 0 || i >= count {
		return nil, false, bad
	}
	if j.open == nil {
		j.open = map[string]*joining{}
	}
	a := j.open[f[0]]
	if a == nil {
		if len(j.open) >= maxPieces {
			return nil, false, fmt.Errorf("cluster: more than %d answers in pieces at once", maxPieces)
		}
		a = &joining{pieces: make([][]byte, count)}
		j.open[f[0]] = a
	}
	if len(a.pieces) != count {
		return nil, false, bad
	}
	if a.pieces[i] == nil {
		a.pieces[i] = m.Data
		a.got++
	}
	if a.got < count {
		return nil, false, nil
	}
	delete(j.open, f[0])
	size := 0
	for _, p := range a.pieces {
		size += len(p)
	}
	data = make([]byte, 0, size)
	for _, p := range a.pieces {
		data = append(data, p...)
	}
	return data, true, nil
}
