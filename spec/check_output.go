package spec

// checkOutputs checks the structured answers asked for: the agent's output and
// each intent's. A schema must be a valid JSON schema whose root is an object —
// what strict json_schema and tool-forced output take. A workflow's answer is its
// answer template, so output does not apply to it; an intent handed to an agent
// answers as that agent does (checkAgentIntents says so).
func (c *checker) checkOutputs() {
	s := c.spec
	if s.Output != nil {
		at := c.at("output")
		s.Output.Source = Source{Pos: at.pos, Path: at.path}
		if s.Workflow != nil {
			c.errorf(at.keyPos(c.file), "give the workflow's model steps a schema instead, and build the JSON in the workflow's answer",
				"output applies to the model's answer; a workflow answers with its answer template")
			return
		}
		c.checkOutput(s.Output, "output")
	}
	for i := range s.Intents {
		in := &s.Intents[i]
		if in.Output == nil || in.Agent != "" {
			continue
		}
		at := c.at("intents", in.Name, "output")
		in.Output.Source = Source{Pos: at.pos, Path: at.path}
		c.checkOutput(in.Output, "intents", in.Name, "output")
	}
	for _, in := range s.Intents {
		if in.Cache != nil && in.Agent == "" && (in.Output != nil || s.Output != nil && s.Workflow == nil) {
			c.warnf(c.at("intents", in.Name, "cache").keyPos(c.file), "remove cache, or the output",
				"intent %q answers with structured output, so its FAQ cache is not used: a stored answer need not match the schema", in.Name)
		}
	}
}

// checkOutput validates one output's schema against the JSON-schema metaschema,
// each error at its place inside the schema, and requires an object at its root.
func (c *checker) checkOutput(o *Output, path ...string) {
	path = append(path, "schema")
	at := c.at(path...)
	if at.node == nil || c.failed[at.path] {
		return
	}
	c.budget = maxJSONNodes
	value, _ := c.toJSON(at.node, at.path)
	o.Schema, _ = value.(map[string]any)
	if err := c.loader.schemas.meta.Validate(value); err != nil {
		c.schemaErrors(err, c.loader.schemas, path)
		o.Schema = nil
		return
	}
	switch typ, ok := o.Schema["type"]; {
	case !ok:
		c.errorf(at.keyPos(c.file), "add type: object, with the answer's fields under properties",
			"the output schema needs type object at its root: providers' structured output (strict json_schema, tool-forced output) takes an object")
		o.Schema = nil
	case typ != "object":
		c.errorf(c.at(append(path, "type")...), "wrap the value in an object: {type: object, properties: {value: …}, required: [value]}",
			"the output schema must have type object at its root, not %v", typ)
		o.Schema = nil
	}
}
