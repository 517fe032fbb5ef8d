package policyschema

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/policy"
)

const toolsJSON = `{"tools":[
 {"name":"transfer_funds","inputSchema":{"type":"object","properties":{
   "amount":{"type":"integer"},"currency":{"type":"string","enum":["USD","EUR"]},"to_account":{"type":"string"},
   "memo":{"type":["string","null"]}},"required":["amount"]}},
 {"name":"delete_user","inputSchema":{"type":"object","properties":{
   "username":{"type":"string"},"environment":{"type":"string"},
   "target":{"type":"object","properties":{"environment":{"type":"string"}}},
   "tags":{"type":"array","items":{"type":"string"}}}}},
 {"name":"resize","inputSchema":{"type":"object","properties":{"amount":{"type":"string"},"ratio":{"type":"number"},"any":{}}}}
]}`

// TestSchemaRefusesMistakes: policies checked against the schema built from real tool
// definitions are refused with file:line for each kind of mistake that would otherwise load
// and silently never match (or fail closed at run time); correct policies pass.
func TestSchemaRefusesMistakes(t *testing.T) {
	tools, err := ParseTools([]byte(toolsJSON))
	if err != nil {
		t.Fatal(err)
	}
	schema, warns := Build(tools)
	if w := strings.Join(warns, "\n"); !strings.Contains(w, `argument "amount" has different types`) || !strings.Contains(w, `"any" has no Cedar type`) || !strings.Contains(w, `"memo" has no Cedar type`) {
		t.Errorf("warnings:\n%s", w)
	}
	dir := t.TempDir()
	schemaFile := filepath.Join(dir, "tools.cedarschema")
	if err := os.WriteFile(schemaFile, []byte(schema), 0o600); err != nil {
		t.Fatal(err)
	}
	good := `@id("ok")
permit (principal, action == Action::"tools/call", resource == ToolCall::"delete_user")
when {
  context.policy_id == "p" && context.annotations.destructiveHint && context.time.hour < 18 &&
  resource.arguments has target && resource.arguments.target has environment &&
  resource.arguments.target.environment == "production" &&
  resource.arguments has tags && resource.arguments.tags.contains("x")
};
@id("group")
permit (principal in Group::"finance", action == Action::"tools/call", resource)
when { resource.arguments has currency && resource.arguments.currency == "USD" };
`
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := policy.Load([]string{write("good.cedar", good)}, schemaFile); err != nil {
		t.Fatalf("correct policies refused: %v", err)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"missing argument, unguarded", `resource.arguments.amout > 5`, "amout"},
		{"optional argument read without has", `resource.arguments.username == "root"`, "username"},
		{"string compared with a number", `resource.arguments has currency && resource.arguments.currency > 5`, ""},
		{"unknown context attribute", `context.polcy_id == "x"`, "polcy_id"},
		{"unknown annotation", `context.annotations.destructive`, "destructive"},
		{"wrong entity type", `principal == Usr::"alice"`, "Usr"},
		{"not a boolean condition", `resource.arguments has username && resource.arguments.username`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "\n\n@id(\"bad\")\nforbid (principal, action == Action::\"tools/call\", resource)\nwhen { " + tc.body + " };\n"
			_, err := policy.Load([]string{write(strings.ReplaceAll(tc.name, " ", "_")+".cedar", src)}, schemaFile)
			if err == nil {
				t.Fatalf("policy %q accepted", tc.body)
			}
			if !strings.Contains(err.Error(), ".cedar:3:1: does not match schema") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error lacks file:line or %q: %v", tc.want, err)
			}
		})
	}
	// What the validator lets through: a tool that does not exist, and a guarded argument no
	// tool has (`has` of a missing attribute types as false: the policy never matches).
	errs := Check("x.cedar", []byte("// ToolCall::\"gone\" in a comment\npermit (principal, action, resource == ToolCall::\"transfer_fund\")\n"+
		"when { resource.arguments has amout && resource.arguments.amout > 5 && resource.arguments has \"currency\" };\n"), tools)
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), `x.cedar:2:40: ToolCall::"transfer_fund" names no tool`) ||
		!strings.Contains(errs[1].Error(), `x.cedar:3:8: resource.arguments has "amout": no tool of the upstream has an argument "amout"`) {
		t.Errorf("Check: %v", errs)
	}
}
