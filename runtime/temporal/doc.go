// Package temporal runs agents as Temporal workflows: durable runs that survive
// the loss of the process running them.
//
// The run's decisions — the state machine, guards, routing, the judge gate, plan
// mode, sub-agents and spec workflows — run in the workflow, in the very code an
// in-process run uses (runtime.Agent.Run) on a runtime.Host made of the
// workflow's deterministic clock, timers and coroutines. Every call that leaves
// the run — each model call (agent, judge, classifier), tool call, store read and
// commit, and knowledge lookup — is an activity with timeouts and a retry policy,
// run by a worker on the real model, tool or store (runtime.Agent.Rewire wires the
// workflow's copy of the agent to the activities). A worker that dies mid-run
// loses nothing: another replays the history and goes on from the activity in
// flight.
//
// Approvals become signals: a run that pauses waits, as a workflow, for the
// signal that a decision was made (or for the approvals to expire) and resumes
// itself. Payloads above a size travel by reference to the store (Codec).
package temporal
