//go:build unix

package spec

import "syscall"

const openNonblock = syscall.O_NONBLOCK
