// Package demo is a small, deterministic MCP server used by `tollgate demo`, the end-to-end
// tests and the docs. Its tools look like the dangerous ones a real deployment governs
// (delete_user, drop_table, transfer_funds) but act only on in-memory state, and every tool
// execution is counted so a test can prove a governed call ran exactly once (or never).
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"path"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Tool names served by the demo server.
const (
	ToolReadFile      = "read_file"
	ToolListUsers     = "list_users"
	ToolDeleteUser    = "delete_user"
	ToolDropTable     = "drop_table"
	ToolTransferFunds = "transfer_funds"
	ToolSlowOperation = "slow_operation"
	ToolConfirmAction = "confirm_action"
)

// ResourceUsers is the URI of the one resource: the current user list as JSON.
const ResourceUsers = "demo://users"

// PromptReviewUser is the name of the one prompt.
const PromptReviewUser = "review_user"

// Limits of slow_operation: the default keeps a demo approval visible for a moment; the
// maximum keeps a forgotten call from pinning a goroutine for long.
const (
	DefaultSlowSeconds = 5
	MaxSlowSeconds     = 300
)

// User is one entry of the in-memory user directory.
type User struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
	Role  string `json:"role"`
}

// Transfer is one completed transfer_funds call.
type Transfer struct {
	ID       string  `json:"transfer_id"`
	From     string  `json:"from_account"`
	To       string  `json:"to_account"`
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

// Demo holds the server and its in-memory state. All methods are safe for concurrent use.
type Demo struct {
	srv  *server.MCPServer
	http *server.StreamableHTTPServer

	mu        sync.Mutex
	calls     map[string]int
	files     map[string]string
	users     []User
	tables    []string
	balances  map[string]float64 // account → balance, single currency for simplicity
	transfers []Transfer
}

// New returns a demo server with fresh state.
func New() *Demo {
	d := &Demo{
		calls: make(map[string]int),
		files: map[string]string{
			"/etc/motd":             "Welcome to the Tollgate demo host.\n",
			"/srv/app/config.yaml":  "database: postgres://db.internal:5432/app\nreplicas: 3\n",
			"/home/alice/notes.txt": "- rotate the staging keys\n- review bob's access\n",
		},
		users: []User{
			{ID: "u-001", Name: "Alice Admin", Email: "alice@example.com", Role: "admin"},
			{ID: "u-002", Name: "Bob Builder", Email: "bob@example.com", Role: "developer"},
			{ID: "u-003", Name: "Carol Clerk", Email: "carol@example.com", Role: "finance"},
			{ID: "u-004", Name: "Dave Devops", Email: "dave@example.com", Role: "operator"},
		},
		tables:   []string{"audit_log", "orders", "payments", "users"},
		balances: map[string]float64{"acc-checking": 10000, "acc-savings": 50000, "acc-payroll": 250000},
	}
	d.srv = server.NewMCPServer("tollgate-demo", "1.0.0",
		server.WithToolCapabilities(true),
		server.WithResourceCapabilities(false, true),
		server.WithPromptCapabilities(true),
		server.WithElicitation(),
		server.WithInstructions("Demo server for Tollgate. All state is in memory and resets on restart."),
	)
	d.registerTools()
	d.registerResource()
	d.registerPrompt()
	d.http = server.NewStreamableHTTPServer(d.srv)
	return d
}

// NewMCPServer returns the MCP server of a fresh Demo.
func NewMCPServer() *server.MCPServer { return New().MCPServer() }

// Handler returns the streamable HTTP handler of a fresh Demo, to mount at /mcp.
func Handler() http.Handler { return New().Handler() }

// Start starts a fresh Demo on addr; see (*Demo).Start.
func Start(ctx context.Context, addr string) (url string, stop func(context.Context) error, err error) {
	return New().Start(ctx, addr)
}

// MCPServer returns the underlying mcp-go server.
func (d *Demo) MCPServer() *server.MCPServer { return d.srv }

// Handler returns the streamable HTTP handler; mount it at /mcp.
func (d *Demo) Handler() http.Handler { return d.http }

// Start listens on addr (e.g. "127.0.0.1:0") and serves the handler at /mcp. It returns the
// full MCP URL and a stop function that closes sessions and shuts the listener down. The server
// also stops when ctx ends.
func (d *Demo) Start(ctx context.Context, addr string) (url string, stop func(context.Context) error, err error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("demo: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", d.http)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = hs.Serve(ln) // returns ErrServerClosed after Shutdown
	}()

	done := make(chan struct{})
	var once sync.Once
	var stopErr error
	stop = func(sctx context.Context) error {
		once.Do(func() {
			close(done)
			// Close sessions first: open GET streams would otherwise hold Shutdown until sctx ends.
			d.http.CloseSessions(sctx)
			stopErr = hs.Shutdown(sctx)
			if stopErr != nil {
				_ = hs.Close()
			}
			<-served
		})
		return stopErr
	}
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = stop(sctx)
		case <-done:
		}
	}()
	return "http://" + ln.Addr().String() + "/mcp", stop, nil
}

