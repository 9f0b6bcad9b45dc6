package memory_test

import (
	"testing"

	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/store/memory"
	"github.com/agentrun/agentrun/runtime/store/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) runtime.Store { return memory.New() })
}
