package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gobwas/glob"

	"github.com/tollgate-mcp/tollgate/internal/identity"
)

var (
	workflowName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	groupName    = regexp.MustCompile(`^[a-z0-9_-]+$`)
	envName      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// validator collects every problem instead of stopping at the first.
type validator struct {
	c    *Config
	errs []error
}

func (v *validator) add(path, format string, args ...any) {
	fe := &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)}
	if m := v.c.meta; m != nil {
		for p := path; p != ""; p = parent(p) {
			if m.bad[p] {
				return // already reported while decoding or expanding
			}
		}
		if name, ok := m.fromEnv[path]; ok {
			fe.Msg += fmt.Sprintf(" (set by $%s)", name)
		} else {
			for p := path; p != "" && fe.Line == 0; p = parent(p) {
				fe.Line = m.lines[p]
			}
		}
	}
	v.errs = append(v.errs, fe)
}

// parent strips the last ".key" or "[i]" from a YAML path.
func parent(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// Validate reports every problem in the config at once, each a *FieldError with
// its YAML path. It expects defaults to be applied (Parse does; see ApplyDefaults)
// and checks that Cedar files exist, but never that token variables are set —
// see ApproverTokens.
func (c *Config) Validate() error {
	v := &validator{c: c}
	if c.Schema != 1 {
		v.add("schema", "must be 1, got %d", c.Schema)
	}
	v.sources()
	v.governance()
	v.workflows()
	v.approvers()
	v.sharedNames()
	v.approverGroups()
	v.cedar()
	for i, t := range c.TaskAnnotationOverrides.ForceRequired {
		if strings.TrimSpace(t) == "" {
			v.add(idx("task_annotation_overrides.force_required", i), "must not be empty")
		}
	}
	v.tasks()
	v.server()
	switch c.Audit.Forward {
	case AuditForwardAll, AuditForwardSampled, AuditForwardNone:
	default:
		v.add("audit.forward", "must be all, sampled or none, got %q", c.Audit.Forward)
	}
	if r := c.Telemetry.SampleRatio; r < 0 || r > 1 {
		v.add("telemetry.sample_ratio", "must be between 0 and 1, got %g", r)
	}
	sortByLine(v.errs)
	return errors.Join(v.errs...)
}

func (v *validator) sources() {
	src := v.c.Sources
	switch {
	case len(src) == 0:
		v.add("sources", "exactly one source is required (the upstream MCP server)")
		return
	case len(src) > 1:
		v.add("sources", "exactly one source is supported, got %d", len(src))
	}
	for i, s := range src {
		p := idx("sources", i)
		v.credential(p, s)
		if s.ID == "" {
			v.add(p+".id", "must not be empty")
		}
		if s.Kind != SourceKindMCP {
			v.add(p+".kind", "must be %q, got %q", SourceKindMCP, s.Kind)
		}
		switch {
		case s.URL != "" && s.Command != "":
			v.add(p, "set url (an HTTP server) or command (a stdio server), not both")
		case s.Command != "":
			v.stdio(p, s)
		case s.URL == "":
			v.add(p+".url", "must not be empty (or set command to run a stdio server)")
		default:
			v.httpURL(p+".url", s.URL)
			for key, set := range map[string]bool{"args": len(s.Args) > 0, "env": len(s.Env) > 0, "cwd": s.Cwd != "",
				"share": s.Share, "max_processes": s.MaxProcesses != 0, "idle_timeout": s.IdleTimeout != 0, "run_as": s.RunAs.Set()} {
				if set {
					v.add(p+"."+key, "applies to a command (stdio server) only, not to url")
				}
			}
		}
		if s.ConnectTimeout <= 0 {
			v.add(p+".connect_timeout", "must be > 0")
		}
	}
}

// stdio checks a command source. Values are never echoed: env values are often secrets.
func (v *validator) stdio(p string, s Source) {
	if strings.ContainsRune(s.Command, 0) {
		v.add(p+".command", "must not contain a NUL byte")
	}
	for i, a := range s.Args {
		if strings.ContainsRune(a, 0) {
			v.add(idx(p+".args", i), "must not contain a NUL byte")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		if !validEnvName(k) {
			v.add(p+".env", "%q is not a variable name (letters, digits and _, not starting with a digit)", k)
		} else if strings.ContainsRune(s.Env[k], 0) {
			v.add(p+".env."+k, "must not contain a NUL byte")
		}
	}
	if s.MaxProcesses < 1 {
		v.add(p+".max_processes", "must be at least 1, got %d", s.MaxProcesses)
	}
	if s.IdleTimeout <= 0 {
		v.add(p+".idle_timeout", "must be > 0")
	}
	if s.RunAs.Set() {
		for _, key := range []string{"uid", "gid"} {
			id := s.RunAs.UID
			if key == "gid" {
				id = s.RunAs.GID
			}
			if id < 1 || id >= 1<<31-1 {
				v.add(p+".run_as."+key, "must be set, between 1 and 2147483646 (not root), got %d", id)
			}
		}
	}
}

// httpURL checks an absolute http(s) URL. The value is never echoed: URLs may
// carry credentials.
func (v *validator) httpURL(path, s string) {
	if s == "" {
		v.add(path, "must not be empty")
		return
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add(path, "must be an absolute http:// or https:// URL")
	}
}

func validAction(a Action) bool {
	switch a {
	case ActionForward, ActionApprove, ActionDeny, ActionPolicy:
		return true
	}
	return false
}

const actionList = "forward, approve, deny or policy"

func (v *validator) governance() {
	g := v.c.Governance
	if g.Mode != ModeEnforce && g.Mode != ModeAudit {
		v.add("governance.mode", "must be enforce or audit, got %q", g.Mode)
	}
	v.pins(g.Pins)
	if !validAction(g.Defaults.Action) {
		v.add("governance.defaults.action", "must be %s, got %q", actionList, g.Defaults.Action)
	} else if g.Defaults.Action == ActionApprove || g.Defaults.Action == ActionPolicy {
		v.workflowRef("governance.defaults.approval", g.Defaults.Approval)
	}
	if g.Defaults.Action == ActionPolicy {
		v.needCedar("governance.defaults.action")
	}
	for i, r := range g.Rules {
		p := idx("governance.rules", i)
		if r.Match == "" {
			v.add(p+".match", "must not be empty")
		} else if _, err := glob.Compile(r.Match); err != nil {
			msg := err.Error()
			var se *glob.SyntaxError
			if errors.As(err, &se) {
				msg = fmt.Sprintf("%s at offset %d", se.Reason, se.Offset)
			}
			v.add(p+".match", "invalid glob %q: %s", r.Match, msg)
		}
		hints := make([]string, 0, len(r.MatchAnnotations))
		for k := range r.MatchAnnotations {
			hints = append(hints, k)
		}
		sort.Strings(hints) // stable error order
		for _, k := range hints {
			if !slices.Contains(AnnotationHints, k) {
				msg := fmt.Sprintf("unknown annotation %q (want %s)", k, strings.Join(AnnotationHints, ", "))
				if s := suggest(k, AnnotationHints); s != "" {
					msg = fmt.Sprintf("unknown annotation %q (did you mean %q?)", k, s)
				}
				v.add(p+".match_annotations."+k, "%s", msg)
			}
		}
		if r.Callers != nil && len(r.Callers) == 0 {
			v.add(p+".callers", "must list at least one caller; leave it out to apply the rule to every caller")
		}
		for k, c := range r.Callers {
			name, isUser := strings.CutPrefix(c, CallerUserPrefix)
			if !isUser {
				var isGroup bool
				if name, isGroup = strings.CutPrefix(c, CallerGroupPrefix); !isGroup {
					v.add(idx(p+".callers", k), "must be \"user:<subject>\" or \"group:<name>\", got %q", c)
					continue
				}
			}
			if strings.TrimSpace(name) == "" || len(name) > 256 {
				v.add(idx(p+".callers", k), "names nobody: %q", c)
			} else if err := identity.Check(name); err != nil {
				v.add(idx(p+".callers", k), "%v", err)
			}
		}
		if r.Mode != "" && r.Mode != ModeEnforce && r.Mode != ModeAudit {
			v.add(p+".mode", "must be enforce or audit (or absent: governance.mode), got %q", r.Mode)
		}
		switch {
		case !validAction(r.Action):
			v.add(p+".action", "must be %s, got %q", actionList, r.Action)
		case r.Action == ActionApprove || r.Action == ActionPolicy:
			v.workflowRef(p+".approval", r.Approval)
			if r.Action == ActionPolicy {
				v.needCedar(p + ".action")
			}
		}
	}
}

func (v *validator) needCedar(user string) {
	if len(v.c.Cedar.Policies) == 0 {
		v.add("cedar.policies", "must list at least one policy file: %s is policy", user)
	}
}

func (v *validator) workflowRef(path, name string) {
	if name == "" {
		name = DefaultWorkflow
	}
	if _, ok := v.c.Approval[name]; ok {
		return
	}
	names := make([]string, 0, len(v.c.Approval))
	for n := range v.c.Approval {
		names = append(names, n)
	}
	sort.Strings(names)
	v.add(path, "unknown approval workflow %q (defined: %s)", name, strings.Join(names, ", "))
}

func (v *validator) workflows() {
	names := make([]string, 0, len(v.c.Approval))
	for n := range v.c.Approval {
		names = append(names, n)
	}
	sort.Strings(names) // stable error order
	for _, name := range names {
		w := v.c.Approval[name]
		p := "approval." + name
		if !workflowName.MatchString(name) {
			v.add(p, "workflow name must use only letters, digits, '-' and '_'")
		}
		switch w.Destination.Type {
		case DestinationWebhook:
			v.httpURL(p+".destination.url", w.Destination.URL)
		case DestinationSlack:
			v.slackDestination(p+".destination", w.Destination)
		case DestinationConsole, DestinationElicitation:
			if w.Destination.URL != "" {
				v.add(p+".destination.url", "is only used by webhook and slack destinations")
			}
		default:
			v.add(p+".destination.type", "must be console, webhook, slack or elicitation, got %q", w.Destination.Type)
		}
		if w.Destination.Channel != "" && w.Destination.Type != DestinationSlack {
			v.add(p+".destination.channel", "is only used by slack destinations")
		}
		if w.Timeout <= 0 {
			v.add(p+".timeout", "must be > 0")
		}
		if w.OnTimeout != OnTimeoutDeny && w.OnTimeout != OnTimeoutApprove {
			v.add(p+".on_timeout", "must be deny or approve, got %q", w.OnTimeout)
		}
		if w.MinApprovals < 1 {
			v.add(p+".min_approvals", "must be >= 1 (distinct approvers needed), got %d", w.MinApprovals)
		} else if w.MinApprovals > 1 && w.Destination.Type == DestinationElicitation {
			// the requester answers an elicitation, and a requester never counts as an approver
			v.add(p+".min_approvals", "must be 1 with destination elicitation (the requester decides there, and a requester never counts toward min_approvals), got %d", w.MinApprovals)
		} else if n := v.deciders(w.Approvers); w.MinApprovals > 1 && w.MinApprovals > n {
			// Such a call could never be approved: it would wait for its timeout every time.
			v.add(p+".min_approvals", "needs %d distinct approvers, but only %d may decide this workflow (approvers, approver_groups, and \"admin\" from $TOLLGATE_ADMIN_TOKEN)", w.MinApprovals, n)
		}
		for i, f := range w.RedactFields {
			if f == "" || strings.Contains(f, "..") || strings.HasPrefix(f, ".") || strings.HasSuffix(f, ".") || strings.ContainsAny(f, " \t") {
				v.add(idx(p+".redact_fields", i), "must be a dot path like \"credentials.api_key\", got %q", f)
			}
		}
		v.workflowApprovers(p+".approvers", w.Approvers)
	}
}

// deciders counts the distinct people who may decide a workflow with this approvers list
// (absent: every configured approver), counting "admin" ($TOLLGATE_ADMIN_TOKEN) as one more,
// since the environment may provide it.
func (v *validator) deciders(list []string) int {
	var names []string
	add := func(n string) {
		if !slices.ContainsFunc(names, func(o string) bool { return identity.Same(o, n) }) {
			names = append(names, n)
		}
	}
	if list == nil {
		for _, a := range v.c.Approvers {
			add(a.Name)
		}
		add(AdminApprover)
		return len(names)
	}
	for _, e := range list {
		if g, ok := strings.CutPrefix(e, GroupPrefix); ok {
			for _, m := range v.c.ApproverGroups[g] {
				add(m)
			}
			continue
		}
		add(e)
	}
	return len(names)
}

func (v *validator) approvers() {
	for i, a := range v.c.Approvers {
		p := idx("approvers", i)
		if a.Name == "" {
			v.add(p+".name", "must not be empty")
		} else if err := identity.Check(a.Name); err != nil {
			v.add(p+".name", "%v", err) // invisible code points: one person could act as two
		} else if j := slices.IndexFunc(v.c.Approvers[:i], func(o Approver) bool { return identity.Same(o.Name, a.Name) }); j >= 0 {
			// Confusable names are one person to the self-approval check (identity.Same).
			if o := v.c.Approvers[j].Name; o != a.Name {
				v.add(p+".name", "duplicate approver %q (also approvers[%d]): the same person as %q (case, width or confusable letters)", a.Name, j, o)
			} else {
				v.add(p+".name", "duplicate approver %q (also approvers[%d])", a.Name, j)
			}
		}
		for k, sub := range a.Subjects {
			sp := idx(p+".subjects", k)
			if strings.TrimSpace(sub) == "" || len(sub) > 256 {
				v.add(sp, "must be a token subject of 1 to 256 bytes")
			} else if err := identity.Check(sub); err != nil {
				v.add(sp, "%v", err)
			}
		}
		if id := a.SlackUserID; id != "" {
			if !slackUserID().MatchString(id) {
				v.add(p+".slack_user_id", "must be a Slack member id like U012AB3CD (Slack: profile, ⋮, Copy member ID), got %q", id)
			} else if j := slices.IndexFunc(v.c.Approvers[:i], func(o Approver) bool { return o.SlackUserID == id }); j >= 0 {
				v.add(p+".slack_user_id", "duplicate Slack user %q (also approvers[%d]): one click would decide as two approvers", id, j)
			}
		}
		if a.TokenEnv != "" && a.TokenFile != "" {
			v.add(p+".token_file", "set token_env or token_file, not both")
		} else if a.TokenEnv == "" && a.TokenFile == "" {
			// An approver without a token signs in only through the login proxy.
			if len(v.c.Server.AdminAuth.TrustedProxy) == 0 {
				v.add(p+".token_env", "must name the environment variable holding the approver's token, or token_file the file (or set server.admin_auth.trusted_proxy to sign approvers in through a login proxy)")
			}
		} else if a.TokenEnv != "" && !envName.MatchString(a.TokenEnv) {
			v.add(p+".token_env", "must be an environment variable name, got %q", a.TokenEnv)
		}
		if a.Email != "" {
			if at := strings.IndexByte(a.Email, '@'); at <= 0 || at != strings.LastIndexByte(a.Email, '@') || at == len(a.Email)-1 ||
				strings.ContainsFunc(a.Email, func(r rune) bool { return r <= ' ' || r == 0x7f || identity.IsDefaultIgnorable(r) }) {
				v.add(p+".email", "must be an e-mail address like \"alice@example.com\", got %q", a.Email)
			} else if j := slices.IndexFunc(v.c.Approvers[:i], func(o Approver) bool { return strings.EqualFold(o.Email, a.Email) }); j >= 0 {
				v.add(p+".email", "duplicate e-mail %q (also approvers[%d])", a.Email, j)
			}
		}
	}
}

// adminAuth checks server.admin_auth: the login proxy's CIDRs and the header names it sets.
func (v *validator) adminAuth() {
	a := v.c.Server.AdminAuth
	if ti := a.TokenIssuer; ti.Enabled() {
		p := "server.admin_auth.token_issuer"
		switch ti.Type {
		case "", CallerAuthJWT, CallerAuthIntrospection:
		default:
			v.add(p+".type", "must be jwt or introspection, got %q", ti.Type)
		}
		if ti.Issuer == "" {
			v.add(p+".issuer", "is required: the issuer of the approvers' access tokens")
		} else {
			v.issuerURL(p+".issuer", ti.Issuer)
		}
		if ti.Audience == "" {
			v.add(p+".audience", "is required: the audience the issuer puts in tokens for Tollgate's admin API (a token for /mcp must not be one for the admin API)")
		}
		for k, al := range ti.Algorithms {
			if !slices.Contains(DefaultAlgorithms, al) {
				v.add(idx(p+".algorithms", k), "must be one of %s, got %q", strings.Join(DefaultAlgorithms, ", "), al)
			}
		}
		if ti.Type == CallerAuthIntrospection && (ti.IntrospectionURL == "" || ti.ClientID == "" || (ti.ClientSecretFile == "") == (ti.ClientSecretEnv == "")) {
			v.add(p+".introspection_url", "introspection needs introspection_url, client_id and one of client_secret_file, client_secret_env")
		}
		if ca := v.c.Server.CallerAuth; ca.Enabled() && ti.Audience != "" && ti.Audience == v.c.Server.Resource() {
			v.add(p+".audience", "must differ from the /mcp resource %q: a caller's token must not work on the admin API", ti.Audience)
		}
	}
	for i, c := range a.TrustedProxy {
		p := idx("server.admin_auth.trusted_proxy", i)
		pfx, err := netip.ParsePrefix(c)
		switch {
		case err != nil:
			hint := ""
			if ip, err := netip.ParseAddr(c); err == nil {
				hint = fmt.Sprintf(" (one address: %s/%d)", ip, ip.BitLen())
			}
			v.add(p, "must be a CIDR like \"10.42.0.0/16\"%s, got %q", hint, c)
		case pfx.Bits() == 0:
			// Every peer could then name any approver in a header.
			v.add(p, "must not trust every address (%q): name the login proxy's addresses", c)
		case pfx.Masked() != pfx:
			v.add(p, "has host bits set: write %q, got %q", pfx.Masked().String(), c)
		}
	}
	hs := []struct{ path, name string }{
		{"server.admin_auth.user_header", a.UserHeader},
		{"server.admin_auth.email_header", a.EmailHeader},
		{"server.admin_auth.groups_header", a.GroupsHeader},
	}
	for i, h := range hs {
		if !isToken(h.name) {
			v.add(h.path, "must be an HTTP header name, got %q", h.name)
			continue
		}
		if strings.EqualFold(h.name, "Authorization") || strings.EqualFold(h.name, "Host") || strings.EqualFold(h.name, "Cookie") {
			v.add(h.path, "must be a header the login proxy sets, not %q", h.name)
		}
		for _, o := range hs[:i] {
			if strings.EqualFold(o.name, h.name) {
				v.add(h.path, "must differ from %s (%q)", o.path, o.name)
			}
		}
	}
	// oauth2-proxy sets one family of headers and passes the other through from the client
	// (reverse-proxy mode: X-Forwarded-* set, a client's X-Auth-Request-* kept): names from both
	// families let a signed-in user claim another's e-mail or groups.
	if len(a.TrustedProxy) > 0 {
		family := func(n string) string {
			for _, f := range []string{"x-auth-request-", "x-forwarded-"} {
				if strings.HasPrefix(strings.ToLower(n), f) {
					return f
				}
			}
			return ""
		}
		if uf := family(a.UserHeader); uf != "" {
			for _, h := range hs[1:] {
				if f := family(h.name); f != "" && f != uf {
					v.add(h.path, "%q is from the other family of oauth2-proxy's headers than user_header %q: the proxy sets one family and passes the other through from clients, who could then claim it; use the same family", h.name, a.UserHeader)
				}
			}
		}
	}
}

// knownApprover reports whether name is exactly a configured approver's name (or
// $TOLLGATE_ADMIN_TOKEN's "admin"). Lists grant: a look-alike is not the approver
// (identity: folding only refuses), see lookalikeApprover for the message.
func (v *validator) knownApprover(name string) bool {
	if strings.TrimSpace(name) == "" {
		return false
	}
	return name == AdminApprover || slices.ContainsFunc(v.c.Approvers, func(a Approver) bool { return a.Name == name })
}

// lookalikeApprover returns the configured approver name looks like (identity.Same), "" if none.
func (v *validator) lookalikeApprover(name string) string {
	if identity.Same(name, AdminApprover) {
		return AdminApprover
	}
	if i := slices.IndexFunc(v.c.Approvers, func(a Approver) bool { return identity.Same(a.Name, name) }); i >= 0 {
		return v.c.Approvers[i].Name
	}
	return ""
}

// didYouMean names the approver a list entry only looks like: lists grant, so they must name
// approvers exactly.
func (v *validator) didYouMean(name string) string {
	if o := v.lookalikeApprover(name); o != "" {
		return fmt.Sprintf(": write it exactly as configured, %q (names that only look alike are different people to a list)", o)
	}
	return ""
}

// sharedNames refuses a token subject that another approver also carries, as a subject or as
// any other name (names, e-mails and Slack ids are checked as such above): the directory could
// not tell which person it is (identity.NewDirectory).
func (v *validator) sharedNames() {
	owner := map[string]int{}
	for i, a := range v.c.Approvers {
		for _, n := range a.Person().Names() {
			if _, ok := owner[n]; !ok {
				owner[n] = i
			}
		}
	}
	for i, a := range v.c.Approvers {
		for k, sub := range a.Subjects {
			if j, ok := owner[sub]; ok && j != i {
				v.add(idx(idx("approvers", i)+".subjects", k), "%q is also a name of approvers[%d] (%s): one name, one person", sub, j, v.c.Approvers[j].Name)
			}
		}
	}
}

// approverGroups checks approver_groups: lower-case names, each a non-empty list of
// configured approvers.
func (v *validator) approverGroups() {
	names := make([]string, 0, len(v.c.ApproverGroups))
	for n := range v.c.ApproverGroups {
		names = append(names, n)
	}
	sort.Strings(names) // stable error order
	for _, name := range names {
		p := "approver_groups." + name
		if !groupName.MatchString(name) {
			v.add(p, "group name must use only a-z, 0-9, '-' and '_', got %q", name)
		}
		members := v.c.ApproverGroups[name]
		if len(members) == 0 {
			v.add(p, "must list at least one approver")
		}
		for i, m := range members {
			if !v.knownApprover(m) {
				v.add(idx(p, i), "unknown approver %q (approvers[].name)%s", m, v.didYouMean(m))
			}
		}
	}
}

// workflowApprovers checks approval.<name>.approvers: absent means every approver; present,
// each entry is a configured approver or "group:<name>" of approver_groups.
func (v *validator) workflowApprovers(path string, list []string) {
	if list == nil {
		return
	}
	if len(list) == 0 {
		v.add(path, "must list at least one approver or group; leave it out to let every approver decide")
	}
	for i, e := range list {
		if g, ok := strings.CutPrefix(e, GroupPrefix); ok {
			if _, found := v.c.ApproverGroups[g]; !found {
				v.add(idx(path, i), "unknown approver group %q (approver_groups)", g)
			}
			continue
		}
		if !v.knownApprover(e) {
			v.add(idx(path, i), "unknown approver %q (approvers[].name, or \"%s<name>\" for a group)%s", e, GroupPrefix, v.didYouMean(e))
		}
	}
}

func (v *validator) cedar() {
	cd := v.c.Cedar
	for i, p := range cd.Policies {
		v.file(idx("cedar.policies", i), p)
	}
	if cd.Schema != "" {
		v.file("cedar.schema", cd.Schema)
	}
	switch cd.Validation {
	case ValidationOff, ValidationWarn, ValidationStrict:
	default:
		v.add("cedar.validation", "must be off, warn or strict, got %q", cd.Validation)
	}
}

func (v *validator) file(path, p string) {
	if p == "" {
		v.add(path, "must not be empty")
		return
	}
	if _, err := os.Stat(v.c.ResolvePath(p)); err != nil {
		v.add(path, "cannot read %s: %v", v.c.ResolvePath(p), errors.Unwrap(err))
	}
}

func (v *validator) tasks() {
	t := v.c.Tasks
	if t.DefaultTTL <= 0 {
		v.add("tasks.default_ttl", "must be > 0")
	}
	if t.MaxTTL <= 0 {
		v.add("tasks.max_ttl", "must be > 0")
	} else if t.DefaultTTL > t.MaxTTL {
		v.add("tasks.default_ttl", "must not exceed tasks.max_ttl (%s > %s)", t.DefaultTTL, t.MaxTTL)
	}
	if t.PollInterval <= 0 {
		v.add("tasks.poll_interval", "must be > 0")
	}
	if t.ExecutionTimeout <= 0 {
		v.add("tasks.execution_timeout", "must be > 0")
	} else if t.MaxTTL > 0 && t.ExecutionTimeout > t.MaxTTL {
		v.add("tasks.execution_timeout", "must not exceed tasks.max_ttl (%s > %s)", t.ExecutionTimeout, t.MaxTTL)
	}
	if t.InputTimeout <= 0 {
		v.add("tasks.input_timeout", "must be > 0")
	} else if t.ExecutionTimeout > 0 && t.InputTimeout > t.ExecutionTimeout {
		v.add("tasks.input_timeout", "must not exceed tasks.execution_timeout (%s > %s)", t.InputTimeout, t.ExecutionTimeout)
	}
	if t.ExecutionLease < Duration(MinExecutionLease) {
		v.add("tasks.execution_lease", "must be at least %s, got %s", MinExecutionLease, t.ExecutionLease)
	}
	switch t.SyncApproval {
	case SyncApprovalError, SyncApprovalPromote, SyncApprovalBlock, SyncApprovalHold:
	default:
		v.add("tasks.sync_approval", "must be hold, error, promote or block, got %q", t.SyncApproval)
	}
	if t.HoldBudget <= 0 {
		v.add("tasks.hold_budget", "must be > 0")
	}
	if t.ReplayWindow < 0 {
		v.add("tasks.replay_window", "must not be negative")
	}
	if t.PromoteAfter < 0 {
		v.add("tasks.promote_after", "must not be negative")
	}
	if t.Retention < 0 {
		v.add("tasks.retention", "must not be negative")
	}
	switch t.Store.Type {
	case StoreMemory, StoreAuto:
	case StoreFile:
		if t.Store.Path == "" {
			v.add("tasks.store.path", "is required for the file store (or set $%s)", EnvDataDir)
		}
	case StoreRedis:
		v.redisStore(t.Store)
	default:
		v.add("tasks.store.type", "must be auto, file, memory or redis, got %q", t.Store.Type)
	}
	if t.Store.Type != StoreRedis {
		if t.Store.Sentinel.Set() {
			v.add("tasks.store.sentinel", "is only used with tasks.store.type: redis")
		}
		if t.Store.TLS.Set() {
			v.add("tasks.store.tls", "is only used with tasks.store.type: redis")
		}
	}
	q := t.Quotas
	if q.MaxPendingPerOwner <= 0 {
		v.add("tasks.quotas.max_pending_per_owner", "must be > 0")
	}
	if q.MaxPendingPerSource <= 0 {
		v.add("tasks.quotas.max_pending_per_source", "must be > 0")
	}
	if q.MaxPendingTotal <= 0 {
		v.add("tasks.quotas.max_pending_total", "must be > 0")
	}
	if q.MaxUpstreamTasksPerSource <= 0 {
		v.add("tasks.quotas.max_upstream_tasks_per_source", "must be > 0")
	}
	if q.MaxUpstreamTasksTotal <= 0 {
		v.add("tasks.quotas.max_upstream_tasks_total", "must be > 0")
	} else if q.MaxUpstreamTasksTotal < q.MaxUpstreamTasksPerSource {
		v.add("tasks.quotas.max_upstream_tasks_total", "must be ≥ max_upstream_tasks_per_source (%d)", q.MaxUpstreamTasksPerSource)
	}
	if q.MaxArgumentBytes <= 0 {
		v.add("tasks.quotas.max_argument_bytes", "must be > 0")
	}
	if q.MaxStoredBytes <= 0 {
		v.add("tasks.quotas.max_stored_bytes", "must be > 0")
	}
	if ps := q.MaxStoredBytesPerSource; q.MaxStoredBytes > 0 && (ps <= 0 || ps > q.MaxStoredBytes) {
		v.add("tasks.quotas.max_stored_bytes_per_source", "must be > 0 and at most tasks.quotas.max_stored_bytes (%d), got %d", q.MaxStoredBytes, ps)
	}
}

func (v *validator) server() {
	s := v.c.Server
	v.hostPort("server.listen", s.Listen)
	v.hostPort("server.admin_listen", s.AdminListen)
	if s.Listen != "" && s.Listen == s.AdminListen && !strings.HasSuffix(s.Listen, ":0") {
		v.add("server.admin_listen", "must differ from server.listen")
	}
	for i, o := range s.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			v.add(idx("server.allowed_origins", i), "must be an origin like \"https://app.example.com\", got %q", o)
		}
	}
	for i, h := range s.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/ \t") {
			v.add(idx("server.allowed_hosts", i), "must be a host name or host:port, got %q", h)
		}
	}
	if h := s.IdentityHeader; h != "" && (strings.ContainsAny(h, ": \t\r\n") || !isToken(h)) {
		v.add("server.identity_header", "must be an HTTP header name, got %q", h)
	}
	v.adminAuth()
	v.callerAuth()
	if s.MaxBodyBytes <= 0 {
		v.add("server.max_body_bytes", "must be > 0")
	}
	if rl := s.RateLimit; rl.RequestsPerSecond < 0 || rl.RequestsPerSecond > 1e6 {
		v.add("server.rate_limit.requests_per_second", "must be between 0 (off) and 1000000, got %v", rl.RequestsPerSecond)
	}
	if s.RateLimit.Burst < 0 {
		v.add("server.rate_limit.burst", "must be >= 0, got %d", s.RateLimit.Burst)
	}
	for _, d := range []struct {
		path string
		val  Duration
	}{
		{"server.sync_forward_timeout", s.SyncForwardTimeout},
		{"server.request_timeout", s.RequestTimeout},
		{"server.shutdown_timeout", s.ShutdownTimeout},
		{"server.tools_fetch_timeout", s.ToolsFetchTimeout},
		{"server.reload.settle", s.Reload.Settle},
	} {
		if d.val <= 0 {
			v.add(d.path, "must be > 0")
		}
	}
	if s.ToolsMaxPages <= 0 {
		v.add("server.tools_max_pages", "must be > 0")
	}
	if s.Reload.WeakerSettle < s.Reload.Settle {
		v.add("server.reload.weaker_settle", "must be at least server.reload.settle (%s), got %s", s.Reload.Settle.D(), s.Reload.WeakerSettle.D())
	}
	if m := s.Reload.EndMarker; m != "" && (strings.TrimSpace(m) != m || strings.ContainsAny(m, "\r\n")) {
		v.add("server.reload.end_marker", "must be one line without leading or trailing spaces")
	}
	v.limits()
}

