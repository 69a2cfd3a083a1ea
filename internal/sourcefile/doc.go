// Package sourcefile is what the parsers of the files operators write
// (the jobs and expectations files) share: it finds the character YAML
// refuses in one, which the YAML library reports without a place.
package sourcefile
