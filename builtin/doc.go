// Package builtin holds the builtin tools (calculator, read_file, list_dir, write_file,
// http_get, current_time), each implementing runtime's Tool interface with a typed
// configuration decoded from the spec's `with:`. It is wired into a registry value by
// cmd; it has no init side effects and must not import cmd or skills.
package builtin