func (v *validator) limits() {
	l := v.c.Server.Limits
	const p = "server.limits."
	for _, n := range []struct {
		key string
		val int
	}{
		{"max_connections", l.MaxConnections}, {"admin_max_connections", l.AdminMaxConnections},
		{"max_streams", l.MaxStreams}, {"max_streams_per_session", l.MaxStreamsPerSession},
		{"max_streams_per_source", l.MaxStreamsPerSource},
		{"max_sessions", l.MaxSessions}, {"max_parked_calls", l.MaxParkedCalls},
		{"max_parked_calls_per_source", l.MaxParkedCallsPerSource},
	} {
		if n.val <= 0 {
			v.add(p+n.key, "must be > 0")
		}
	}
	for _, d := range []struct {
		key string
		val Duration
	}{
		{"header_timeout", l.HeaderTimeout}, {"body_timeout", l.BodyTimeout},
		{"idle_timeout", l.IdleTimeout}, {"write_timeout", l.WriteTimeout},
	} {
		if d.val <= 0 {
			v.add(p+d.key, "must be > 0")
		}
	}
	// A budget below one largest body would refuse every request of that size.
	if mb := v.c.Server.MaxBodyBytes; l.MaxInflightBodyBytes < mb && mb > 0 {
		v.add(p+"max_inflight_body_bytes", "must be at least server.max_body_bytes (%d), got %d", mb, l.MaxInflightBodyBytes)
	}
	// A share below one largest body would refuse every request of that size from any source.
	if ps := l.MaxInflightBodyBytesPerSource; ps <= 0 || ps > l.MaxInflightBodyBytes && l.MaxInflightBodyBytes > 0 {
		v.add(p+"max_inflight_body_bytes_per_source", "must be > 0 and at most server.limits.max_inflight_body_bytes (%d), got %d", l.MaxInflightBodyBytes, ps)
	} else if mb := v.c.Server.MaxBodyBytes; ps < mb && mb > 0 && l.MaxInflightBodyBytes >= mb {
		v.add(p+"max_inflight_body_bytes_per_source", "must be at least server.max_body_bytes (%d), got %d", mb, ps)
	}
	if l.MaxStreamsPerSession > l.MaxStreams && l.MaxStreams > 0 {
		v.add(p+"max_streams_per_session", "must not exceed server.limits.max_streams (%d)", l.MaxStreams)
	}
	if l.MaxStreamsPerSource > l.MaxStreams && l.MaxStreams > 0 {
		v.add(p+"max_streams_per_source", "must not exceed server.limits.max_streams (%d)", l.MaxStreams)
	}
	if l.MaxParkedCallsPerSource > l.MaxParkedCalls && l.MaxParkedCalls > 0 {
		v.add(p+"max_parked_calls_per_source", "must not exceed server.limits.max_parked_calls (%d)", l.MaxParkedCalls)
	}
	if l.SessionsPerSecond < 0 || l.SessionsPerSecond > 1e6 {
		v.add(p+"sessions_per_second", "must be between 0 (no limit) and 1000000, got %v", l.SessionsPerSecond)
	}
	if l.SessionsPerSecond > 0 && l.SessionBurst <= 0 {
		v.add(p+"session_burst", "must be > 0")
	}
}

