// Package policyschema writes a Cedar schema for Tollgate's requests from an upstream's tools
// (tools/list): the principal (User in Group, or Session), the ToolCall resource with the
// arguments every tool declares (typed from its inputSchema) and the context Tollgate
// provides. Policies validated against it (policy.Load with cedar.schema) are refused when
// they name an argument no tool has, compare it with the wrong type, or read context
// attributes Tollgate does not set; UnknownTools reports ToolCall ids no tool has.
package policyschema

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/policy"
)

// Tool is one tools/list entry as far as the schema needs it.
type Tool struct {
	Name        string          `json:"name"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// ParseTools reads a tools/list result ({"tools": [...]}) or a bare array of tools.
func ParseTools(b []byte) ([]Tool, error) {
	var list struct {
		Tools []Tool `json:"tools"`
	}
	if err := json.Unmarshal(b, &list); err == nil && list.Tools != nil {
		return list.Tools, nil
	}
	var tools []Tool
	if err := json.Unmarshal(b, &tools); err != nil {
		return nil, fmt.Errorf("tools: want a tools/list result or an array of tools: %w", err)
	}
	return tools, nil
}

// maxDepth bounds nested object arguments in the schema (deeper ones are left untyped: out).
const maxDepth = 6

// jsonSchema is the part of a JSON Schema the mapping reads.
type jsonSchema struct {
	Type       json.RawMessage        `json:"type"`
	Properties map[string]*jsonSchema `json:"properties"`
	Items      *jsonSchema            `json:"items"`
	Enum       []json.RawMessage      `json:"enum"`
}

// cedarType maps a JSON Schema to a Cedar type, "" when it has none (a union type, a
// missing type). A "number" is typed Long, as Tollgate converts whole JSON numbers: a
// fractional value becomes a Cedar decimal at run time, fails to compare and is denied.
func cedarType(s *jsonSchema, depth int) string {
	if s == nil || depth > maxDepth {
		return ""
	}
	var t string
	if json.Unmarshal(s.Type, &t) != nil {
		return ""
	}
	switch t {
	case "string":
		return "String"
	case "integer", "number":
		return "Long"
	case "boolean":
		return "Bool"
	case "array":
		if it := cedarType(s.Items, depth+1); it != "" {
			return "Set<" + it + ">"
		}
	case "object":
		if s.Properties == nil {
			return ""
		}
		return record(s.Properties, depth+1)
	}
	return ""
}

func record(props map[string]*jsonSchema, depth int) string {
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("{")
	first := true
	for _, n := range names {
		t := cedarType(props[n], depth)
		if t == "" {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		// Every attribute is optional: a policy must guard it with `has` (a missing
		// attribute is an evaluation error, and Tollgate denies on errors).
		fmt.Fprintf(&b, "%s?: %s", strconv.Quote(n), t)
	}
	b.WriteString("}")
	return b.String()
}

// Build returns the Cedar schema for tools and warnings about arguments it cannot type
// (policies naming them fail validation as unknown attributes).
func Build(tools []Tool) (string, []string) {
	type arg struct {
		typ   string
		tools []string
	}
	args := map[string]*arg{}
	var warns []string
	conflict := map[string]bool{}
	for _, t := range tools {
		var s jsonSchema
		if len(t.InputSchema) > 0 && json.Unmarshal(t.InputSchema, &s) != nil {
			warns = append(warns, fmt.Sprintf("tool %q: inputSchema is not a JSON Schema object; its arguments are left out", t.Name))
			continue
		}
		for name, p := range s.Properties {
			typ := cedarType(p, 1)
			if typ == "" {
				warns = append(warns, fmt.Sprintf("tool %q: argument %q has no Cedar type (a union, or untyped); left out", t.Name, name))
				continue
			}
			a := args[name]
			switch {
			case a == nil:
				args[name] = &arg{typ: typ, tools: []string{t.Name}}
			case a.typ != typ:
				conflict[name] = true
				a.tools = append(a.tools, t.Name)
			default:
				a.tools = append(a.tools, t.Name)
			}
		}
	}
	props := map[string]string{}
	for name, a := range args {
		if conflict[name] {
			warns = append(warns, fmt.Sprintf("argument %q has different types in tools %s; left out", name, strings.Join(a.tools, ", ")))
			continue
		}
		props[name] = a.typ
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names)
	slices.Sort(warns)

	var b strings.Builder
	b.WriteString("// Cedar schema for Tollgate's tools/call requests, written by `tollgate policy schema`\n")
	b.WriteString("// from the upstream's tools/list. Every argument is optional: guard it with `has`.\n")
	// A verified caller's e-mail and name are the User's attributes, set only when the
	// token carries them (docs/contract.md §3).
	b.WriteString("entity Group;\nentity User in [Group] {\n  email?: String,\n  name?: String,\n};\nentity Session;\n")
	b.WriteString("entity ToolCall {\n  name: String,\n  arguments: {\n")
	for _, n := range names {
		fmt.Fprintf(&b, "    %s?: %s,\n", strconv.Quote(n), props[n])
	}
	b.WriteString("  },\n};\n")
	b.WriteString("action \"tools/call\" appliesTo {\n  principal: [User, Session],\n  resource: [ToolCall],\n  context: {\n")
	b.WriteString("    policy_id: String,\n    source_id: String,\n    annotations: {")
	for i, h := range config.AnnotationHints {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: Bool", h)
	}
	b.WriteString("},\n    scopes: Set<String>,\n    time: {unix: Long, hour: Long, weekday: Long},\n  },\n};\n")
	return b.String(), warns
}

var (
	toolRef = regexp.MustCompile(`ToolCall\s*::\s*"((?:[^"\\]|\\.)*)"`)
	// hasArg is `resource.arguments has name` (or "name"): Cedar's validator types a `has`
	// of an attribute the record lacks as false and accepts the policy, which then never
	// matches — the mistake this check is for.
	hasArg = regexp.MustCompile(`resource\s*\.\s*arguments\s+has\s+(?:"((?:[^"\\]|\\.)*)"|([A-Za-z_][A-Za-z0-9_]*))`)
)

