// Package server assembles a running Tollgate from a configuration: the MCP listener, the admin
// listener, the task manager and the background workers, with one lifecycle.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"reflect"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/callerauth"
	"github.com/tollgate-mcp/tollgate/internal/identity"
	"github.com/tollgate-mcp/tollgate/internal/upstreamcred"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate-mcp/tollgate/internal/approval"
	"github.com/tollgate-mcp/tollgate/internal/audit"
	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/console"
	"github.com/tollgate-mcp/tollgate/internal/disclose"
	"github.com/tollgate-mcp/tollgate/internal/events"
	"github.com/tollgate-mcp/tollgate/internal/execution"
	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/gwtools"
	"github.com/tollgate-mcp/tollgate/internal/intercept"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/limits"
	"github.com/tollgate-mcp/tollgate/internal/logcap"
	"github.com/tollgate-mcp/tollgate/internal/metrics"
	"github.com/tollgate-mcp/tollgate/internal/notify"
	"github.com/tollgate-mcp/tollgate/internal/origin"
	"github.com/tollgate-mcp/tollgate/internal/pins"
	"github.com/tollgate-mcp/tollgate/internal/proxy"
	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/slack"
	"github.com/tollgate-mcp/tollgate/internal/stdio"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
	"github.com/tollgate-mcp/tollgate/internal/telemetry"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// Options are what the command line adds to the configuration.
type Options struct {
	Logger    *slog.Logger
	LookupEnv func(string) (string, bool) // nil = os.LookupEnv
	Version   string
	// Ready, if set, is closed once both listeners accept connections.
	Ready chan<- struct{}
}

// Server is one Tollgate instance.
type Server struct {
	opts       Options
	log        *slog.Logger
	snaps      governance.Holder
	reg        *prometheus.Registry
	metrics    *metrics.Metrics
	up         *upstream.Client
	stdio      *stdio.Transport // the processes of a command source (nil for a url)
	sessions   *session.Registry
	store      store.Store
	tasks      *tasks.Manager
	hub        *events.Hub
	tools      *gwtools.Tools
	gw         *intercept.Gateway
	pins       *pins.Keeper // nil = governance.pins.mode off
	pinRefresh atomic.Bool  // a recheckPins is running
	ann        *intercept.Annotations
	audit      *audit.Logger
	mcpLn      net.Listener
	adminLn    net.Listener
	mcpSrv     *http.Server
	mcp        *proxy.Handler
	adminSrv   *http.Server
	reloader   *Reloader
	traceStop  func(context.Context) error
	approvers  approverTokens // reloaded with the configuration
	notifier   *notify.Notifier
	slack      *slack.Slack // slack destinations with a channel: buttons (docs/slack.md)
	// cannotRun tells why a pending call could no longer run (unrunnable.go); endedSessions
	// are stdio sessions that ended, for refreshEnded.
	cannotRun     func(*tasks.Task) *tasks.Unrunnable
	notWaitingFor func(*tasks.Task) *tasks.NotWaiting
	endedSessions chan string
	unwaitedTasks chan string   // held calls nobody waits for any more (noteStoppedWaiting)
	toolsChanged  chan struct{} // the upstream's tools were listed again (noteToolsChanged)
	cacheOnce     sync.Once
	cacheOK       chan struct{}
	// callers verifies /mcp bearer tokens (server.caller_auth); nil when off.
	callers *callerauth.Authenticator
	// adminTokens verifies approvers' access tokens (server.admin_auth.token_issuer).
	adminTokens adminIssuer

	// storeWarning is set when tasks fell back to memory without being asked to (/readyz).
	storeWarning string
	// storeHealth probes the task store for /readyz (nil for the memory store).
	storeHealth *storeHealth

	// policyCheckMu serialises validations of Cedar policies against the upstream's tools.
	policyCheckMu sync.Mutex
}

