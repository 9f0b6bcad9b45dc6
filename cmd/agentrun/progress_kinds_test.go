package main

import (
	"slices"
	"testing"

	"github.com/agentrun/agentrun/runtime"
)

// Every kind of event the runtime emits has a progress printer or is listed as
// deliberately silent: a new kind cannot go unseen by accident. runtime.EventKinds
// holds every EventKind constant (runtime's TestEventKindsListsEveryConstant).
func TestEveryEventKindIsPrintedOrSilent(t *testing.T) {
	for _, k := range runtime.EventKinds {
		_, printed := printers[k]
		silent := slices.Contains(silentKinds, k)
		switch {
		case printed && silent:
			t.Errorf("event kind %q has a printer and is listed as silent", k)
		case !printed && !silent:
			t.Errorf("event kind %q has no printer in printers (cmd/agentrun/exec.go) and is not in silentKinds", k)
		}
	}
	for k := range printers {
		if !slices.Contains(runtime.EventKinds, k) {
			t.Errorf("printers has %q, which is not in runtime.EventKinds", k)
		}
	}
	for _, k := range silentKinds {
		if !slices.Contains(runtime.EventKinds, k) {
			t.Errorf("silentKinds has %q, which is not in runtime.EventKinds", k)
		}
	}
}
