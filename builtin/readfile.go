package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/agentrun/agentrun/runtime/tool"
	"github.com/agentrun/agentrun/spec"
)

// binarySniffLen is how much of a file is checked for NUL bytes up front, as git does.
const binarySniffLen = 8000

// readFile returns a text file of its root with numbered lines.
type readFile struct{ fileTool }

func newReadFile(t *spec.Tool, dir string) (tool.Tool, error) {
	ft, err := newFileTool(t, dir, "read_file", fileConfig{Root: ".", MaxBytes: 64 << 10}, false)
	if err != nil {
		return nil, err
	}
	return &readFile{ft}, nil
}

func (r *readFile) Describe() tool.Info {
	return tool.Info{
		Description: fmt.Sprintf("Read a text file, with numbered lines. Paths are relative to the "+
			"tool's root directory. At most %s are returned per call; use offset and limit to read "+
			"a long file in parts.", byteCount(int64(r.maxBytes))),
		Parameters: objectSchema(map[string]any{
			"path": pathParameter("file", "README.md"),
			"offset": map[string]any{
				"type":        "integer",
				"minimum":     1,
				"description": "First line to return (1-based). Default 1.",
				"examples":    []any{1},
			},
			"limit": map[string]any{
				"type":        "integer",
				"minimum":     1,
				"description": "Maximum number of lines to return. Default: as many as fit.",
				"examples":    []any{200},
			},
		}, "path"),
	}
}

func (r *readFile) Call(ctx context.Context, in tool.Input) (string, error) {
	p, err := requiredString(in.Args, "path")
	if err != nil {
		return "", err
	}
	offset, err := positiveIntArg(in.Args, "offset", 1)
	if err != nil {
		return "", err
	}
	limit, err := positiveIntArg(in.Args, "limit", 0)
	if err != nil {
		return "", err
	}
	rel, err := localPath(p)
	if err != nil {
		return "", err
	}
	root, err := os.OpenRoot(r.root)
	if err != nil {
		return "", fmt.Errorf("the tool's root is not available: %v", err)
	}
	defer root.Close()

	shown := displayPath(rel)
	// Stat before Open: opening a FIFO or device could block or never end.
	st, err := root.Stat(rel)
	if err != nil {
		return "", pathError(shown, err)
	}
	if st.IsDir() {
		return "", fmt.Errorf("%s is a directory, not a file", shown)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", shown)
	}
	f, err := root.Open(rel)
	if err != nil {
		return "", pathError(shown, err)
	}
	defer f.Close()
	return r.render(ctx, f, shown, offset, limit)
}

// render numbers the lines from offset on, and stops at limit lines or when the next
// line would take the output over maxBytes, saying how to read on.
func (r *readFile) render(ctx context.Context, f io.Reader, shown string, offset, limit int) (string, error) {
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(binarySniffLen); bytes.IndexByte(head, 0) >= 0 {
		return "", fmt.Errorf("%s is a binary file; %s reads text files only", shown, r.name)
	}
	var out strings.Builder
	lineNo, emitted := 0, 0
	more := func() bool { _, err := br.Peek(1); return err == nil }
	for {
		if lineNo%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return "", err
			}
		}
		// Lines before offset are skipped without keeping them.
		keep := r.maxBytes + 1
		if lineNo+1 < offset {
			keep = 0
		}
		line, err := readLine(br, keep)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("%s: %v", shown, err)
		}
		lineNo++
		if lineNo < offset {
			continue
		}
		if bytes.IndexByte(line, 0) >= 0 {
			return "", fmt.Errorf("%s is a binary file (NUL byte on line %d); %s reads text files only", shown, lineNo, r.name)
		}
		entry := fmt.Sprintf("%4d\t%s\n", lineNo, line)
		if out.Len()+len(entry) > r.maxBytes {
			if emitted == 0 {
				// A single line longer than the whole budget: show its start rather than nothing.
				out.WriteString(validPrefix(entry, r.maxBytes))
				fmt.Fprintf(&out, "\n[… line %d is longer than %s and was cut", lineNo, byteCount(int64(r.maxBytes)))
				if more() {
					fmt.Fprintf(&out, "; to read on, call %s with offset=%d", r.name, lineNo+1)
				}
				out.WriteString("]\n")
				return out.String(), nil
			}
			fmt.Fprintf(&out, "[… cut at %s: lines %d-%d shown, the file goes on; to read on, call %s with offset=%d]\n",
				byteCount(int64(r.maxBytes)), offset, lineNo-1, r.name, lineNo)
			return out.String(), nil
		}
		out.WriteString(entry)
		emitted++
		if limit > 0 && emitted == limit {
			if more() {
				fmt.Fprintf(&out, "[… lines %d-%d shown, the file goes on; to read on, call %s with offset=%d]\n",
					offset, lineNo, r.name, lineNo+1)
			}
			return out.String(), nil
		}
	}
	switch {
	case lineNo == 0:
		return "(empty file)", nil
	case emitted == 0:
		return "", fmt.Errorf("offset %d is past the end: %s has %d lines", offset, shown, lineNo)
	}
	return out.String(), nil
}

// readLine reads one line without its line ending, keeping at most keep bytes of it
// so that a huge single-line file cannot exhaust memory. It returns io.EOF only when
// no line is left.
func readLine(br *bufio.Reader, keep int) ([]byte, error) {
	var line []byte
	read := false
	for {
		chunk, isPrefix, err := br.ReadLine()
		if err != nil {
			if errors.Is(err, io.EOF) && read {
				return line, nil
			}
			return nil, err
		}
		read = true
		if room := keep - len(line); room > 0 {
			line = append(line, chunk[:min(len(chunk), room)]...)
		}
		if !isPrefix {
			return bytes.TrimSuffix(line, []byte("\r")), nil
		}
	}
}

// validPrefix cuts s to at most n bytes without splitting a UTF-8 sequence.
func validPrefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
