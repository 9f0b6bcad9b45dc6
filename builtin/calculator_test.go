package builtin

import (
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestCalculator(t *testing.T) {
	calc := mustBuild(t, "calculator", nil, "")
	tests := []struct {
		name string
		expr string
		want string
	}{
		{"integer arithmetic prints no decimals", "2 * (3 + 4)", "14"},
		{"no float noise", "0.1 + 0.2", "0.3"},
		{"division is not integer division", "7 / 2", "3.5"},
		{"modulo on integers", "17 % 5", "2"},
		{"modulo on fractions", "5.5 % 2", "1.5"},
		{"caret is power", "2 ^ 10", "1024"},
		{"double star is power", "2 ** 0.5", "1.4142135623731"},
		{"power is right-associative", "2 ^ 3 ^ 2", "512"},
		{"precedence", "1 + 2 * 3 - 4 / 2", "5"},
		{"unary minus", "-(3 - 5) * -2", "-4"},
		{"constants", "round(pi * 1000) + round(e * 1000)", "5860"},
		{"functions", "sqrt(16) + abs(-2) + floor(2.7) + ceil(2.1) + pow(2, 3)", "19"},
		{"logarithms", "log(e) + log10(1000) + exp(0)", "5"},
		{"trigonometry in radians", "round(sin(pi / 2) + cos(0) + tan(0))", "2"},
		{"min and max take many arguments", "min(4, 2, 8) + max(1, 9, 3)", "11"},
		{"max of one", "max(5)", "5"},
		{"products beyond int64 do not wrap", "9999999999 * 9999999999", "9.999999998e+19"},
		{"small results keep their digits", "1 / 3", "0.333333333333333"},
		{"negative zero prints as zero", "-0 * 5", "0"},
		{"underscores and hex", "1_000 + 0x10", "1016"},
		{"whitespace and newlines", " 1 +\n 2 ", "3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := call(calc, map[string]any{"expression": tt.expr})
			if err != nil {
				t.Fatalf("%s: %v", tt.expr, err)
			}
			if got != tt.want {
				t.Errorf("%s = %q, want %q", tt.expr, got, tt.want)
			}
		})
	}
}

func TestCalculatorRefuses(t *testing.T) {
	calc := mustBuild(t, "calculator", nil, "")
	tests := []struct {
		name string
		expr string
		want string
	}{
		{"strings", `"abc"`, "text is not allowed"},
		{"string concatenation", `"1" + "2"`, "text is not allowed"},
		{"booleans", "1 + true", "true and false are not allowed"},
		{"comparisons", "1 < 2", `operator "<" is not allowed`},
		{"logic", "1 and 2", `operator "and" is not allowed`},
		{"ranges", "1..100000000", `operator ".." is not allowed`},
		{"the environment", "$env", `unknown name "$env"`},
		{"environment members", `$env["HOME"]`, "fields and methods are not allowed"},
		{"a variable", "x + 1", `unknown name "x"`},
		{"expr builtins are disabled", `len("abc")`, `unknown name "len"`},
		{"time builtins are disabled", "now()", `unknown name "now"`},
		{"unlisted functions", "foo(1)", `unknown name "foo"`},
		{"the operator helpers are not callable", "_div(1, 0)", `unknown name "_div"`},
		{"method calls", "pi.String()", "fields and methods are not allowed"},
		{"a constant called like a function", "pi(2)", "only the listed math functions can be called"},
		{"a function used as a value", "sqrt", "sqrt is a function; call it with parentheses"},
		{"arrays", "[1, 2]", "not allowed"},
		{"maps", "{a: 1}", "not allowed"},
		{"conditionals", "1 ? 2 : 3", "not allowed"},
		{"variables", "let x = 2; x * x", "not allowed"},
		{"nil", "nil", "nil is not allowed"},
		{"closures and predicates", "map([1], # * 2)", "not allowed"},
		{"division by zero", "1 / (2 - 2)", "division by zero"},
		{"zero divided by zero", "0 / 0", "division by zero"},
		{"modulo by zero", "5 % 0", "modulo by zero"},
		{"NaN from a function", "sqrt(-1)", "sqrt(-1) has no finite result"},
		{"infinity from a function", "log(0)", "log(0) has no finite result"},
		{"overflow", "1e308 * 10", "not a finite number"},
		{"power overflow", "10 ^ 400", "10 ^ 400 has no finite result"},
		{"too few arguments", "min()", "not enough arguments to call min"},
		{"too many arguments", "sqrt(1, 2)", "too many arguments to call sqrt"},
		{"syntax errors", "2 * (3 + ", "invalid expression"},
		{"empty", "   ", "the expression is empty"},
		{"too long", strings.Repeat("1+", 3000) + "1", "characters long"},
		{"too many nodes", strings.Repeat("1+", 1500) + "1", "invalid expression"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := call(calc, map[string]any{"expression": tt.expr})
			if err == nil {
				t.Fatalf("%s = %q, want an error containing %q", tt.expr, got, tt.want)
			}
			wantErrContains(t, err, tt.want)
		})
	}
}

func TestCalculatorErrorPointsAtTheColumn(t *testing.T) {
	calc := mustBuild(t, "calculator", nil, "")
	_, err := call(calc, map[string]any{"expression": `1 + "x"`})
	wantErrContains(t, err, "(at column 5)")
}

func TestCalculatorArgumentErrors(t *testing.T) {
	calc := mustBuild(t, "calculator", nil, "")
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"missing", map[string]any{}, "argument expression is required"},
		{"not a string", map[string]any{"expression": 3.0}, "argument expression must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(calc, tt.args)
			wantErrContains(t, err, tt.want)
		})
	}
}

func TestCalculatorConcurrentCalls(t *testing.T) {
	// An Agent runs tool calls in parallel; one calculator serves them all.
	calc := mustBuild(t, "calculator", nil, "")
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			want := strconv.Itoa(i * 3)
			got, err := call(calc, map[string]any{"expression": strconv.Itoa(i) + " * 3"})
			if err != nil || got != want {
				t.Errorf("%d * 3 = %q, %v", i, got, err)
			}
			if _, err := call(calc, map[string]any{"expression": `"x"`}); err == nil {
				t.Error("a refused expression passed under concurrency")
			}
		})
	}
	wg.Wait()
}
