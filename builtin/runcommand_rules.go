package builtin

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentrun/agentrun/spec"
)

// allowedProgram is one entry of run_command's allow list: a plain name, or a mapping
// that opts a code runner in and narrows the arguments the model may pass. The model
// controls every argument, so the rules are checked on each call, before the program
// starts.
type allowedProgram struct {
	// Program is the name as listed (found on PATH) or a path; the model names it
	// the same way.
	Program string
	// AllowCodeExecution lists a program that runs code or programs its arguments
	// give (an interpreter, awk, sed, find, git, …), knowingly.
	AllowCodeExecution bool
	// Subcommands, when set, are what the arguments must start with: each entry is
	// one or more words ("status", "stash list").
	Subcommands []string
	// AllowOptions, when set, are the only options the arguments may hold.
	AllowOptions []string
	// DenyOptions are options the arguments may not hold, in any spelling.
	DenyOptions []string
}

// allowEntryKeys are the keys of an allow entry's mapping form, in the order the docs
// give them.
var allowEntryKeys = []string{"program", "allow_code_execution", "subcommands", "allow_options", "deny_options"}

// decodeAllow reads with.allow, whose entries are names or mappings; decodeWith's
// field kinds cover neither mixed lists nor booleans, so the entries are read here,
// with every problem reported at once like decodeWith does.
func decodeAllow(raw any) ([]allowedProgram, []string) {
	var list []any
	switch l := raw.(type) {
	case nil:
		return nil, nil
	case []any:
		list = l
	case []string:
		for _, s := range l {
			list = append(list, s)
		}
	default:
		return nil, []string{fmt.Sprintf("with.allow must be a list of programs (names, or mappings with program:), not %s", describeValue(raw))}
	}
	var programs []allowedProgram
	var problems []string
	for i, item := range list {
		at := fmt.Sprintf("with.allow[%d]", i)
		var p allowedProgram
		switch v := item.(type) {
		case string:
			p.Program = v
		case map[string]any:
			var bad []string
			p, bad = decodeAllowEntry(at, v)
			if len(bad) > 0 {
				problems = append(problems, bad...)
				continue
			}
		default:
			problems = append(problems, fmt.Sprintf("%s must be a program name or a mapping with program:, not %s", at, describeValue(item)))
			continue
		}
		if bad := p.problems(at); len(bad) > 0 {
			problems = append(problems, bad...)
			continue
		}
		if j := slices.IndexFunc(programs, func(q allowedProgram) bool { return q.Program == p.Program }); j >= 0 {
			problems = append(problems, fmt.Sprintf("%s: %s is listed twice; put its rules in one entry", at, p.Program))
			continue
		}
		programs = append(programs, p)
	}
	return programs, problems
}