// Calls reports how often tool has executed (argument validation failures included, since the
// handler ran).
func (d *Demo) Calls(tool string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[tool]
}

// AllCalls returns a copy of every tool's execution count.
func (d *Demo) AllCalls() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.calls)
}

// Users returns the current user directory.
func (d *Demo) Users() []User {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.users)
}

// Tables returns the tables that have not been dropped, sorted.
func (d *Demo) Tables() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.tables)
}

// Transfers returns the completed transfers in order.
func (d *Demo) Transfers() []Transfer {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.transfers)
}

// count records one execution of tool.
func (d *Demo) count(tool string) {
	d.mu.Lock()
	d.calls[tool]++
	d.mu.Unlock()
}

// tool wraps a handler so every execution is counted before it runs.
func (d *Demo) tool(name string, h server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		d.count(name)
		return h(ctx, req)
	}
}

func (d *Demo) registerTools() {
	d.srv.AddTool(mcp.NewTool(ToolReadFile,
		mcp.WithDescription("Read a text file from the demo host's (in-memory) filesystem."),
		mcp.WithTitleAnnotation("Read file"),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		mcp.WithString("path", mcp.Required(), mcp.MinLength(1), mcp.MaxLength(4096),
			mcp.Description("Absolute path, e.g. /etc/motd")),
	), d.tool(ToolReadFile, d.readFile))

	d.srv.AddTool(mcp.NewTool(ToolListUsers,
		mcp.WithDescription("List the users of the demo application."),
		mcp.WithTitleAnnotation("List users"),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		mcp.WithString("role", mcp.Description("Only users with this role"),
			mcp.Enum("admin", "developer", "finance", "operator")),
	), d.tool(ToolListUsers, d.listUsers))

	d.srv.AddTool(mcp.NewTool(ToolDeleteUser,
		mcp.WithDescription("Permanently delete a user account. Returns the deleted user."),
		mcp.WithTitleAnnotation("Delete user"),
		mcp.WithReadOnlyHintAnnotation(false),
		mcp.WithDestructiveHintAnnotation(true),
		mcp.WithIdempotentHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(false),
		mcp.WithString("user_id", mcp.Required(), mcp.Pattern(`^u-[0-9]{3}$`),
			mcp.Description("User id, e.g. u-002")),
		mcp.WithString("environment", mcp.Enum("staging", "production"),
			mcp.Description("Target environment (default staging); policies/delete_protection.cedar holds production for approval")),
	), d.tool(ToolDeleteUser, d.deleteUser))

	d.srv.AddTool(mcp.NewTool(ToolDropTable,
		mcp.WithDescription("Drop a database table and all of its rows."),
		mcp.WithTitleAnnotation("Drop table"),
		mcp.WithReadOnlyHintAnnotation(false),
		mcp.WithDestructiveHintAnnotation(true),
		mcp.WithIdempotentHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(false),
		mcp.WithString("table", mcp.Required(), mcp.Pattern(`^[a-z_][a-z0-9_]*$`),
			mcp.Description("Table name, e.g. orders")),
		mcp.WithString("environment", mcp.Enum("staging", "production"),
			mcp.Description("Target environment (default staging)")),
	), d.tool(ToolDropTable, d.dropTable))

	d.srv.AddTool(mcp.NewTool(ToolTransferFunds,
		mcp.WithDescription("Move money between two accounts."),
		mcp.WithTitleAnnotation("Transfer funds"),
		mcp.WithReadOnlyHintAnnotation(false),
		mcp.WithDestructiveHintAnnotation(true),
		mcp.WithIdempotentHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(true),
		mcp.WithString("from_account", mcp.Required(), mcp.Description("Source account, e.g. acc-checking")),
		mcp.WithString("to_account", mcp.Required(), mcp.Description("Destination account, e.g. acc-savings")),
		mcp.WithNumber("amount", mcp.Required(), mcp.Min(0.01), mcp.Description("Amount to move, > 0")),
		mcp.WithString("currency", mcp.Required(), mcp.Enum("USD", "EUR", "GBP"),
			mcp.Description("ISO 4217 currency code")),
	), d.tool(ToolTransferFunds, d.transferFunds))

	d.srv.AddTool(mcp.NewTool(ToolSlowOperation,
		mcp.WithDescription("Work for a number of seconds (reports progress once per second); stops early when cancelled."),
		mcp.WithTitleAnnotation("Slow operation"),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		mcp.WithNumber("seconds", mcp.DefaultNumber(DefaultSlowSeconds), mcp.Min(0), mcp.Max(MaxSlowSeconds),
			mcp.Description("How long to work, in seconds")),
	), d.tool(ToolSlowOperation, d.slowOperation))

	d.srv.AddTool(mcp.NewTool(ToolConfirmAction,
		mcp.WithDescription("Ask the user (via elicitation) to confirm an action and report the answer."),
		mcp.WithTitleAnnotation("Confirm action"),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(false),
		mcp.WithString("action", mcp.Required(), mcp.MinLength(1), mcp.Description("What to ask about, e.g. restart the web tier")),
	), d.tool(ToolConfirmAction, d.confirmAction))
}

