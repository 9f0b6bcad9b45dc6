//go:build unix

package kinds

import (
	"os/exec"
	"syscall"
)

// killGroupOnCancel starts the command in its own process group and kills the whole
// group on timeout or cancellation, so grandchildren do not outlive the call.
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