// New builds a server from cfg and binds its listeners (so the addresses are known at once).
// When it fails part-way, what it had opened (telemetry, store, audit log, listeners) is
// closed again.
func New(cfg *config.Config, o Options) (_ *Server, err error) {
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	// Secrets given as files ($TOLLGATE_ADMIN_TOKEN_FILE, …) are read once, here.
	if o.LookupEnv, err = config.WithSecretFiles(o.LookupEnv); err != nil {
		return nil, err
	}
	// Every part logs through logcap: client-chosen names and texts are clipped.
	o.Logger = slog.New(logcap.NewHandler(o.Logger.Handler()))
	s := &Server{opts: o, log: o.Logger, reg: prometheus.NewRegistry(), cacheOK: make(chan struct{}),
		endedSessions: make(chan string, maxEndedQueue), unwaitedTasks: make(chan string, maxEndedQueue),
		toolsChanged: make(chan struct{}, 1)}
	var snap *governance.Snapshot
	snap, err = governance.Build(cfg, nil)
	if err != nil {
		return nil, err
	}
	s.snaps.Store(snap)
	s.logAuditMode(snap)

	tokens, err := cfg.ApproverTokens(o.LookupEnv)
	if err != nil {
		return nil, err
	}
	if len(tokens) == 0 && (len(cfg.Server.AdminAuth.TrustedProxy) == 0 || len(cfg.Approvers) == 0) {
		s.log.Warn("no approver tokens configured (approvers: or TOLLGATE_ADMIN_TOKEN); the approvals API will refuse every request")
	}

	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.metrics = metrics.New(s.reg, o.Version)

	tp, traceStop, err := telemetry.Setup(context.Background(), cfg.Telemetry, o.Version)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	s.traceStop = traceStop
	undo = append(undo, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = traceStop(ctx)
	})
	// The session table comes first: a stdio server's sessions consult it (Busy).
	lim := cfg.Server.Limits
	s.sessions = session.NewRegistry(lim.MaxSessions, func(ss *session.Session) {
		s.hub.CloseSession(ss.ID)
		if s.sessions.Ended(ss.ID) { // ended by its client (DELETE), not evicted
			s.noteSessionEnd(ss.ID) // its pending calls' Slack requests say they cannot run
		}
	})
	s.sessions.LimitSources(lim.SessionsPerSecond, lim.SessionBurst)
	src := cfg.Sources[0]
	upURL, upOpts := src.URL, upstream.Options{
		ConnectTimeout: src.ConnectTimeout.D(),
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			return telemetry.Transport(s.metrics.InstrumentTransport(rt))
		},
	}
	if src.Stdio() {
		if s.stdio, err = startStdio(src, o.LookupEnv, s.log, s.sessions.Busy, s.noteSessionEnd); err != nil {
			return nil, err
		}
		undo = append(undo, func() { _ = s.stdio.Close() })
		s.metrics.SetStdioProcesses(s.stdio.Processes)
		upURL, upOpts.Transport = stdioURL, s.stdio
	}
	if src.Credential.Set() {
		c := src.Credential
		if c.ValueFile != "" {
			c.ValueFile = cfg.ResolvePath(c.ValueFile) // relative to the configuration file
		}
		if c.ClientCredentials.ClientSecretFile != "" {
			c.ClientCredentials.ClientSecretFile = cfg.ResolvePath(c.ClientCredentials.ClientSecretFile)
		}
		cred, err := upstreamcred.New(c, o.LookupEnv, s.log)
		if err != nil {
			return nil, err
		}
		wrap := upOpts.WrapTransport
		upOpts.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return cred.Wrap(wrap(rt)) }
	}
	if s.up, err = upstream.New(upURL, upOpts); err != nil {
		return nil, err
	}
	opened, err := openStore(cfg, o.LookupEnv, s.log)
	if err != nil {
		return nil, err
	}
	s.store, s.storeWarning = opened.Store, opened.warning
	s.storeHealth = newStoreHealth(s.store, s.log)
	undo = append(undo, func() { _ = s.store.Close() })
	resolved := *cfg // the hash key lives beside the store actually opened
	resolved.Tasks.Store = opened.cfg
	hashKey, err := argumentHashKey(&resolved, o.LookupEnv)
	if err != nil {
		return nil, err
	}
	ownKey := ownerKey(o.LookupEnv, hashKey)
	disclose.SetOwnerKey([]byte(ownKey))
	if s.audit, err = audit.Open(auditPath(cfg)); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	undo = append(undo, func() { _ = s.audit.Close() })
	s.hub = events.NewHub(events.Options{Logger: s.log})
	// Session ids Tollgate saw created are kept (as keyed hashes) in the task store, so a
	// restart or another replica accepts them and no other id (docs/SECURITY.md, Sessions).
	known, err := store.NewKnownSessions(s.store, hashKey)
	if err != nil {
		return nil, err
	}
	s.sessions.KeepIn(known, session.DefaultBookTTL, func(op string, err error) {
		s.log.Warn("task store: could not "+op+" a session id; it holds in this process only", "error", err.Error())
	})
	if store.IsShared(s.store) { // another replica may end a session this one holds
		s.sessions.SharedEnds()
	}
	s.metrics.SetSessionCount(s.sessions.Len)

	// The listeners are bound here, before the parts that name the admin address: webhook/Slack
	// approval notifications and held calls' answers link the console.
	if s.mcpLn, err = net.Listen("tcp", cfg.Server.Listen); err != nil {
		return nil, fmt.Errorf("listen %s (server.listen / TOLLGATE_LISTEN): %w", cfg.Server.Listen, err)
	}
	undo = append(undo, func() { _ = s.mcpLn.Close() })
	if s.adminLn, err = net.Listen("tcp", cfg.Server.AdminListen); err != nil {
		return nil, fmt.Errorf("listen %s (server.admin_listen / TOLLGATE_ADMIN_LISTEN): %w", cfg.Server.AdminListen, err)
	}
	undo = append(undo, func() { _ = s.adminLn.Close() })
	mcpMax, adminMax := s.connectionCaps(lim)
	mcpLimited := limits.NewListener(s.mcpLn, mcpMax, "MCP", func() { s.metrics.Limited("connections_mcp") })
	s.mcpLn = mcpLimited
	srv := cfg.Server
	if srv.PublicURL == "" {
		srv.PublicURL = "http://" + s.mcpLn.Addr().String() // the bound address (listen may say :0)
	}
	if s.callers, err = callerauth.New(srv, callerauth.Options{Metrics: callerauth.NewMetrics(s.reg), Logger: s.log}); err != nil {
		return nil, err
	}
	s.adminLn = limits.NewListener(s.adminLn, adminMax, "admin", func() { s.metrics.Limited("connections_admin") })
	consoleURL := "http://" + s.AdminAddr() + console.Path

	// Built in dependency order, each part given what it uses at construction: the annotation
	// cache and the bridge (read by the task manager's re-check and the execution.Runner, and
	// filled by the Gateway), the runner and manager, Tollgate's own tools, then the Gateway.
	proms := execution.NewPromotions()
	bridge := intercept.NewBridge(s.up, s.log)
	s.ann = intercept.NewAnnotations(&s.snaps, s.up, bridge, s.log)
	runner := execution.New(execution.Options{Upstream: s.up, Sessions: s.sessions, Promotions: proms, Modern: bridge.ExecuteModern})
	t := cfg.Tasks
	s.tasks = tasks.NewManager(s.store, runner, s.ann.Recheck, tasks.Options{
		DefaultTTL: t.DefaultTTL.D(), MaxTTL: t.MaxTTL.D(), PollInterval: t.PollInterval.D(), Retention: t.Retention.D(),
		ExecutionTimeout: t.ExecutionTimeout.D(), InputTimeout: t.InputTimeout.D(), ExecutionLease: t.ExecutionLease.D(), Quotas: t.Quotas, Workflow: s.snaps.Workflow, People: s.snaps.People, Logger: s.log, Registerer: s.reg,
		ArgumentHashKey: hashKey,
		SessionLive:     func(id string) bool { return s.sessions.Peek(id) != nil },
		ConsoleURL:      consoleURL,
		Unfollowed:      s.pushTaskNote,
	})
	undo = append(undo, func() { _ = s.tasks.Close() })
	s.tools = gwtools.New(s.tasks, s.hub, proms, gwtools.Options{Logger: s.log, ConsoleURL: consoleURL})
	var upTasks intercept.UpstreamTaskStore
	if ut, ok := s.store.(store.UpstreamTasks); ok && store.IsShared(s.store) {
		upTasks = ut // replicas share upstream task bindings (docs/operations.md)
	}
	s.gw = intercept.NewGateway(intercept.Deps{
		Snapshots: &s.snaps, Upstream: s.up, Sessions: s.sessions, Logger: s.log, Registerer: s.reg,
		OwnerKey: ownKey, Promotions: proms, Tasks: s.tasks, Tools: s.tools,
		Annotations: s.ann, Bridge: bridge, ConsoleURL: consoleURL, UpstreamTasks: upTasks,
		ParkSlots: mcpLimited, // a parked MRTR call holds descriptors like a connection
		Audit:     s.audit, StoppedWaiting: s.noteStoppedWaiting,
	})
	if s.pins, err = s.setupPins(context.Background(), cfg); err != nil {
		return nil, err
	}
	s.tasks.Subscribe(s.pushTaskStatus)
	s.tasks.Subscribe(s.gw.OnModernTaskChange)
	s.tasks.Subscribe(s.gw.OnTaskQuestion)
	s.tasks.Subscribe(s.tools.PublishTaskChange)
	s.tasks.Subscribe(s.audit.OnTaskChange)
	s.tasks.Subscribe(s.holdSessions)
	s.metrics.SetPendingTasks(
		func() []string { return slices.Collect(maps.Keys(s.snaps.Load().Config.Approval)) },
		s.pendingByWorkflow)

	router := intercept.NewRouter()
	s.gw.Register(router)
	s.mcp = proxy.New(proxy.Options{
		Upstream: s.up, Sessions: s.sessions, Router: router,
		MaxBodyBytes: cfg.Server.MaxBodyBytes, RequestTimeout: cfg.Server.RequestTimeout.D(),
		AllowedOrigins: cfg.Server.AllowedOrigins, AllowedHosts: cfg.Server.AllowedHosts,
		ListenAddr: cfg.Server.Listen, Logger: s.log, Observer: s.metrics,
		BodyBudget: limits.NewSharedBudget(lim.MaxInflightBodyBytes, lim.MaxInflightBodyBytesPerSource),
		MaxStreams: lim.MaxStreams, MaxStreamsPerSource: lim.MaxStreamsPerSource, MaxStreamsPerSession: lim.MaxStreamsPerSession,
		CallerAuth: s.callers, ForwardAuthorization: cfg.Sources[0].ForwardAuthorization,
		Identity: func(r *http.Request) string {
			if c := identity.FromContext(r.Context()); c != nil {
				return c.Subject // the verified caller
			}
			if h := s.snaps.Load().Config.Server.IdentityHeader; h != "" {
				return r.Header.Get(h)
			}
			return ""
		},
		Divert: func(ss *session.Session, m *jsonrpc.Message) bool {
			// The progress of a call Tollgate runs for a task, sent on the session's GET
			// stream under Tollgate's token: it goes where the task's notes go (tasks.Note).
			if m.Method != tasks.MethodProgress {
				return false
			}
			id, ok := tasks.ProgressTask(jsonrpc.Member(m.Params, "progressToken"))
			if ok {
				s.tasks.Note(id, ss.ID, tasks.Note{Method: m.Method, Params: slices.Clone(m.Params)})
			}
			return ok
		},
		OnNotification: func(ss *session.Session, m *jsonrpc.Message) {
			// Only the method: params may carry tool output or log text.
			s.hub.Publish(ss.ID, events.TypeNotification, "", map[string]string{"method": m.Method})
			s.gw.UpstreamNotification(m.Method) // tools/list_changed: list afresh
			if m.Method == "notifications/tools/list_changed" {
				s.recheckPins() // a changed definition is quarantined before anyone lists; policies re-checked
			}
		},
	})
	mcpMux := http.NewServeMux()
	mcpMux.Handle("/mcp", telemetry.Middleware(s.mcp, tp))
	if s.callers != nil {
		for _, p := range s.callers.MetadataPaths() {
			mcpMux.HandleFunc(p, s.callers.ServeMetadata) // RFC 9728, unauthenticated
		}
	}
	s.mcpSrv = s.httpServer(mcpMux, lim)

	s.cannotRun, s.notWaitingFor = s.unrunnable(bridge), s.notWaiting(store.IsShared(s.store))
	s.slack = s.newSlack(consoleURL)
	adminMux := http.NewServeMux()
	adminMux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	adminMux.HandleFunc("GET /readyz", s.readyz)
	adminMux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	s.approvers.set(tokens)
	api := approval.Throttle(approval.NewHandler(s.tasks, &s.approvers, approval.Options{Workflow: s.snaps.Workflow, Logger: s.log,
		Config: func() *config.Config { return s.snaps.Load().Config },
		Decisions: func(would bool, limit int, visible func(string) bool) any {
			return s.audit.Recent(would, limit, func(e audit.Event) bool { return visible(e.Workflow) })
		},
		AuditMode: func() string { return s.snaps.Load().AuditMode() },
		Explain:   s.explainTask, CannotRun: s.cannotRun, NotWaiting: s.notWaitingFor}),
		approval.ThrottleOptions{Auth: &s.approvers, OnRefuse: func() { s.metrics.Limited("admin_auth") }})
	// Access tokens of server.admin_auth.token_issuer sign approvers in; a token that does
	// not verify reaches the throttle, which counts it.
	api = approval.TokenSignIn(api, approval.TokenSignInOptions{
		Verify: s.adminTokens.verifier(func() *config.Config { return s.snaps.Load().Config }, s.log),
		People: s.snaps.People, OnRefused: s.metrics.SignInRefused,
	})
	// The login proxy (server.admin_auth) signs approvers in before the token throttle.
	api = approval.ProxySignIn(api, approval.ProxyOptions{
		SignIn:      approval.SignInFrom(func() *config.Config { return s.snaps.Load().Config }),
		OnUntrusted: func() { s.metrics.Limited("admin_proxy_header") }, OnRefused: s.metrics.SignInRefused, Logger: s.log,
	})
	adminMux.Handle("/api/v1/approvals", api)
	adminMux.Handle("/api/v1/approvals/", api)
	// Wrong tokens count towards the same per-address throttle as the approvals API's.
	adminMux.Handle("GET "+BackupPath, approval.Throttle(http.HandlerFunc(s.backup),
		approval.ThrottleOptions{Auth: &s.approvers, OnRefuse: func() { s.metrics.Limited("admin_auth") }}))
	adminMux.Handle("/api/v1/decisions", api)
	pinsAPI := approval.Throttle(approval.RequireApprover(&s.approvers, s.log, s.pinsAPI(s.pins)),
		approval.ThrottleOptions{Auth: &s.approvers, OnRefuse: func() { s.metrics.Limited("admin_auth") }})
	pinsAPI = approval.ProxySignIn(pinsAPI, approval.ProxyOptions{
		SignIn:      approval.SignInFrom(func() *config.Config { return s.snaps.Load().Config }),
		OnUntrusted: func() { s.metrics.Limited("admin_proxy_header") }, OnRefused: s.metrics.SignInRefused, Logger: s.log,
	})
	adminMux.Handle("/api/v1/pins", pinsAPI)
	adminMux.Handle("/api/v1/pins/", pinsAPI)
	// Authenticated by Slack's request signature, not a bearer token (docs/slack.md).
	adminMux.Handle("POST "+slack.InteractionsPath, s.slack.Interactions())
	adminMux.Handle(console.Path, console.Handler())
	adminMux.Handle(console.Path+"/", console.Handler())
	// DNS-rebinding protection as on the MCP listener; the console's own pages are same-origin.
	adminGuard := origin.New(origin.Options{ListenAddr: cfg.Server.AdminListen,
		AllowedHosts: cfg.Server.AllowedHosts, AllowedOrigins: cfg.Server.AllowedOrigins, SameOrigin: true})
	s.adminSrv = s.httpServer(adminGuard.Wrap(adminMux), lim)

	s.reloader = newReloader(s, cfg)

	s.notifier = notify.New(notify.Options{
		Workflow: s.snaps.Workflow, ConsoleURL: consoleURL,
		Logger: s.log, Registerer: s.reg, Remember: s.tasks.NoteMessage,
	})
	s.tasks.Subscribe(s.notifier.OnTaskChange)
	s.tasks.Subscribe(s.slack.OnTaskChange)
	return s, nil
}