func (d *Demo) readFile(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p, err := req.RequireString("path")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	if !path.IsAbs(p) {
		return mcp.NewToolResultErrorf("path %q is not absolute", p), nil
	}
	d.mu.Lock()
	content, ok := d.files[path.Clean(p)]
	d.mu.Unlock()
	if !ok {
		return mcp.NewToolResultErrorf("%s: no such file", path.Clean(p)), nil
	}
	return mcp.NewToolResultText(content), nil
}

func (d *Demo) listUsers(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	role := req.GetString("role", "")
	d.mu.Lock()
	users := make([]User, 0, len(d.users))
	for _, u := range d.users {
		if role == "" || u.Role == role {
			users = append(users, u)
		}
	}
	d.mu.Unlock()
	return mcp.NewToolResultJSON(map[string]any{"users": users, "count": len(users)})
}

func (d *Demo) deleteUser(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id, err := req.RequireString("user_id")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	d.mu.Lock()
	i := slices.IndexFunc(d.users, func(u User) bool { return u.ID == id })
	var deleted User
	if i >= 0 {
		deleted = d.users[i]
		d.users = slices.Delete(d.users, i, i+1)
	}
	remaining := len(d.users)
	d.mu.Unlock()
	if i < 0 {
		return mcp.NewToolResultErrorf("user %s not found", id), nil
	}
	return mcp.NewToolResultJSON(map[string]any{"deleted": deleted, "remaining_users": remaining})
}

func (d *Demo) dropTable(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	table, err := req.RequireString("table")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	d.mu.Lock()
	i := slices.Index(d.tables, table)
	if i >= 0 {
		d.tables = slices.Delete(d.tables, i, i+1)
	}
	d.mu.Unlock()
	if i < 0 {
		return mcp.NewToolResultErrorf("table %q does not exist", table), nil
	}
	return mcp.NewToolResultJSON(map[string]any{"dropped": table})
}