func (v *validator) hostPort(path, s string) {
	_, port, err := net.SplitHostPort(s)
	if err == nil {
		var n int
		n, err = strconv.Atoi(port)
		if err == nil && (n < 0 || n > 65535) {
			err = fmt.Errorf("port out of range")
		}
	}
	if err != nil {
		v.add(path, "must be host:port like \"127.0.0.1:%d\", got %q", DefaultListenPort, s)
	}
}

// isToken reports whether h is an RFC 9110 token (a valid header field name).
func isToken(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return h != ""
}

// slackUserID is a Slack member id: U… or W… (Enterprise Grid), upper-case letters and digits.
// Compiled when a configuration with Slack is first validated, not at start: compiled, the two
// Slack patterns keep ≈ 50 KB of heap that most processes never use.
var slackUserID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[UW][A-Z0-9]{2,31}$`) })

// slackChannel is a channel name (#approvals, lower case, digits, - _ .) or a channel id (C…, G…).
var slackChannel = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(#[a-z0-9][a-z0-9._-]{0,79}|[CGD][A-Z0-9]{2,31})$`)
})

// slackDestination: a slack destination posts either through an incoming webhook (url) or
// with the bot token to a channel (channel, with buttons), never both.
func (v *validator) slackDestination(p string, d Destination) {
	switch {
	case d.URL != "" && d.Channel != "":
		v.add(p+".channel", "set either url (incoming webhook) or channel (bot token, with buttons), not both")
	case d.Channel != "":
		if !slackChannel().MatchString(d.Channel) {
			v.add(p+".channel", "must be a channel name like \"#approvals\" or a channel id like C012AB3CD, got %q", d.Channel)
		}
	default:
		v.httpURL(p+".url", d.URL)
	}
}

