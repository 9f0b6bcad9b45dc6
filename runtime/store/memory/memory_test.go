package memory_test

import (
	"testing"

	"github.com/agentrun/agentrun/runtime/store"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/store/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return memory.New() })
}

// BenchmarkLoadSave is one run's use of the store: see storetest.Bench.
func BenchmarkLoadSave(b *testing.B) {
	storetest.Bench(b, func(*testing.B) store.Store { return memory.New() })
}
