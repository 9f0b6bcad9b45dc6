package spec

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/types"
)

// The membership rewrite changes how `id in seen(kind)` is answered, never what:
// each expression, compiled as written (answered by scanning the list) and as
// rewritten (in_seen), gives the same result for seen and unseen ids of any type.
func TestSeenMembershipRewrite(t *testing.T) {
	args := types.Map{"number": types.String, "any": types.Any, "list": types.Array(types.Any)}
	env := EnvAccept.Types(VarTypes{Args: args, User: userType([]string{"tenant"})})
	seen := map[string][]string{"orders": {"A1", "A2", "1"}, "cards": {"x"}}
	values := Values{
		User:         UserValue([]string{"tenant"}, "u1", map[string]string{"tenant": "orders"}),
		Conversation: ConversationValue("c1"),
		Seen:         func(kind string) ([]string, error) { return seen[kind], nil },
		InSeen: func(id any, kind string) (bool, error) {
			s, ok := id.(string)
			return ok && slices.Contains(seen[kind], s), nil
		},
	}
	cases := []struct {
		src       string
		rewritten bool
	}{
		{`args.number in seen("orders")`, true},
		{`args.number not in seen("orders")`, true},
		{`args.any in seen("orders")`, true},
		{`args.any not in seen("orders") || args.number in seen("cards")`, true},
		{`all(args.list, # in seen("orders"))`, true},
		{`any(args.list, {# not in seen("orders")})`, true},
		{`args.number in seen(user.tenant)`, true}, // a kind known at run time only
		{`nil in seen("orders")`, true},
		{`len(seen("orders")) > 2`, false},
		{`args.number in seen("orders")[1:]`, false},
		{`seen("orders")[0] == args.number`, false},
		{`args.number in map(seen("orders"), lower(#))`, false},
		{`"x" in seen("cards") and len(seen("cards")) == 1`, true},
		{`args.list[0] in seen(args.list[1])`, true}, // both sides may fail: the id's error first
	}
	inputs := []map[string]any{
		{"number": "A1", "any": "A2", "list": []any{"A1", "A2"}},
		{"number": "B9", "any": 1.0, "list": []any{"A1", "B9"}},
		{"number": "", "any": nil, "list": []any{}},
		{"number": "x", "any": "1", "list": []any{1.0, "1"}},
		{"number": "a1", "any": []any{"A1"}, "list": []any{nil}},
	}
	for _, c := range cases {
		t.Run(c.src, func(t *testing.T) {
			plain, err := expr.Compile(c.src, expr.Env(env), expr.AsBool())
			if err != nil {
				t.Fatal(err)
			}
			prog, err := compileIn(c.src, env, true)
			if err != nil {
				t.Fatal(err)
			}
			tree := prog.Node().String()
			if got := strings.Contains(tree, "in_seen("); got != c.rewritten {
				t.Errorf("rewritten %v, want %v: %s", got, c.rewritten, tree)
			}
			if c.rewritten && strings.Contains(tree, `in seen(`) {
				t.Errorf("a membership test is left: %s", tree)
			}
			for _, in := range inputs {
				v := values
				v.Args = in
				want, werr := expr.Run(plain, EnvAccept.Values(&v))
				got, gerr := expr.Run(prog, EnvAccept.Values(&v))
				if got != want || fmt.Sprint(gerr) != fmt.Sprint(werr) {
					t.Errorf("args %v: rewritten %v, %v; as written %v, %v", in, got, gerr, want, werr)
				}
			}
		})
	}
}

// A store that cannot answer fails the expression with the same message, pointing at
// the same place, whether the list or the single lookup failed.
func TestSeenMembershipErrorPlace(t *testing.T) {
	env := EnvAccept.Types(VarTypes{Args: types.Map{"number": types.String}, User: userType(nil)})
	down := errors.New("store down")
	v := Values{
		Args:   map[string]any{"number": "A1"},
		Seen:   func(string) ([]string, error) { return nil, down },
		InSeen: func(any, string) (bool, error) { return false, down },
	}
	for _, src := range []string{`args.number in seen("orders")`, "args.number != \"\" &&\n  args.number not in seen(\"orders\")"} {
		plain, err := expr.Compile(src, expr.Env(env), expr.AsBool())
		if err != nil {
			t.Fatal(err)
		}
		prog, err := compileIn(src, env, true)
		if err != nil {
			t.Fatal(err)
		}
		_, werr := expr.Run(plain, EnvAccept.Values(&v))
		_, gerr := expr.Run(prog, EnvAccept.Values(&v))
		if werr == nil || gerr == nil || gerr.Error() != werr.Error() || !strings.Contains(gerr.Error(), "store down") {
			t.Errorf("%s:\nrewritten  %v\nas written %v", src, gerr, werr)
		}
	}
}

// Expressions without seen are compiled once, as written.
func TestSeenMembershipOnlyWhereSeenIs(t *testing.T) {
	env := EnvCollect.Types(VarTypes{User: userType(nil)})
	prog, err := compileIn(`"seen" in result.tags`, env, false)
	if err != nil {
		t.Fatal(err)
	}
	if tree := prog.Node().String(); strings.Contains(tree, "in_seen") {
		t.Errorf("rewritten without seen: %s", tree)
	}
	if _, ok := withInSeen(env)[string(varInSeen)]; ok || !reflect.DeepEqual(withInSeen(env), env) {
		t.Errorf("in_seen added to an environment without seen")
	}
}
