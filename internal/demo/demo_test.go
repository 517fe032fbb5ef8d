package demo

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// start runs d on a loopback port for the duration of the test.
func start(t *testing.T, d *Demo) string {
	t.Helper()
	url, stop, err := d.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return url
}

// connect returns an initialized 2025-11-25 client (the protocol Tollgate speaks).
func connect(t *testing.T, url string, opts ...client.ClientOption) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatalf("transport: %v", err)
	}
	opts = append(opts, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	c := client.NewClient(tr, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("client start: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	var req mcp.InitializeRequest
	req.Params.ClientInfo = mcp.Implementation{Name: "demo-test", Version: "1.0.0"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

func call(t *testing.T, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestToolsList(t *testing.T) {
	c := connect(t, start(t, New()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	got := map[string]mcp.Tool{}
	for _, tool := range res.Tools {
		got[tool.Name] = tool
	}
	tests := []struct {
		name        string
		required    []string
		destructive bool
	}{
		{ToolReadFile, []string{"path"}, false},
		{ToolListUsers, nil, false},
		{ToolDeleteUser, []string{"user_id"}, true},
		{ToolDropTable, []string{"table"}, true},
		{ToolTransferFunds, []string{"from_account", "to_account", "amount", "currency"}, true},
		{ToolSlowOperation, nil, false},
		{ToolConfirmAction, []string{"action"}, false},
	}
	if len(got) != len(tests) {
		t.Errorf("got %d tools, want %d", len(got), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, ok := got[tt.name]
			if !ok {
				t.Fatalf("tool %q missing", tt.name)
			}
			req := slices.Clone(tool.InputSchema.Required)
			slices.Sort(req)
			want := slices.Clone(tt.required)
			slices.Sort(want)
			if !slices.Equal(req, want) {
				t.Errorf("required = %v, want %v", req, want)
			}
			if d := tool.Annotations.DestructiveHint; d == nil || *d != tt.destructive {
				t.Errorf("destructiveHint = %v, want %v", d, tt.destructive)
			}
			if tool.Description == "" {
				t.Error("empty description")
			}
		})
	}
}

func TestToolCalls(t *testing.T) {
	tests := []struct {
		name     string
		tool     string
		args     map[string]any
		wantErr  bool   // result.isError
		wantText string // substring of the text content
	}{
		{"read existing file", ToolReadFile, map[string]any{"path": "/etc/motd"}, false, "Welcome to the Tollgate demo"},
		{"read cleans path", ToolReadFile, map[string]any{"path": "/etc/../etc/motd"}, false, "Welcome"},
		{"read missing file", ToolReadFile, map[string]any{"path": "/etc/shadow"}, true, "no such file"},
		{"read relative path", ToolReadFile, map[string]any{"path": "etc/motd"}, true, "not absolute"},
		{"list all users", ToolListUsers, nil, false, `"count":4`},
		{"list by role", ToolListUsers, map[string]any{"role": "finance"}, false, `"count":1`},
		{"delete user", ToolDeleteUser, map[string]any{"user_id": "u-002"}, false, `"id":"u-002"`},
		{"delete unknown user", ToolDeleteUser, map[string]any{"user_id": "u-999"}, true, "not found"},
		{"drop table", ToolDropTable, map[string]any{"table": "orders"}, false, `"dropped":"orders"`},
		{"drop unknown table", ToolDropTable, map[string]any{"table": "nope"}, true, "does not exist"},
		{"transfer", ToolTransferFunds, map[string]any{"from_account": "acc-checking", "to_account": "acc-savings", "amount": 125.5, "currency": "EUR"}, false, `"transfer_id":"tx-0001"`},
		{"transfer insufficient", ToolTransferFunds, map[string]any{"from_account": "acc-checking", "to_account": "acc-savings", "amount": 1e9, "currency": "EUR"}, true, "insufficient funds"},
		{"transfer same account", ToolTransferFunds, map[string]any{"from_account": "acc-savings", "to_account": "acc-savings", "amount": 1, "currency": "USD"}, true, "must differ"},
		{"transfer unknown account", ToolTransferFunds, map[string]any{"from_account": "acc-x", "to_account": "acc-savings", "amount": 1, "currency": "USD"}, true, "not found"},
		{"transfer missing amount", ToolTransferFunds, map[string]any{"from_account": "acc-checking", "to_account": "acc-savings", "currency": "USD"}, true, "amount"},
		{"slow zero seconds", ToolSlowOperation, map[string]any{"seconds": 0}, false, `"status":"done"`},
		{"slow out of range", ToolSlowOperation, map[string]any{"seconds": MaxSlowSeconds + 1}, true, "between 0 and"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New()
			c := connect(t, start(t, d))
			res := call(t, c, tt.tool, tt.args)
			if res.IsError != tt.wantErr {
				t.Errorf("isError = %v, want %v (text %q)", res.IsError, tt.wantErr, text(res))
			}
			if got := text(res); !strings.Contains(got, tt.wantText) {
				t.Errorf("text = %q, want it to contain %q", got, tt.wantText)
			}
			if n := d.Calls(tt.tool); n != 1 {
				t.Errorf("Calls(%s) = %d, want 1", tt.tool, n)
			}
		})
	}
}

// A governed delete must be observable as having run exactly once.
func TestDeleteUserRemovesOnce(t *testing.T) {
	d := New()
	c := connect(t, start(t, d))
	first := call(t, c, ToolDeleteUser, map[string]any{"user_id": "u-003"})
	if first.IsError {
		t.Fatalf("first delete failed: %s", text(first))
	}
	var out struct {
		Deleted   User `json:"deleted"`
		Remaining int  `json:"remaining_users"`
	}
	if err := json.Unmarshal([]byte(text(first)), &out); err != nil {
		t.Fatalf("decode result: %v", err)
	}
	if out.Deleted.ID != "u-003" || out.Deleted.Name != "Carol Clerk" || out.Remaining != 3 {
		t.Errorf("result = %+v", out)
	}
	if slices.ContainsFunc(d.Users(), func(u User) bool { return u.ID == "u-003" }) {
		t.Error("u-003 still listed after delete")
	}
	if second := call(t, c, ToolDeleteUser, map[string]any{"user_id": "u-003"}); !second.IsError {
		t.Errorf("second delete succeeded: %s", text(second))
	}
	if n := d.Calls(ToolDeleteUser); n != 2 {
		t.Errorf("Calls = %d, want 2", n)
	}
	if got := d.AllCalls(); len(got) != 1 {
		t.Errorf("AllCalls = %v, want only delete_user", got)
	}
}

func TestStateChanges(t *testing.T) {
	d := New()
	c := connect(t, start(t, d))
	call(t, c, ToolDropTable, map[string]any{"table": "payments"})
	if slices.Contains(d.Tables(), "payments") {
		t.Errorf("tables = %v, payments still there", d.Tables())
	}
	call(t, c, ToolTransferFunds, map[string]any{"from_account": "acc-payroll", "to_account": "acc-checking", "amount": 10, "currency": "USD"})
	call(t, c, ToolTransferFunds, map[string]any{"from_account": "acc-payroll", "to_account": "acc-checking", "amount": 20, "currency": "USD"})
	tr := d.Transfers()
	if len(tr) != 2 || tr[1].ID != "tx-0002" || tr[1].Amount != 20 {
		t.Errorf("transfers = %+v", tr)
	}
}

// slow_operation must stop when the caller gives up, not run to its end.
func TestSlowOperationHonoursCancel(t *testing.T) {
	d := New()
	c := connect(t, start(t, d))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name = ToolSlowOperation
	req.Params.Arguments = map[string]any{"seconds": MaxSlowSeconds}
	_, err := c.CallTool(ctx, req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	if n := d.Calls(ToolSlowOperation); n != 1 {
		t.Errorf("Calls = %d, want 1", n)
	}
	// goleak in TestMain proves the handler goroutine ended once the server stopped.
}

func TestSlowOperationReportsProgress(t *testing.T) {
	c := connect(t, start(t, New()))
	var progress atomic.Int32
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationProgress) {
			progress.Add(1)
		}
	})
	var req mcp.CallToolRequest
	req.Params.Name = ToolSlowOperation
	req.Params.Arguments = map[string]any{"seconds": 1.5}
	req.Params.Meta = &mcp.Meta{ProgressToken: "p1"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("call: %v %v", err, res)
	}
	if progress.Load() < 1 {
		t.Error("no progress notification received")
	}
}

type elicitor struct {
	calls  atomic.Int32
	result *mcp.ElicitationResult
}

func (e *elicitor) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	e.calls.Add(1)
	if !strings.Contains(req.Params.Message, "restart web") {
		return nil, errors.New("unexpected message " + req.Params.Message)
	}
	return e.result, nil
}

func TestConfirmActionElicits(t *testing.T) {
	tests := []struct {
		name       string
		answer     mcp.ElicitationResult
		wantResp   string
		wantYes    bool
		wantNoCall bool
	}{
		{"accept yes", mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"confirm": true, "comment": "go"}}}, "accept", true, false},
		{"accept no", mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"confirm": false}}}, "accept", false, false},
		{"decline", mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, "decline", false, false},
		{"cancel", mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionCancel}}, "cancel", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &elicitor{result: &tt.answer}
			c := connect(t, start(t, New()), client.WithElicitationHandler(e))
			res := call(t, c, ToolConfirmAction, map[string]any{"action": "restart web tier"})
			if res.IsError {
				t.Fatalf("tool error: %s", text(res))
			}
			var out struct {
				Response  string `json:"response"`
				Confirmed bool   `json:"confirmed"`
			}
			if err := json.Unmarshal([]byte(text(res)), &out); err != nil {
				t.Fatalf("decode %q: %v", text(res), err)
			}
			if out.Response != tt.wantResp || out.Confirmed != tt.wantYes {
				t.Errorf("got %+v, want response %s confirmed %v", out, tt.wantResp, tt.wantYes)
			}
			if e.calls.Load() != 1 {
				t.Errorf("elicitation asked %d times, want 1", e.calls.Load())
			}
		})
	}
}

