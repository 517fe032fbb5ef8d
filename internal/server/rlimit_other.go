//go:build !unix

package server

// openFileLimit is unknown off Unix: the configured caps apply as they are.
func openFileLimit() (uint64, bool) { return 0, false }
