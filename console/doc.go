// Package console is agentrun's web console: static pages, embedded in the
// binary, that chat with an agent, show a run's timeline, the agent's graph,
// approvals waiting, a knowledge probe and a user's memory and conversations.
//
// The console is a client of the serve API and nothing else: every request it
// makes goes to a documented endpoint (docs/serve.md), with the credentials the
// user gives it (`agentrun serve --ui`) or with none (`agentrun dev`, where the
// server is on a loopback address and lets the page choose the user). The pages
// themselves hold no data, so they are served without authentication; what
// they show is fetched with the user's token.
package console
