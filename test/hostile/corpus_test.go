package hostile

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// A corpus case is one hostile HTTP request and what must come of it. Cases come from
// corpus/*.txtar (hand-written, one section per case) and from the generated families in
// families_test.go; both run against one real Tollgate in front of the typed mcp-go upstream,
// which records every body it receives.
type hcase struct {
	name      string
	admin     bool   // send to the admin listener instead of /mcp
	method    string // HTTP method (default POST for /mcp, GET for admin)
	path      string // admin path, e.g. /metrics
	host      string // Host header ("" = the listener's address)
	header    http.Header
	noSession bool // send no Mcp-Session-Id
	body      []byte

	// Expectations. status is always checked; the rest when set.
	status   int
	code     string // JSON-RPC error code, "*" = any error
	errName  string // error.data.error
	result   bool   // a JSON-RPC result (not an error)
	upstream string // "never" | "seen": whether a body with the case's marker reached the upstream
}

// markerFor is the unique text a case carries so the recording upstream can tell whether that
// request (or anything built from it) reached it. It is safe inside a JSON string and a header.
func markerFor(name string) string {
	return "hx-" + strings.Map(func(r rune) rune {
		if r < 0x80 && (r == '-' || r == '/' || r == '.' || r == '_' || r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z') {
			return r
		}
		return '_'
	}, name) + "-mk"
}

// corpusServer is the server block of the corpus gateway (with policyRules).
const corpusServer = `server:
  max_body_bytes: 262144
  allowed_origins: ["https://app.example.com"]
  allowed_hosts: ["gw.internal"]
`

// corpusMaxBody is server.max_body_bytes above.
const corpusMaxBody = 262144

// TestHostileCorpus runs every case of the bad-input corpus (see corpus/README.txt).
func TestHostileCorpus(t *testing.T) {
	cases := append(loadCorpus(t), generated()...)
	if len(cases) < 200 {
		t.Fatalf("corpus has %d cases, want at least 200", len(cases))
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] || seen[markerFor(c.name)] {
			t.Fatalf("duplicate case name or marker %q", c.name)
		}
		seen[c.name], seen[markerFor(c.name)] = true, true
		if c.upstream != "" && !bytes.Contains(c.body, []byte("{{marker}}")) && !strings.Contains(fmt.Sprint(c.header), "{{marker}}") {
			t.Fatalf("case %s asserts upstream: %s but carries no {{marker}}", c.name, c.upstream)
		}
	}
	t.Logf("%d cases", len(cases))

	up := startTypedUpstream(t)
	g := startPolicyGateway(t, up, corpusServer)
	session := g.NewClient(t).Session
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runCase(t, g, up, session, c) })
	}
}

