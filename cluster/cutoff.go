package cluster

import (
	"strings"

	"github.com/apollo-11/apollo"
)

// cutOff is the answer of a node whose connection to NATS is down
// (reconnecting, or closed as the node stops), nil while it is up. Every
// event and every question needs NATS: answering at once says what is
// wrong, where waiting out PublishTimeout or QueryTimeout blamed
// JetStream or the partitions' owners, which the node cannot reach. An
// event refused so is not sent: the connection would keep it in its
// reconnect buffer and store it once back, although answered retry_later.
func (n *Node) cutOff() *apollo.Error {
	if n.opts.Conn.IsConnected() {
		return nil
	}
	return &apollo.Error{Code: apollo.EUNAVAILABLE,
		Message: "this node is cut off NATS (" + n.natsState() + ")",
		Hint:    "resend to another node, or retry in a few seconds; the node's GET /api/v1/system says cluster.nats, and its log when it is back"}
}

// natsState is the state of the node's connection to NATS, in the words
// of nats.go's Status in lower case: connected, reconnecting, closed...
func (n *Node) natsState() string {
	return strings.ToLower(n.opts.Conn.Status().String())
}

// Unavailable says why the node cannot take requests now (it is cut off
// NATS), or nil: GET /readyz of a node answers 503 with it, where the
// node's readiness (Ready) is for life once reached.
func (n *Node) Unavailable() error {
	if e := n.cutOff(); e != nil {
		return e
	}
	return nil
}
