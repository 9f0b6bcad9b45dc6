package a2a

import (
	"encoding/json"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
)

// parseCard parses an agent card, taking the scopes of its security
// requirements in the form A2A 1.0's ProtoJSON gives them ({"list": [...]}, as
// the official JS SDK writes them) as well as bare lists: the Go SDK v2.3.1
// reads only bare lists and fails the whole card otherwise
// (a2aproject/a2a-go#430).
func parseCard(body []byte) (*a2a.AgentCard, error) {
	var card map[string]any
	if err := json.Unmarshal(body, &card); err != nil {
		return nil, err
	}
	unwrapScopes(card)
	if skills, ok := card["skills"].([]any); ok {
		for _, s := range skills {
			if skill, ok := s.(map[string]any); ok {
				unwrapScopes(skill)
			}
		}
	}
	fixed, err := json.Marshal(card)
	if err != nil {
		return nil, err
	}
	return agentcard.DefaultCardParser(fixed)
}

// unwrapScopes turns each {"list": [...]} of obj's securityRequirements into
// the list itself.
func unwrapScopes(obj map[string]any) {
	reqs, _ := obj["securityRequirements"].([]any)
	for _, r := range reqs {
		req, _ := r.(map[string]any)
		schemes, _ := req["schemes"].(map[string]any)
		for name, scopes := range schemes {
			if wrapped, ok := scopes.(map[string]any); ok {
				list, _ := wrapped["list"].([]any)
				if list == nil {
					list = []any{}
				}
				schemes[name] = list
			}
		}
	}
}
