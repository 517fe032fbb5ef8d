package approval

import (
	"crypto/sha256"
	"crypto/subtle"
)

// Authenticator maps a bearer token to the approver's name (docs/contract.md §4: "the approver's
// name comes from the token").
type Authenticator interface {
	Approver(token string) (name string, ok bool)
}

type staticTokens []staticToken

type staticToken struct {
	sum  [sha256.Size]byte
	name string
}

// StaticTokens returns an Authenticator over a fixed token → approver name map. Empty tokens
// and empty names are ignored. Tokens are compared as SHA-256 digests in constant time, and
// every entry is compared on each call, so neither timing nor length reveals a token.
func StaticTokens(m map[string]string) Authenticator {
	s := make(staticTokens, 0, len(m))
	for tok, name := range m {
		if tok == "" || name == "" {
			continue
		}
		s = append(s, staticToken{sum: sha256.Sum256([]byte(tok)), name: name})
	}
	return s
}

func (s staticTokens) Approver(token string) (string, bool) {
	if token == "" {
		return "", false
	}
	sum := sha256.Sum256([]byte(token))
	name, found := "", false
	for _, e := range s {
		if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 && !found {
			name, found = e.name, true
		}
	}
	return name, found
}
