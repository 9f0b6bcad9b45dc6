package main

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/agentrun/agentrun"
	"github.com/agentrun/agentrun/runtime/model/openai"
	"github.com/agentrun/agentrun/spec"
)

// keyVariables are where the OpenAI provider finds its API key: the variable the
// spec names (api_key_env), else LLM_API_KEY then OPENAI_API_KEY.
func keyVariables(m spec.Model) []string {
	if m.APIKeyEnv != "" {
		return []string{m.APIKeyEnv}
	}
	return []string{"LLM_API_KEY", "OPENAI_API_KEY"}
}

// givenKeyVariable is the variable the model's key comes from, "" when none is set.
func givenKeyVariable(m spec.Model) string {
	for _, v := range keyVariables(m) {
		if envSet(v) {
			return v
		}
	}
	return ""
}

func envSet(name string) bool {
	v, ok := os.LookupEnv(name)
	return ok && v != ""
}

// keyHint says which variable to set for the model's key and, when the spec names
// one that is empty while a usual one is set, that the spec does not read the latter.
func keyHint(m spec.Model) string {
	vars := keyVariables(m)
	hint := "set " + strings.Join(vars, " or ")
	if m.APIKeyEnv != "" {
		hint += " (the variable the spec's model.api_key_env names)"
	}
	if len(vars) == 1 && !envSet(vars[0]) {
		for _, other := range []string{"OPENAI_API_KEY", "LLM_API_KEY"} {
			if other != vars[0] && envSet(other) {
				hint += fmt.Sprintf("; %s is set, but this spec reads only %s: export %s=\"$%s\", or set api_key_env: %s",
					other, vars[0], vars[0], other, other)
				break
			}
		}
	}
	return hint
}

// checkModelKey looks for the API key of the model (after --model's override)
// before anything is opened. Without one the OpenAI API refuses every call, so
// that is an error (exit 1); another server (a local one) may need no key, so
// there it is a warning.
func checkModelKey(errOut io.Writer, m spec.Model, override string, quiet bool) error {
	if err := agentrun.OverrideModel(&m, override); err != nil {
		return err
	}
	if m.Provider != "" && m.Provider != spec.ProviderOpenAI {
		return nil
	}
	if givenKeyVariable(m) != "" {
		return nil
	}
	base := cmp.Or(m.BaseURL, os.Getenv("LLM_BASE_URL"), os.Getenv("OPENAI_BASE_URL"), openai.DefaultBaseURL)
	if base == openai.DefaultBaseURL {
		fmt.Fprintf(errOut, "agentrun: no API key for %s: %s\n", base, keyHint(m))
		return exitError{1}
	}
	if !quiet {
		fmt.Fprintf(errOut, "agentrun: warning: no API key for %s (a server that needs one answers 401): %s\n", base, keyHint(m))
	}
	return nil
}

// reportModelConfig tells a run that stopped on a configuration error (the key
// refused, no such model) as the error it is, with the setting to change: exit 1,
// and never the fallback message on stdout as if it were the answer.
func reportModelConfig(errOut io.Writer, m spec.Model, status int, detail string) error {
	var hint string
	switch v := givenKeyVariable(m); {
	case status == http.StatusNotFound:
		hint = "change model.name in the spec (or LLM_MODEL_NAME, or --model openai:NAME), or model.base_url (LLM_BASE_URL) if the server is not the right one"
	case v != "":
		hint = "check the key in " + v + ", and that it is for this server (model.base_url, LLM_BASE_URL)"
	default:
		hint = keyHint(m)
	}
	fmt.Fprintf(errOut, "agentrun: the model is misconfigured: %s\n  to fix it: %s\n", detail, hint)
	return exitError{1}
}
