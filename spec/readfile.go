package spec

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// MaxFileSize is the most agentrun reads of a spec, skill.yaml, instructions_file or
// test file: 4 MiB is hundreds of times the largest hand-written spec, and small enough
// that a parsed file stays far below a CI runner's memory.
const MaxFileSize = 4 << 20

// NotRegularError is a path that is a directory, device, named pipe or socket: reading
// one could block forever (a FIFO) or never end (/dev/zero).
type NotRegularError struct {
	Path string
	Mode fs.FileMode
	// Target is where Path leads when it is a symlink, such as /dev/zero.
	Target string
}

func (e *NotRegularError) Error() string { return e.describe(e.Path) }

func (e *NotRegularError) describe(name string) string {
	if e.Target != "" {
		name += " is a symlink to " + e.Target + ","
	} else {
		name += " is"
	}
	return fmt.Sprintf("%s %s, not a regular file; agentrun reads only regular files", name, modeNoun(e.Mode))
}

// TooLargeError is a regular file above the size cap of what reads it.
type TooLargeError struct {
	Path string
	Max  int64
}

func (e *TooLargeError) Error() string { return e.describe(e.Path) }

func (e *TooLargeError) describe(name string) string {
	return fmt.Sprintf("%s is larger than %s, the most agentrun reads", name, formatSize(e.Max))
}

// ReadFile reads a regular file of at most limit bytes, following symlinks; anything
// else is a *NotRegularError, a larger file a *TooLargeError. It looks at the file
// before opening it, so a FIFO or device is never opened, and again at the open
// descriptor, so a file swapped in between is refused too; the read itself stops
// after limit bytes, whatever the size said.
func ReadFile(path string, limit int64) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkRegular(path, info, limit); err != nil {
		return nil, err
	}
	// O_NONBLOCK keeps open from waiting for a writer if a FIFO replaced the file.
	f, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := checkRegular(path, info, limit); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(int(info.Size()) + bytes.MinRead)
	if _, err := b.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, err
	}
	if int64(b.Len()) > limit { // it grew after the stat, or its size said nothing (/proc)
		return nil, &TooLargeError{Path: path, Max: limit}
	}
	return b.Bytes(), nil
}

func checkRegular(path string, info fs.FileInfo, limit int64) error {
	if !info.Mode().IsRegular() {
		e := &NotRegularError{Path: path, Mode: info.Mode()}
		if l, err := os.Lstat(path); err == nil && l.Mode()&fs.ModeSymlink != 0 {
			e.Target, _ = filepath.EvalSymlinks(path)
		}
		return e
	}
	if info.Size() > limit {
		return &TooLargeError{Path: path, Max: limit}
	}
	return nil
}

// modeNoun names a kind of file for a person: "a named pipe (FIFO)".
func modeNoun(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "a special file"
}

func formatSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
