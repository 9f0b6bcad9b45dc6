//go:build !unix

package kinds

import "os/exec"

func killGroupOnCancel(cmd *exec.Cmd) {}
