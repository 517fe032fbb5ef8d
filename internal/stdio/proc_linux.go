package stdio

import (
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// setParentDeath has the kernel kill the server if Tollgate dies without stopping it.
func setParentDeath(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// protectSelf keeps Tollgate's memory out of its servers' reach before the first starts: not
// dumpable, /proc/<Tollgate>/environ, mem, maps and fd are readable only with CAP_SYS_PTRACE,
// so a server running as Tollgate's own user (the usual case, without run_as) cannot read the
// approver tokens, admin token, Slack secrets or owner-hash key in Tollgate's environment or
// memory, nor ptrace it. (Root with CAP_SYS_PTRACE still can: run_as is the defence there.) A
// server's own process is dumpable again after its exec.
func protectSelf() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }

// closeOnExecAll marks every descriptor beyond 0-2 close-on-exec before a server starts, those
// Tollgate inherited from whoever started it included (Go opens its own so; an inherited one
// would reach every server): a server gets stdin, stdout and stderr only.
func closeOnExecAll() error {
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return nil
	}
	// Before Linux 5.11: mark each open descriptor.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}
