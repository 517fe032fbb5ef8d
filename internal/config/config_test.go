package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// envMap returns a lookupEnv over a fixed map, so tests never see the real environment.
func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

var fixtureEnv = envMap(map[string]string{"SET": "value", "EMPTY": ""})

type want struct{ path, sub string }

// wantsOf reads the "# want: <path>: <substring>" lines of a bad fixture.
func wantsOf(t *testing.T, data []byte) []want {
	t.Helper()
	var ws []want
	for line := range strings.Lines(string(data)) {
		s, ok := strings.CutPrefix(strings.TrimSpace(line), "# want: ")
		if !ok {
			continue
		}
		p, sub, ok := strings.Cut(s, ": ")
		if !ok {
			t.Fatalf("malformed want line %q", line)
		}
		ws = append(ws, want{p, sub})
	}
	if len(ws) == 0 {
		t.Fatal("fixture has no # want: lines")
	}
	return ws
}

// TestBadFixtures: every fixture in testdata/bad must produce exactly its listed
// errors — no more, no fewer (Prometheus-style bad-config table).
func TestBadFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			ws := wantsOf(t, data)
			c, err := Load(f, fixtureEnv)
			if err == nil {
				t.Fatalf("Load succeeded (%+v), want errors %v", c, ws)
			}
			if c != nil {
				t.Error("Load returned a config together with an error")
			}
			got := FieldErrors(err)
			if len(got) != len(errorsOf(err)) {
				t.Errorf("error contains non-FieldError parts: %v", err)
			}
			used := make([]bool, len(got))
			for _, w := range ws {
				found := false
				for i, fe := range got {
					if !used[i] && fe.Path == w.path && strings.Contains(fe.Error(), w.sub) {
						used[i], found = true, true
						break
					}
				}
				if !found {
					t.Errorf("missing error %q: %q\ngot:\n%v", w.path, w.sub, err)
				}
			}
			for i, fe := range got {
				if !used[i] {
					t.Errorf("unexpected error: %v", fe)
				}
			}
		})
	}
}

// errorsOf flattens joined errors.
func errorsOf(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, errorsOf(e)...)
		}
		return out
	}
	return []error{err}
}

func TestValidFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.yaml")
	if len(files) == 0 {
		t.Fatal("no valid fixtures")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := Load(f, fixtureEnv)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if c.Path != f {
				t.Errorf("Path = %q, want %q", c.Path, f)
			}
			// A loaded config must still validate (Validate is idempotent).
			if err := c.Validate(); err != nil {
				t.Errorf("Validate after Load: %v", err)
			}
		})
	}
}

