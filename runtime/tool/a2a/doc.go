// Package a2a is the tool of an agents entry that names a remote agent speaking
// the A2A protocol (a2a: in the spec), built on the official Go SDK's client
// (github.com/a2aproject/a2a-go/v2/a2aclient). A call sends the model's task as a
// message, follows the task to its last state — streamed when the agent's card
// says it streams, polled otherwise — and returns the text of its artifacts or of
// its answer; a task that fails, is rejected or canceled, or asks for input is an
// error the model reads. A call that ends first (its timeout, the run's
// max_run_time, a canceled run) cancels the remote task.
//
// The agent is reached only on its URL's host: the card's endpoints elsewhere are
// refused, and the token goes to nothing else. The token comes from the
// environment (the assembly reads it), is held as a tool.Credential, and is in no
// error, event or trace. The run's user is not sent: the remote agent knows only
// the task and the token. Every response is read up to a bound.
//
// Like every tool kind it imports runtime/tool and spec, never the engine.
package a2a