// credential checks sources[].credential.
func (v *validator) credential(p string, src Source) {
	c := src.Credential
	if !c.Set() && c.Header == "" {
		return
	}
	p += ".credential"
	n := 0
	for _, set := range []bool{c.ValueEnv != "", c.ValueFile != "", c.ClientCredentials.Set()} {
		if set {
			n++
		}
	}
	if n != 1 {
		v.add(p, "needs exactly one of value_env, value_file and client_credentials")
	}
	if cc := c.ClientCredentials; cc.Set() {
		cp := p + ".client_credentials"
		if cc.TokenURL == "" {
			v.add(cp+".token_url", "is required (the authorization server's token endpoint)")
		} else {
			v.issuerURL(cp+".token_url", cc.TokenURL)
		}
		if cc.ClientID == "" {
			v.add(cp+".client_id", "is required")
		}
		if (cc.ClientSecretEnv == "") == (cc.ClientSecretFile == "") {
			v.add(cp+".client_secret_env", "exactly one of client_secret_env and client_secret_file is required")
		}
		if cc.ClientSecretEnv != "" && !envName.MatchString(cc.ClientSecretEnv) {
			v.add(cp+".client_secret_env", "must be an environment variable name, got %q", cc.ClientSecretEnv)
		}
		for k, sc := range cc.Scopes {
			if sc == "" || strings.ContainsAny(sc, " \"\\") {
				v.add(idx(cp+".scopes", k), "must be a scope token (no spaces or quotes), got %q", sc)
			}
		}
		if cc.Resource != "" {
			if u, err := url.Parse(cc.Resource); err != nil || !u.IsAbs() || u.Fragment != "" {
				v.add(cp+".resource", "must be an absolute URI without fragment (RFC 8707), got %q", cc.Resource)
			}
		}
		if cc.AuthStyle != "" && cc.AuthStyle != AuthStyleBasic && cc.AuthStyle != AuthStylePost {
			v.add(cp+".auth_style", "must be basic or post, got %q", cc.AuthStyle)
		}
	}
	if c.ValueEnv != "" && !envName.MatchString(c.ValueEnv) {
		v.add(p+".value_env", "must be an environment variable name, got %q", c.ValueEnv)
	}
	h := c.Header
	if h == "" {
		h = "Authorization"
	}
	if !isToken(h) || strings.EqualFold(h, "Host") || strings.EqualFold(h, "Cookie") || strings.EqualFold(h, "Content-Length") ||
		strings.EqualFold(h, "Mcp-Session-Id") || strings.EqualFold(h, "MCP-Protocol-Version") {
		v.add(p+".header", "must be a header name Tollgate does not set itself, got %q", h)
	}
	if src.Stdio() {
		v.add(p, "is for an HTTP upstream (url); a stdio server gets its secrets through env")
	}
	if src.ForwardAuthorization && strings.EqualFold(h, "Authorization") {
		v.add(p+".header", "is Authorization, which forward_authorization passes from the caller: choose one")
	}
}

