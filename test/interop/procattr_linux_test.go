package interop

import "syscall"

// procAttr puts a child in its own process group (so the whole group can be signalled) and
// has the kernel kill it if the test binary dies first.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
