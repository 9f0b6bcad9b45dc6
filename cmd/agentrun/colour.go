package main

import (
	"regexp"
	"strings"
)

// ANSI colours of exec's progress lines: restrained, only the marks and the
// timings, so the text stays the terminal's own colour.
const (
	ansiGreen  = "\x1b[32m"
	ansiRed    = "\x1b[31m"
	ansiYellow = "\x1b[33m"
	ansiDim    = "\x1b[2m"
	ansiReset  = "\x1b[0m"
)

// useColour decides whether progress lines get colour: only on a terminal, and
// never when NO_COLOR holds anything (https://no-color.org).
func useColour(terminal bool, noColor string) bool {
	return terminal && noColor == ""
}

// progressMark is a line's leading mark after its "[turn]" and indentation.
var progressMark = regexp.MustCompile(`^((?:\[\d+\])?\s*)(✓|✗|!) `)

// durationField is a " · "-separated field that is a whole duration (round's).
var durationField = regexp.MustCompile(`^(?:\d+h)?(?:\d+m)?\d+(?:\.\d+)?(?:ns|µs|ms|s)$`)

var markColours = map[string]string{"✓": ansiGreen, "✗": ansiRed, "!": ansiYellow}

// colourLine colours one progress line: its mark (✓ green, ✗ red, ! yellow) and
// its timings dim. The rest, which may quote a tool's output, is left as it is.
func colourLine(line string) string {
	body, nl := strings.CutSuffix(line, "\n")
	if m := progressMark.FindStringSubmatchIndex(body); m != nil {
		mark := body[m[4]:m[5]]
		body = body[:m[4]] + markColours[mark] + mark + ansiReset + body[m[5]:]
	}
	fields := strings.Split(body, " · ")
	for i, f := range fields {
		if i > 0 && durationField.MatchString(f) {
			fields[i] = ansiDim + f + ansiReset
		}
	}
	body = strings.Join(fields, " · ")
	if nl {
		body += "\n"
	}
	return body
}
