package spec

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/agentrun/agentrun/schema"
)

// TestSchemaMatchesTypes walks the JSON schema and the Go spec types side by side:
// every schema property must decode into a field, and every field must be a schema
// property, so the schema (the contract) and the decoder cannot drift apart.
func TestSchemaMatchesTypes(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(schema.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	w := schemaWalker{t: t, defs: doc["definitions"].(map[string]any), visited: map[string]bool{}}
	w.walk("", doc, reflect.TypeOf(Spec{}))
	w.walk("skill", w.defs["skill_pack"].(map[string]any), reflect.TypeOf(SkillPack{}))
	if w.checked < 100 {
		t.Errorf("only %d properties compared; the walk is not reaching the schema", w.checked)
	}
}

type schemaWalker struct {
	t       *testing.T
	defs    map[string]any
	visited map[string]bool
	checked int
	// external maps the references into another schema file to the Go type they
	// must decode into; that file's own walk compares their insides.
	external map[string]reflect.Type
}

var scalarTypes = map[reflect.Type]string{
	reflect.TypeOf(Expr{}):     "string",
	reflect.TypeOf(Template{}): "string",
	reflect.TypeOf(Regex{}):    "string",
	reflect.TypeOf(Duration{}): "string",
}

func (w *schemaWalker) resolve(s map[string]any) map[string]any {
	for {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		s = w.defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
	}
}

func (w *schemaWalker) walk(path string, s map[string]any, typ reflect.Type) {
	ref, _ := s["$ref"].(string)
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if ref != "" && !strings.HasPrefix(ref, "#") {
		if want, ok := w.external[ref]; !ok || want != typ {
			w.t.Errorf("%s: refers to %s, which decodes into %v, not %s", path, ref, want, typ)
		}
		return
	}
	s = w.resolve(s)
	key := path + "|" + typ.String()
	if ref != "" && typ.Kind() == reflect.Struct {
		// A definition that holds itself (a workflow step's steps) is compared once.
		if w.visited[ref+"|"+typ.String()] {
			return
		}
		w.visited[ref+"|"+typ.String()] = true
	}
	if w.visited[key] {
		return
	}
	w.visited[key] = true
	if want, ok := scalarTypes[typ]; ok {
		if s["type"] != want {
			w.t.Errorf("%s: Go type %s decodes a %s, schema says %v", path, typ, want, s["type"])
		}
		return
	}
	if branches, ok := s["oneOf"].([]any); ok { // a short form and an object form
		for _, b := range branches {
			if bs := w.resolve(b.(map[string]any)); bs["type"] == "object" {
				s = bs
			}
		}
	}
	switch typ.Kind() {
	case reflect.Struct:
		w.walkStruct(path, s, typ)
	case reflect.Slice:
		if s["type"] == "object" { // a mapping of name → element (domains, intents)
			w.walk(path+".*", s["additionalProperties"].(map[string]any), typ.Elem())
			return
		}
		items, ok := s["items"].(map[string]any)
		if !ok {
			w.t.Errorf("%s: Go type %s is a list, schema has no items", path, typ)
			return
		}
		w.walk(path+"[]", items, typ.Elem())
	case reflect.Map:
		if s["type"] != "object" {
			w.t.Errorf("%s: Go type %s is a map, schema type is %v", path, typ, s["type"])
			return
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			w.walk(path+".*", ap, typ.Elem())
		}
	case reflect.String:
		w.compareEnum(path, s, typ)
	case reflect.Int, reflect.Int64:
		if s["type"] != "integer" && s["const"] == nil {
			w.t.Errorf("%s: Go %s, schema type is %v", path, typ.Kind(), s["type"])
		}
	case reflect.Float64:
		if s["type"] != "number" {
			w.t.Errorf("%s: Go float64, schema type is %v", path, s["type"])
		}
	case reflect.Bool:
		if s["type"] != "boolean" && !slices.Contains(asList(s["type"]), any("boolean")) {
			w.t.Errorf("%s: Go bool, schema type is %v", path, s["type"])
		}
	case reflect.Interface:
		// any value: nothing to compare
	default:
		w.t.Errorf("%s: unexpected Go kind %s", path, typ.Kind())
	}
}

// vocabularies are the spec's closed vocabularies: each Go type's values must be
// exactly its schema enum.
var vocabularies = map[reflect.Type][]string{
	reflect.TypeFor[Provider]():           values(Providers),
	reflect.TypeFor[ModelAPI]():           values(ModelAPIs),
	reflect.TypeFor[ReasoningEffort]():    values(ReasoningEfforts),
	reflect.TypeFor[IntentKind]():         values(IntentKinds),
	reflect.TypeFor[MemoryLevel]():        values(MemoryLevels),
	reflect.TypeFor[Recognizer]():         values(Recognizers),
	reflect.TypeFor[StoreKind]():          values(StoreKinds),
	reflect.TypeFor[Extraction]():         values(Extractions),
	reflect.TypeFor[DuplicatePolicy]():    values(DuplicatePolicies),
	reflect.TypeFor[JudgeOnError]():       values(JudgeOnErrors),
	reflect.TypeFor[JudgeOnExhausted]():   values(JudgeOnExhausteds),
	reflect.TypeFor[FilterStage]():        stageValues(),
	reflect.TypeFor[FilterAction]():       values(FilterActions),
	reflect.TypeFor[EmbeddingsProvider](): values(EmbeddingsProviders),
	reflect.TypeFor[CacheScope]():         values(CacheScopes),
	reflect.TypeFor[CacheVerify]():        values(CacheVerifies),
	reflect.TypeFor[ApprovalOnTimeout]():  values(ApprovalOnTimeouts),
	reflect.TypeFor[StepOnError]():        values(StepOnErrors),
}

// openEnums are plain-string keys whose schema enum is not a spec vocabulary: the
// builtins come from the builtin package, and HTTP methods and option types are
// other standards' words.
var openEnums = []string{".tools[].builtin", ".tools[].http.method", "skill.tools[].builtin", "skill.tools[].http.method", "skill.options.*.type"}

func values[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

func stageValues() []string {
	var out []string
	for _, s := range FilterStages {
		out = append(out, string(s.Stage))
	}
	return out
}

func (w *schemaWalker) compareEnum(path string, s map[string]any, typ reflect.Type) {
	enum, hasEnum := s["enum"].([]any)
	want, typed := vocabularies[typ]
	switch {
	case typ == reflect.TypeFor[string]() && hasEnum && !slices.Contains(openEnums, path):
		w.t.Errorf("%s: the schema has an enum %v but the Go field is a plain string: make it a vocabulary type in vocab.go", path, enum)
	case typ == reflect.TypeFor[string]() && !hasEnum && s["type"] != "string":
		w.t.Errorf("%s: Go string, schema type is %v", path, s["type"])
	case typ != reflect.TypeFor[string]() && !typed:
		w.t.Errorf("%s: Go type %s is not listed in vocabularies", path, typ)
	case typed:
		var got []string
		for _, e := range enum {
			got = append(got, fmt.Sprint(e))
		}
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
			w.t.Errorf("%s: schema enum %v, Go vocabulary %s has %v", path, got, typ, want)
		}
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func (w *schemaWalker) walkStruct(path string, s map[string]any, typ reflect.Type) {
	props, _ := s["properties"].(map[string]any)
	// A mapping with a short form (cache: true) is typed [boolean, object].
	if s["type"] != "object" && !slices.Contains(asList(s["type"]), any("object")) || s["additionalProperties"] != false {
		w.t.Errorf("%s: schema for %s must be a closed object (additionalProperties: false)", path, typ)
	}
	fields := map[string]reflect.StructField{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if name == "-" || name == "" || !f.IsExported() {
			continue
		}
		fields[name] = f
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		w.checked++
		f, ok := fields[name]
		if !ok {
			w.t.Errorf("%s.%s: in the schema, but %s has no field for it", path, name, typ)
			continue
		}
		w.walk(path+"."+name, props[name].(map[string]any), f.Type)
	}
	for name := range fields {
		if _, ok := props[name]; !ok {
			w.t.Errorf("%s.%s: field of %s, but not in the schema", path, name, typ)
		}
	}
}