func TestFullFixtureValues(t *testing.T) {
	c, err := Load("testdata/valid/full.yaml", envMap(map[string]string{"PAGES": "12"}))
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"source url default", c.Sources[0].URL, "http://127.0.0.1:3000/mcp"},
		{"connect timeout", c.Sources[0].ConnectTimeout.D(), 2 * time.Second},
		{"merged rule action", c.Governance.Rules[1].Action, ActionApprove},
		{"merged rule match overrides", c.Governance.Rules[1].Match, "remove_*"},
		{"merged rule approval", c.Governance.Rules[1].Approval, "finance"},
		{"approve rule defaults to default workflow", c.Governance.Rules[0].Approval, DefaultWorkflow},
		{"policy rule defaults to default workflow", c.Governance.Rules[2].Approval, DefaultWorkflow},
		{"finance timeout", c.Approval["finance"].Timeout.D(), 90 * time.Minute},
		{"default workflow added", c.Approval[DefaultWorkflow], Workflow{Destination: Destination{Type: DestinationConsole}, Timeout: Duration(10 * time.Minute), OnTimeout: OnTimeoutDeny, MinApprovals: 1}},
		{"tools_max_pages from ${PAGES}", c.Server.ToolsMaxPages, 12},
		{"$$ escape", c.Audit.Path, "$HOME/audit.log"},
		{"sample ratio", c.Telemetry.SampleRatio, 0.25},
		{"promote_after", c.Tasks.PromoteAfter.D(), 250 * time.Millisecond},
		{"cedar resolves against file dir", c.ResolvePath(c.Cedar.Policies[0]), filepath.Join("testdata", "policies", "allow.cedar")},
	}
	for _, ck := range checks {
		if !reflect.DeepEqual(ck.got, ck.want) {
			t.Errorf("%s: got %#v, want %#v", ck.name, ck.got, ck.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	c, err := Parse([]byte("schema: 1\nsources: [{id: u, kind: mcp, url: 'http://h/mcp'}]\n"), "", envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Schema:     1,
		Sources:    []Source{{ID: "u", Kind: "mcp", URL: "http://h/mcp", ConnectTimeout: Duration(5 * time.Second)}},
		Governance: Governance{Defaults: Defaults{Action: ActionForward, Approval: "default"}, Pins: Pins{Mode: "off", NewTools: "accept", OnChange: "quarantine", MaxDefinitionBytes: 64 << 10, MaxTools: 10000, Workflow: "default"}},
		Cedar:      Cedar{Validation: "warn"},
		Approval: map[string]Workflow{"default": {
			Destination: Destination{Type: "console"}, Timeout: Duration(10 * time.Minute), OnTimeout: "deny", MinApprovals: 1,
		}},
		Tasks: Tasks{
			DefaultTTL: Duration(10 * time.Minute), MaxTTL: Duration(24 * time.Hour), PollInterval: Duration(2 * time.Second),
			ExecutionTimeout: Duration(5 * time.Minute),
			InputTimeout:     Duration(2 * time.Minute),
			ExecutionLease:   Duration(30 * time.Second),
			SyncApproval:     "hold", HoldBudget: Duration(50 * time.Second), ReplayWindow: Duration(10 * time.Minute),
			Store:  Store{Type: "auto"},
			Quotas: Quotas{MaxPendingPerOwner: 100, MaxPendingPerSource: 1000, MaxPendingTotal: 10000, MaxUpstreamTasksPerSource: 1000, MaxUpstreamTasksTotal: 100000, MaxArgumentBytes: 1 << 20, MaxStoredBytes: 64 << 20, MaxStoredBytesPerSource: 16 << 20},
		},
		Server: Server{
			Listen: "127.0.0.1:7467", AdminListen: "127.0.0.1:7469", MaxBodyBytes: 4 << 20,
			SyncForwardTimeout: Duration(60 * time.Second), RequestTimeout: Duration(60 * time.Second),
			ShutdownTimeout: Duration(10 * time.Second), ToolsFetchTimeout: Duration(30 * time.Second), ToolsMaxPages: 100,
			Limits: Limits{
				MaxConnections: 1024, AdminMaxConnections: 64,
				HeaderTimeout: Duration(10 * time.Second), BodyTimeout: Duration(30 * time.Second),
				IdleTimeout: Duration(120 * time.Second), WriteTimeout: Duration(30 * time.Second),
				MaxInflightBodyBytes: 64 << 20, MaxInflightBodyBytesPerSource: 16 << 20, MaxStreams: 1000, MaxStreamsPerSession: 4, MaxStreamsPerSource: 250,
				MaxSessions: 10000, SessionsPerSecond: 10, SessionBurst: 50, MaxParkedCalls: 256, MaxParkedCallsPerSource: 64,
			},
			AdminAuth:  AdminAuth{UserHeader: "X-Auth-Request-User", EmailHeader: "X-Auth-Request-Email", GroupsHeader: "X-Auth-Request-Groups"},
			CallerAuth: CallerAuth{CallerIssuer: CallerIssuer{Type: "none"}, ClockSkew: Duration(time.Minute), ToolView: "caller"},
			Reload:     Reload{Settle: Duration(DefaultReloadSettle), WeakerSettle: Duration(DefaultReloadWeakerSettle)},
		},
		Audit: Audit{Forward: "all"},
	}
	want.Governance.Mode = "enforce"
	c.meta = nil
	if !reflect.DeepEqual(c, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", c, want)
	}

	// ApplyDefaults on a config built in code gives the same result.
	built := &Config{Schema: 1, Sources: []Source{{ID: "u", Kind: "mcp", URL: "http://h/mcp"}}}
	built.ApplyDefaults()
	if !reflect.DeepEqual(built, want) {
		t.Errorf("ApplyDefaults:\n got %+v\nwant %+v", built, want)
	}
	if err := built.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestExplicitDefaultWorkflowKept(t *testing.T) {
	c, err := Parse([]byte(`schema: 1
sources: [{id: u, kind: mcp, url: "http://h/mcp"}]
approval:
  default: {destination: {type: slack, url: "https://hooks.slack.example/T000"}, on_timeout: approve}
`), "", envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	w, ok := c.WorkflowFor("")
	if !ok || w.Destination.Type != DestinationSlack || w.OnTimeout != OnTimeoutApprove || w.Timeout.D() != 10*time.Minute {
		t.Errorf("WorkflowFor(\"\") = %+v, %v", w, ok)
	}
	if _, ok := c.WorkflowFor("missing"); ok {
		t.Error("WorkflowFor(missing) found a workflow")
	}
}

func TestExpand(t *testing.T) {
	env := envMap(map[string]string{"A": "alpha", "EMPTY": "", "N": "7"})
	tests := []struct {
		in, want, err string
	}{
		{in: "plain", want: "plain"},
		{in: "${A}", want: "alpha"},
		{in: "x-${A}-y", want: "x-alpha-y"},
		{in: "${A}${N}", want: "alpha7"},
		{in: "${EMPTY}", want: ""},
		{in: "${EMPTY:-d}", want: "d"},
		{in: "${MISSING:-def ault}", want: "def ault"},
		{in: "${MISSING:-}", want: ""},
		{in: "${A:-d}", want: "alpha"},
		{in: "${MISSING:-a:-b}", want: "a:-b"},
		{in: "$$", want: "$"},
		{in: "$${A}", want: "${A}"},
		{in: "$$$${A}", want: "$${A}"},
		{in: "$$${A}", want: "$alpha"},
		{in: "cost $5", want: "cost $5"},
		{in: "trailing $", want: "trailing $"},
		{in: "$A", want: "$A"},
		{in: "${MISSING}", err: "environment variable MISSING is not set"},
		{in: "${A", err: "unterminated"},
		{in: "${}", err: "invalid variable reference"},
		{in: "${9X}", err: "invalid variable reference"},
		{in: "${A B}", err: "invalid variable reference"},
	}
	for _, tt := range tests {
		got, err := expand(tt.in, env)
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("expand(%q) error = %v, want %q", tt.in, err, tt.err)
			}
		case err != nil:
			t.Errorf("expand(%q): %v", tt.in, err)
		case got != tt.want:
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestExpansionNotInKeys(t *testing.T) {
	_, err := Parse([]byte("schema: 1\nsources: [{id: u, kind: mcp, url: 'http://h/mcp'}]\n${KEY}: 1\n"), "",
		envMap(map[string]string{"KEY": "schema"}))
	fes := FieldErrors(err)
	if len(fes) != 1 || fes[0].Path != "${KEY}" || !strings.Contains(fes[0].Msg, "unknown key") {
		t.Errorf("got %v, want one unknown key ${KEY}", err)
	}
}

func TestQuotedExpansionStaysString(t *testing.T) {
	// Quoted values keep their string type after expansion; plain ones are retyped.
	env := envMap(map[string]string{"ID": "123", "TTL": "15m"})
	c, err := Parse([]byte("schema: 1\nsources:\n  - id: \"${ID}\"\n    kind: mcp\n    url: http://h/mcp\ntasks:\n  default_ttl: ${TTL}\n"), "", env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sources[0].ID != "123" || c.Tasks.DefaultTTL.D() != 15*time.Minute {
		t.Errorf("id %q ttl %v", c.Sources[0].ID, c.Tasks.DefaultTTL)
	}
}

const minimal = "schema: 1\nsources: [{id: u, kind: mcp, url: 'http://h/mcp'}]\n"

func TestEnvOverrides(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		env   map[string]string
		check func(*Config) bool
		err   []string // "path: substring"
	}{
		{name: "ttls", env: map[string]string{EnvTaskDefaultTTLMS: "60000", EnvTaskMaxTTLMS: "3600000"},
			check: func(c *Config) bool { return c.Tasks.DefaultTTL.D() == time.Minute && c.Tasks.MaxTTL.D() == time.Hour }},
		{name: "env beats file", yaml: minimal + "tasks: {default_ttl: 1m}\n", env: map[string]string{EnvTaskDefaultTTLMS: "2000"},
			check: func(c *Config) bool { return c.Tasks.DefaultTTL.D() == 2*time.Second }},
		{name: "force required appended and deduplicated", yaml: minimal + "task_annotation_overrides: {force_required: [a]}\n",
			env: map[string]string{EnvTaskForceRequired: " b, a,,c "},
			check: func(c *Config) bool {
				return slices.Equal(c.TaskAnnotationOverrides.ForceRequired, []string{"a", "b", "c"})
			}},
		{name: "timeouts and pages", env: map[string]string{EnvSyncForwardSecs: "5", EnvToolsFetchTimeoutMS: "1500", EnvToolsMaxPages: "3"},
			check: func(c *Config) bool {
				return c.Server.SyncForwardTimeout.D() == 5*time.Second && c.Server.ToolsFetchTimeout.D() == 1500*time.Millisecond && c.Server.ToolsMaxPages == 3
			}},
		{name: "upstream url replaces", env: map[string]string{EnvUpstreamURL: "https://up.example/mcp"},
			check: func(c *Config) bool { return c.Sources[0].URL == "https://up.example/mcp" }},
		{name: "upstream url adds source", yaml: "schema: 1\n", env: map[string]string{EnvUpstreamURL: "http://h:1/mcp"},
			check: func(c *Config) bool {
				return len(c.Sources) == 1 && c.Sources[0].ID == "upstream" && c.Sources[0].Kind == "mcp"
			}},
		{name: "listeners", env: map[string]string{EnvListen: "0.0.0.0:1", EnvAdminListen: "0.0.0.0:2"},
			check: func(c *Config) bool { return c.Server.Listen == "0.0.0.0:1" && c.Server.AdminListen == "0.0.0.0:2" }},
		{name: "data dir gives file store path", yaml: minimal + "tasks: {store: {type: file}}\n", env: map[string]string{EnvDataDir: "/data"},
			check: func(c *Config) bool { return c.Tasks.Store.Path == filepath.Join("/data", "tasks.db") }},
		{name: "data dir gives the default (auto) store its path", env: map[string]string{EnvDataDir: "/data"},
			check: func(c *Config) bool {
				return c.Tasks.Store.Type == StoreAuto && c.Tasks.Store.Path == filepath.Join("/data", "tasks.db")
			}},
		{name: "data dir leaves an explicit memory store alone", yaml: minimal + "tasks: {store: {type: memory}}\n", env: map[string]string{EnvDataDir: "/data"},
			check: func(c *Config) bool { return c.Tasks.Store.Type == StoreMemory && c.Tasks.Store.Path == "" }},
		{name: "data dir does not replace an explicit path", yaml: minimal + "tasks: {store: {type: file, path: /x.db}}\n", env: map[string]string{EnvDataDir: "/data"},
			check: func(c *Config) bool { return c.Tasks.Store.Path == "/x.db" }},
		{name: "empty variables are ignored", env: map[string]string{EnvListen: "", EnvTaskMaxTTLMS: " "},
			check: func(c *Config) bool {
				return c.Server.Listen == DefaultListen && c.Tasks.MaxTTL.D() == DefaultTaskMaxTTL
			}},
		{name: "bad numbers name the variable",
			env: map[string]string{EnvTaskDefaultTTLMS: "10m", EnvTaskMaxTTLMS: "-1", EnvSyncForwardSecs: "0", EnvToolsFetchTimeoutMS: "1.5", EnvToolsMaxPages: "x"},
			err: []string{
				"tasks.default_ttl: $TOLLGATE_TASK_DEFAULT_TTL_MS must be a positive integer (milliseconds), got \"10m\"",
				"tasks.max_ttl: $TOLLGATE_TASK_MAX_TTL_MS must be a positive integer",
				"server.sync_forward_timeout: $TOLLGATE_SYNC_FORWARD_TIMEOUT_SECS must be a positive integer (seconds)",
				"server.tools_fetch_timeout: $TOLLGATE_TOOLS_FETCH_TIMEOUT_MS must be a positive integer",
				"server.tools_max_pages: $TOLLGATE_TOOLS_MAX_PAGES must be a positive integer",
			}},
		{name: "too large", env: map[string]string{EnvSyncForwardSecs: "9223372036854775807"},
			err: []string{"server.sync_forward_timeout: $TOLLGATE_SYNC_FORWARD_TIMEOUT_SECS is too large"}},
		{name: "invalid overridden values name the variable", env: map[string]string{EnvListen: "nope", EnvUpstreamURL: "not a url"},
			err: []string{"server.listen: must be host:port like \"127.0.0.1:7467\", got \"nope\" (set by $TOLLGATE_LISTEN)",
				"sources[0].url: must be an absolute http:// or https:// URL (set by $TOLLGATE_UPSTREAM_URL)"}},
		{name: "execution timeout default clamped to a short max ttl", yaml: minimal + "tasks: {max_ttl: 1m, default_ttl: 30s}\n",
			check: func(c *Config) bool { return c.Tasks.ExecutionTimeout.D() == time.Minute }},
		{name: "input timeout default clamped to a short execution timeout", yaml: minimal + "tasks: {execution_timeout: 45s}\n",
			check: func(c *Config) bool { return c.Tasks.InputTimeout.D() == 45*time.Second }},
		{name: "execution lease below the minimum", yaml: minimal + "tasks: {execution_lease: 2s}\n",
			err: []string{"tasks.execution_lease: must be at least 3s, got 2s"}},
		{name: "execution lease at the minimum", yaml: minimal + "tasks: {execution_lease: 3s}\n",
			check: func(c *Config) bool { return c.Tasks.ExecutionLease.D() == 3*time.Second }},
		{name: "execution timeout default clamped to max ttl from env", env: map[string]string{EnvTaskMaxTTLMS: "120000", EnvTaskDefaultTTLMS: "60000"},
			check: func(c *Config) bool { return c.Tasks.ExecutionTimeout.D() == 2*time.Minute }},
		{name: "upstream task share defaults to a smaller total", yaml: minimal + "tasks: {quotas: {max_upstream_tasks_total: 500}}\n",
			check: func(c *Config) bool {
				return c.Tasks.Quotas.MaxUpstreamTasksPerSource == 500 && c.Tasks.Quotas.MaxUpstreamTasksTotal == 500
			}},
		{name: "upstream task share and total", yaml: minimal + "tasks: {quotas: {max_upstream_tasks_per_source: 7, max_upstream_tasks_total: 9}}\n",
			check: func(c *Config) bool {
				return c.Tasks.Quotas.MaxUpstreamTasksPerSource == 7 && c.Tasks.Quotas.MaxUpstreamTasksTotal == 9
			}},
		{name: "upstream task share past the total", yaml: minimal + "tasks: {quotas: {max_upstream_tasks_per_source: 10, max_upstream_tasks_total: 9}}\n",
			err: []string{"tasks.quotas.max_upstream_tasks_total: must be ≥ max_upstream_tasks_per_source (10)"}},
		{name: "upstream task bounds zero", yaml: minimal + "tasks: {quotas: {max_upstream_tasks_per_source: 0, max_upstream_tasks_total: 0}}\n",
			err: []string{"tasks.quotas.max_upstream_tasks_per_source: must be > 0", "tasks.quotas.max_upstream_tasks_total: must be > 0"}},
		{name: "ttl env below file max", yaml: minimal + "tasks: {max_ttl: 1m}\n", env: map[string]string{EnvTaskDefaultTTLMS: "120000"},
			err: []string{"tasks.default_ttl: must not exceed tasks.max_ttl (2m > 1m) (set by $TOLLGATE_TASK_DEFAULT_TTL_MS)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := tt.yaml
			if y == "" {
				y = minimal
			}
			c, err := Parse([]byte(y), "", envMap(tt.env))
			if len(tt.err) > 0 {
				assertErrors(t, err, tt.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(c) {
				t.Errorf("check failed: %+v", c)
			}
		})
	}
}

// assertErrors checks that err holds exactly the listed "path: substring" errors.
func assertErrors(t *testing.T, err error, wants []string) {
	t.Helper()
	got := FieldErrors(err)
	if len(got) != len(wants) {
		t.Errorf("got %d errors, want %d:\n%v", len(got), len(wants), err)
	}
	for _, w := range wants {
		p, sub, _ := strings.Cut(w, ": ")
		if !slices.ContainsFunc(got, func(fe *FieldError) bool { return fe.Path == p && strings.Contains(fe.Error(), sub) }) {
			t.Errorf("missing %q in:\n%v", w, err)
		}
	}
}

func TestMultipleErrorsAtOnce(t *testing.T) {
	// Decode, expansion and validation problems are all reported together, and a
	// path that failed to decode is not reported again by validation.
	_, err := Parse([]byte(`schema: 1
sources: [{id: u, kind: mcp, url: "${UP}"}]
governance:
  rules:
    - {match: "[x", action: forward, color: red}
tasks: {max_ttl: forever, sync_approval: maybe}
server: {listen: bad}
`), "", envMap(nil))
	assertErrors(t, err, []string{
		"sources[0].url: environment variable UP is not set",
		"governance.rules[0].color: unknown key \"color\" (line 5)",
		"tasks.max_ttl: must be a duration like \"10m\" or \"250ms\", got \"forever\" (line 6)",
		"governance.rules[0].match: invalid glob \"[x\"",
		"tasks.sync_approval: must be hold, error, promote or block, got \"maybe\" (line 6)",
		"server.listen: must be host:port like \"127.0.0.1:7467\", got \"bad\" (line 7)",
	})
}

func TestFieldErrorFormat(t *testing.T) {
	tests := []struct {
		fe   FieldError
		want string
	}{
		{FieldError{Path: "governance.rules[2].match", Msg: "must not be empty"}, "governance.rules[2].match: must not be empty"},
		{FieldError{Path: "schema", Msg: "must be 1, got 0", Line: 3}, "schema: must be 1, got 0 (line 3)"},
		{FieldError{Msg: "config is empty"}, "config is empty"},
	}
	for _, tt := range tests {
		if got := tt.fe.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	var fe *FieldError
	_, err := Parse([]byte("schema: 2\nsources: [{id: u, kind: mcp, url: 'http://h/mcp'}]\n"), "", envMap(nil))
	if !errors.As(err, &fe) || fe.Path != "schema" {
		t.Errorf("errors.As: %v", err)
	}
	if FieldErrors(nil) != nil {
		t.Error("FieldErrors(nil) != nil")
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  string
	}{
		{in: "10m", want: 10 * time.Minute},
		{in: "250ms", want: 250 * time.Millisecond},
		{in: "1h30m", want: 90 * time.Minute},
		{in: `"5s"`, want: 5 * time.Second},
		{in: "0", want: 0},
		{in: "0s", want: 0},
		{in: "~", want: 0},
		{in: "30", err: "bare number"},
		{in: "1.5", err: "bare number"},
		{in: "-1s", err: "must not be negative"},
		{in: "ten", err: `got "ten"`},
		{in: "[1m]", err: "got a list"},
	}
	for _, tt := range tests {
		var d Duration
		err := yaml.Unmarshal([]byte(tt.in), &d)
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want %q", tt.in, err, tt.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tt.in, err)
		case d.D() != tt.want:
			t.Errorf("%s: got %v, want %v", tt.in, d.D(), tt.want)
		}
	}
	for _, d := range []time.Duration{0, 250 * time.Millisecond, 10 * time.Minute, 24 * time.Hour, 90 * time.Minute, 61 * time.Second} {
		out, err := yaml.Marshal(Duration(d))
		if err != nil {
			t.Fatal(err)
		}
		var back Duration
		if err := yaml.Unmarshal(out, &back); err != nil || back.D() != d {
			t.Errorf("round trip %v via %q: %v, %v", d, out, back.D(), err)
		}
	}
	if s := Duration(10 * time.Minute).String(); s != "10m" {
		t.Errorf("String() = %q, want 10m", s)
	}
	if s := Duration(24 * time.Hour).String(); s != "24h" {
		t.Errorf("String() = %q, want 24h", s)
	}
}

func TestResolve(t *testing.T) {
	has := func(paths ...string) func(string) bool {
		return func(p string) bool { return slices.Contains(paths, p) }
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvConfig {
				return v
			}
			return ""
		}
	}
	tests := []struct {
		name   string
		flag   string
		env    string
		exists func(string) bool
		want   string
		err    string
	}{
		{name: "flag first", flag: "a.yaml", env: "b.yaml", exists: has("a.yaml", "b.yaml", "./tollgate.yaml"), want: "a.yaml"},
		{name: "env second", env: "b.yaml", exists: has("b.yaml", "./tollgate.yaml"), want: "b.yaml"},
		{name: "local third", exists: has("./tollgate.yaml", "/etc/tollgate/config.yaml"), want: "./tollgate.yaml"},
		{name: "system last", exists: has("/etc/tollgate/config.yaml"), want: "/etc/tollgate/config.yaml"},
		{name: "missing flag file is an error", flag: "a.yaml", exists: has("./tollgate.yaml"), err: "config file a.yaml (from --config) does not exist"},
		{name: "missing env file is an error", env: "b.yaml", exists: has("./tollgate.yaml"), err: "config file b.yaml (from $TOLLGATE_CONFIG) does not exist"},
		{name: "nothing found lists what was tried", exists: has(),
			err: "no config file found; tried --config (not given), $TOLLGATE_CONFIG (not set), ./tollgate.yaml (not found), /etc/tollgate/config.yaml (not found)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(tt.flag, env(tt.env), tt.exists)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Errorf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Resolve = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	// Defaults for nil functions use the real file system.
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(p, []byte(minimal), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := Resolve(p, nil, nil); err != nil || got != p {
		t.Errorf("Resolve(real file) = %q, %v", got, err)
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), envMap(nil))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestApproverTokens(t *testing.T) {
	cfg := func(as ...Approver) *Config { return &Config{Approvers: as} }
	tests := []struct {
		name string
		c    *Config
		env  map[string]string
		want map[string]string
		err  []string
	}{
		{name: "none", c: cfg(), want: map[string]string{}},
		{name: "approvers and admin", c: cfg(Approver{Name: "alice", TokenEnv: "A"}, Approver{Name: "bob", TokenEnv: "B"}),
			env:  map[string]string{"A": "token-of-alice-0001", "B": "token-of-bob-000001", EnvAdminToken: "token-of-admin-0001"},
			want: map[string]string{"token-of-alice-0001": "alice", "token-of-bob-000001": "bob", "token-of-admin-0001": "admin"}},
		{name: "admin only", c: cfg(), env: map[string]string{EnvAdminToken: "0123456789abcdef"}, want: map[string]string{"0123456789abcdef": "admin"}},
		{name: "short tokens", c: cfg(Approver{Name: "alice", TokenEnv: "A"}), env: map[string]string{"A": "Q", EnvAdminToken: "fifteen-bytes-Q"},
			err: []string{`approvers[0].token_env: token of approver "alice" is 1 bytes; at least 16 are required`,
				`$TOLLGATE_ADMIN_TOKEN: token of approver "admin" is 15 bytes; at least 16 are required`}},
		{name: "empty admin ignored", c: cfg(), env: map[string]string{EnvAdminToken: ""}, want: map[string]string{}},
		{name: "unset and empty token_env", c: cfg(Approver{Name: "alice", TokenEnv: "A"}, Approver{Name: "bob", TokenEnv: "B"}), env: map[string]string{"B": ""},
			err: []string{`approvers[0].token_env: environment variable A (token of approver "alice") is not set`,
				`approvers[1].token_env: environment variable B (token of approver "bob") is not set`}},
		{name: "shared token", c: cfg(Approver{Name: "alice", TokenEnv: "A"}, Approver{Name: "bob", TokenEnv: "B"}), env: map[string]string{"A": "s3cr3t-shared-0123", "B": "s3cr3t-shared-0123"},
			err: []string{`approvers[1].token_env: approver "bob" has the same token as approver "alice"`}},
		{name: "admin shares a token", c: cfg(Approver{Name: "alice", TokenEnv: "A"}), env: map[string]string{"A": "s3cr3t-shared-0123", EnvAdminToken: "s3cr3t-shared-0123"},
			err: []string{`$TOLLGATE_ADMIN_TOKEN: approver "admin" has the same token as approver "alice"; the gateway reads $TOLLGATE_ADMIN_TOKEN as approver "admin": unset it in the shell that runs tollgate, and give it to the CLI per command (TOLLGATE_ADMIN_TOKEN=$A tollgate approvals list)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.c.ApproverTokens(envMap(tt.env))
			if len(tt.err) > 0 {
				assertErrors(t, err, tt.err)
				for _, v := range tt.env {
					if v != "" && strings.Contains(err.Error(), v) {
						t.Errorf("error leaks a token value: %v", err)
					}
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestRestartRequired(t *testing.T) {
	base := func() *Config {
		c, err := Parse([]byte(minimal), "", envMap(nil))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tests := []struct {
		name   string
		change func(*Config)
		want   []string
	}{
		{name: "nothing", change: func(*Config) {}},
		{name: "reloadable settings", change: func(c *Config) {
			c.Governance.Rules = append(c.Governance.Rules, Rule{Match: "x", Action: ActionDeny})
			c.Tasks.SyncApproval = SyncApprovalPromote
			c.Tasks.PromoteAfter = Duration(time.Second)
			c.Server.SyncForwardTimeout = Duration(time.Second)
			c.Server.RateLimit.RequestsPerSecond = 5
			c.Approvers = []Approver{{Name: "a", TokenEnv: "A"}}
			c.Server.AdminAuth.TrustedProxy = []string{"10.0.0.0/8"}
			c.Governance.Pins.Workflow = "tools" // who decides pins is read at each decision
		}},
		{name: "pins", change: func(c *Config) { c.Governance.Pins.Mode = PinsTrustFirst },
			want: []string{"governance.pins.mode"}},
		{name: "upstream client", change: func(c *Config) { c.Sources[0].ConnectTimeout = Duration(time.Second) },
			want: []string{"sources[0].connect_timeout"}},
		{name: "task manager settings", change: func(c *Config) {
			c.Tasks.DefaultTTL = Duration(time.Minute)
			c.Tasks.Quotas.MaxPendingTotal = 1
		}, want: []string{"tasks.default_ttl", "tasks.quotas"}},
		{name: "listeners", change: func(c *Config) { c.Server.Listen = "0.0.0.0:1"; c.Server.MaxBodyBytes = 1 },
			want: []string{"server.listen", "server.max_body_bytes"}},
		{name: "limits", change: func(c *Config) { c.Server.Limits.MaxConnections = 5; c.Server.Limits.BodyTimeout = 1 },
			want: []string{"server.limits.max_connections", "server.limits.body_timeout"}},
		{name: "origins", change: func(c *Config) { c.Server.AllowedOrigins = []string{"https://a"} }, want: []string{"server.allowed_origins"}},
		{name: "empty list equals absent", change: func(c *Config) { c.Server.AllowedHosts = []string{} }},
		{name: "store", change: func(c *Config) { c.Tasks.Store = Store{Type: StoreRedis, URL: "redis://r"} },
			want: []string{"tasks.store.type", "tasks.store.url"}},
		{name: "upstream", change: func(c *Config) { c.Sources[0].URL = "http://other/mcp" }, want: []string{"sources[0].url"}},
		{name: "upstream removed", change: func(c *Config) { c.Sources = nil }, want: []string{"sources[0].url"}},
		{name: "audit and telemetry", change: func(c *Config) { c.Audit.Path = "/a"; c.Telemetry.SampleRatio = 1 },
			want: []string{"audit.path", "telemetry.sample_ratio"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, nw := base(), base()
			tt.change(nw)
			if got := RestartRequired(old, nw); !slices.Equal(got, tt.want) {
				t.Errorf("RestartRequired = %v, want %v", got, tt.want)
			}
		})
	}
	if RestartRequired(nil, base()) != nil {
		t.Error("nil old config should need no restart")
	}
}

func TestResolvePath(t *testing.T) {
	tests := []struct{ cfgPath, p, want string }{
		{"/etc/tollgate/config.yaml", "policies/a.cedar", "/etc/tollgate/policies/a.cedar"},
		{"/etc/tollgate/config.yaml", "../p/a.cedar", "/etc/p/a.cedar"},
		{"/etc/tollgate/config.yaml", "/abs/a.cedar", "/abs/a.cedar"},
		{"config/demo.yaml", "../policies/a.cedar", "policies/a.cedar"},
		{"", "policies/a.cedar", "policies/a.cedar"},
		{"/etc/tollgate/config.yaml", "", ""},
	}
	for _, tt := range tests {
		c := &Config{Path: tt.cfgPath}
		if got := c.ResolvePath(tt.p); got != tt.want {
			t.Errorf("ResolvePath(%q) with Path %q = %q, want %q", tt.p, tt.cfgPath, got, tt.want)
		}
	}
}

func TestAliases(t *testing.T) {
	// Nested aliases ("billion laughs") stay cheap: unknown keys are not descended
	// into and a typed field stops at the first mismatch.
	var b strings.Builder
	b.WriteString(minimal + "x0: &a0 [a, a, a, a, a, a, a, a, a, a]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "x%d: &a%d [%s]\n", i, i, strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 9)+fmt.Sprintf("*a%d", i-1))
	}
	b.WriteString("task_annotation_overrides: {force_required: *a9}\n")
	_, err := Parse([]byte(b.String()), "", envMap(nil))
	if n := len(FieldErrors(err)); n == 0 || n > 20 {
		t.Errorf("got %d errors: %v", n, err)
	}

	// Many aliases in a typed list hit the alias limit, reported once.
	list := "[" + strings.Repeat("*t, ", maxAliasUses) + "*t]"
	_, err = Parse([]byte(minimal+"approval:\n  default:\n    redact_fields: [&t x]\n    timeout: 1m\ntask_annotation_overrides:\n  force_required: "+list+"\n"), "", envMap(nil))
	assertErrors(t, err, []string{"task_annotation_overrides.force_required[1000]: too many alias expansions"})
}

// configKeys lists every leaf YAML key of Config, walking the struct tags:
// lists are written "[]" and map entries "<name>".
func configKeys(t reflect.Type, prefix string) []string {
	var out []string
	durationType := reflect.TypeFor[Duration]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" && opts == "inline" {
			out = append(out, configKeys(f.Type, prefix)...)
			continue
		}
		p := name
		if prefix != "" {
			p = prefix + "." + name
		}
		ft := f.Type
		switch {
		case ft.Kind() == reflect.Struct && ft != durationType:
			out = append(out, configKeys(ft, p)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, configKeys(ft.Elem(), p+"[]")...)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			out = append(out, configKeys(ft.Elem(), p+".<name>")...)
		default:
			out = append(out, p)
		}
	}
	return out
}

// docTable returns the first-column code spans and the second column of the table
// under the given "## " heading of a markdown document.
func docTable(t *testing.T, doc, heading string) map[string]string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n## "+heading+"\n")
	if !ok {
		t.Fatalf("docs: no %q section", heading)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	rows := map[string]string{}
	for line := range strings.Lines(rest) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		key := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if _, dup := rows[key]; dup {
			t.Errorf("docs %s: %q listed twice", heading, key)
		}
		rows[key] = strings.TrimSpace(cells[2])
	}
	return rows
}

// TestDocsMatchCode: docs/configuration.md lists exactly the config keys and
// environment variables the code knows (docs/contract.md §5.8).
func TestDocsMatchCode(t *testing.T) {
	data, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)

	keys := configKeys(reflect.TypeFor[Config](), "")
	rows := docTable(t, doc, "Configuration keys")
	for _, k := range keys {
		if _, ok := rows[k]; !ok {
			t.Errorf("config key %s is missing from docs/configuration.md", k)
		}
	}
	for k := range rows {
		if !slices.Contains(keys, k) {
			t.Errorf("docs/configuration.md lists %s, which is not a config key", k)
		}
	}

	envRows := docTable(t, doc, "Environment variables")
	for _, e := range EnvVars {
		def, ok := envRows[e.Name]
		if !ok {
			t.Errorf("env var %s is missing from docs/configuration.md", e.Name)
			continue
		}
		if def = strings.Trim(def, "`"); def == "—" {
			def = ""
		}
		if def != e.Default {
			t.Errorf("docs default of %s = %q, code says %q", e.Name, def, e.Default)
		}
	}
	for name := range envRows {
		if !slices.ContainsFunc(EnvVars, func(e EnvVar) bool { return e.Name == name }) {
			t.Errorf("docs list %s, which is not in EnvVars", name)
		}
	}
}

// shippedConfig loads config/<name>. When the example Cedar policies are not there
// yet, it loads a temp copy with placeholder policies instead (never touching
// the repository's policies/).
func shippedConfig(t *testing.T, name string, env map[string]string) *Config {
	t.Helper()
	path := filepath.Join("..", "..", "config", name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var probe struct {
		Cedar Cedar `yaml:"cedar"`
	}
	if err := yaml.Unmarshal(data, &probe); err != nil {
		t.Fatal(err)
	}
	missing := false
	for _, p := range probe.Cedar.Policies {
		if _, err := os.Stat(filepath.Join(filepath.Dir(path), p)); err != nil {
			missing = true
		}
	}
	if missing {
		root := t.TempDir()
		path = filepath.Join(root, "config", name)
		for _, p := range append([]string{name}, probe.Cedar.Policies...) {
			dst := filepath.Join(root, "config", p)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Logf("policies for %s not present yet; using placeholders", name)
	}
	c, err := Load(path, envMap(env))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}

func TestDemoConfig(t *testing.T) {
	c := shippedConfig(t, "demo.yaml", nil)
	if got := c.Sources[0].URL; got != "http://127.0.0.1:7470/mcp" {
		t.Errorf("demo upstream = %q", got)
	}
	c = shippedConfig(t, "demo.yaml", map[string]string{EnvUpstreamURL: "http://127.0.0.1:5555/mcp"})
	if got := c.Sources[0].URL; got != "http://127.0.0.1:5555/mcp" {
		t.Errorf("demo upstream with env = %q", got)
	}
	actions := map[string]Action{}
	for _, r := range c.Governance.Rules {
		actions[r.Match] = r.Action
	}
	want := map[string]Action{"read_*": ActionForward, "list_*": ActionForward, "delete_*": ActionApprove, "drop_*": ActionDeny, "transfer_*": ActionPolicy}
	if !reflect.DeepEqual(actions, want) {
		t.Errorf("demo rules = %v", actions)
	}
	if w, _ := c.WorkflowFor("default"); !slices.Equal(w.RedactFields, []string{"password", "credentials.api_key"}) {
		t.Errorf("demo default workflow = %+v", w)
	}
}

// TestExampleConfig: config/example.yaml is valid and shows every key; the keys of a stdio
// server (sources[].command, exclusive with url) are shown by config/example-stdio.yaml.
func TestExampleConfig(t *testing.T) {
	shown := map[string]bool{}
	for _, name := range []string{"example.yaml", "example-stdio.yaml", "example-oauth.yaml"} {
		c := shippedConfig(t, name, nil)
		for p := range c.meta.lines {
			shown[normalizePath(p)] = true
		}
	}
	for _, k := range configKeys(reflect.TypeFor[Config](), "") {
		if !shown[k] {
			t.Errorf("config/example.yaml does not show %s", k)
		}
	}
}

// normalizePath turns "approval.finance.timeout" / "sources[0].url" into the
// configKeys form "approval.<name>.timeout" / "sources[].url".
func normalizePath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '[' {
			j := strings.IndexByte(p[i:], ']')
			b.WriteString("[]")
			i += j
			continue
		}
		b.WriteByte(p[i])
	}
	s := b.String()
	if rest, ok := strings.CutPrefix(s, "approval."); ok {
		_, after, found := strings.Cut(rest, ".")
		s = "approval.<name>"
		if found {
			s += "." + after
		}
	}
	// A list of scalars ends in "[]"; the key itself is the leaf.
	return strings.TrimSuffix(s, "[]")
}

func TestEnvVarsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range EnvVars {
		if !strings.HasPrefix(e.Name, "TOLLGATE_") || e.Description == "" || seen[e.Name] {
			t.Errorf("bad EnvVars entry %+v", e)
		}
		seen[e.Name] = true
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range []string{EnvConfig, EnvAdminToken, EnvAdminURL, EnvLogLevel, EnvDataDir, EnvUpstreamURL} {
		if !seen[n] {
			t.Errorf("EnvVars lacks %s (have %v)", n, names)
		}
	}
}

// TestPerSourceBodyDefault: one source's share of the body budget defaults to a quarter of it,
// never below one largest body nor above the budget.
func TestPerSourceBodyDefault(t *testing.T) {
	for _, tt := range []struct {
		yaml string
		want int64
	}{
		{"", 16 << 20},
		{"  limits: {max_inflight_body_bytes: 8388608}\n", 4 << 20},
		{"  max_body_bytes: 1024\n  limits: {max_inflight_body_bytes: 1048576}\n", 256 << 10},
		{"  limits: {max_inflight_body_bytes: 67108864, max_inflight_body_bytes_per_source: 67108864}\n", 64 << 20},
	} {
		c, err := Parse([]byte("schema: 1\nsources: [{id: u, kind: mcp, url: 'http://h/mcp'}]\nserver:\n  listen: 127.0.0.1:7467\n"+tt.yaml), "", envMap(nil))
		if err != nil {
			t.Fatalf("%q: %v", tt.yaml, err)
		}
		if got := c.Server.Limits.MaxInflightBodyBytesPerSource; got != tt.want {
			t.Errorf("%q: per-source share %d, want %d", tt.yaml, got, tt.want)
		}
	}
}

// TestCallerAuthInlineIssuer: server.caller_auth's top-level issuer keys are CallerIssuer's,
// inlined — they decode into it, a typo among them is refused with the right suggestion, and
// All lists it before issuers[].
func TestCallerAuthInlineIssuer(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	base := "schema: 1\nsources: [{id: u, kind: mcp, url: \"http://127.0.0.1:1/mcp\"}]\nserver:\n  public_url: https://mcp.example.com\n  caller_auth:\n"
	cfg, err := Parse([]byte(base+"    type: jwt\n    name: agents\n    issuer: https://idp.example.com\n    jwks_url: https://idp.example.com/jwks\n    clock_skew: 30s\n    issuers:\n      - {name: humans, issuer: https://sso.example.com, jwks_url: https://sso.example.com/jwks}\n"), "x.yaml", env)
	if err != nil {
		t.Fatal(err)
	}
	ca := cfg.Server.CallerAuth
	if ca.Issuer != "https://idp.example.com" || ca.JWKSURL != "https://idp.example.com/jwks" || ca.Name != "agents" || time.Duration(ca.ClockSkew) != 30*time.Second {
		t.Errorf("inline issuer not decoded: %+v", ca)
	}
	all := ca.All()
	if len(all) != 2 || all[0].Issuer != "https://idp.example.com" || all[1].Issuer != "https://sso.example.com" || all[1].Type != CallerAuthJWT {
		t.Errorf("All() = %+v", all)
	}
	_, err = Parse([]byte(base+"    type: jwt\n    isuer: https://idp.example.com\n"), "x.yaml", env)
	if err == nil || !strings.Contains(err.Error(), `server.caller_auth.isuer`) || !strings.Contains(err.Error(), `did you mean "issuer"`) {
		t.Errorf("typo: %v", err)
	}
}
