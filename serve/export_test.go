package serve

// RoutePatterns are the authenticated endpoints' patterns, for the external tests.
func RoutePatterns() []string {
	var out []string
	for _, rt := range (&Server{}).routes() {
		out = append(out, rt.pattern)
	}
	return out
}
