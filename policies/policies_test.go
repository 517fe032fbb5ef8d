package policies_test

import (
	"encoding/json"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/policy"
	"github.com/tollgate-mcp/tollgate/internal/rules"
	"github.com/tollgate-mcp/tollgate/policies"
)

func load(t *testing.T) *policy.Engine {
	t.Helper()
	files, err := fs.Glob(policies.FS, "*.cedar")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, "financial.cedar") || !slices.Contains(files, "delete_protection.cedar") || !slices.Contains(files, "annotations.cedar") {
		t.Fatalf("embedded files = %v", files)
	}
	e, err := policy.LoadFS(policies.FS, files, "")
	if err != nil {
		t.Fatalf("LoadFS: %v", err)
	}
	return e
}

type row struct {
	name    string
	tool    string
	args    string
	want    policy.Outcome
	ids     []string // determining policies; nil = don't check
	wantErr bool     // fail-closed evaluation or conversion error
}

func run(t *testing.T, e *policy.Engine, policyID string, rows []row) {
	t.Helper()
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			d, err := e.Decide(policy.Request{
				Principal: "alice",
				Tool:      tt.tool,
				Arguments: json.RawMessage(tt.args),
				PolicyID:  policyID,
				SourceID:  "upstream",
				Time:      time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC),
			})
			if (err != nil) != tt.wantErr {
				t.Fatalf("Decide error = %v, wantErr %v", err, tt.wantErr)
			}
			if d.Outcome != tt.want {
				t.Errorf("outcome = %s (%s %v), want %s", d.Outcome, d.Reason, d.PolicyIDs, tt.want)
			}
			if tt.ids != nil && !slices.Equal(d.PolicyIDs, tt.ids) {
				t.Errorf("policy ids = %v, want %v", d.PolicyIDs, tt.ids)
			}
		})
	}
}

func TestFinancialPolicy(t *testing.T) {
	e := load(t)
	const tf = "transfer_funds"
	run(t, e, "financial_transfer", []row{
		{"small USD forwards", tf, `{"amount":500,"currency":"USD","to_account":"ACC-1"}`, policy.Forward, []string{"financial.forward_small"}, false},
		{"limit 1000 forwards", tf, `{"amount":1000,"currency":"EUR","to_account":"ACC-1"}`, policy.Forward, nil, false},
		{"integral float 1000.0 forwards", tf, `{"amount":1000.0,"currency":"EUR","to_account":"ACC-1"}`, policy.Forward, nil, false},
		{"1001 needs approval", tf, `{"amount":1001,"currency":"USD","to_account":"ACC-1"}`, policy.Approve, []string{"financial.approve_medium"}, false},
		{"limit 50000 needs approval", tf, `{"amount":50000,"currency":"USD","to_account":"ACC-1"}`, policy.Approve, nil, false},
		{"above 50000 denied", tf, `{"amount":50001,"currency":"USD","to_account":"ACC-1"}`, policy.Deny, []string{"financial.forbid_large"}, false},
		{"exponent amount 6e4 denied", tf, `{"amount":6e4,"currency":"USD","to_account":"ACC-1"}`, policy.Deny, nil, false},
		{"zero denied", tf, `{"amount":0,"currency":"USD","to_account":"ACC-1"}`, policy.Deny, []string{"financial.forbid_non_positive"}, false},
		{"negative denied", tf, `{"amount":-5,"currency":"USD","to_account":"ACC-1"}`, policy.Deny, nil, false},
		{"GBP denied", tf, `{"amount":10,"currency":"GBP","to_account":"ACC-1"}`, policy.Deny, []string{"financial.forbid_currency"}, false},
		{"lowercase usd denied", tf, `{"amount":10,"currency":"usd","to_account":"ACC-1"}`, policy.Deny, nil, false},
		{"numeric currency denied", tf, `{"amount":10,"currency":840,"to_account":"ACC-1"}`, policy.Deny, nil, false},
		{"blocked account denied", tf, `{"amount":10,"currency":"USD","to_account":"ACC-666-SANCTIONED"}`, policy.Deny, []string{"financial.forbid_blocked_account"}, false},
		{"blocked account beats approval", tf, `{"amount":5000,"currency":"USD","to_account":"ACC-999-FROZEN"}`, policy.Deny, []string{"financial.forbid_blocked_account"}, false},
		{"missing amount denied", tf, `{"currency":"USD","to_account":"ACC-1"}`, policy.Deny, []string{"financial.forbid_missing_fields"}, false},
		{"null amount is missing", tf, `{"amount":null,"currency":"USD","to_account":"ACC-1"}`, policy.Deny, []string{"financial.forbid_missing_fields"}, false},
		{"missing currency denied", tf, `{"amount":10,"to_account":"ACC-1"}`, policy.Deny, []string{"financial.forbid_missing_fields"}, false},
		{"missing account denied", tf, `{"amount":10,"currency":"USD"}`, policy.Deny, []string{"financial.forbid_missing_fields"}, false},
		{"no arguments denied", tf, ``, policy.Deny, []string{"financial.forbid_missing_fields"}, false},
		{"fractional amount fails closed", tf, `{"amount":999.99,"currency":"USD","to_account":"ACC-1"}`, policy.Deny, nil, true},
		{"string amount fails closed", tf, `{"amount":"500","currency":"USD","to_account":"ACC-1"}`, policy.Deny, nil, true},
		{"nested amount object fails closed", tf, `{"amount":{"value":500},"currency":"USD","to_account":"ACC-1"}`, policy.Deny, nil, true},
		{"extra nested fields ignored", tf, `{"amount":10,"currency":"USD","to_account":"ACC-1","meta":{"tags":["a"],"note":null}}`, policy.Forward, nil, false},
		{"forged __entity rejected", tf, `{"amount":10,"currency":"USD","to_account":{"__entity":{"type":"Account","id":"ACC-1"}}}`, policy.Deny, nil, true},
		{"forged __extn rejected", tf, `{"amount":{"__extn":{"fn":"decimal","arg":"1.0"}},"currency":"USD","to_account":"ACC-1"}`, policy.Deny, nil, true},
		{"duplicate amount rejected", tf, `{"amount":10,"amount":900000,"currency":"USD","to_account":"ACC-1"}`, policy.Deny, nil, true},
		{"other tool under this policy_id denied", "transfer_crypto", `{"amount":10,"currency":"USD","to_account":"ACC-1"}`, policy.Deny, nil, false},
	})
	// The same call under another rule's policy_id is not governed by this file.
	run(t, e, "something_else", []row{
		{"wrong policy_id matches nothing", tf, `{"amount":10,"currency":"USD","to_account":"ACC-1"}`, policy.Deny, nil, false},
	})
}

