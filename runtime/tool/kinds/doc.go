// Package kinds implements the declarative tool kinds: command (a program run
// without a shell, arguments as JSON on stdin) and http (a templated request). Each
// decodes its own typed configuration from the spec and implements tool.Tool; what
// each renders is declared in spec (spec.ToolKind), not here. The two share one
// package because they share the output limits and the process helpers builtin uses.
//
// kinds imports runtime/tool and spec, never the engine.
package kinds
