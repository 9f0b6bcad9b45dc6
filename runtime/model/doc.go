// Package model is what the engine asks of a language model: Model, the Request it
// sends (messages, tools, a JSON schema for the answer) and the Response it gets
// (message, finish reason, usage), the model Error that says whether a failure is a
// misconfiguration, and the token estimates budgets use.
//
// The providers live beneath it: openai (any OpenAI-compatible endpoint) and offline
// (the test and script models, and the recorder). They import this package and spec,
// never the engine.
package model
