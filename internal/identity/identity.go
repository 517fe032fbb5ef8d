// Package identity is Tollgate's one answer to "who is this?" and "are these the same person?"
// (docs/SECURITY.md "One person, many names").
//
// Who: a request's verified caller (Caller: the subject of a token Tollgate verified, or the
// name a trusted proxy asserts in server.identity_header) is resolved once at the door and
// carried in the request's context (NewContext, FromContext).
//
// The same person: every name a person carries — approver name, e-mail, login-proxy user, token
// subject, Slack member id — belongs to one Person, and a Directory built from the configured
// approvers maps each name to its person. Two comparisons, for two purposes:
//
//   - Refusing (self-approval, a second vote by one person): SamePerson and Same fold
//     look-alikes, so "alice", "Alice", "ａlice", "alıce", "Alİce" and "alicе" (Cyrillic е) are
//     one person. Folding may only ever refuse.
//   - Granting (sign-in, who an approver list admits): Directory.SignIn and Directory.Approver
//     match names exactly; a look-alike of a configured name is refused (ErrLookalike), never
//     taken for it.
//
// Names carrying invisible code points ("alice" followed by U+200B, a soft hyphen inside) are
// refused where they enter (Check).
package identity

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.mau.fi/util/confusable"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Same reports whether a and b name the same person: equal after trimming spaces, NFKC,
// Unicode case folding, dropping default-ignorable code points, and the confusable skeleton of
// Unicode UTS #39 (section 4, Confusable Detection; data of Unicode 17 through
// go.mau.fi/util/confusable). Two empty names are the same; callers decide whether an empty
// name means anybody.
func Same(a, b string) bool {
	return a == b || key(a) == key(b)
}

var fold = cases.Fold()

// key is what Same compares. Nonspacing marks are dropped after the fold: folding U+0130
// ("İ") gives "i" followed by U+0307, a dot no reader sees on an i, and marks stacked on a
// letter are what look-alike names are made of. Refusing only, so "josé" and "jose" being one
// person costs nothing. The skeleton is applied last: it maps I to l and 0 to O, so a fold
// after it would separate what it joined.
func key(s string) string {
	s = norm.NFKC.String(strings.TrimSpace(s))
	s = fold.String(s)
	s = norm.NFD.String(s)
	s = strings.Map(func(r rune) rune {
		if IsDefaultIgnorable(r) || unicode.Is(unicode.Mn, r) {
			return -1
		}
		return r
	}, s)
	return confusable.Skeleton(norm.NFC.String(s))
}

// Error says why a name was refused.
type Error struct {
	Name   string
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("identity %q %s", e.Name, e.Reason) }

// Check refuses a name that is not valid UTF-8 or holds a control character or a
// default-ignorable code point (zero-width spaces and joiners, soft hyphen, word joiner, byte
// order mark, bidirectional controls, variation selectors, tags, Hangul fillers, ...): such
// names render like another name and would let one person act as two.
func Check(name string) error {
	if !utf8.ValidString(name) {
		return &Error{Name: strings.ToValidUTF8(name, "\uFFFD"), Reason: "is not valid UTF-8"}
	}
	for _, r := range name {
		switch {
		case unicode.IsControl(r):
			return &Error{Name: name, Reason: fmt.Sprintf("contains the control character %U", r)}
		case IsDefaultIgnorable(r):
			return &Error{Name: name, Reason: fmt.Sprintf("contains %U, an invisible (default-ignorable) code point", r)}
		}
	}
	return nil
}

// IsDefaultIgnorable reports whether r has the Unicode property Default_Ignorable_Code_Point,
// derived as in DerivedCoreProperties.txt: Other_Default_Ignorable_Code_Point + Cf +
// Variation_Selector, less White_Space, U+FFF9..U+FFFB, U+13430..U+1343F and
// Prepended_Concatenation_Mark.
func IsDefaultIgnorable(r rune) bool {
	if !unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) && !unicode.Is(unicode.Cf, r) &&
		!unicode.Is(unicode.Variation_Selector, r) {
		return false
	}
	switch {
	case unicode.Is(unicode.White_Space, r),
		r >= 0xFFF9 && r <= 0xFFFB,
		r >= 0x13430 && r <= 0x1343F,
		unicode.Is(unicode.Prepended_Concatenation_Mark, r):
		return false
	}
	return true
}