// callerAuth checks server.public_url and server.caller_auth.
func (v *validator) callerAuth() {
	s := v.c.Server
	if s.PublicURL != "" {
		if u, err := url.Parse(s.PublicURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			v.add("server.public_url", "must be an http(s) URL without query or fragment, like https://mcp.example.com, got %q", s.PublicURL)
		}
	}
	ca := s.CallerAuth
	switch ca.Type {
	case CallerAuthNone:
		if len(ca.Issuers) > 0 || ca.Issuer != "" {
			v.add("server.caller_auth.type", "is none, but issuers are configured: set jwt or introspection")
		}
		return
	case CallerAuthJWT, CallerAuthIntrospection:
	default:
		v.add("server.caller_auth.type", "must be none, jwt or introspection, got %q", ca.Type)
		return
	}
	if s.IdentityHeader != "" {
		v.add("server.identity_header", "cannot be set with server.caller_auth: the caller is who a verified token says (a header could name anyone); remove one of them")
	}
	if ca.ClockSkew < 0 || ca.ClockSkew.D() > 10*60*1e9 {
		v.add("server.caller_auth.clock_skew", "must be between 0 and 10m")
	}
	if ca.ToolView != ToolViewCaller && ca.ToolView != ToolViewAll {
		v.add("server.caller_auth.tool_view", "must be caller or all, got %q", ca.ToolView)
	}
	all := ca.All()
	names := map[string]int{}
	issuers := map[string]int{}
	for i, is := range all {
		p := "server.caller_auth"
		if i > 0 {
			p = idx("server.caller_auth.issuers", i-1)
		}
		if len(all) > 1 {
			if is.Name == "" {
				v.add(p+".name", "is required when several issuers are configured (it prefixes their subjects: name:sub)")
			} else if j, ok := names[is.Name]; ok {
				v.add(p+".name", "duplicate issuer name %q (also issuer %d)", is.Name, j)
			}
			names[is.Name] = i
		}
		if is.Name != "" && !groupName.MatchString(is.Name) {
			v.add(p+".name", "must use only a-z, 0-9, '-' and '_', got %q", is.Name)
		}
		switch is.Type {
		case CallerAuthJWT, CallerAuthIntrospection:
		default:
			v.add(p+".type", "must be jwt or introspection, got %q", is.Type)
		}
		if is.Issuer == "" {
			v.add(p+".issuer", "is required: the issuer URL (iss) of the tokens Tollgate accepts")
		} else {
			v.issuerURL(p+".issuer", is.Issuer)
			if j, ok := issuers[is.Issuer]; ok {
				v.add(p+".issuer", "duplicate issuer %q (also issuer %d)", is.Issuer, j)
			}
			issuers[is.Issuer] = i
		}
		if is.JWKSURL != "" {
			v.issuerURL(p+".jwks_url", is.JWKSURL)
		}
		if is.Audience != "" && strings.TrimSpace(is.Audience) != is.Audience {
			v.add(p+".audience", "must not have surrounding spaces")
		}
		for k, a := range is.Algorithms {
			if !slices.Contains(DefaultAlgorithms, a) {
				v.add(idx(p+".algorithms", k), "must be one of %s (asymmetric algorithms only: never none, never HMAC), got %q", strings.Join(DefaultAlgorithms, ", "), a)
			}
		}
		for k, sc := range is.RequiredScopes {
			if sc == "" || strings.ContainsAny(sc, " \"\\") {
				v.add(idx(p+".required_scopes", k), "must be a scope token (no spaces or quotes), got %q", sc)
			}
		}
		if is.MaxKeyAge < 0 {
			v.add(p+".max_key_age", "must not be negative")
		}
		if is.Type == CallerAuthIntrospection {
			if is.IntrospectionURL == "" {
				v.add(p+".introspection_url", "is required for introspection (RFC 7662 endpoint)")
			} else {
				v.issuerURL(p+".introspection_url", is.IntrospectionURL)
			}
			if is.ClientID == "" {
				v.add(p+".client_id", "is required for introspection")
			}
			if (is.ClientSecretFile == "") == (is.ClientSecretEnv == "") {
				v.add(p+".client_secret_file", "exactly one of client_secret_file and client_secret_env is required for introspection")
			}
		}
	}
}

