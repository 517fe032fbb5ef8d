package disclose

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// The one-pass redactor (redactTo) must write exactly the bytes of the decoder-based one it
// replaced (kept here as the reference): the list's argumentsSha256 is compared with the
// detail view's arguments, and an approver must see the same text either way.

func refRedact(args json.RawMessage, fields []string) json.RawMessage {
	root := buildRedactTree(fields)
	if len(root.children) == 0 {
		return args
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, args); err != nil {
		return redactedJSON
	}
	out, err := refValue(compact.Bytes(), root)
	if err != nil {
		return redactedJSON
	}
	return out
}

func refValue(raw json.RawMessage, n *redactNode) (json.RawMessage, error) {
	if len(raw) == 0 {
		return raw, nil
	}
	switch raw[0] {
	case '{':
		return refObject(raw, n)
	case '[':
		return refArray(raw, n)
	}
	return raw, nil
}

func refObject(raw json.RawMessage, n *redactNode) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	var out bytes.Buffer
	out.WriteByte('{')
	first := true
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		if c := n.children[jsonrpc.FoldName(key)]; c != nil {
			if c.leaf {
				val = redactedJSON
			} else if val, err = refValue(val, c); err != nil {
				return nil, err
			}
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		if err := writeKey(&out, key); err != nil {
			return nil, err
		}
		out.WriteByte(':')
		out.Write(val)
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

func refArray(raw json.RawMessage, n *redactNode) (json.RawMessage, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.WriteByte('[')
	for i, e := range elems {
		r, err := refValue(e, n)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out.WriteByte(',')
		}
		out.Write(r)
	}
	out.WriteByte(']')
	return out.Bytes(), nil
}

var redactSame = []struct {
	args   string
	fields []string
}{
	{`{"user":"bob","password":"p4ss"}`, []string{"password"}},
	{` { "a" : [ 1 , { "b" : "x y" , "c" : [ {"b":2} ] } ] , "b" : { } } `, []string{"a.b", "b"}},
	{`{"PASSWORD":1,"paſſword":2,"password":{"x":[1,2]},"pass\u0077ord":"w"}`, []string{"password"}},
	{`{"k\u003c>":"<&>","\ud83d\ude00":"\u2028","a\"b":"c\\","\u00e9t\u00e9":{"x":1}}`, []string{"x"}},
	{"{\"\xff\xfe\":1,\"ok\":\"\xff\"}", []string{"a"}},
	{`[[[{"s":1}]],{"s":[{"s":2}]},"s",null,true,-1.5e+10]`, []string{"s.s"}},
	{`"just a string"`, []string{"a"}},
	{`12345`, []string{"a"}},
	{`{"a":{"b":{"c":{"d":"deep"}}},"e":[]}`, []string{"a.b.c.d", "e.f"}},
	{`{"a":1}{"b":2}`, []string{"a"}},
	{`{"a":`, []string{"a"}},
	{"{\"a\":\t\n\r 1 \n}", []string{"b"}},
	{`{"big":"` + strings.Repeat("é€x", 3000) + `","password":"p"}`, []string{"password"}},
}

func TestRedactSameAsReference(t *testing.T) {
	for _, tc := range redactSame {
		got, want := Redact(json.RawMessage(tc.args), tc.fields), refRedact(json.RawMessage(tc.args), tc.fields)
		if !bytes.Equal(got, want) {
			t.Errorf("Redact(%.60q, %v)\n got %.200s\nwant %.200s", tc.args, tc.fields, got, want)
		}
	}
}

func FuzzRedactSameAsReference(f *testing.F) {
	for _, tc := range redactSame {
		f.Add(tc.args, strings.Join(tc.fields, ","))
	}
	f.Fuzz(func(t *testing.T, args, fields string) {
		fs := strings.Split(fields, ",")
		got, want := Redact(json.RawMessage(args), fs), refRedact(json.RawMessage(args), fs)
		if !bytes.Equal(got, want) {
			t.Errorf("Redact(%q, %q) = %q, reference %q", args, fs, got, want)
		}
	})
}
