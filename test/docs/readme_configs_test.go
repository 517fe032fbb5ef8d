package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/governance"
)

// fence matches a fenced block in a README section: its language and its text (the fences of
// a list item are indented; so is their text, which YAML and Cedar do not mind once dedented).
var fence = regexp.MustCompile("(?ms)^([ \t]*)```(yaml|cedar)\n(.*?)^[ \t]*```")

// readmeSection is the text of the README section under heading ("## …") up to the next one.
func readmeSection(t *testing.T, readme, heading string) string {
	t.Helper()
	i := strings.Index(readme, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README has no %q section", heading)
	}
	rest := readme[i+len(heading)+2:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

func dedent(text, indent string) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, indent)
	}
	return strings.Join(lines, "\n")
}

// TestReadmeConfigsValidate: every configuration the README offers to copy — the three
// common ones and "put Tollgate in front of your server" — passes what `tollgate validate`
// checks (config.Load, then governance.Build: globs and Cedar with positions), with the Cedar
// files the README shows beside it and only the variables the README tells the reader to set.
func TestReadmeConfigsValidate(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	sections := map[string]int{ // heading → YAML configurations it must hold
		"## Three common configurations":          3,
		"## Put Tollgate in front of your server": 1,
		"## Govern a stdio server":                1,
	}
	env := map[string]string{"ALICE_TOKEN": strings.Repeat("a", 32)} // step 2 of the recipe
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for heading, want := range sections {
		section := readmeSection(t, readme, heading)
		cedar := map[string]string{} // path named in the block's first line → policy text
		var configs []string
		for _, m := range fence.FindAllStringSubmatch(section, -1) {
			text := dedent(m[3], m[1])
			switch m[2] {
			case "cedar":
				first, _, _ := strings.Cut(text, "\n")
				name, _, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(first, "//")), " ")
				if !strings.HasSuffix(name, ".cedar") {
					t.Fatalf("%s: a cedar block must name its file on its first line (// policies/x.cedar), got %q", heading, first)
				}
				cedar[name] = text
			case "yaml":
				configs = append(configs, text)
			}
		}
		if len(configs) != want {
			t.Fatalf("%s: %d YAML configurations, want %d", heading, len(configs), want)
		}
		for i, cfgText := range configs {
			dir := t.TempDir()
			for name, text := range cedar {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(dir, "tollgate.yaml")
			if err := os.WriteFile(path, []byte(cfgText), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path, lookup)
			if err == nil {
				_, err = governance.Build(cfg, nil)
			}
			if err != nil {
				t.Errorf("%s, configuration %d does not validate:\n%s\n%v", heading, i+1, cfgText, err)
			}
		}
	}
}
