package config

import (
	"errors"
	"fmt"
	"os"
)

// AdminApprover is the approver name given to $TOLLGATE_ADMIN_TOKEN.
const AdminApprover = "admin"

// MinTokenBytes is the shortest approver or admin token accepted: a bearer token is the only
// credential of the admin API, and a short one falls to guessing (failed tokens are also
// throttled per address, docs/SECURITY.md).
const MinTokenBytes = 16

// tokenTooShort is the error for a token shorter than MinTokenBytes; it names the approver and
// the length, never the value.
func tokenTooShort(path, name, token string) error {
	if len(token) >= MinTokenBytes {
		return nil
	}
	return &FieldError{Path: path, Msg: fmt.Sprintf("token of approver %q is %d bytes; at least %d are required (e.g. openssl rand -hex 32)",
		name, len(token), MinTokenBytes)}
}

// shortTokens reports every token variable that is set but shorter than MinTokenBytes. Parse
// runs it, so a reload reports it too; variables that are not set are ApproverTokens' concern
// (run by server.New, a reload and `tollgate validate`, through server.Preflight).
func (c *Config) shortTokens(lookupEnv func(string) (string, bool)) []error {
	var errs []error
	for i, a := range c.Approvers {
		if tok, ok := lookupEnv(a.TokenEnv); ok && tok != "" && a.TokenEnv != "" {
			if err := tokenTooShort(idx("approvers", i)+".token_env", a.Name, tok); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if tok, ok := lookupEnv(EnvAdminToken); ok && tok != "" {
		if err := tokenTooShort("$"+EnvAdminToken, AdminApprover, tok); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// ApproverTokens maps each bearer token to its approver's name (docs/contract.md §4):
// approvers[].token_env or token_file, plus $TOLLGATE_ADMIN_TOKEN as "admin" when set. A listed
// token_env that is unset or empty, a token shorter than MinTokenBytes, or two approvers
// sharing a token, is an error.
// Errors name approvers and variables, never token values. nil lookupEnv uses the
// process environment.
func (c *Config) ApproverTokens(lookupEnv func(string) (string, bool)) (map[string]string, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	tokens := make(map[string]string, len(c.Approvers)+1)
	var errs []error
	addToken := func(path, name, token string) {
		if err := tokenTooShort(path, name, token); err != nil {
			errs = append(errs, err)
			return
		}
		if other, dup := tokens[token]; dup && other != name {
			msg := fmt.Sprintf("approver %q has the same token as approver %q", name, other)
			if name == AdminApprover && path == "$"+EnvAdminToken {
				// The usual cause: TOLLGATE_ADMIN_TOKEN exported for the approvals CLI in the shell
				// that starts the gateway, which reads it as a second approver.
				msg += fmt.Sprintf("; the gateway reads $%s as approver %q: unset it in the shell that runs tollgate, "+
					"and give it to the CLI per command (%s=$%s tollgate approvals list)", EnvAdminToken, AdminApprover, EnvAdminToken, envOf(c, other))
			}
			errs = append(errs, &FieldError{Path: path, Msg: msg})
			return
		}
		tokens[token] = name
	}
	for i, a := range c.Approvers {
		if a.TokenFile != "" {
			path := idx("approvers", i) + ".token_file"
			tok, err := ReadSecretFile(a.TokenFile, fmt.Sprintf("token of approver %q", a.Name), MinTokenBytes)
			if err != nil {
				errs = append(errs, &FieldError{Path: path, Msg: err.Error()})
				continue
			}
			addToken(path, a.Name, tok)
			continue
		}
		if a.TokenEnv == "" {
			continue // signs in through the login proxy only (Validate checks it is configured)
		}
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

// envOf is the token_env of approver name ("TOKEN" if none), for a hint.
func envOf(c *Config, name string) string {
	for _, a := range c.Approvers {
		if a.Name == name && a.TokenEnv != "" {
			return a.TokenEnv
		}
	}
	return "TOKEN"
}
