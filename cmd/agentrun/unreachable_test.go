package main

import (
	"net"
	"strings"
	"testing"
)

// A Temporal cluster nobody can reach is a failure (exit 1) for every command
// that dials it: the worker once exited 2, as for a usage error, where exec exited 1.
func TestWorkerAndExecExitOneWhenTemporalIsUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	for _, args := range [][]string{
		{"worker", "--temporal", closed, "--model", "test", codeAssistant},
		{"exec", "--engine", "temporal", "--temporal", closed, codeAssistant, "hello"},
		{"serve", "--engine", "temporal", "--temporal", closed, "--insecure-no-auth", "--addr", "127.0.0.1:0", "--model", "test", codeAssistant},
	} {
		t.Run(args[0], func(t *testing.T) {
			code, _, stderr := runCLI(t, args...)
			if code != 1 || !strings.Contains(stderr, "agentrun: temporal at "+closed+": ") {
				t.Errorf("exit %d, want 1:\n%s", code, stderr)
			}
		})
	}
}
