// Package httpcap bounds the response bodies an HTTP client reads: each model
// provider wraps its transport in Transport, so neither an SDK's reading of a whole
// body nor its stream scanner can grow without bound, whatever the server sends.
package httpcap