// httpServer applies server.limits to one listener's server: header, body, idle and write
// bounds (docs/SECURITY.md). No whole-request timeout: it would cut long-lived streams.
func (s *Server) httpServer(h http.Handler, lim config.Limits) *http.Server {
	return &http.Server{
		Handler:           limits.Deadlines(h, lim.BodyTimeout.D(), lim.WriteTimeout.D()),
		ReadHeaderTimeout: lim.HeaderTimeout.D(),
		IdleTimeout:       lim.IdleTimeout.D(),
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// fdReserve is the open files kept free besides connections: listeners, the store, the audit
// log, upstream probes, the configuration watcher.
const fdReserve = 64

// connectionCaps returns the connection caps of both listeners, lowering the MCP one when the
// process may not open enough files for it (each client connection may hold an upstream one
// too): running out of descriptors would stop both listeners from accepting at all.
func (s *Server) connectionCaps(lim config.Limits) (mcp, admin int) {
	mcp, admin = lim.MaxConnections, lim.AdminMaxConnections
	nofile, ok := openFileLimit()
	if !ok {
		return mcp, admin
	}
	if fit := fittingConnections(nofile, admin); fit < mcp {
		s.log.Warn("server.limits.max_connections lowered to fit the open-files limit (raise ulimit -n)",
			"configured", mcp, "effective", fit, "nofile", nofile)
		mcp = fit
	}
	return mcp, admin
}

// fittingConnections is how many MCP connections nofile descriptors hold after the admin
// listener's and the reserve: two each (client and upstream), at least one.
func fittingConnections(nofile uint64, admin int) int {
	free := int64(min(nofile, 1<<30)) - fdReserve - int64(admin)
	return int(max(free/2, 1))
}

// pushTaskStatus sends notifications/tasks/status to the owning session's open stream only
// (docs/contract.md §2); the client learns a task's first state from CreateTaskResult.
func (s *Server) pushTaskStatus(tr tasks.Transition) {
	if tr.Created() {
		return
	}
	t := tr.Task
	if ss := s.sessions.Get(t.SessionID); ss != nil {
		ss.Push(jsonrpc.Notification("notifications/tasks/status", t.WireJSON()))
	}
}

// pushTaskNote sends the upstream's progress or log message during a 2025-11-25 task call
// that no tasks/result stream follows to the session's stream (dropped when none is open or
// it is full); a held call's go only to its own stream.
func (s *Server) pushTaskNote(t *tasks.Task, n tasks.Note) {
	if t.Promoted {
		return
	}
	if b := intercept.TaskNote(t, n); b != nil {
		if ss := s.sessions.Get(t.SessionID); ss != nil {
			ss.Push(b)
		}
	}
}

// holdSessions keeps a session with pending Tollgate tasks from being evicted while they are
// pending (their notifications and results belong to it).
func (s *Server) holdSessions(tr tasks.Transition) {
	t := tr.Task
	ss := s.sessions.Peek(t.SessionID)
	if ss == nil {
		return
	}
	if t.State.Terminal() {
		ss.ReleaseTask(t.ID)
		return
	}
	ss.HoldTask(t.ID, t.CreatedAt.Add(t.TTL))
}

func auditPath(cfg *config.Config) string {
	if p := cfg.Audit.Path; p != "" && p != "-" {
		return cfg.ResolvePath(p)
	}
	return cfg.Audit.Path
}

// SubscribeTasks calls fn after every committed task transition (see tasks.Manager.Subscribe:
// fn must not block). Subscribe before Run so no transition of the stored tasks is missed.
func (s *Server) SubscribeTasks(fn func(tasks.Transition)) (unsubscribe func()) {
	return s.tasks.Subscribe(fn)
}

// MCPAddr is the bound MCP address (host:port).
func (s *Server) MCPAddr() string { return s.mcpLn.Addr().String() }

// AdminAddr is the bound admin address.
func (s *Server) AdminAddr() string { return s.adminLn.Addr().String() }

// Run serves until ctx ends, then shuts down gracefully within server.shutdown_timeout.
func (s *Server) Run(ctx context.Context) error {
	cfg := s.snaps.Load().Config
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// One run group: the listeners and the background workers. The first error of any of them
	// (a listener failing, a worker that cannot run) ends the group and is Run's result.
	var wg sync.WaitGroup
	const members = 10
	errc := make(chan error, members)
	run := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	serve := func(srv *http.Server, ln net.Listener) func(context.Context) error {
		return func(context.Context) error {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		}
	}
	worker := func(f func(context.Context)) func(context.Context) error {
		return func(ctx context.Context) error { f(ctx); return nil }
	}
	// Stored tasks are recovered before anything is served (the subscribers are attached).
	// The manager outlives ctx: at shutdown its executing calls get the grace (Drain below)
	// and Close ends it.
	run("task manager", func(ctx context.Context) error { return s.tasks.Run(context.WithoutCancel(ctx)) })
	select {
	case <-s.tasks.Loaded():
		s.resumeNotices(ctx)
	case <-ctx.Done():
	}
	run("mcp listener", serve(s.mcpSrv, s.mcpLn))
	run("admin listener", serve(s.adminSrv, s.adminLn))
	s.log.Info("tollgate listening", "mcp", "http://"+s.MCPAddr()+"/mcp", "admin", "http://"+s.AdminAddr(),
		"upstream", upstreamName(cfg.Sources[0]), "version", s.opts.Version)
	if s.opts.Ready != nil {
		close(s.opts.Ready)
	}

	run("approval channel check", worker(s.checkChannels))
	run("task store probe", worker(s.storeHealth.run))
	run("notifier", worker(s.notifier.Run))
	run("slack", worker(s.slack.Run))
	run("slack refresh", worker(s.refreshEnded))
	run("upstream watcher", worker(func(ctx context.Context) { s.watchUpstream(ctx, cfg) }))
	run("reloader", worker(s.reloader.Run))
	if s.pins != nil {
		run("pins", worker(func(ctx context.Context) { s.pins.Run(ctx, pinSync) })) // other replicas' decisions
	}
	if s.callers != nil {
		run("caller auth keys", s.callers.Run)
	}

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		cancel()
	}
	s.log.Info("shutting down", "drain_timeout", cfg.Server.ShutdownTimeout.D().String())
	sctx, scancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout.D())
	defer scancel()
	// Long-lived streams would hold Shutdown for its whole bound: end them first; held calls
	// get their "call again" answer (intercept.ErrShuttingDown), plain in-flight requests and
	// executing approved calls drain within the bound; then what remains is cut off.
	s.mcp.Close()
	s.gw.Close()
	_ = s.mcpSrv.Shutdown(sctx)
	_ = s.adminSrv.Shutdown(sctx)
	s.tasks.Drain(sctx)
	_ = s.mcpSrv.Close()
	_ = s.adminSrv.Close()
	_ = s.tasks.Close()
	wg.Wait()
	if s.stdio != nil {
		_ = s.stdio.Close() // after the gateway ended its sessions and the executions stopped
	}
	_ = s.store.Close()
	_ = s.audit.Close()
	tctx, tcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer tcancel()
	_ = s.traceStop(tctx) // flush spans
	return err
}

