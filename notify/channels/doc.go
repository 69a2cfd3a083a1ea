// Package channels builds notify.Channels from the channels: section of
// apollo.yaml: it knows every channel type, decodes each one's settings
// strictly (an unknown field is an error that names the channel and the
// field), and applies the type's defaults.
package channels
