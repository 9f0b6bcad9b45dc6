// Package unprivileged lets a test running as root (CI runs the tests as root) see
// file permissions as any other user does, so that an unreadable directory is
// unreadable to the code under test too.
//
// It imports nothing of agentrun.
package unprivileged
