// Package grade holds the graders of an eval's answers (`agentrun eval`): the
// graders of an answer's text (contains, not contains, regex, equals, a JSON path
// into a structured answer), each compiled once from its configuration, and the LLM
// grader, which asks a grader model to score an answer against a rubric and reports
// the usage and cost of that call apart from the agent's.
//
// Every grader returns a Grade: passed or not, a score from 0 to 1, and a reason in
// plain English that says what was found or missing. A grader that could not grade
// (a grader model's malformed verdict) says so in the Grade, never by passing.
//
// grade imports the interface packages (runtime/model), spec and internal helpers
// only: never the engine, a model implementation or scenario, so the eval runner
// and its tests can hand it any model.
package grade
