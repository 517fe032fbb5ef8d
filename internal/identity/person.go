package identity

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Person is one person and every name they carry: a configured approver (name, e-mail, token
// subjects, Slack member id), or a caller known by what its request says (a subject and the
// e-mail its token carries, or the one name a trusted proxy asserts).
type Person struct {
	Name     string   // approver name, or the one name an unconfigured party carries
	Emails   []string // e-mail addresses
	Subjects []string // verified token subjects, as Caller.Subject (issuer-scoped)
	SlackIDs []string // Slack member ids
}

// Names lists every non-empty name p carries.
func (p Person) Names() []string { return p.names() }

func (p Person) names() []string {
	out := make([]string, 0, 1+len(p.Emails)+len(p.Subjects)+len(p.SlackIDs))
	for _, group := range [][]string{{p.Name}, p.Emails, p.Subjects, p.SlackIDs} {
		for _, n := range group {
			if strings.TrimSpace(n) != "" {
				out = append(out, n)
			}
		}
	}
	return out
}

// SamePerson reports whether a and b may be one person: some name of one is the same (Same:
// case, width, marks, invisible code points and confusable letters folded) as some name of the
// other. It is for refusing only — self-approval, a second vote — never for granting. Two
// parties with no names are not the same person.
func SamePerson(a, b Person) bool {
	an, bn := a.names(), b.names()
	for _, x := range an {
		for _, y := range bn {
			if Same(x, y) {
				return true
			}
		}
	}
	return false
}

// Kind is which of a person's names a claim names.
type Kind uint8

const (
	KindName    Kind = iota // approver name (also a login proxy's user)
	KindEmail               // e-mail address
	KindSubject             // verified token subject
	KindSlackID             // Slack member id
)

// Claim is one name a request presents to be granted an identity (Grant).
type Claim struct {
	Kind  Kind
	Value string
}

// Directory maps every name of the configured approvers to the person carrying it. Built once
// per configuration snapshot; safe for concurrent use.
type Directory struct {
	people []Person
	exact  map[string]int // kind + exact name (e-mails ASCII-lowercased) → index in people
}

func (p Person) claims() []Claim {
	out := []Claim{{KindName, p.Name}}
	for _, e := range p.Emails {
		out = append(out, Claim{KindEmail, e})
	}
	for _, sub := range p.Subjects {
		out = append(out, Claim{KindSubject, sub})
	}
	for _, id := range p.SlackIDs {
		out = append(out, Claim{KindSlackID, id})
	}
	return out
}

// NewDirectory indexes people. A name two people carry is indexed for neither (configuration
// validation refuses such a list; a directory never guesses).
func NewDirectory(people []Person) *Directory {
	d := &Directory{people: slices.Clone(people), exact: make(map[string]int)}
	dup := map[string]bool{}
	for i, p := range d.people {
		for _, c := range p.claims() {
			if strings.TrimSpace(c.Value) == "" {
				continue
			}
			k := exactKey(c)
			if j, ok := d.exact[k]; ok && j != i {
				dup[k] = true
			}
			d.exact[k] = i
		}
	}
	for k := range dup {
		delete(d.exact, k)
	}
	return d
}

// exactKey is how a claim is looked up when granting: exactly, except that an e-mail address
// made only of ASCII characters is case-insensitive ("Alice@Example.com" is alice@example.com,
// as every mail system treats it); no Unicode folding, so "ａlice@example.com" is another name.
func exactKey(c Claim) string {
	v := strings.TrimSpace(c.Value)
	if c.Kind == KindEmail && isASCII(v) {
		v = strings.ToLower(v)
	}
	return string(rune('0'+c.Kind)) + "\x00" + v
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// lookup returns the index of the person c names exactly, -1 if none.
func (d *Directory) lookup(c Claim) int {
	if d == nil || strings.TrimSpace(c.Value) == "" {
		return -1
	}
	if i, ok := d.exact[exactKey(c)]; ok {
		return i
	}
	return -1
}

// expand is p with every configured person one of its names names exactly, whatever kind of
// name it is (refusing: a proxy's "alice@example.com" is whoever has that e-mail).
func (d *Directory) expand(p Person) []Person {
	out := []Person{p}
	for _, n := range p.names() {
		for k := KindName; k <= KindSlackID; k++ {
			if i := d.lookup(Claim{k, n}); i >= 0 {
				out = append(out, d.people[i])
			}
		}
	}
	return out
}

// Same reports whether a and b may be one person (refusing only): each is expanded to every
// configured person one of its names names exactly, and any name of one side that is the same
// as (Same) any name of the other makes them one. "alice@example.com" asserted by a proxy is
// approver alice when alice's e-mail is that address; a token subject is the approver whose
// subjects list it.
func (d *Directory) Same(a, b Person) bool {
	for _, x := range d.expand(a) {
		for _, y := range d.expand(b) {
			if SamePerson(x, y) {
				return true
			}
		}
	}
	return false
}

// SameName is Same for two single names (two approvers' votes).
func (d *Directory) SameName(a, b string) bool {
	return d.Same(Person{Name: a}, Person{Name: b})
}

// ErrLookalike: a name that is not exactly a configured person's but looks like one (case,
// width, confusable letters, marks). Granting refuses it; it is counted, never mapped.
var ErrLookalike = errors.New("looks like a configured approver's name but is not exactly it")

// ErrUnknown: a name no configured person carries.
var ErrUnknown = errors.New("is not a configured approver")

// ErrAmbiguous: names that map exactly to two different people.
var ErrAmbiguous = errors.New("names a different approver than the other name presented")

// NameError says which name was refused and why (one of the errors above).
type NameError struct {
	Name string
	Err  error
	// Other is the approver the look-alike resembles, or the approver the other name of an
	// ambiguous pair names (for the operator's log; never granted).
	Other string
}

func (e *NameError) Error() string {
	if e.Other != "" {
		return fmt.Sprintf("%q %v (%q)", e.Name, e.Err, e.Other)
	}
	return fmt.Sprintf("%q %v", e.Name, e.Err)
}

func (e *NameError) Unwrap() error { return e.Err }

// Grant returns the configured person the claims name, each matched exactly within its kind
// (granting: a login proxy's user and e-mail, a token's subject and e-mail claim). Claims that
// name someone must all name the same person; empty claims are skipped. When none names
// anyone exactly, a claim that looks like a configured name (Same) is ErrLookalike, else
// ErrUnknown. Errors are *NameError.
func (d *Directory) Grant(claims ...Claim) (Person, error) {
	found, by := -1, ""
	var given []string
	for _, c := range claims {
		if strings.TrimSpace(c.Value) == "" {
			continue
		}
		given = append(given, c.Value)
		i := d.lookup(c)
		if i < 0 {
			continue
		}
		if found >= 0 && i != found {
			return Person{}, &NameError{Name: c.Value, Err: ErrAmbiguous, Other: d.people[found].Name + " by " + by}
		}
		found, by = i, c.Value
	}
	if found >= 0 {
		return d.people[found], nil
	}
	if len(given) == 0 {
		return Person{}, &NameError{Err: ErrUnknown}
	}
	if d != nil {
		for _, n := range given {
			for _, p := range d.people {
				if SamePerson(Person{Name: n}, p) {
					return Person{}, &NameError{Name: n, Err: ErrLookalike, Other: p.Name}
				}
			}
		}
	}
	return Person{}, &NameError{Name: strings.Join(given, " / "), Err: ErrUnknown}
}
