package rules

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gobwas/glob"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// globPatterns covers every construct the config accepts, alone and combined.
var globPatterns = []string{
	"", "*", "**", "?", "a", "ab", "a*", "*a", "*a*", "a*b", "*prod*delete*", "a*b*c", "**a**",
	"?a", "a?", "*?", "?*", "*?*", "a*?b", "*a?*b*", "[a-c]", "[!a-c]", "[ab]", "[!ab]", "*[ab]*",
	"a*[!a]", "[a-c]*[x-z]", "{a,b}", "{a,}", "{,a}", "{}", "{a*,*b}", "{a,b}{c,d}", "x{a,b{c,d}}y",
	"{*a,b*}*c", "*{ab,ba}*", "a\\*b", "\\?*", "é*", "*é", "?é?", "[à-ü]*", "{a?c,*}", "*{,x}",
	"{a*b,c}y", "*a*a*a*b", "a**b", "*.admin.*", "{get,list}_*", "a[\\]]b", "[-]", "[!-]*",
}

var globNames = []string{
	"", "a", "b", "ab", "ba", "abc", "aab", "aaab", "axb", "a*b", "a?b", "acb", "ac", "bc", "cy",
	"aby", "aay", "ay", "prod_delete", "xprodydeletez", "prodprod", "é", "éa", "aé", "àbé", "aéb",
	"x", "xy", "xay", "xby", "xcy", "xbdy", "-", "a]b", "*", "?", "ab.admin.cd", "get_x", "list_",
	"\xff", "a\xffb", "\xe2\x82", "\xe2\x82\xac", "a\xe2\x82b", "bbbbba", "aaaaab", "abababab",
}

func TestGlobAgreesWithGobwas(t *testing.T) {
	for _, p := range globPatterns {
		ref, err := glob.Compile(p)
		if err != nil {
			t.Fatalf("reference compile %q: %v", p, err)
		}
		g, err := CompileGlob(p)
		if err != nil {
			t.Fatalf("CompileGlob(%q): %v", p, err)
		}
		for _, s := range globNames {
			if got, want := g.Match(s), ref.Match(s); got != want {
				t.Errorf("%q matching %q = %v, gobwas/glob says %v", p, s, got, want)
			}
		}
	}
}

// TestGlobAgreesWithGobwasRandom compares the two engines on random patterns and names over a
// small alphabet, where overlaps and near misses are common.
func TestGlobAgreesWithGobwasRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	parts := []string{"a", "b", "ab", "*", "?", "[ab]", "[!a]", "[a-b]", "{a,b*}", "{,a?}", "{*b,a}"}
	for range 5000 {
		var pb strings.Builder
		for range rng.IntN(6) {
			pb.WriteString(parts[rng.IntN(len(parts))])
		}
		p := pb.String()
		ref, err := glob.Compile(p)
		if err != nil {
			t.Fatalf("reference compile %q: %v", p, err)
		}
		g, err := CompileGlob(p)
		if err != nil {
			t.Fatalf("CompileGlob(%q): %v", p, err)
		}
		for range 20 {
			b := make([]byte, rng.IntN(8))
			for i := range b {
				b[i] = "abc"[rng.IntN(3)]
			}
			if got, want := g.Match(string(b)), ref.Match(string(b)); got != want {
				t.Fatalf("%q matching %q = %v, gobwas/glob says %v", p, b, got, want)
			}
		}
	}
}

func FuzzGlobAgreesWithGobwas(f *testing.F) {
	for i, p := range globPatterns {
		f.Add(p, globNames[i%len(globNames)])
	}
	f.Fuzz(func(t *testing.T, p, s string) {
		if len(p) > 64 || len(s) > 64 {
			return // the reference backtracks; keep each case cheap
		}
		ref, refErr := glob.Compile(p)
		g, err := CompileGlob(p)
		if errors.Is(err, errTooManyAlternatives) {
			return
		}
		if (refErr == nil) != (err == nil) {
			t.Fatalf("CompileGlob(%q) error %v, gobwas/glob error %v", p, err, refErr)
		}
		if err != nil {
			return
		}
		if got, want := g.Match(s), ref.Match(s); got != want {
			t.Fatalf("%q matching %q = %v, gobwas/glob says %v", p, s, got, want)
		}
	})
}

// TestCompileRefusesExplodingAlternatives: a rule whose {a,b} groups multiply out past
// MaxGlobAlternatives is refused with its path, while a long flat list is fine.
func TestCompileRefusesExplodingAlternatives(t *testing.T) {
	explode := strings.Repeat("{a,b}", 9) // 512 alternatives
	_, err := Compile(config.Governance{Rules: []config.Rule{rule("ok", config.ActionDeny), rule(explode, config.ActionDeny)}}, nil)
	if err == nil || !strings.Contains(err.Error(), "governance.rules[1].match") || !strings.Contains(err.Error(), "alternatives") {
		t.Fatalf("Compile of %q: err = %v, want a refusal naming governance.rules[1].match", explode, err)
	}
	names := make([]string, MaxGlobAlternatives)
	for i := range names {
		names[i] = "tool_" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "_" + string(rune('a'+i/26))
	}
	flat := "{" + strings.Join(names, ",") + "}*"
	e := mustCompile(t, config.Governance{Rules: []config.Rule{rule(flat, config.ActionDeny)}})
	if d := e.Decide(names[MaxGlobAlternatives-1] + "_more"); d.Rule != 0 {
		t.Errorf("a flat list of %d names: decision %+v, want rule 0", MaxGlobAlternatives, d)
	}
	if _, err := CompileGlob(flat + "{x,y}"); !errors.Is(err, errTooManyAlternatives) {
		t.Errorf("a flat list times two: err = %v, want errTooManyAlternatives", err)
	}
}
