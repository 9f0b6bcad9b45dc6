package spec

import (
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
)

// runContextNames are the variables through which an expression reads who is
// asking: the user, the conversation, and what the conversation revealed.
var runContextNames = map[string]bool{"user": true, "conversation": true, "seen": true, "in_seen": true}

// ReadsRunContext reports whether the compiled expression reads the run context
// (user, conversation, seen): what it yields may differ from one user to another.
func (e *Expr) ReadsRunContext() bool {
	return e != nil && programReadsRunContext(e.Program)
}

// ReadsRunContext reports whether any part of the template reads the run context.
func (t *Template) ReadsRunContext() bool {
	if t == nil {
		return false
	}
	for _, p := range t.Parts {
		if programReadsRunContext(p.Program) {
			return true
		}
	}
	return false
}

// AnyReadsRunContext reports whether any of the templates reads the run context.
func AnyReadsRunContext(templates map[string]*Template) bool {
	for _, t := range templates {
		if t.ReadsRunContext() {
			return true
		}
	}
	return false
}

func programReadsRunContext(p *vm.Program) bool {
	if p == nil {
		return false
	}
	v := &contextRefs{}
	node := p.Node()
	ast.Walk(&node, v)
	return v.found
}

type contextRefs struct{ found bool }

func (v *contextRefs) Visit(n *ast.Node) {
	if id, ok := (*n).(*ast.IdentifierNode); ok && runContextNames[id.Value] {
		v.found = true
	}
}