func decodeAllowEntry(at string, m map[string]any) (allowedProgram, []string) {
	var p allowedProgram
	var problems []string
	strs := func(key string, dst *[]string) {
		if l, ok := toStrings(m[key]); ok {
			*dst = l
		} else {
			problems = append(problems, fmt.Sprintf("%s.%s must be a list of strings, not %s", at, key, describeValue(m[key])))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(m)) {
		if m[key] == nil {
			continue
		}
		switch key {
		case "program":
			s, ok := m[key].(string)
			if !ok {
				problems = append(problems, fmt.Sprintf("%s.program must be a string, not %s", at, describeValue(m[key])))
			}
			p.Program = s
		case "allow_code_execution":
			b, ok := m[key].(bool)
			if !ok {
				problems = append(problems, fmt.Sprintf("%s.allow_code_execution must be true or false, not %s", at, describeValue(m[key])))
			}
			p.AllowCodeExecution = b
		case "subcommands":
			strs(key, &p.Subcommands)
		case "allow_options":
			strs(key, &p.AllowOptions)
		case "deny_options":
			strs(key, &p.DenyOptions)
		default:
			msg := fmt.Sprintf("%s: unknown key %q", at, key)
			if s := spec.Closest(key, allowEntryKeys); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			problems = append(problems, msg+"; an entry takes "+strings.Join(allowEntryKeys, ", "))
		}
	}
	if m["program"] == nil {
		problems = append(problems, fmt.Sprintf("%s needs program:, the program's name, like {program: git, subcommands: [status]}", at))
	}
	return p, problems
}

// problems checks one entry: the program is a name that may be listed, and its rules
// are well-formed, so that a rule never silently matches nothing.
func (p allowedProgram) problems(at string) []string {
	var problems []string
	switch {
	case strings.TrimSpace(p.Program) == "":
		return []string{at + ": the program name is empty"}
	case strings.ContainsAny(p.Program, " \t\n"):
		name, _, _ := strings.Cut(strings.TrimSpace(p.Program), " ")
		return []string{fmt.Sprintf("%s: %q is not a program name: the model passes the arguments; "+
			"to allow only some subcommands write {program: %s, subcommands: [...]}", at, p.Program, name)}
	}
	if why := p.refusal(""); why != "" {
		problems = append(problems, at+": "+why)
	}
	for _, s := range p.Subcommands {
		if len(strings.Fields(s)) == 0 || strings.HasPrefix(s, "-") {
			problems = append(problems, fmt.Sprintf("%s.subcommands: %q is not a subcommand; a subcommand is one or more words, like status or \"stash list\"", at, s))
		}
	}
	for _, list := range []struct {
		key  string
		opts []string
	}{{"allow_options", p.AllowOptions}, {"deny_options", p.DenyOptions}} {
		for _, o := range list.opts {
			if !strings.HasPrefix(o, "-") || o == "-" || o == "--" || strings.ContainsAny(o, "= \t") {
				problems = append(problems, fmt.Sprintf("%s.%s: %q is not an option; write an option as -x, --name or -name, without a value", at, list.key, o))
			}
		}
	}
	return problems
}

// refusal says why the program may not run as listed, or "". path is where it was
// found on PATH; "" looks it up (at validate time, a program that is not installed
// is judged by its name alone).
func (p allowedProgram) refusal(path string) string {
	if risk, risky := riskOf(p.Program); risky {
		return p.refusalFor(p.Program, risk)
	}
	if target, risk, risky := resolvedRisk(p.Program, path); risky {
		return p.refusalFor(fmt.Sprintf("%s (a link to %s)", p.Program, target), risk)
	}
	return ""
}

func (p allowedProgram) refusalFor(what string, risk programRisk) string {
	if risk.anyCommand {
		msg := what + " would run any command it is given; list the programs themselves"
		if p.AllowCodeExecution {
			msg += " (allow_code_execution does not apply to shells and launchers)"
		}
		return msg
	}
	if p.AllowCodeExecution {
		return ""
	}
	return fmt.Sprintf("%s %s. The model chooses the arguments, so it could run any code: list it only on purpose, "+
		"as {program: %s, allow_code_execution: true}, and narrow its arguments with subcommands, allow_options "+
		"or deny_options", what, risk.why, p.Program)
}

// checkArgs returns why the model's arguments break the entry's rules, naming the
// rule, or nil. Every argument is checked, also after "--": the model chooses where
// to put it, and not every program honours it (find's expression does not).
func (p allowedProgram) checkArgs(args []string) error {
	for i, a := range args {
		if !isOption(a) {
			continue
		}
		for _, d := range p.DenyOptions {
			if deniedSpelling(a, d) {
				return fmt.Errorf("%s: argument %d %q is refused by the rule deny_options: %s is denied in any spelling, "+
					"also after --", p.Program, i+1, a, d)
			}
		}
	}
	if len(p.Subcommands) > 0 && !slices.ContainsFunc(p.Subcommands, func(s string) bool {
		words := strings.Fields(s)
		return len(args) >= len(words) && slices.Equal(args[:len(words)], words)
	}) {
		first := "nothing"
		if len(args) > 0 {
			first = fmt.Sprintf("%q", args[0])
		}
		return fmt.Errorf("%s: refused by the rule subcommands: the arguments must start with one of %s, not %s "+
			"(options go after the subcommand)", p.Program, strings.Join(p.Subcommands, ", "), first)
	}
	if len(p.AllowOptions) > 0 {
		for i, a := range args {
			if isOption(a) && !allowedSpelling(a, p.AllowOptions) {
				return fmt.Errorf("%s: argument %d %q is refused by the rule allow_options: the options allowed are %s "+
					"(a short option's value goes in the next argument)", p.Program, i+1, a, strings.Join(p.AllowOptions, ", "))
			}
		}
	}
	return nil
}

// isOption reports whether a program would read the argument as an option: it starts
// with "-", except "-" (standard input) and "--" (which ends the options, for the
// programs that honour it).
func isOption(a string) bool {
	return len(a) > 1 && a[0] == '-' && a != "--"
}

// deniedSpelling reports whether arg could be the denied option in any spelling a
// program might accept:
//   - --name: --name, --name=v, and abbreviations (--na), which getopt_long and git
//     accept; also -name and its abbreviations (-na), which getopt_long_only and Go's
//     flag package accept.
//   - -x: the letter anywhere in a one-dash argument: -x, -xVALUE, -ax (a cluster);
//     also --x and --x=v, which Go's flag package and getopt_long_only read as -x.
//   - -word (find's -exec, Go's -flag): -word, -word=v, --word, --word=v.
func deniedSpelling(arg, rule string) bool {
	head, _, _ := strings.Cut(arg, "=")
	twoDash := strings.HasPrefix(arg, "--")
	switch {
	case strings.HasPrefix(rule, "--"):
		name := rule[2:]
		if twoDash {
			return len(head) > 2 && strings.HasPrefix(name, head[2:])
		}
		word := head[1:]
		return word == name || len(word) >= 2 && strings.HasPrefix(name, word)
	case len(rule) == 2:
		if twoDash {
			return head == "-"+rule
		}
		return strings.ContainsRune(arg[1:], rune(rule[1]))
	default:
		return head == rule || head == "-"+rule
	}
}

// allowedSpelling reports whether arg is one of the allowed options: exactly, a long
// option with =value, or a cluster of allowed one-letter options (-la for -l and
// -a). A one-letter option with =value is refused: getopt reads "=…" as more letters.
func allowedSpelling(arg string, rules []string) bool {
	head, _, hasValue := strings.Cut(arg, "=")
	if slices.Contains(rules, head) && (!hasValue || len(head) > 2) {
		return true
	}
	if strings.HasPrefix(arg, "--") {
		return false
	}
	for _, c := range arg[1:] {
		if !slices.Contains(rules, "-"+string(c)) {
			return false
		}
	}
	return true
}

// describeRules tells the model what it may pass, so it does not learn the rules
// by being refused.
func (p allowedProgram) describeRules() string {
	var parts []string
	if len(p.Subcommands) > 0 {
		parts = append(parts, "arguments start with one of: "+strings.Join(p.Subcommands, ", "))
	}
	if len(p.AllowOptions) > 0 {
		parts = append(parts, "only the options "+strings.Join(p.AllowOptions, " "))
	}
	if len(p.DenyOptions) > 0 {
		parts = append(parts, "never the options "+strings.Join(p.DenyOptions, " "))
	}
	if len(parts) == 0 {
		return p.Program
	}
	return p.Program + " (" + strings.Join(parts, "; ") + ")"
}
