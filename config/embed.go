// Package configs embeds Tollgate's shipped configuration files: demo.yaml, run by
// `tollgate demo`, and example.yaml, the commented reference of every key.
package configs

import "embed"

// FS holds demo.yaml and example.yaml.
//
//go:embed demo.yaml example.yaml
var FS embed.FS
