package config

import (
	"errors"
	"fmt"
	"os"
)

// AdminApprover is the approver name given to $TOLLGATE_ADMIN_TOKEN.
const AdminApprover = "admin"

// ApproverTokens maps each bearer token to its approver's name (docs/contract.md §4):
// approvers[].token_env, plus $TOLLGATE_ADMIN_TOKEN as "admin" when set. A listed
// token_env that is unset or empty, or two approvers sharing a token, is an error.
// Errors name approvers and variables, never token values. nil lookupEnv uses the
// process environment.
func (c *Config) ApproverTokens(lookupEnv func(string) (string, bool)) (map[string]string, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	tokens := make(map[string]string, len(c.Approvers)+1)
	var errs []error
	addToken := func(path, name, token string) {
		if other, dup := tokens[token]; dup && other != name {
			errs = append(errs, &FieldError{Path: path, Msg: fmt.Sprintf("approver %q has the same token as approver %q", name, other)})
			return
		}
		tokens[token] = name
	}
	for i, a := range c.Approvers {
		path := idx("approvers", i) + ".token_env"
		tok, ok := lookupEnv(a.TokenEnv)
		if !ok || tok == "" {
			errs = append(errs, &FieldError{Path: path, Msg: fmt.Sprintf("environment variable %s (token of approver %q) is not set", a.TokenEnv, a.Name)})
			continue
		}
		addToken(path, a.Name, tok)
	}
	if tok, ok := lookupEnv(EnvAdminToken); ok && tok != "" {
		addToken("$"+EnvAdminToken, AdminApprover, tok)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return tokens, nil
}
