package scenario

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// Counts returns how many cases passed and failed; a file that could not run counts
// as one failure.
func Counts(files []File) (passed, failed int) {
	for _, f := range files {
		if f.Diagnostics.HasErrors() && len(f.Cases) == 0 {
			failed++
		}
		for _, c := range f.Cases {
			if c.Passed {
				passed++
			} else {
				failed++
			}
		}
	}
	return passed, failed
}

// WriteText prints each case with PASS or FAIL; a failure shows what differed and
// what the agent actually did. The last line is "N passed, N failed".
func WriteText(w io.Writer, files []File) {
	for _, f := range files {
		for _, d := range f.Diagnostics {
			fmt.Fprintf(w, "%s\n", d)
			if d.Hint != "" {
				fmt.Fprintf(w, "    hint: %s\n", d.Hint)
			}
		}
		for _, c := range f.Cases {
			status := "PASS"
			if !c.Passed {
				status = "FAIL"
			}
			fmt.Fprintf(w, "%s %s › %s (%s)\n", status, f.Path, c.Case, c.Duration.Round(time.Millisecond))
			if c.Passed {
				continue
			}
			for _, msg := range c.Failures {
				fmt.Fprintf(w, "    ✗ %s\n", strings.ReplaceAll(msg, "\n", "\n      "))
			}
			fmt.Fprintln(w, "    what the agent did:")
			for _, line := range c.Trajectory {
				fmt.Fprintf(w, "      %s\n", line)
			}
		}
	}
	passed, failed := Counts(files)
	fmt.Fprintf(w, "%d passed, %d failed\n", passed, failed)
}

// WriteJSON prints the results for machines.
func WriteJSON(w io.Writer, files []File) error {
	passed, failed := Counts(files)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Passed int    `json:"passed"`
		Failed int    `json:"failed"`
		Files  []File `json:"files"`
	}{passed, failed, files})
}

// JUnit XML, the report format CI systems read.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Error     *junitFailure `xml:"error,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// WriteJUnit prints one testsuite per test file and one testcase per case; a file
// that could not run is a testcase with an error.
func WriteJUnit(w io.Writer, files []File) error {
	out := junitSuites{Name: "agentrun test"}
	var total time.Duration
	for _, f := range files {
		s := junitSuite{Name: f.Path}
		var suiteTime time.Duration
		if f.Diagnostics.HasErrors() && len(f.Cases) == 0 {
			s.Tests, s.Errors = 1, 1
			s.Cases = append(s.Cases, junitCase{Name: "load", ClassName: f.Path, Time: "0.000",
				Error: &junitFailure{Message: "the test file or its agent does not load", Type: "load", Text: f.Diagnostics.Error()}})
		}
		for _, c := range f.Cases {
			suiteTime += c.Duration
			jc := junitCase{Name: c.Case, ClassName: f.Path, Time: seconds(c.Duration)}
			if !c.Passed {
				s.Failures++
				jc.Failure = &junitFailure{Message: firstLine(c.Failures), Type: "expectation",
					Text: strings.Join(c.Failures, "\n") + "\n\nwhat the agent did:\n" + strings.Join(c.Trajectory, "\n")}
			}
			s.Tests++
			s.Cases = append(s.Cases, jc)
		}
		s.Time = seconds(suiteTime)
		total += suiteTime
		out.Tests += s.Tests
		out.Failures += s.Failures
		out.Errors += s.Errors
		out.Suites = append(out.Suites, s)
	}
	out.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func firstLine(msgs []string) string {
	if len(msgs) == 0 {
		return ""
	}
	line, _, _ := strings.Cut(msgs[0], "\n")
	return line
}
