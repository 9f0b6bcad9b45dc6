// Package fallback is a model.Model made of other models tried in order: a spec's
// model.fallback chain. The chain moves on to the next model only when one fails
// with a fault another model may not meet — a *model.Error whose Retryable() is
// true (429, 5xx, Anthropic's 529, a timeout, a connection failure) after that
// model's own retries. A refused request (400, 401, 403, 404, 413, a Refused
// error) ends the call: another model would be asked the same wrong thing, and a
// wrong key must be seen, not hidden. A content filter is an answer (its finish
// reason), never a fault, so it never falls back. A streamed call that already
// delivered text does not fall back either: the reader saw half an answer.
//
// Each model of a chain has a circuit breaker, kept in the chain value, so that
// every run of one server (serve builds its models once) shares it: after
// Options.Threshold consecutive retryable failures the model is skipped for
// Options.Cooldown, then one trial call may go to it (half-open); its success
// closes the breaker, its failure opens it again. When every breaker is open
// the first model is tried anyway: a chain never fails without trying.
//
// The Response says which model answered (model.Response.Answered). The package
// imports the model interface package only, never a provider: the assembly
// (models.go) builds each entry by its provider.
package fallback
