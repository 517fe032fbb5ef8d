package rules

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// BenchmarkHostileName decides a caller-chosen name built to make a backtracking glob engine
// quadratic: every "prod" is a place `*prod*delete*` could restart, and "delete" never comes.
// Issue 27 measured about 2 s for 200 KB and 7.5 s for 400 KB before matching was linear.
func BenchmarkHostileName(b *testing.B) {
	e, err := Compile(config.Governance{Rules: []config.Rule{rule("*prod*delete*", config.ActionDeny)}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, kb := range []int{200, 400} {
		name := strings.Repeat("prod", kb*1024/4)
		b.Run(strconv.Itoa(kb)+"KB", func(b *testing.B) {
			for b.Loop() {
				if d := e.Decide(name); d.Rule != -1 {
					b.Fatalf("decision = %+v, want the defaults", d)
				}
			}
		})
	}
}