func TestDeleteProtectionPolicy(t *testing.T) {
	e := load(t)
	run(t, e, "delete_protection", []row{
		{"ordinary user forwards", "delete_user", `{"user_id":"u-002"}`, policy.Forward, []string{"delete.forward_other"}, false},
		{"no arguments forwards", "delete_user", ``, policy.Forward, nil, false},
		{"administrator denied", "delete_user", `{"user_id":"u-001"}`, policy.Deny, []string{"delete.forbid_privileged_users"}, false},
		{"administrator in production still denied", "delete_user", `{"user_id":"u-001","environment":"production"}`, policy.Deny, nil, false},
		{"audit table denied", "drop_table", `{"table":"audit_log"}`, policy.Deny, []string{"delete.forbid_privileged_users"}, false},
		{"users table denied", "drop_table", `{"table":"users","environment":"staging"}`, policy.Deny, nil, false},
		{"other table forwards", "drop_table", `{"table":"orders"}`, policy.Forward, nil, false},
		{"production needs approval", "delete_user", `{"user_id":"u-002","environment":"production"}`, policy.Approve, []string{"delete.approve_production"}, false},
		{"production drop needs approval", "drop_table", `{"table":"orders","environment":"production"}`, policy.Approve, []string{"delete.approve_production"}, false},
		{"Production is another spelling", "delete_user", `{"user_id":"u-002","environment":"Production"}`, policy.Forward, nil, false},
		{"null environment forwards", "delete_user", `{"user_id":"u-002","environment":null}`, policy.Forward, nil, false},
		{"numeric user_id forwards", "delete_user", `{"user_id":1}`, policy.Forward, nil, false},
		{"float argument forwards", "delete_user", `{"user_id":"u-002","ratio":0.5}`, policy.Forward, nil, false},
		{"environment as object is not production", "delete_user", `{"user_id":"u-002","environment":{"name":"production"}}`, policy.Forward, nil, false},
		{"forged __entity user_id rejected", "delete_user", `{"user_id":{"__entity":{"type":"User","id":"u-001"}}}`, policy.Deny, nil, true},
	})
}

func TestAnnotationsPolicy(t *testing.T) {
	e := load(t)
	for _, tt := range []struct {
		name, tool, args, ann string // ann: the tool's annotations object as listed ("" = none)
		want                  policy.Outcome
		id                    string // the determining policy ("" = don't check)
	}{
		{"unannotated tool is destructive: approval", "rm", `{}`, ``, policy.Approve, "annotations.approve_destructive"},
		{"declared destructive, closed world: approval", "rm", `{}`, `{"destructiveHint":true,"openWorldHint":false}`, policy.Approve, ""},
		{"read-only forwards", "ls", `{}`, `{"readOnlyHint":true}`, policy.Forward, "annotations.forward_non_destructive"},
		{"read-only wins over destructiveHint", "ls", `{"environment":"production"}`, `{"readOnlyHint":true,"destructiveHint":true}`, policy.Forward, ""},
		{"additive forwards", "append", `{}`, `{"destructiveHint":false}`, policy.Forward, ""},
		{"destructive in production denied", "rm", `{"environment":"production"}`, ``, policy.Deny, "annotations.forbid_destructive_production"},
		{"additive in production forwards", "append", `{"environment":"production"}`, `{"destructiveHint":false}`, policy.Forward, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := e.Decide(policy.Request{Principal: "alice", Tool: tt.tool, Arguments: json.RawMessage(tt.args),
				PolicyID: "annotation_guard", SourceID: "upstream", Annotations: rules.ParseHints([]byte(tt.ann))})
			if err != nil || d.Outcome != tt.want {
				t.Fatalf("Decide = %s (%s %v), %v; want %s", d.Outcome, d.Reason, d.PolicyIDs, err, tt.want)
			}
			if tt.id != "" && !slices.Equal(d.PolicyIDs, []string{tt.id}) {
				t.Errorf("policy ids = %v, want [%s]", d.PolicyIDs, tt.id)
			}
		})
	}
}
