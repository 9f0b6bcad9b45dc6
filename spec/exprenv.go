package spec

import (
	"fmt"

	"github.com/expr-lang/expr/types"
)

// Var is a variable that expressions and templates may use.
type Var string

const (
	VarUser         Var = "user"         // the run's user: id and declared attributes
	VarConversation Var = "conversation" // the run's conversation: id
	VarIntent       Var = "intent"       // the run's intent
	VarArgs         Var = "args"         // a tool call's arguments, bound ones included
	VarSeen         Var = "seen"         // seen(kind): entities revealed to the user
	VarResult       Var = "result"       // a tool's result, decoded when it is JSON
	VarTool         Var = "tool"         // the tool's name
	VarText         Var = "text"         // the tool's result as text
	VarOK           Var = "ok"           // whether the tool call succeeded
	VarInput        Var = "input"        // the user's message
	VarAnswer       Var = "answer"       // the answer
	VarSteps        Var = "steps"        // a workflow's earlier steps' outputs, by name
	VarItem         Var = "item"         // the element a for_each step works on
	VarIndex        Var = "index"        // its position in the list, from 0
)

// varInSeen is seen's hidden companion, in_seen(id, kind): `id in seen(kind)` and
// `id not in seen(kind)` compile to calls of it (seenMembership), so a check asks for
// one entity instead of loading them all. An expression cannot name it.
const varInSeen Var = "in_seen"

// Env is the set of variables one place's expressions see. The same Env types the
// expressions when the spec loads (Types) and builds their values when a run
// evaluates them (Values), so the two cannot disagree.
type Env []Var

// The environments of each place in a spec.
var (
	EnvInstructions = Env{VarUser, VarConversation, VarIntent}
	EnvToolTemplate = Env{VarArgs, VarUser, VarConversation} // http and command templates
	EnvAccept       = Env{VarArgs, VarUser, VarConversation, VarSeen}
	EnvCollect      = Env{VarArgs, VarUser, VarConversation, VarResult}
	// EnvApproval is a tool's approval.when and approval.message.
	EnvApproval   = Env{VarArgs, VarUser, VarConversation, VarIntent, VarSeen}
	EnvMCPHeaders = Env{VarUser, VarConversation}
	EnvFactRule   = Env{VarArgs, VarResult, VarUser, VarConversation}
	// EnvWorkflow is a workflow step's when, for_each, args, prompt and task, a
	// loop's until and the workflow's answer; EnvWorkflowItem a for_each step's
	// args, prompt and task.
	EnvWorkflow     = Env{VarInput, VarUser, VarConversation, VarSteps}
	EnvWorkflowItem = Env{VarInput, VarUser, VarConversation, VarSteps, VarItem, VarIndex}
)

// FilterEnv is the environment of a filter's when at a stage.
func FilterEnv(stage FilterStage) Env {
	switch stage {
	case StageInput:
		return Env{VarInput, VarUser, VarConversation, VarIntent}
	case StageToolResult:
		return Env{VarTool, VarArgs, VarResult, VarText, VarOK, VarUser, VarConversation, VarIntent}
	case StageAnswer:
		return Env{VarAnswer, VarInput, VarUser, VarConversation, VarIntent}
	}
	return nil
}

// VarTypes are the types that vary from place to place: args from a tool's
// parameters, user from the declared attributes.
type VarTypes struct {
	Args types.Type
	User types.Map
	// Steps are the workflow steps an expression may read; Item is a for_each
	// list's element type (nil: any).
	Steps types.Map
	Item  types.Type
}

var openMap = types.TypeOf(map[string]any{})

// The types of seen and in_seen. Both may fail — the entities live in the store —
// and an expression that fails refuses what it guards.
var (
	seenType   = types.TypeOf(func(string) ([]string, error) { return nil, nil })
	inSeenType = types.TypeOf(func(any, string) (bool, error) { return false, nil })
)

// withInSeen is env with in_seen beside seen, for compiling the rewritten membership
// tests; it is env itself when env has no seen.
func withInSeen(env types.Map) types.Map {
	if _, ok := env[string(VarSeen)]; !ok {
		return env
	}
	m := make(types.Map, len(env)+1)
	for k, v := range env {
		m[k] = v
	}
	m[string(varInSeen)] = inSeenType
	return m
}

// Types is the typed environment the expressions of this place compile against.
func (e Env) Types(t VarTypes) types.Map {
	m := make(types.Map, len(e))
	for _, v := range e {
		var typ types.Type
		switch v {
		case VarUser:
			typ = t.User
		case VarConversation:
			typ = conversationType
		case VarArgs:
			typ = t.Args
			if typ == nil {
				typ = openMap
			}
		case VarSeen:
			typ = seenType
		case VarResult:
			typ = types.Any
		case VarOK:
			typ = types.Bool
		case VarIntent, VarTool, VarText, VarInput, VarAnswer:
			typ = types.String
		case VarSteps:
			typ = t.Steps
			if t.Steps == nil {
				typ = types.Map{}
			}
		case VarItem:
			typ = t.Item
			if typ == nil {
				typ = types.Any
			}
		case VarIndex:
			typ = types.Int
		default:
			panic(fmt.Sprintf("spec: variable %q has no type", v))
		}
		m[string(v)] = typ
	}
	return m
}

// Values are what the variables hold in one run; an Env picks the ones its place
// sees.
type Values struct {
	Args         map[string]any
	User         map[string]any // UserValue
	Conversation map[string]any // ConversationValue
	Intent       string
	Seen         func(kind string) ([]string, error)     // every entity of the kind
	InSeen       func(id any, kind string) (bool, error) // one entity: a non-string id never is
	Result       any
	Tool         string
	Text         string
	OK           bool
	Input        string
	Answer       string
	Steps        map[string]any // StepOutput values by step name
	Item         any
	Index        int
}

// Values is the environment an expression of this place runs in.
func (e Env) Values(v *Values) map[string]any {
	m := make(map[string]any, len(e)+1)
	for _, name := range e {
		var val any
		switch name {
		case VarUser:
			val = v.User
		case VarConversation:
			val = v.Conversation
		case VarIntent:
			val = v.Intent
		case VarArgs:
			val = v.Args
		case VarSeen:
			val = v.Seen
			m[string(varInSeen)] = v.InSeen
		case VarResult:
			val = v.Result
		case VarTool:
			val = v.Tool
		case VarText:
			val = v.Text
		case VarOK:
			val = v.OK
		case VarInput:
			val = v.Input
		case VarAnswer:
			val = v.Answer
		case VarSteps:
			val = v.Steps
		case VarItem:
			val = v.Item
		case VarIndex:
			val = v.Index
		default:
			panic(fmt.Sprintf("spec: variable %q has no value", name))
		}
		m[string(name)] = val
	}
	return m
}

// UserValue is `user` at run time: the id and every declared attribute, so a
// missing attribute reads as "" rather than failing the expression.
func UserValue(declared []string, id string, attrs map[string]string) map[string]any {
	m := make(map[string]any, len(declared)+1)
	m["id"] = id
	for _, a := range declared {
		m[a] = attrs[a]
	}
	return m
}

// ConversationValue is `conversation` at run time.
func ConversationValue(id string) map[string]any { return map[string]any{"id": id} }
