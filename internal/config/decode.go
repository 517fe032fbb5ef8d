package config

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// maxAliasUses bounds alias dereferences so a tiny file cannot expand into a huge
// tree ("billion laughs"); real configs use a handful.
const maxAliasUses = 1000

// meta is what parsing learned about the file, kept so defaults can tell absent
// keys from explicit zeros and validation can name lines and env variables.
type meta struct {
	lines   map[string]int    // YAML path of every non-null value → line
	fromEnv map[string]string // YAML path → TOLLGATE_* variable that set it
	bad     map[string]bool   // paths that already failed; validation skips them
}

func newMeta() *meta {
	return &meta{lines: map[string]int{}, fromEnv: map[string]string{}, bad: map[string]bool{}}
}

func idx(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// expandNode expands ${VAR} in every scalar value (never in keys). Alias nodes are
// skipped: their anchor is expanded where it is defined.
func expandNode(n *yaml.Node, path string, lookupEnv func(string) (string, bool), m *meta, errs *[]error) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			expandNode(c, path, lookupEnv, m, errs)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			expandNode(c, idx(path, i), lookupEnv, m, errs)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			expandNode(n.Content[i+1], join(path, keyName(n.Content[i])), lookupEnv, m, errs)
		}
	case yaml.ScalarNode:
		v, err := expand(n.Value, lookupEnv)
		if err != nil {
			*errs = append(*errs, &FieldError{Path: path, Msg: err.Error(), Line: n.Line})
			m.bad[path] = true
			n.Value = ""
			n.Tag = "!!null"
			n.Style = 0
			return
		}
		if v != n.Value {
			n.Value = v
			if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
				// A plain scalar is typed by its expanded text, so ${PORT:-7467}
				// can fill an integer and ${X:-} means "unset".
				n.Tag = ""
			}
		}
	}
}

func keyName(k *yaml.Node) string {
	if k.Kind == yaml.ScalarNode {
		return k.Value
	}
	return "?"
}

// decoder fills a Go value from a node tree strictly: unknown and duplicate keys
// and type mismatches are errors carrying their YAML path and line. Unlike
// yaml.v3's KnownFields it reports every problem with a path, not just a line.
type decoder struct {
	m       *meta
	errs    []error
	aliases int
	tooDeep bool // alias limit reported once; later aliases are dropped quietly
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

func (d *decoder) fail(path string, n *yaml.Node, format string, args ...any) {
	d.errs = append(d.errs, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...), Line: n.Line})
	d.m.bad[path] = true
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func (d *decoder) deref(n *yaml.Node, path string) (*yaml.Node, bool) {
	for n.Kind == yaml.AliasNode {
		d.aliases++
		if d.aliases > maxAliasUses || n.Alias == nil {
			if !d.tooDeep {
				d.fail(path, n, "too many alias expansions (more than %d)", maxAliasUses)
				d.tooDeep = true
			}
			return nil, false
		}
		n = n.Alias
	}
	return n, true
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string, line int) {
	n, ok := d.deref(n, path)
	if !ok || isNull(n) {
		return // null leaves the zero value: the key counts as absent
	}
	if line == 0 {
		line = n.Line
	}
	d.m.lines[path] = line

	if v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		if err := v.Addr().Interface().(yaml.Unmarshaler).UnmarshalYAML(n); err != nil {
			d.fail(path, n, "%s", err.Error())
		}
		return
	}

	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(path, n, "must be a list, got a %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, s.Index(i), idx(path, i), 0)
		}
		v.Set(s)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.fail(path, n, "must be a string, got a %s", kindName(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Int, reflect.Int64, reflect.Int32:
		var x int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&x) != nil || v.OverflowInt(x) {
			d.fail(path, n, "must be an integer, got %s", describe(n))
			return
		}
		v.SetInt(x)
	case reflect.Float64, reflect.Float32:
		var x float64
		tag := n.ShortTag()
		if n.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") || n.Decode(&x) != nil {
			d.fail(path, n, "must be a number, got %s", describe(n))
			return
		}
		v.SetFloat(x)
	case reflect.Bool:
		var x bool
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&x) != nil {
			d.fail(path, n, "must be true or false, got %s", describe(n))
			return
		}
		v.SetBool(x)
	default:
		d.fail(path, n, "unsupported type %s", v.Type())
	}
}