func runCase(t *testing.T, g *testkit.Gateway, up *typedUpstream, session string, c hcase) {
	marker := markerFor(c.name)
	body := bytes.ReplaceAll(c.body, []byte("{{marker}}"), []byte(marker))
	body = bytes.ReplaceAll(body, []byte("{{admin_token}}"), []byte(testkit.AdminToken))
	url, method := g.MCP, cmpOr(c.method, http.MethodPost)
	if c.admin {
		url, method = g.Admin+c.path, cmpOr(c.method, http.MethodGet)
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if !c.admin {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if !c.noSession {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
	}
	for k, vs := range c.header {
		req.Header.Del(k)
		for _, v := range vs {
			if v = strings.ReplaceAll(v, "{{admin_token}}", testkit.AdminToken); v != "" {
				req.Header.Add(k, strings.ReplaceAll(v, "{{marker}}", marker))
			}
		}
	}
	if c.host != "" {
		req.Host = strings.ReplaceAll(c.host, "{{port}}", req.URL.Port())
	}
	resp, err := testkit.HTTPClient.Do(req)
	if err != nil {
		t.Fatalf("request failed: %v", err)
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()

	if resp.StatusCode != c.status {
		t.Errorf("HTTP %d, want %d: %.400s", resp.StatusCode, c.status, raw)
	}
	if c.code != "" || c.errName != "" || c.result {
		msg := rpcMessage(resp.Header.Get("Content-Type"), raw)
		var m struct {
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code int `json:"code"`
				Data struct {
					Error string `json:"error"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(msg, &m); err != nil {
			t.Fatalf("reply is no JSON-RPC message: %v: %.400s", err, raw)
		}
		switch {
		case c.result && m.Result == nil:
			t.Errorf("want a result, got %.400s", msg)
		case (c.code != "" || c.errName != "") && m.Error == nil:
			t.Errorf("want error %s %s, got %.400s", c.code, c.errName, msg)
		case m.Error != nil && c.code != "" && c.code != "*" && strconv.Itoa(m.Error.Code) != c.code:
			t.Errorf("error code %d, want %s: %.400s", m.Error.Code, c.code, msg)
		case m.Error != nil && c.errName != "" && m.Error.Data.Error != c.errName:
			t.Errorf("data.error %q, want %q: %.400s", m.Error.Data.Error, c.errName, msg)
		}
	}
	switch saw := up.Saw([]byte(marker)); {
	case c.upstream == "never" && saw:
		t.Errorf("the upstream received the request")
	case c.upstream == "seen" && !saw:
		t.Errorf("the upstream never received the request")
	}
}

// rpcMessage is the JSON-RPC message of a reply: the body, or an SSE stream's last response.
func rpcMessage(contentType string, raw []byte) []byte {
	if !strings.HasPrefix(contentType, "text/event-stream") {
		return raw
	}
	var last []byte
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok && (bytes.Contains(d, []byte(`"result"`)) || bytes.Contains(d, []byte(`"error"`))) {
			last = d
		}
	}
	return last
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// loadCorpus reads corpus/*.txtar. Each section is one case: directive lines, a blank line,
// then the body exactly as sent (its final newline dropped). Directives:
//
//	status: 400                     HTTP status (required)
//	error: -32600 BatchNotSupported JSON-RPC error code ("*" = any) and optional data.error
//	result: yes                     a JSON-RPC result is expected
//	upstream: never|seen            whether the upstream received a body with {{marker}}
//	target: admin GET /metrics      send to the admin listener (method, path)
//	target: mcp PUT                 send to /mcp with another HTTP method
//	session: none                   send no Mcp-Session-Id
//	host: evil.example:{{port}}     the Host header
//	header: Name: value             an extra header (repeatable; an empty value removes it)
//
// The body (and header values) may use {{marker}}, {{admin_token}}, {{bytes:HEX}} (raw
// bytes, e.g. invalid UTF-8) and {{repeat:N:text}} (text without braces, N times).
func loadCorpus(t *testing.T) []hcase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("corpus", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files: %v", err)
	}
	var out []hcase
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		prefix := strings.TrimSuffix(filepath.Base(f), ".txtar") + "/"
		for _, sec := range txtar.Parse(b).Files {
			c, err := parseCase(prefix+sec.Name, sec.Data)
			if err != nil {
				t.Fatalf("%s: case %s: %v", f, sec.Name, err)
			}
			out = append(out, c)
		}
	}
	return out
}

var (
	bytesRE  = regexp.MustCompile(`\{\{bytes:([0-9a-fA-F ]+)\}\}`)
	repeatRE = regexp.MustCompile(`\{\{repeat:(\d+):([^{}]*)\}\}`)
)

func parseCase(name string, data []byte) (hcase, error) {
	c := hcase{name: name, header: http.Header{}}
	head, body, _ := bytes.Cut(data, []byte("\n\n"))
	for _, line := range strings.Split(string(head), "\n") {
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return c, fmt.Errorf("directive %q has no colon", line)
		}
		v = strings.TrimSpace(v)
		switch k {
		case "status":
			n, err := strconv.Atoi(v)
			if err != nil {
				return c, err
			}
			c.status = n
		case "error":
			c.code, c.errName, _ = strings.Cut(v, " ")
		case "result":
			c.result = v == "yes"
		case "upstream":
			if v != "never" && v != "seen" {
				return c, fmt.Errorf("upstream: %q", v)
			}
			c.upstream = v
		case "target":
			f := strings.Fields(v)
			switch {
			case len(f) == 3 && f[0] == "admin":
				c.admin, c.method, c.path = true, f[1], f[2]
			case len(f) == 2 && f[0] == "mcp":
				c.method = f[1]
			default:
				return c, fmt.Errorf("target: want `admin METHOD PATH` or `mcp METHOD`, got %q", v)
			}
		case "session":
			c.noSession = v == "none"
		case "host":
			c.host = v
		case "header":
			hk, hv, _ := strings.Cut(v, ":")
			c.header[http.CanonicalHeaderKey(strings.TrimSpace(hk))] = append(c.header[http.CanonicalHeaderKey(strings.TrimSpace(hk))], strings.TrimSpace(hv))
		default:
			return c, fmt.Errorf("unknown directive %q", k)
		}
	}
	body = bytes.TrimSuffix(body, []byte("\n"))
	var err error
	body = bytesRE.ReplaceAllFunc(body, func(m []byte) []byte {
		h, e := hex.DecodeString(strings.ReplaceAll(string(bytesRE.FindSubmatch(m)[1]), " ", ""))
		if e != nil {
			err = e
		}
		return h
	})
	body = repeatRE.ReplaceAllFunc(body, func(m []byte) []byte {
		sm := repeatRE.FindSubmatch(m)
		n, _ := strconv.Atoi(string(sm[1]))
		return bytes.Repeat(sm[2], n)
	})
	c.body = body
	switch {
	case err != nil:
		return c, err
	case c.status == 0:
		return c, fmt.Errorf("no status")
	}
	return c, nil
}