// pendingByWorkflow counts tasks awaiting a decision per workflow (tollgate_pending_tasks).
func (s *Server) pendingByWorkflow() map[string]int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := s.tasks.AwaitingByWorkflow(ctx)
	if err != nil {
		return map[string]int{}
	}
	return out
}

// watchUpstream builds the annotation cache after the first successful handshake and rebuilds
// it when the upstream comes back after an outage (REQ-CORE-007 F-007.1, F-007.4).
func (s *Server) watchUpstream(ctx context.Context, cfg *config.Config) {
	backoff := 250 * time.Millisecond
	healthy := false
	for {
		c := s.snaps.Load().Config
		err := s.ann.Refresh(ctx, c.Server.ToolsMaxPages, c.Server.ToolsFetchTimeout.D())
		switch {
		case err == nil:
			s.noteToolsChanged()
			changed := s.gw.Recompute(s.snaps.Load())
			s.checkPolicies(s.snaps.Load()) // the first listing, or tools that changed
			if !healthy {
				s.log.Info("annotation cache built", "upstream", upstreamName(cfg.Sources[0]))
			}
			healthy = true
			first := false
			s.cacheOnce.Do(func() { close(s.cacheOK); first = true })
			s.metrics.UpstreamUp(true)
			if len(changed) > 0 {
				s.notifyListChanged()
			}
			if first {
				// Start-up garbage (the upstream's whole tool list, the config and Cedar
				// sources, package initialisers) is several times the live heap; return it once
				// now instead of leaving it resident until the scavenger gets to it
				// (docs/PERFORMANCE.md "Idle RSS"). Once ready (/readyz needs the upstream up),
				// so start to ready does not pay for it.
				debug.FreeOSMemory()
			}
			backoff = 250 * time.Millisecond
		case ctx.Err() != nil:
			return
		default:
			if healthy {
				s.log.Warn("upstream unreachable; keeping cached annotations", "error", err.Error())
			} else {
				s.log.Warn("annotation cache not built yet", "error", err.Error())
			}
			healthy = false
			s.metrics.UpstreamUp(false)
		}
		wait := 30 * time.Second
		if !healthy {
			wait = backoff
			backoff = min(backoff*2, 10*time.Second)
		}
		if !s.sleepOrProbe(ctx, wait, healthy) {
			return
		}
	}
}