// describe names a bad value for an error message without echoing long text.
func describe(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		return "a " + kindName(n)
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	return strconv.Quote(v)
}

type pair struct {
	key, val *yaml.Node
	merged   bool // came from a "<<" merge key; explicit keys override it
}

// pairs flattens a mapping, following "<<" merge keys (YAML 1.1 merge).
func (d *decoder) pairs(n *yaml.Node, path string, merged bool, depth int) []pair {
	var out []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			if depth > 10 {
				d.fail(path, k, "merge keys nested too deeply")
				continue
			}
			src, ok := d.deref(val, path)
			if !ok {
				continue
			}
			var maps []*yaml.Node
			switch src.Kind {
			case yaml.MappingNode:
				maps = []*yaml.Node{src}
			case yaml.SequenceNode:
				for _, e := range src.Content {
					if e, ok := d.deref(e, path); ok {
						maps = append(maps, e)
					}
				}
			default:
				maps = []*yaml.Node{src}
			}
			for _, mm := range maps {
				if mm.Kind != yaml.MappingNode {
					d.fail(path, k, "merge key \"<<\" needs a mapping or a list of mappings")
					continue
				}
				out = append(out, d.pairs(mm, path, true, depth+1)...)
			}
			continue
		}
		out = append(out, pair{key: k, val: val, merged: merged})
	}
	return out
}

// entries returns the mapping's key/value pairs with merge keys applied:
// explicit keys win over merged ones; an explicit key given twice is an error.
func (d *decoder) entries(n *yaml.Node, path string) []pair {
	all := d.pairs(n, path, false, 0)
	explicit := map[string]bool{}
	var out []pair
	for _, p := range all {
		if p.merged {
			continue
		}
		if p.key.Kind != yaml.ScalarNode {
			d.fail(path, p.key, "keys must be strings, got a %s", kindName(p.key))
			continue
		}
		if explicit[p.key.Value] {
			d.fail(join(path, p.key.Value), p.key, "duplicate key %q", p.key.Value)
			continue
		}
		explicit[p.key.Value] = true
		out = append(out, p)
	}
	seen := explicit
	for _, p := range all {
		if !p.merged || p.key.Kind != yaml.ScalarNode || seen[p.key.Value] {
			continue
		}
		seen[p.key.Value] = true
		out = append(out, p)
	}
	return out
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(path, n, "must be a mapping, got %s", describe(n))
		return
	}
	fields := fieldsOf(v.Type())
	for _, p := range d.entries(n, path) {
		name := p.key.Value
		i, ok := fields.index[name]
		if !ok {
			msg := fmt.Sprintf("unknown key %q", name)
			if s := suggest(name, fields.names); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.fail(join(path, name), p.key, "%s", msg)
			continue
		}
		d.decode(p.val, v.FieldByIndex(i), join(path, name), p.key.Line)
	}
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(path, n, "must be a mapping, got %s", describe(n))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for _, p := range d.entries(n, path) {
		e := reflect.New(v.Type().Elem()).Elem()
		d.decode(p.val, e, join(path, p.key.Value), p.key.Line)
		v.SetMapIndex(reflect.ValueOf(p.key.Value).Convert(v.Type().Key()), e)
	}
}

type structFields struct {
	index map[string][]int // reflect.Value.FieldByIndex path; an inline struct's keys are its parent's
	names []string
}

var fieldCache sync.Map // reflect.Type → *structFields

// fieldsOf maps the yaml tag names of t's exported fields to field index paths. A field
// tagged `yaml:",inline"` contributes its own keys at this level.
func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{index: map[string][]int{}}
	for i := range t.NumField() {
		sf := t.Field(i)
		name, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if !sf.IsExported() || name == "-" {
			continue
		}
		if name == "" && opts == "inline" && sf.Type.Kind() == reflect.Struct {
			inner := fieldsOf(sf.Type)
			for _, n := range inner.names {
				f.index[n] = append([]int{i}, inner.index[n]...)
				f.names = append(f.names, n)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		f.index[name] = []int{i}
		f.names = append(f.names, name)
	}
	sort.Strings(f.names)
	fieldCache.Store(t, f)
	return f
}

// suggest returns the known key closest to name when it looks like a typo.
func suggest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if dd := editDistance(name, k); dd < bestD {
			best, bestD = k, dd
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
