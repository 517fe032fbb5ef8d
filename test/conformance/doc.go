// Package conformance runs the official MCP conformance suite (npm
// @modelcontextprotocol/conformance, pinned in test/npm) against mcp-go's conformance server
// twice — directly and through Tollgate with every call forwarded — and fails when a scenario
// that passes directly fails through Tollgate. It also runs the 2026-07-28 suite's
// server-stateless and tasks-* scenarios against test/fixture/modern, directly and through
// Tollgate, and checks both against an explicit expectations table. See README.md here.
package conformance