func (d *Demo) transferFunds(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	from, err1 := req.RequireString("from_account")
	to, err2 := req.RequireString("to_account")
	amount, err3 := req.RequireFloat("amount")
	currency, err4 := req.RequireString("currency")
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	switch {
	case amount <= 0:
		return mcp.NewToolResultErrorf("amount must be > 0, got %v", amount), nil
	case from == to:
		return mcp.NewToolResultError("from_account and to_account must differ"), nil
	case currency != "USD" && currency != "EUR" && currency != "GBP":
		return mcp.NewToolResultErrorf("unsupported currency %q", currency), nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	fromBal, okFrom := d.balances[from]
	_, okTo := d.balances[to]
	switch {
	case !okFrom:
		return mcp.NewToolResultErrorf("account %s not found", from), nil
	case !okTo:
		return mcp.NewToolResultErrorf("account %s not found", to), nil
	case fromBal < amount:
		return mcp.NewToolResultErrorf("insufficient funds in %s", from), nil
	}
	d.balances[from] -= amount
	d.balances[to] += amount
	t := Transfer{
		ID:   fmt.Sprintf("tx-%04d", len(d.transfers)+1),
		From: from, To: to, Amount: amount, Currency: currency,
	}
	d.transfers = append(d.transfers, t)
	return mcp.NewToolResultJSON(map[string]any{"status": "completed", "transfer": t, "from_balance": d.balances[from]})
}

func (d *Demo) slowOperation(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	seconds := req.GetFloat("seconds", DefaultSlowSeconds)
	if seconds < 0 || seconds > MaxSlowSeconds {
		return mcp.NewToolResultErrorf("seconds must be between 0 and %d, got %v", MaxSlowSeconds, seconds), nil
	}
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	total := time.Duration(seconds * float64(time.Second))
	deadline := time.NewTimer(total)
	defer deadline.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for elapsed := 1; ; elapsed++ {
		select {
		case <-ctx.Done():
			// The caller cancelled (notifications/cancelled or a dropped connection).
			return nil, fmt.Errorf("slow_operation cancelled: %w", ctx.Err())
		case <-deadline.C:
			return mcp.NewToolResultJSON(map[string]any{"status": "done", "seconds": seconds})
		case <-tick.C:
			if token != nil {
				_ = d.srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
					"progressToken": token,
					"progress":      elapsed,
					"total":         seconds,
				})
			}
		}
	}
}

func (d *Demo) confirmAction(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	action, err := req.RequireString("action")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	res, err := d.srv.RequestElicitation(ctx, mcp.ElicitationRequest{
		Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)},
		Params: mcp.ElicitationParams{
			Message: "Please confirm: " + action,
			RequestedSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"confirm": map[string]any{"type": "boolean", "title": "Confirm", "description": "Go ahead with the action?"},
					"comment": map[string]any{"type": "string", "title": "Comment"},
				},
				"required": []string{"confirm"},
			},
		},
	})
	if err != nil {
		return mcp.NewToolResultErrorf("elicitation failed: %v", err), nil
	}
	out := map[string]any{"action": action, "response": string(res.Action), "confirmed": false}
	if res.Action == mcp.ElicitationResponseActionAccept {
		if m, ok := res.Content.(map[string]any); ok {
			if c, ok := m["confirm"].(bool); ok {
				out["confirmed"] = c
			}
			if c, ok := m["comment"].(string); ok {
				out["comment"] = c
			}
		}
	}
	return mcp.NewToolResultJSON(out)
}

func (d *Demo) registerResource() {
	d.srv.AddResource(mcp.NewResource(ResourceUsers, "users",
		mcp.WithResourceDescription("The demo application's current users as JSON"),
		mcp.WithMIMEType("application/json"),
	), func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		users := d.Users()
		sort.Slice(users, func(i, j int) bool { return users[i].ID < users[j].ID })
		b, err := json.Marshal(users)
		if err != nil {
			return nil, err
		}
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: ResourceUsers, MIMEType: "application/json", Text: string(b)}}, nil
	})
}

func (d *Demo) registerPrompt() {
	d.srv.AddPrompt(mcp.NewPrompt(PromptReviewUser,
		mcp.WithPromptDescription("Ask the assistant to review a user's access before any change"),
		mcp.WithArgument("user_id", mcp.ArgumentDescription("User id, e.g. u-002"), mcp.RequiredArgument()),
	), func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		id := req.Params.Arguments["user_id"]
		if id == "" {
			return nil, errors.New("argument user_id is required")
		}
		return mcp.NewGetPromptResult("Review a user's access", []mcp.PromptMessage{
			mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(fmt.Sprintf(
				"Review the access of user %s: read %s, then list_users, and explain whether deleting the account is safe. Do not call delete_user.",
				id, ResourceUsers))),
		}), nil
	})
}
