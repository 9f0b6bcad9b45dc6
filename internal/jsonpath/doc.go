// Package jsonpath is the small subset of JSONPath that eval files and
// scenario/grade's JSON grader share: $ is the whole document, .name, ['name'] or
// ["name"] a key of an object, [N] the N-th element of an array (from 0), and .*
// or [*] every key or element. There are no filters, slices or recursive descent.
//
// A path is parsed once (Parse, whose error gives the offset of the step at fault)
// and then selects values from a document decoded by encoding/json (Select), with
// a reason saying where a path without a wildcard led nowhere.
//
// It imports only the standard library, as internal/layering asks of it.
package jsonpath
