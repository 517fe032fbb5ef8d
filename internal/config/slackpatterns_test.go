package config

import "testing"

// The Slack patterns, compiled on first use, accept what they accepted when compiled at start.
func TestSlackPatterns(t *testing.T) {
	for id, want := range map[string]bool{"U012AB3CD": true, "W0ALICE": true, "U0": false, "u012ab3cd": false, "C012AB3CD": false, "": false} {
		if got := slackUserID().MatchString(id); got != want {
			t.Errorf("slack user id %q: match %v, want %v", id, got, want)
		}
	}
	for ch, want := range map[string]bool{"#approvals": true, "#ops.pay-1_x": true, "C012AB3CD": true, "G0AB": true, "D0AB": true,
		"#Approvals": false, "approvals": false, "#": false, "U012AB3CD": false} {
		if got := slackChannel().MatchString(ch); got != want {
			t.Errorf("slack channel %q: match %v, want %v", ch, got, want)
		}
	}
}
