//go:build !unix

package spec

// Without unix FIFOs there is nothing for O_NONBLOCK to guard against.
const openNonblock = 0
