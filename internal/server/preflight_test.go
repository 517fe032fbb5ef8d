package server

import (
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// TestPreflightSlackSecrets: tollgate validate names a Slack channel destination that run
// would start without its bot token or signing secret (it would only show on /readyz).
func TestPreflightSlackSecrets(t *testing.T) {
	cfg := &config.Config{Tasks: config.Tasks{Store: config.Store{Type: config.StoreMemory}}, Approval: map[string]config.Workflow{
		"pay":   {Destination: config.Destination{Type: config.DestinationSlack, Channel: "#approvals"}},
		"other": {Destination: config.Destination{Type: config.DestinationConsole}},
	}}
	for _, tc := range []struct {
		env  map[string]string
		want []string
	}{
		{nil, []string{config.EnvSlackBotToken, config.EnvSlackSigningSecret}},
		{map[string]string{config.EnvSlackBotToken: "xoxb-1"}, []string{config.EnvSlackSigningSecret}},
		{map[string]string{config.EnvSlackBotToken: "xoxb-1", config.EnvSlackSigningSecret: "s"}, nil},
	} {
		warnings, err := Preflight(cfg, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
		if err != nil {
			t.Fatalf("env %v: %v", tc.env, err)
		}
		var slackLines []string
		for _, w := range warnings {
			if strings.Contains(w, "approval.pay") {
				slackLines = append(slackLines, w)
			}
			if strings.Contains(w, "approval.other") {
				t.Errorf("a console workflow is named: %q", w)
			}
		}
		if len(slackLines) != len(tc.want) {
			t.Errorf("env %v: warnings %q, want one per %v", tc.env, warnings, tc.want)
			continue
		}
		for i, v := range tc.want {
			if !strings.Contains(slackLines[i], "$"+v) {
				t.Errorf("env %v: warning %q does not name $%s", tc.env, slackLines[i], v)
			}
		}
	}
}
