package config

import (
	"errors"
	"maps"
	"strings"
)

// CommandConfig is the configuration `tollgate run -- CMD ARGS…` starts from when no config
// file is given: the command as the one source, everything else at its default (forward
// every call). UseCommand then sets the command and the shorthand rules.
const CommandConfig = `schema: 1
sources:
  - {id: stdio, kind: mcp, command: placeholder}
`

// UseCommand makes c's source the stdio server argv (tollgate run -- CMD ARGS…): a url the file
// named is dropped, args replaced; env, cwd and the process bounds of a command source the
// file named are kept. The --deny and then --approve globs become the first rules (before the
// file's), and each name in pass is given to the process with its value from lookupEnv
// (--env NAME). The result is validated again.
func (c *Config) UseCommand(argv, approve, deny, pass []string, lookupEnv func(string) (string, bool)) error {
	if len(argv) == 0 || argv[0] == "" {
		return errors.New("no command after --")
	}
	if len(c.Sources) == 0 {
		c.Sources = []Source{{ID: "stdio", Kind: SourceKindMCP, ConnectTimeout: Duration(DefaultConnectTimeout)}}
	}
	src := &c.Sources[0]
	if !src.Stdio() {
		src.Env, src.Cwd, src.Share = nil, "", false
	}
	src.URL, src.Command, src.Args = "", argv[0], argv[1:]
	if src.MaxProcesses == 0 {
		src.MaxProcesses = DefaultMaxProcesses
	}
	if src.IdleTimeout == 0 {
		src.IdleTimeout = Duration(DefaultProcessIdleTimeout)
	}
	var missing []string
	for _, name := range pass {
		v, ok := lookupEnv(name)
		if !ok {
			missing = append(missing, name)
			continue
		}
		env := maps.Clone(src.Env)
		if env == nil {
			env = map[string]string{}
		}
		env[name] = v
		src.Env = env
	}
	if len(missing) > 0 {
		return errors.New("--env: not set in Tollgate's environment: " + strings.Join(missing, ", "))
	}
	rules := make([]Rule, 0, len(deny)+len(approve)+len(c.Governance.Rules))
	for _, g := range deny {
		rules = append(rules, Rule{Match: g, Action: ActionDeny})
	}
	for _, g := range approve {
		rules = append(rules, Rule{Match: g, Action: ActionApprove, Approval: DefaultWorkflow})
	}
	c.Governance.Rules = append(rules, c.Governance.Rules...)
	return c.Validate()
}
