// Package policies embeds Tollgate's example Cedar policies so the demo and
// tests can load them without touching the filesystem.
package policies

import "embed"

// FS holds every *.cedar file of this directory.
//
//go:embed *.cedar
var FS embed.FS