// A client without elicitation gets a tool error, not a hang.
func TestConfirmActionWithoutElicitation(t *testing.T) {
	c := connect(t, start(t, New()))
	res := call(t, c, ToolConfirmAction, map[string]any{"action": "restart web tier"})
	if !res.IsError {
		t.Errorf("want isError, got %s", text(res))
	}
}

func TestResourceAndPrompt(t *testing.T) {
	d := New()
	c := connect(t, start(t, d))
	call(t, c, ToolDeleteUser, map[string]any{"user_id": "u-001"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	var rr mcp.ReadResourceRequest
	rr.Params.URI = ResourceUsers
	res, err := c.ReadResource(ctx, rr)
	if err != nil {
		t.Fatalf("resources/read: %v", err)
	}
	if len(res.Contents) != 1 {
		t.Fatalf("contents = %d, want 1", len(res.Contents))
	}
	tc, ok := res.Contents[0].(mcp.TextResourceContents)
	if !ok {
		t.Fatalf("content type %T", res.Contents[0])
	}
	var users []User
	if err := json.Unmarshal([]byte(tc.Text), &users); err != nil {
		t.Fatalf("decode users: %v", err)
	}
	if len(users) != 3 || users[0].ID != "u-002" {
		t.Errorf("users = %+v, want 3 starting with u-002", users)
	}

	var pr mcp.GetPromptRequest
	pr.Params.Name = PromptReviewUser
	pr.Params.Arguments = map[string]string{"user_id": "u-004"}
	prompt, err := c.GetPrompt(ctx, pr)
	if err != nil {
		t.Fatalf("prompts/get: %v", err)
	}
	if len(prompt.Messages) != 1 {
		t.Fatalf("messages = %d", len(prompt.Messages))
	}
	if m, ok := prompt.Messages[0].Content.(mcp.TextContent); !ok || !strings.Contains(m.Text, "u-004") {
		t.Errorf("prompt message = %#v", prompt.Messages[0].Content)
	}
}

func TestPackageLevelConstructors(t *testing.T) {
	if NewMCPServer() == nil {
		t.Fatal("NewMCPServer returned nil")
	}
	if Handler() == nil {
		t.Fatal("Handler returned nil")
	}
	ctx, cancel := context.WithCancel(context.Background())
	url, stop, err := Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/mcp") {
		t.Errorf("url = %q", url)
	}
	connect(t, url) // serves MCP
	cancel()        // ctx end stops the server
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := stop(sctx); err != nil {
		t.Errorf("stop after cancel: %v", err)
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
	if err == nil {
		resp.Body.Close()
		t.Error("server still answering after stop")
	}
}

func TestStartBadAddr(t *testing.T) {
	if _, _, err := New().Start(context.Background(), "256.0.0.1:bad"); err == nil {
		t.Error("want listen error")
	}
}
