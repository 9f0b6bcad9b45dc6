package runtime

import (
	"errors"
	"fmt"
)

// EngineTemporal names the Temporal engine in a Placement.
const EngineTemporal = "temporal"

// Placement is where a run executes, as its paused record keeps it: only an
// execution on the same engine may resume it, since a durable engine's run
// waits on as a workflow that a resumption elsewhere would leave behind.
type Placement struct {
	// Engine is "" for a process on the store (exec, serve, resume), else the
	// durable engine's name (EngineTemporal).
	Engine string `json:"engine,omitempty"`
	// Address, Namespace and TaskQueue say how to reach the run on its engine:
	// the address its worker dialed, its namespace and task queue.
	Address   string `json:"address,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	TaskQueue string `json:"task_queue,omitempty"`
}

// Placer is a Host that runs runs on a durable engine rather than in this
// process: a run it pauses records its Placement.
type Placer interface {
	Host
	Placement() Placement
}

// placementOf is where a run on h executes.
func placementOf(h Host) Placement {
	if p, ok := h.(Placer); ok {
		return p.Placement()
	}
	return Placement{}
}

// ErrOtherEngine is a resumption of a paused run on another engine than the
// one the run waits on.
var ErrOtherEngine = errors.New("the run is paused on another engine")

// String names the placement for people: "the local engine" or "Temporal
// (namespace support, task queue desk)".
func (p Placement) String() string {
	if p.Engine == "" {
		return "the local engine"
	}
	s := p.Engine
	if p.Engine == EngineTemporal {
		s = "Temporal"
	}
	switch {
	case p.Namespace != "" && p.TaskQueue != "":
		s += fmt.Sprintf(" (namespace %s, task queue %s)", p.Namespace, p.TaskQueue)
	case p.Namespace != "":
		s += fmt.Sprintf(" (namespace %s)", p.Namespace)
	}
	return s
}

// ResumableFrom reports, as ErrOtherEngine, whether a run paused at p cannot
// be resumed by an execution at here: another engine, or another namespace of
// the same one. The task queue and address may differ: a run is reached by its
// id, and one cluster has many addresses.
func (p Placement) ResumableFrom(here Placement) error {
	if p.Engine == here.Engine && (p.Namespace == "" || here.Namespace == "" || p.Namespace == here.Namespace) {
		return nil
	}
	return fmt.Errorf("%w: it waits on %s, not on %s", ErrOtherEngine, p, here)
}
