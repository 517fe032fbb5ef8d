package rules

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/gobwas/glob"
	"github.com/gobwas/glob/syntax"
)

// MaxGlobAlternatives bounds how many plain alternatives a rule's glob may stand for once its
// {a,b} groups are multiplied out: `{a,b,c}_*` is 3, `{a,b}{c,d}{e,f}` is 8. Matching costs at
// most the name's length times the expanded pattern's, so the bound keeps a decision linear in
// the name with a constant the config chose; a pattern past it is refused at load.
const MaxGlobAlternatives = 256

// Glob is a compiled rule pattern (gobwas/glob syntax without separators, docs/contract.md §3).
// Tool names are chosen by callers, so matching must not backtrack: a backtracking engine spent
// seconds on `*prod*delete*` against a 200 KB name (issue 27). Glob multiplies the {a,b} groups
// out into plain alternatives, splits each at its stars into segments of fixed length, and
// places every segment at its leftmost fit — which is complete, since whatever a later fit
// allows an earlier one allows too. A match reads the name once per segment: linear in the
// name for every pattern Compile accepts.
type Glob struct {
	alts []globAlt
}

// globAlt is one alternative: segs[0] anchored at the start, segs[len-1] at the end when
// !trailingStar (with a single segment and no star both), the rest placed leftmost in between.
type globAlt struct {
	segs         []globSeg
	leadingStar  bool
	trailingStar bool
}

// globSeg is a star-free run of atoms; it matches a fixed number of runes.
type globSeg struct {
	atoms []globAtom
	runes int
	text  string // the whole segment when it is one literal, else ""
}

type atomKind uint8

const (
	atomText  atomKind = iota // literal bytes
	atomAny                   // `?`: one rune
	atomRange                 // `[a-z]`, `[!a-z]`
	atomSet                   // `[abc]`, `[!abc]`
	atomStar                  // only while parsing; never stored in a segment
)

type globAtom struct {
	kind   atomKind
	text   string // atomText
	lo, hi rune   // atomRange
	set    string // atomSet: the member runes
	not    bool
}

// CompileGlob compiles pattern. Its syntax errors are gobwas/glob's (as config validation
// reports them); a pattern standing for more than MaxGlobAlternatives alternatives is refused.
func CompileGlob(pattern string) (*Glob, error) {
	if _, err := glob.Compile(pattern); err != nil {
		return nil, err
	}
	lex := syntax.NewLexer(pattern)
	seqs, err := parseAlternatives(lex, false)
	if err != nil {
		return nil, err
	}
	g := &Glob{alts: make([]globAlt, 0, len(seqs))}
	for _, seq := range seqs {
		g.alts = append(g.alts, newAlt(seq))
	}
	return g, nil
}

// parseAlternatives reads a sequence up to EOF (or, inGroup, up to the closing `}` of a
// group, with its `,`-separated alternatives) and returns the plain sequences it stands for.
// The pattern already compiled with gobwas/glob, so the token stream is well formed.
func parseAlternatives(lex *syntax.Lexer, inGroup bool) ([][]globAtom, error) {
	var out [][]globAtom
	cur := [][]globAtom{nil} // expansions of the current alternative so far
	for {
		tok := lex.Next()
		switch tok.Type {
		case syntax.EOF, syntax.TermsClose:
			return append(out, cur...), nil
		case syntax.Error:
			return nil, fmt.Errorf("glob: %s", tok.Data)
		case syntax.TermSeparator:
			if !inGroup {
				return nil, fmt.Errorf("glob: unexpected `,`")
			}
			out = append(out, cur...)
			cur = [][]globAtom{nil}
		case syntax.TermsOpen:
			group, err := parseAlternatives(lex, true)
			if err != nil {
				return nil, err
			}
			if len(cur)*len(group) > MaxGlobAlternatives {
				return nil, errTooManyAlternatives
			}
			next := make([][]globAtom, 0, len(cur)*len(group))
			for _, head := range cur {
				for _, tail := range group {
					next = append(next, append(append([]globAtom(nil), head...), tail...))
				}
			}
			cur = next
		default:
			a, err := parseAtom(lex, tok)
			if err != nil {
				return nil, err
			}
			for i := range cur {
				cur[i] = append(cur[i], a)
			}
		}
		if len(out)+len(cur) > MaxGlobAlternatives {
			return nil, errTooManyAlternatives
		}
	}
}

var errTooManyAlternatives = fmt.Errorf("its {a,b} groups multiply out to more than %d alternatives; split it into several rules", MaxGlobAlternatives)

func parseAtom(lex *syntax.Lexer, tok syntax.Token) (globAtom, error) {
	switch tok.Type {
	case syntax.Text:
		return globAtom{kind: atomText, text: tok.Data}, nil
	case syntax.Single:
		return globAtom{kind: atomAny}, nil
	case syntax.Any, syntax.Super: // no separators: `*` and `**` are the same
		return globAtom{kind: atomStar}, nil
	case syntax.RangeOpen:
		a := globAtom{kind: atomSet}
		for {
			t := lex.Next()
			switch t.Type {
			case syntax.Not:
				a.not = true
			case syntax.RangeLo:
				a.kind = atomRange
				a.lo, _ = utf8.DecodeRuneInString(t.Data)
			case syntax.RangeHi:
				a.hi, _ = utf8.DecodeRuneInString(t.Data)
			case syntax.Text:
				a.set = t.Data
			case syntax.RangeBetween:
			case syntax.RangeClose:
				return a, nil
			default:
				return a, fmt.Errorf("glob: unexpected %v in a character class", t)
			}
		}
	}
	return globAtom{}, fmt.Errorf("glob: unexpected %v", tok)
}

