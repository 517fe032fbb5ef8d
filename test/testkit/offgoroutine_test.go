package testkit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// failNow are the testing.TB methods that end the calling goroutine (runtime.Goexit).
var failNow = map[string]bool{"Fatal": true, "Fatalf": true, "FailNow": true, "Skip": true, "Skipf": true, "SkipNow": true}

// fatalHelpers are this package's helpers that call t.Fatal on failure; their Try* variants
// return the error instead.
var fatalHelpers = map[string]bool{"AdminRequest": true, "TaskRPC": true, "CallTask": true}

// TestNoFailNowOffTestGoroutine: t.Fatal (and every FailNow) must run on the test's own
// goroutine. Called from a goroutine the test started, or from an HTTP handler, it ends only
// that goroutine: a test waiting for what the goroutine would have sent hangs until the
// package's timeout, and one that already returned panics. The check is syntactic: calls in a
// `go` statement's function or in a function literal taking an http.ResponseWriter, made
// directly on t/tb/b or through the fatal helpers above.
func TestNoFailNowOffTestGoroutine(t *testing.T) {
	fset := token.NewFileSet()
	for _, root := range []string{"../../internal", "../../test"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				var body ast.Node
				switch n := n.(type) {
				case *ast.GoStmt:
					body = n.Call
				case *ast.FuncLit:
					if isHandler(n) {
						body = n.Body
					}
				}
				if body == nil {
					return true
				}
				ast.Inspect(body, func(n ast.Node) bool {
					c, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					sel, ok := c.Fun.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					recv, _ := sel.X.(*ast.Ident)
					if (recv != nil && failNow[sel.Sel.Name] && (recv.Name == "t" || recv.Name == "tb" || recv.Name == "b")) || fatalHelpers[sel.Sel.Name] {
						t.Errorf("%s: %s called off the test's goroutine; use t.Error (or the Try* helper) and return", fset.Position(c.Pos()), sel.Sel.Name)
					}
					return true
				})
				return false
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// isHandler reports whether fn's first parameter is an http.ResponseWriter.
func isHandler(fn *ast.FuncLit) bool {
	ps := fn.Type.Params.List
	if len(ps) == 0 {
		return false
	}
	sel, ok := ps[0].Type.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, _ := sel.X.(*ast.Ident)
	return pkg != nil && pkg.Name == "http" && sel.Sel.Name == "ResponseWriter"
}
