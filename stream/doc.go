// Package stream is the live stream behind GET /api/v1/stream
// (docs/stream.md): a Hub that subscribes once to the applied changes,
// numbers them with cursors, keeps the latest in a ring for clients that
// come back, and fans them out to WebSocket clients grouped by tenant and
// filter, with alerts, heartbeats and the system figures. The HTTP layer
// (httpapi) authenticates a request and hands it to Hub.Serve as a
// Caller; cmd/apollo gives the hub its sources. The hub's lock order is in
// docs/architecture.md.
package stream
