// Package offline holds the models that need no network: Test, which calls every
// offered tool once with arguments built from the tools' schemas and then answers with
// what it got (like pydantic-ai's TestModel), and Script, which plays scripted turns
// from a file. They make every feature of an agent runnable and testable offline.
//
// offline imports runtime; it must not import cmd.
package offline
