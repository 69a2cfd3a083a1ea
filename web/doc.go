// Package web is Apollo-11's dashboard: a static single-page app (Preact,
// htm, @preact/signals and uPlot, vendored under static/vendor with their
// versions and hashes in static/vendor/VERSIONS) embedded in the binary.
// Handler serves it with a strict Content-Security-Policy; httpapi mounts it
// at "/". The page reads the REST API and the live stream (docs/dashboard.md).
// Node is needed only to re-vendor the libraries: npm ci && npm run vendor.
package web