// newAlt splits a plain sequence at its stars; empty runs between stars are dropped.
func newAlt(seq []globAtom) globAlt {
	var alt globAlt
	var run []globAtom
	stars := false
	for _, a := range seq {
		if a.kind != atomStar {
			run = append(run, a)
			continue
		}
		stars = true
		if len(run) > 0 {
			alt.segs = append(alt.segs, newSeg(run))
			run = nil
		}
	}
	if len(run) > 0 || !stars {
		alt.segs = append(alt.segs, newSeg(run)) // the whole of a star-free sequence, even ""
	}
	alt.leadingStar = stars && seq[0].kind == atomStar
	alt.trailingStar = stars && seq[len(seq)-1].kind == atomStar
	return alt
}

func newSeg(atoms []globAtom) globSeg {
	// Merge adjacent literals so a segment of plain text is one string comparison.
	var s globSeg
	for _, a := range atoms {
		if a.kind == atomText {
			s.runes += utf8.RuneCountInString(a.text)
			if n := len(s.atoms); n > 0 && s.atoms[n-1].kind == atomText {
				s.atoms[n-1].text += a.text
				continue
			}
		} else {
			s.runes++
		}
		s.atoms = append(s.atoms, a)
	}
	if len(s.atoms) == 1 && s.atoms[0].kind == atomText {
		s.text = s.atoms[0].text
	}
	return s
}

// Match reports whether the whole of s matches.
func (g *Glob) Match(s string) bool {
	for i := range g.alts {
		if g.alts[i].match(s) {
			return true
		}
	}
	return false
}

func (a *globAlt) match(s string) bool {
	segs := a.segs
	pos := 0
	if !a.leadingStar {
		n, ok := segs[0].matchAt(s)
		if !ok {
			return false
		}
		if len(segs) == 1 && !a.trailingStar {
			return n == len(s) // no star at all
		}
		pos, segs = n, segs[1:]
	}
	last := len(segs)
	if !a.trailingStar {
		last-- // the final segment is anchored at the end
	}
	for i := 0; i < last; i++ {
		end, ok := segs[i].find(s, pos)
		if !ok {
			return false
		}
		pos = end
	}
	if a.trailingStar {
		return true
	}
	return segs[last].matchEnd(s, pos)
}

// matchAt matches the segment at the start of s and returns how many bytes it took.
func (g *globSeg) matchAt(s string) (int, bool) {
	if g.text != "" || len(g.atoms) == 0 {
		return len(g.text), strings.HasPrefix(s, g.text)
	}
	n := 0
	for i := range g.atoms {
		k, ok := g.atoms[i].matchAt(s[n:])
		if !ok {
			return 0, false
		}
		n += k
	}
	return n, true
}

// find places the segment at its leftmost fit in s at or after pos (a rune boundary) and
// returns where the fit ends. Each try costs at most the segment's length: O(len(s)·len(g)).
func (g *globSeg) find(s string, pos int) (int, bool) {
	if g.text != "" {
		// A literal is valid UTF-8, so it can only start where a rune does.
		if j := strings.Index(s[pos:], g.text); j >= 0 {
			return pos + j + len(g.text), true
		}
		return 0, false
	}
	for p := pos; ; {
		if n, ok := g.matchAt(s[p:]); ok {
			return p + n, true
		}
		if p >= len(s) {
			return 0, false
		}
		_, w := utf8.DecodeRuneInString(s[p:])
		p += w
	}
}

// matchEnd reports whether the segment matches a suffix of s starting at or after pos. It
// matches a fixed number of runes, so only the start that many runes before the end can fit.
func (g *globSeg) matchEnd(s string, pos int) bool {
	if g.text != "" {
		return len(s)-len(g.text) >= pos && strings.HasSuffix(s, g.text)
	}
	lead := pos
	for range g.runes {
		if lead >= len(s) {
			return false
		}
		_, w := utf8.DecodeRuneInString(s[lead:])
		lead += w
	}
	start := pos
	for lead < len(s) {
		_, w := utf8.DecodeRuneInString(s[lead:])
		lead += w
		_, w = utf8.DecodeRuneInString(s[start:])
		start += w
	}
	n, ok := g.matchAt(s[start:])
	return ok && start+n == len(s)
}

// matchAt matches one atom at the start of s. An invalid byte decodes as U+FFFD of width 1,
// as gobwas/glob and regexp read it.
func (a *globAtom) matchAt(s string) (int, bool) {
	if a.kind == atomText {
		return len(a.text), strings.HasPrefix(s, a.text)
	}
	if s == "" {
		return 0, false
	}
	r, w := utf8.DecodeRuneInString(s)
	var in bool
	switch a.kind {
	case atomAny:
		return w, true
	case atomRange:
		in = a.lo <= r && r <= a.hi
	case atomSet:
		in = strings.ContainsRune(a.set, r)
	}
	return w, in != a.not
}
