package spec

import "testing"

// TestLazySchemasCompile compiles the schemas a Loader leaves for first use: one
// that stopped compiling would otherwise surface as a puzzling diagnostic in the
// run that first needs it, not as a failure here.
func TestLazySchemasCompile(t *testing.T) {
	s, err := compileSchemas()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		schema *lazySchema
	}{
		{"skill", s.skill},
		{"test", s.test},
		{"serve", s.serve},
		{"eval", s.eval},
		{"metaschema", s.meta},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.schema.compile(); err != nil {
				t.Fatal(err)
			}
		})
	}
	if s.testDoc == nil || s.serveDoc == nil || s.evalDoc == nil {
		t.Error("compiling the test, serve or eval schema did not keep its JSON for propertiesAt")
	}
}
