package agentrun_test

import (
	"context"
	"fmt"
	"log"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime"
	"github.com/agentrun/agentrun/runtime/tool"
)

// A Go program builds an agent from its spec and runs it. The offline test model
// calls each tool the agent offers once, then answers with what they returned.
func Example() {
	ctx := context.Background()
	agent, err := agentrun.Open(ctx, "examples/agents/code-assistant.yaml", agentrun.Options{Model: "test", Store: "memory:"})
	if err != nil {
		log.Fatal(err)
	}
	defer agent.Close()

	res, err := agent.Run(ctx, runtime.Request{Input: "What is 2*(3+4)?", User: tool.User{ID: "u-1"}})
	if err != nil {
		log.Fatal(err)
	}
	for _, step := range res.Steps {
		fmt.Println(step.Tool, step.Outcome)
	}
	fmt.Println(res.Stop)
	// Output:
	// calculator ok
	// read_file ok
	// list_dir ok
	// completed
}