// issuerURL requires https, or http to a loopback host (a local test issuer).
func (v *validator) issuerURL(path, raw string) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		v.add(path, "must be an absolute https URL without query or fragment, got %q", raw)
		return
	}
	switch u.Scheme {
	case "https":
	case "http":
		if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			v.add(path, "must use https (http only for a loopback issuer), got %q", raw)
		}
	default:
		v.add(path, "must be an https URL, got %q", raw)
	}
}

// pins checks governance.pins (the pin file itself is read and checked by package pins).
func (v *validator) pins(p Pins) {
	switch p.Mode {
	case PinsOff, PinsTrustFirst: // file is read only with mode file
	case PinsFile:
		if p.File == "" {
			v.add("governance.pins.file", "required with governance.pins.mode: file")
		}
	default:
		v.add("governance.pins.mode", "must be off, trust_first or file, got %q", p.Mode)
	}
	if p.NewTools != PinsAccept && p.NewTools != PinsQuarantine {
		v.add("governance.pins.new_tools", "must be accept or quarantine, got %q", p.NewTools)
	}
	if p.OnChange != PinsQuarantine && p.OnChange != PinsHold {
		v.add("governance.pins.on_change", "must be quarantine or hold, got %q", p.OnChange)
	}
	if p.MaxDefinitionBytes < 1024 || p.MaxDefinitionBytes > 4<<20 {
		v.add("governance.pins.max_definition_bytes", "must be between 1024 and 4194304, got %d", p.MaxDefinitionBytes)
	}
	if p.MaxTools < 1 || p.MaxTools > 1000000 {
		v.add("governance.pins.max_tools", "must be between 1 and 1000000, got %d", p.MaxTools)
	}
	if p.Enabled() {
		v.workflowRef("governance.pins.workflow", p.Workflow)
	}
}

