package config

import "errors"

// ErrNoConfig is Resolve's error when no config file was named and none is in a default place.
var ErrNoConfig = errors.New("no config file found")

// MinimalConfig is the config the CLI offers when none is found: the least that runs in front
// of one MCP server (every other key has a default). A test keeps it valid.
const MinimalConfig = `schema: 1
sources:
  - {id: upstream, kind: mcp, url: "http://127.0.0.1:3000/mcp"}   # your MCP server
governance:
  rules:
    - {match: "delete_*", action: approve}   # held until a human approves
    - {match: "drop_*", action: deny}
`