// Check reports what the schema validator lets through in a policy file's source: each
// ToolCall::"name" that names no tool, and each `resource.arguments has x` where no tool has
// an argument x — both make a policy that never matches (a mistyped forbid fails open). Each
// error is "policy: file:line:column: …"; names in // comments are skipped.
func Check(file string, src []byte, tools []Tool) []error {
	known, args := map[string]bool{}, map[string]bool{}
	for _, t := range tools {
		known[t.Name] = true
		var s jsonSchema
		if json.Unmarshal(t.InputSchema, &s) == nil {
			for n := range s.Properties {
				args[n] = true
			}
		}
	}
	var errs []error
	at := func(off int) (line, col int, commented bool) {
		start := strings.LastIndex(string(src[:off]), "\n") + 1
		return 1 + strings.Count(string(src[:off]), "\n"), off - start + 1, strings.Contains(string(src[start:off]), "//")
	}
	for _, m := range toolRef.FindAllSubmatchIndex(src, -1) {
		name, err := strconv.Unquote(`"` + string(src[m[2]:m[3]]) + `"`)
		line, col, commented := at(m[0])
		if err != nil || known[name] || commented {
			continue
		}
		errs = append(errs, fmt.Errorf("policy: %s:%d:%d: ToolCall::%q names no tool of the upstream", file, line, col, name))
	}
	for _, m := range hasArg.FindAllSubmatchIndex(src, -1) {
		name := ""
		if m[2] >= 0 {
			name, _ = strconv.Unquote(`"` + string(src[m[2]:m[3]]) + `"`)
		} else {
			name = string(src[m[4]:m[5]])
		}
		line, col, commented := at(m[0])
		if args[name] || commented {
			continue
		}
		errs = append(errs, fmt.Errorf("policy: %s:%d:%d: resource.arguments has %q: no tool of the upstream has an argument %q, so this is always false", file, line, col, name, name))
	}
	return errs
}

// Digest identifies a set of tools as the schema sees them (names and inputSchemas, in any
// order): a tools/list that changes nothing else does not re-validate.
func Digest(tools []Tool) string {
	sorted := slices.Clone(tools)
	slices.SortFunc(sorted, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	h := sha256.New()
	for _, t := range sorted {
		fmt.Fprintf(h, "%d:%s%d:", len(t.Name), t.Name, len(t.InputSchema))
		h.Write(t.InputSchema)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Validate checks a loaded policy set against the schema Build writes for tools: cedar-go's
// schema validator on every policy, then Check on every file's text. Each problem names
// file:line:column; warns are Build's (arguments left untyped).
func Validate(e *policy.Engine, tools []Tool) (problems []error, warns []string) {
	schema, warns := Build(tools)
	problems = e.ValidateSchema("upstream-tools.cedarschema", []byte(schema))
	for _, f := range e.Files() {
		problems = append(problems, Check(f.Name, f.Src, tools)...)
	}
	return problems, warns
}
