// Package config loads apollo.yaml: defaults, then the file, then
// environment variables, then flags (applied by cmd/apollo), then Validate.
//
// The file is strict: an unknown key is an error with its line and column,
// because a misspelt key that is silently ignored is the worst kind of
// configuration bug. ${NAME} in any value expands from the environment, so
// secrets stay out of the file.
//
// It uses go.yaml.in/yaml/v3 directly rather than koanf, which the design
// named (docs/architecture.md, "Decisions"):
// decoding through koanf's maps loses the line numbers that errors need,
// and the layering we need is a dozen lines.
package config
