// Package e2e runs Tollgate on real loopback listeners (test/testkit) in front of real MCP
// servers — the mcp-go demo and task servers, or raw HTTP upstreams where a test must control
// bytes — and drives it with real clients: the mcp-go client, raw JSON-RPC, and the tollgate
// binary itself for the CLI.
package e2e