// redisStore checks tasks.store for the redis store: one Redis named by url, or a
// Sentinel-monitored primary (sentinel.master_name + sentinel.addresses), with url then naming
// no host (it may still carry the scheme, credentials, database and options).
func (v *validator) redisStore(s Store) {
	sen := s.Sentinel
	var u *url.URL
	if s.URL != "" {
		var err error
		u, err = url.Parse(s.URL)
		if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix") {
			v.add("tasks.store.url", "must be a redis://, rediss:// or unix:// URL")
			u = nil
		}
	}
	switch {
	case !sen.Set() && s.URL == "":
		v.add("tasks.store.url", "is required for the redis store (or tasks.store.sentinel)")
	case sen.Set():
		if sen.MasterName == "" {
			v.add("tasks.store.sentinel.master_name", "is required with tasks.store.sentinel (the name the Sentinels monitor)")
		}
		if len(sen.Addresses) == 0 {
			v.add("tasks.store.sentinel.addresses", "must list at least one Sentinel host:port")
		}
		for i, a := range sen.Addresses {
			if h, p, err := net.SplitHostPort(a); err != nil || h == "" || p == "" {
				v.add(fmt.Sprintf("tasks.store.sentinel.addresses[%d]", i), "must be host:port, got %q", a)
			}
		}
		if u != nil && (u.Host != "" || u.Scheme == "unix") {
			v.add("tasks.store.url", "must not name a host with tasks.store.sentinel: the Sentinels name the primary "+
				"(keep only scheme, credentials, database and options, e.g. rediss://:password@/0?key_prefix=tollgate:)")
		}
	}
	tl := s.TLS
	if tl.Set() && u != nil && u.Scheme != "rediss" {
		v.add("tasks.store.tls", "needs a rediss:// tasks.store.url (%s:// is plain text)", u.Scheme)
	}
	if (tl.CertFile == "") != (tl.KeyFile == "") {
		v.add("tasks.store.tls", "cert_file and key_file go together")
	}
	for _, f := range [][2]string{{"ca_file", tl.CAFile}, {"cert_file", tl.CertFile}, {"key_file", tl.KeyFile}} {
		if f[1] != "" {
			v.file("tasks.store.tls."+f[0], f[1])
		}
	}
}
