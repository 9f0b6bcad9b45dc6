// Package scenario runs an agent's scenario tests (*.test.yaml) offline: each case
// plays a scripted model (and scripted classifier and judge answers) against the
// compiled agent, with tool results mocked where the case says so, and checks what
// the agent did — intent, tool calls, refusals, guards, verdicts, stop reason,
// answer, facts, history, approvals asked for — against the case's expectations. A
// run that pauses for approval gets the case's decisions and resumes, on a clock of
// the case's own that an expire decision moves past the approvals' expiry.
//
// scenario imports runtime, its offline models and stores, and spec; it must not
// import cmd.
package scenario
