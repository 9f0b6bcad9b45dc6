package spec

import "testing"

func TestShellCommand(t *testing.T) {
	tests := []struct {
		name string
		run  []string
		at   int
		opt  string
		bad  bool
	}{
		{name: "program", run: []string{"./lookup", "--json"}},
		{name: "sh -c", run: []string{"sh", "-c", "ls"}, at: 0, opt: "-c", bad: true},
		{name: "combined flags", run: []string{"/bin/bash", "-ec", "ls"}, at: 0, opt: "-ec", bad: true},
		{name: "through env", run: []string{"/usr/bin/env", "LANG=C", "sh", "-c", "ls"}, at: 2, opt: "-c", bad: true},
		{name: "powershell", run: []string{"pwsh", "-NoProfile", "-Command", "ls"}, at: 0, opt: "-Command", bad: true},
		{name: "cmd /C", run: []string{"cmd.exe", "/C", "dir"}, at: 0, opt: "/C", bad: true},
		{name: "cmd /k", run: []string{"cmd", "/k", "dir"}, at: 0, opt: "/k", bad: true},
		{name: "script file", run: []string{"bash", "./x.sh", "-vc"}},
		{name: "shell with options then script", run: []string{"bash", "-e", "--norc", "./x.sh", "-c"}},
		{name: "shell-named argument", run: []string{"./tool", "--lang", "sh", "-case"}},
		{name: "empty", run: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at, opt, bad := shellCommand(tt.run)
			if bad != tt.bad || at != tt.at || opt != tt.opt {
				t.Errorf("shellCommand(%q) = %d, %q, %v; want %d, %q, %v", tt.run, at, opt, bad, tt.at, tt.opt, tt.bad)
			}
		})
	}
}
