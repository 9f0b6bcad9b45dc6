// Package proctest lets tests see the processes a test started, through Linux's
// /proc: to prove that no server process outlives what started it.
package proctest

import (
	"fmt"
	"os"
	"strings"
)

// Children lists the pids whose parent is pid.
func Children(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var p int
		if _, err := fmt.Sscan(e.Name(), &p); err != nil {
			continue
		}
		if ppid, _, ok := stat(p); ok && ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// Alive reports whether a process exists and is not a zombie.
func Alive(pid int) bool {
	_, state, ok := stat(pid)
	return ok && state != "Z"
}

// stat reads a process's parent and state; comm may hold spaces, so it reads after
// the last ')'.
func stat(pid int) (ppid int, state string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", false
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(fields) < 2 {
		return 0, "", false
	}
	fmt.Sscan(fields[1], &ppid)
	return ppid, fields[0], true
}
