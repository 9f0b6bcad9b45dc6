package spec

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/agentrun/agentrun/schema"
	"go.yaml.in/yaml/v3"
)

// FileKind is what a YAML file beside the agent specs holds. A directory of specs
// also holds the files the docs put there: serve.yaml, recordings, FAQ sources and
// scenario tests, which are told apart by their top-level keys, not their names.
type FileKind string

const (
	KindUnknown FileKind = ""
	KindAgent   FileKind = "agent spec"
	KindServe   FileKind = "serve config"
	KindScript  FileKind = "model script" // exec --record writes one, --model script: reads it
	KindTest    FileKind = "scenario test"
	KindFAQ     FileKind = "FAQ file"
	KindEval    FileKind = "knowledge evaluation set" // agentrun knowledge eval reads one
	// KindEvalFile is an eval file of cases graded against a real model; its
	// top-level `kind: eval` tells it apart, as it shares version with agent specs
	// and cases with scenario tests.
	KindEvalFile FileKind = "eval file"
)

// kindKeys are the keys only one kind of file has at its top, in the order they are
// tried; a file with none of them is an agent spec if it has an agent spec's key.
var kindKeys = sync.OnceValue(func() []kindKey {
	return []kindKey{
		{KindEvalFile, []string{"kind"}}, // before version, which an eval file has too
		{KindAgent, []string{"version"}},
		{KindTest, []string{"cases"}},
		{KindFAQ, []string{"faq"}},
		{KindScript, []string{"turns"}},
		{KindEval, []string{"cache", "retrieval"}},
		{KindServe, topKeys(schema.ServeJSON)},
	}
})

type kindKey struct {
	kind FileKind
	keys []string
}

// agentTopKeys are the agent schema's top-level properties.
var agentTopKeys = sync.OnceValue(func() []string { return topKeys(schema.JSON) })

// topKeys are an embedded schema's top-level properties, sorted.
func topKeys(schemaJSON []byte) []string {
	var doc struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(schemaJSON, &doc); err != nil {
		panic(err) // the embedded schemas are tested to parse
	}
	keys := make([]string, 0, len(doc.Properties))
	for k := range doc.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// KindOf tells what a YAML file holds from its top-level keys. A file that does not
// parse as a mapping is taken for an agent spec, whose loader says what is wrong;
// KindUnknown is a mapping whose keys (returned) are no kind's.
func KindOf(src []byte) (kind FileKind, keys []string) {
	var doc yaml.Node
	if yaml.Unmarshal(src, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return KindAgent, nil
	}
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		keys = append(keys, top.Content[i].Value)
	}
	for _, k := range kindKeys() {
		if slices.ContainsFunc(keys, func(key string) bool { return slices.Contains(k.keys, key) }) {
			return k.kind, keys
		}
	}
	if slices.ContainsFunc(keys, func(key string) bool { return slices.Contains(agentTopKeys(), key) }) {
		return KindAgent, keys
	}
	return KindUnknown, keys
}

// UnknownKind is the error for a file that is no kind agentrun reads, with a
// suggestion when one of its keys looks like a typo of a known one.
func (f File) UnknownKind() Diagnostic {
	known := slices.Clone(agentTopKeys())
	for _, k := range kindKeys() {
		known = append(known, k.keys...)
	}
	hint := "an agent spec starts with `version: 1` and `name: …`; serve.yaml has auth, limits…; a scenario test cases; a model script turns; an FAQ file faq; a knowledge evaluation set cache or retrieval; an eval file kind: eval"
	for _, key := range f.Keys {
		if c := Closest(key, known); c != "" {
			hint = fmt.Sprintf("did you mean %q for %q?", c, key)
			break
		}
	}
	return Diagnostic{Severity: Error, Pos: Pos{File: f.Path, Line: 1, Col: 1}, Hint: hint,
		Message: fmt.Sprintf("not an agent spec, serve config, scenario test, model script, FAQ file, knowledge evaluation set or eval file: its top-level keys are %s", strings.Join(f.Keys, ", "))}
}

// File is a YAML file that YAMLFiles found, with what it holds.
type File struct {
	Path string
	Kind FileKind
	Keys []string // its top-level keys, for UnknownKind
}

// YAMLFiles expands the arguments of validate and serve into the *.yaml and *.yml
// files they name (skipping skill packs, read through the agents that use them, and
// what FindFiles skips) and tells each one's kind by its content: KindUnknown for a
// file that is no kind, an agent spec for one that cannot be read, for the loader
// to report.
func YAMLFiles(args []string) ([]File, Diagnostics, error) {
	paths, diags, err := FindFiles(args, isYAMLFile, "agent specs (*.yaml, *.yml)")
	if err != nil {
		return nil, nil, err
	}
	var files []File
	for _, p := range paths {
		src, err := ReadFile(p, MaxFileSize)
		if err != nil {
			files = append(files, File{Path: p, Kind: KindAgent})
			continue
		}
		kind, keys := KindOf(src)
		files = append(files, File{Path: p, Kind: kind, Keys: keys})
	}
	return files, diags, nil
}

func isYAMLFile(name string) bool {
	ext := filepath.Ext(name)
	return (ext == ".yaml" || ext == ".yml") && strings.TrimSuffix(name, ext) != "skill"
}
