package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"

	"github.com/agentrun/agentrun/runtime"
)

// declaredEventKinds reads runtime/event.go's EventKind constants, so a kind added
// there is seen here without anyone listing it.
func declaredEventKinds(t *testing.T) []runtime.EventKind {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../../runtime/event.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []runtime.EventKind
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			if typ, ok := vs.Type.(*ast.Ident); !ok || typ.Name != "EventKind" {
				continue
			}
			for _, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("an EventKind constant that is not a string literal: %#v", v)
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				kinds = append(kinds, runtime.EventKind(s))
			}
		}
	}
	return kinds
}

// Every kind of event the runtime emits has a progress printer or is listed as
// deliberately silent: a new kind cannot go unseen by accident.
func TestEveryEventKindIsPrintedOrSilent(t *testing.T) {
	declared := declaredEventKinds(t)
	if len(declared) < 20 {
		t.Fatalf("read %d EventKind constants from runtime/event.go: %v", len(declared), declared)
	}
	for _, k := range declared {
		_, printed := printers[k]
		silent := slices.Contains(silentKinds, k)
		switch {
		case printed && silent:
			t.Errorf("event kind %q has a printer and is listed as silent", k)
		case !printed && !silent:
			t.Errorf("event kind %q has no printer in printers and is not in silentKinds", k)
		}
	}
	for k := range printers {
		if !slices.Contains(declared, k) {
			t.Errorf("printers has %q, which runtime/event.go does not declare", k)
		}
	}
	for _, k := range silentKinds {
		if !slices.Contains(declared, k) {
			t.Errorf("silentKinds has %q, which runtime/event.go does not declare", k)
		}
	}
}
