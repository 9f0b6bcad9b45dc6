package unprivileged

import (
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

// Run runs f on a thread without the capabilities that let root read any
// directory (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so that chmod 000 stops it as it
// stops everyone else; CI runs the tests as root. Linux keeps capabilities per thread:
// f runs on a locked thread that ends with it, so no other goroutine is affected. f
// must not call t.Fatal. The error says why the capabilities could not be dropped.
func Run(f func()) error {
	if os.Geteuid() != 0 {
		f()
		return nil
	}
	type header struct {
		version uint32
		pid     int32
	}
	type data struct{ effective, permitted, inheritable uint32 }
	done := make(chan error)
	go func() {
		// Never unlocked: the thread is thrown away when this goroutine ends.
		runtime.LockOSThread()
		hdr := header{version: 0x20080522} // _LINUX_CAPABILITY_VERSION_3
		var caps [2]data
		if _, _, errno := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&caps[0])), 0); errno != 0 {
			done <- errno
			return
		}
		const dacOverride, dacReadSearch = 1, 2
		caps[0].effective &^= 1<<dacOverride | 1<<dacReadSearch
		if _, _, errno := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&caps[0])), 0); errno != 0 {
			done <- errno
			return
		}
		f()
		done <- nil
	}()
	return <-done
}
