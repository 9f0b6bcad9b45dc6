package runtime

// PlanStatus is where a plan step stands.
type PlanStatus string

const (
	PlanPending    PlanStatus = "pending"
	PlanInProgress PlanStatus = "in_progress"
	PlanDone       PlanStatus = "done"
	PlanDropped    PlanStatus = "dropped" // given up, with a reason
)

// PlanStatuses lists every plan status.
var PlanStatuses = []PlanStatus{PlanPending, PlanInProgress, PlanDone, PlanDropped}

// Open reports whether the step still needs work: the plan gate refuses an answer
// while any step is open.
func (s PlanStatus) Open() bool { return s == PlanPending || s == PlanInProgress }

// PlanStep is one step of the model's plan.
type PlanStep struct {
	Step   string     `json:"step"`
	Status PlanStatus `json:"status"`
	Reason string     `json:"reason,omitempty"` // why a step was dropped
}
