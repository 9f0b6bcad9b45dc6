package spec

import (
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
)

// runContextNames are the variables through which an expression reads who is
// asking: the user, the conversation, and what the conversation revealed.
var runContextNames = map[string]RunContext{"user": ReadsUser, "conversation": ReadsConversation, "seen": ReadsSeen, "in_seen": ReadsSeen}

// ReadsRunContext reports whether the compiled expression reads the run context
// (user, conversation, seen): what it yields may differ from one user to another.
func (e *Expr) ReadsRunContext() bool { return e.Reads() != 0 }

// Reads is what of the run context the compiled expression reads.
func (e *Expr) Reads() RunContext {
	if e == nil {
		return 0
	}
	return programReads(e.Program)
}

// ReadsRunContext reports whether any part of the template reads the run context.
func (t *Template) ReadsRunContext() bool { return t.Reads() != 0 }

// Reads is what of the run context the template's parts read.
func (t *Template) Reads() RunContext {
	if t == nil {
		return 0
	}
	var refs RunContext
	for _, p := range t.Parts {
		refs |= programReads(p.Program)
	}
	return refs
}

func programReads(p *vm.Program) RunContext {
	if p == nil {
		return 0
	}
	v := &contextRefs{}
	node := p.Node()
	ast.Walk(&node, v)
	return v.found
}

type contextRefs struct{ found RunContext }

func (v *contextRefs) Visit(n *ast.Node) {
	if id, ok := (*n).(*ast.IdentifierNode); ok {
		v.found |= runContextNames[id.Value]
	}
}
