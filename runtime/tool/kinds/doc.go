// Package kinds implements the declarative tool kinds: command (a program run
// without a shell, arguments as JSON on stdin) and http (a templated request). Each
// decodes its own typed configuration from the spec and implements runtime.Tool.
//
// kinds imports runtime and spec; it must not import cmd.
package kinds