// sleepOrProbe waits; while healthy it probes the upstream every few seconds and returns early
// (to rebuild) when it has been down and is back. False when ctx ended.
func (s *Server) sleepOrProbe(ctx context.Context, wait time.Duration, healthy bool) bool {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(3 * time.Second)
	defer tick.Stop()
	down := false
	for {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return true
		case <-tick.C:
			if !healthy {
				continue
			}
			ok := s.probe(ctx)
			s.metrics.UpstreamUp(ok)
			if !ok {
				down = true
			} else if down {
				s.log.Info("upstream is back; rebuilding annotation cache")
				return true
			}
		}
	}
}

// probe checks the upstream answers HTTP at all (any status counts).
func (s *Server) probe(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := s.up.Send(ctx, http.MethodGet, http.Header{"Accept": {"text/event-stream"}}, nil)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// readyz: config loaded, upstream reachable (cached, from the background probe), store ready.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	var problems []string
	if s.snaps.Load() == nil {
		problems = append(problems, "config not loaded")
	}
	select {
	case <-s.cacheOK:
	default:
		problems = append(problems, "upstream not reached yet")
	}
	if !s.metrics.IsUpstreamUp() {
		problems = append(problems, "upstream unreachable")
	}
	// Approval channels that cannot reach anyone are reported but do not fail readiness: it
	// gates all traffic, and forwarded calls work whatever the approval channels do.
	degraded := s.channelProblems()
	if len(problems) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		for _, p := range problems {
			fmt.Fprintln(w, p)
		}
	} else {
		fmt.Fprintln(w, "ready")
	}
	for _, p := range degraded {
		fmt.Fprintln(w, "degraded: "+p)
	}
	if d := s.callers.Degraded(); d != "" {
		// Ready for callers whose issuer's keys are cached; said where operators look.
		fmt.Fprintln(w, "degraded: caller auth: "+d)
	}
	if s.storeWarning != "" {
		// Ready all the same (the gateway works), but say it where operators look.
		fmt.Fprintln(w, "degraded: "+s.storeWarning)
	}
	// A store that does not answer stops approvals, not forwarded calls: degraded, not 503.
	for _, p := range s.storeHealth.degraded() {
		fmt.Fprintln(w, "degraded: "+p)
	}
	if snap := s.snaps.Load(); snap != nil {
		if d := policyDegraded(snap); d != "" {
			fmt.Fprintln(w, "degraded: "+d)
		}
		if m := snap.AuditMode(); m != "" {
			fmt.Fprintln(w, m) // never silent: calls it would deny or hold are forwarded
		}
	}
}

