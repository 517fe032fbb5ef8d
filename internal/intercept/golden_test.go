package intercept

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/tollgate-mcp/tollgate/internal/session"
)

// update rewrites the client sections of testdata/golden/*.txtar from what the handlers
// produce now (docs/contract.md §5.6: golden transcripts regenerated with -update). Review the
// diff before committing it: a golden file is only as right as the eyes that read it.
var update = flag.Bool("update", false, "rewrite testdata/golden/*.txtar client sections")

// A golden file is a txtar archive (golang.org/x/tools/txtar): free text (what the transcript
// shows and why), then sections opened by a line "-- name --". A section's content is its lines
// with the one final newline removed (sectionData), so a JSON message on one line is exactly
// that line's bytes.
//
//	-- config.yaml --  optional governance config (default: unitConfig)
//	-- request --      a client request, as the client sent it
//	-- upstream --     the upstream's response to it; absent when Tollgate answers locally
//	-- client --       the exact bytes the client receives (rewritten by -update)
//
// request/upstream/client triples repeat and run in order against one Gateway, so an
// initialize earlier in a file sets the capability a later tools/list is annotated with.
func sectionData(f txtar.File) []byte { return bytes.TrimSuffix(f.Data, []byte("\n")) }

// goldenExchange is one request of a transcript.
type goldenExchange struct {
	request, upstream []byte
	hasUpstream       bool
	client            []byte
	hasClient         bool
}

func goldenExchanges(t *testing.T, ar *txtar.Archive) (cfg string, xs []goldenExchange) {
	t.Helper()
	cfg = unitConfig
	for _, s := range ar.Files {
		data := sectionData(s)
		switch s.Name {
		case "config.yaml":
			cfg = string(data)
		case "request":
			xs = append(xs, goldenExchange{request: data})
		case "upstream", "client":
			if len(xs) == 0 {
				t.Fatalf("section %q before any request", s.Name)
			}
			x := &xs[len(xs)-1]
			if s.Name == "upstream" {
				x.upstream, x.hasUpstream = data, true
			} else {
				x.client, x.hasClient = data, true
			}
		default:
			t.Fatalf("unknown section %q", s.Name)
		}
	}
	return cfg, xs
}

// TestGoldenTranscripts replays every testdata/golden/*.txtar through the real handlers: the
// router picks the handler, a forwarded request's Transform is applied to the upstream's
// response, a local reply is taken as is.
func TestGoldenTranscripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files (%v)", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ar := txtar.Parse(raw)
			cfg, xs := goldenExchanges(t, ar)
			if len(xs) == 0 {
				t.Fatal("no request sections")
			}
			h := newHarness(t, cfg)
			// One session for the whole transcript, as one client connection would have.
			sess := &session.Session{ID: "golden-session"}
			var got [][]byte
			for i, gx := range xs {
				x := exchange(t, sess, string(gx.request))
				res := h.router.Route(context.Background(), x)
				var out []byte
				switch {
				case res.Forward != nil:
					if !gx.hasUpstream {
						t.Fatalf("exchange %d: request was forwarded but the file has no upstream section", i+1)
					}
					out = applyTransform(t, res.Forward, x, string(gx.upstream))
				case res.Reply != nil:
					if gx.hasUpstream {
						t.Fatalf("exchange %d: answered locally (%s) but the file has an upstream section", i+1, res.Reply)
					}
					out = res.Reply
				default:
					t.Fatalf("exchange %d: a Wait result cannot be pinned in a golden file", i+1)
				}
				got = append(got, out)
				if !*update && (!gx.hasClient || !bytes.Equal(out, gx.client)) {
					t.Errorf("exchange %d: client bytes differ (run go test -run TestGoldenTranscripts -update and review the diff)\n got: %s\nwant: %s",
						i+1, out, gx.client)
				}
			}
			if *update {
				writeGolden(t, path, ar, got)
			}
		})
	}
}

// writeGolden replaces (or adds) each exchange's client section with got.
func writeGolden(t *testing.T, path string, ar *txtar.Archive, got [][]byte) {
	t.Helper()
	var out []txtar.File
	n := -1
	emit := func() {
		if n >= 0 {
			out = append(out, txtar.File{Name: "client", Data: append(bytes.Clone(got[n]), '\n')})
		}
	}
	for _, s := range ar.Files {
		switch s.Name {
		case "client":
			continue
		case "request":
			emit()
			n++
		}
		out = append(out, s)
	}
	emit()
	ar.Files = out
	if err := os.WriteFile(path, txtar.Format(ar), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGoldenFormat pins what -update relies on: an archive read and written back is unchanged.
func TestGoldenFormat(t *testing.T) {
	tests := []struct{ name, in string }{
		{"comment and sections", "about\n\n-- request --\n{\"a\":1}\n-- client --\n{}\n"},
		{"empty section", "-- request --\n\n-- client --\nx\n"},
		{"section with inner newlines", "c\n-- upstream --\n{\n  \"a\": 1\n}\n"},
		{"dash line that is no marker", "-- request --\n-- x\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(txtar.Format(txtar.Parse([]byte(tt.in)))); got != tt.in {
				t.Errorf("round trip:\n got %q\nwant %q", got, tt.in)
			}
		})
	}
}
