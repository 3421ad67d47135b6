package rulestore

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The store speaks no HTTP: it answers with error classes (errors.go) and
// rulestore/admin alone maps them to statuses. No non-test file of the
// package (nor of its Redis source, rulestore/redissource) builds a
// caddy.APIError or names an HTTP status.
func TestStoreSpeaksNoHTTP(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	sources, err := filepath.Glob("redissource/*.go") // the Redis source is the store's too
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, sources...)
	fset := token.NewFileSet()
	scanned := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		scanned++
		for _, use := range httpAnswers(f) {
			t.Errorf("%s: %s: the store answers with an ErrorClass (Errorf), and rulestore/admin maps it to a status",
				fset.Position(use.Pos()), use.Sel.Name)
		}
	}
	if scanned < 10 {
		t.Fatalf("scanned %d files: not the package's directory?", scanned)
	}
}

// httpAnswers lists f's uses of caddy.APIError and of net/http's status
// constants and error writer, whatever names the imports take.
func httpAnswers(f *ast.File) []*ast.SelectorExpr {
	names := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		local := path[strings.LastIndex(path, "/")+1:]
		if path == "github.com/caddyserver/caddy/v2" {
			local = "caddy"
		}
		if imp.Name != nil {
			local = imp.Name.Name
		}
		names[local] = path
	}
	var out []*ast.SelectorExpr
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		switch names[x.Name] {
		case "net/http":
			if strings.HasPrefix(sel.Sel.Name, "Status") || sel.Sel.Name == "Error" {
				out = append(out, sel)
			}
		case "github.com/caddyserver/caddy/v2":
			if sel.Sel.Name == "APIError" {
				out = append(out, sel)
			}
		}
		return true
	})
	return out
}