// explainTask explains how the configuration loaded now decides a task's call, at the task's
// creation time, with the annotations the upstream lists now.
func (s *Server) explainTask(ctx context.Context, t *tasks.Task) approval.ExplainResponse {
	snap := s.snaps.Load()
	x := snap.Explain(ctx, governance.Caller{Subject: t.RequestedBy, SessionID: t.SessionID, Verified: t.Requester},
		t.Tool, s.ann.Hints(t.Tool), t.Arguments, t.CreatedAt)
	return approval.ExplainResponse{TaskID: t.ID, Tool: t.Tool, State: string(t.State),
		Revision: snap.Revision, EvaluatedAt: t.CreatedAt.UTC(), Explanation: x}
}

// logAuditMode says at start and on every reload that audit mode is on, and what it covers.
func (s *Server) logAuditMode(snap *governance.Snapshot) {
	if m := snap.AuditMode(); m != "" {
		s.log.Warn("governance audit mode is on: calls it would deny or hold are forwarded", "audit_mode", m)
	}
}

// notifyListChanged tells every session with an open stream that the tool list changed.
func (s *Server) notifyListChanged() {
	s.notifyLegacyList()
	s.gw.NotifyToolsChanged() // 2026-07-28 clients listen on subscriptions/listen
}

// notifyLegacyList sends notifications/tools/list_changed on every legacy session's stream.
func (s *Server) notifyLegacyList() {
	msg := []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	s.sessions.Each(func(ss *session.Session) { ss.Push(msg) })
}

