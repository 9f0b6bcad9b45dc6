// Package openai is the model provider for any OpenAI-compatible chat completions
// server (OpenAI, vLLM, Ollama, llama.cpp, DeepSeek, DashScope, …), built on
// github.com/openai/openai-go/v3. It implements runtime.Model: it turns runtime
// messages and tools into a request, streams when asked, retries transient failures
// and reports the rest as *runtime.ModelError.
//
// It lives outside package runtime so the core has no heavy imports. It imports
// runtime and spec; it must not import cmd, builtin or skills.
package openai
