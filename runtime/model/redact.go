package model

import "strings"

// Redact is s with every occurrence of secret (a provider's API key) replaced
// by "[redacted]".
func Redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[redacted]")
}

// Redacted is an error reading text cleaned of secret, wrapping cause. A
// provider passes a cause only when it holds no secret: an SDK's API error keeps
// the request, whose Authorization header carries the key.
func Redacted(text, secret string, cause error) error {
	return &redactedError{msg: Redact(text, secret), cause: cause}
}

type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.cause }