// approverTokens is the approvals API's Authenticator; a configuration reload swaps the token
// set (approvers: and the variables they name are re-read).
type approverTokens struct {
	p atomic.Pointer[approval.Authenticator]
	n atomic.Int64 // tokens set: without any, nobody can decide
}

func (a *approverTokens) set(tokens map[string]string) {
	auth := approval.StaticTokens(tokens)
	a.p.Store(&auth)
	n := 0
	for tok, name := range tokens {
		if tok != "" && name != "" {
			n++
		}
	}
	a.n.Store(int64(n))
}

func (a *approverTokens) Approver(token string) (string, bool) {
	if auth := a.p.Load(); auth != nil {
		return (*auth).Approver(token)
	}
	return "", false
}

// adminIssuer is the verifier of server.admin_auth.token_issuer, rebuilt when a reload
// changes the issuer's settings (its keys are fetched on first use and when they age out).
type adminIssuer struct {
	mu  sync.Mutex
	cfg config.CallerIssuer
	a   *callerauth.Authenticator
}

func (ai *adminIssuer) verifier(current func() *config.Config, log *slog.Logger) func() func(*http.Request) (*identity.Caller, error) {
	return func() func(*http.Request) (*identity.Caller, error) {
		cfg := current()
		if cfg == nil || !cfg.Server.AdminAuth.TokenIssuer.Enabled() {
			return nil
		}
		ti := cfg.Server.AdminAuth.TokenIssuer
		ai.mu.Lock()
		defer ai.mu.Unlock()
		if ai.a == nil || !reflect.DeepEqual(ai.cfg, ti) {
			a, err := callerauth.New(config.Server{PublicURL: "http://admin.invalid", CallerAuth: ti.AsCallerAuth(cfg.Server.CallerAuth.ClockSkew)},
				callerauth.Options{Logger: log})
			if err != nil {
				log.Error("server.admin_auth.token_issuer unusable; approvers' access tokens are refused", "error", err.Error())
				return nil
			}
			ai.cfg, ai.a = ti, a
		}
		a := ai.a
		return func(r *http.Request) (*identity.Caller, error) {
			c, f := a.Authenticate(r)
			if f != nil {
				return nil, f
			}
			return c, nil
		}
	}
}
