// Package conformance runs the official MCP conformance suite (npm
// @modelcontextprotocol/conformance, pinned in test/npm) against mcp-go's conformance server
// twice — directly and through Tollgate with every call forwarded — and fails when a scenario
// that passes directly fails through Tollgate. See README.md in this directory.
package conformance
