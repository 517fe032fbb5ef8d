//go:build unix

package stdio

import (
	"os/exec"
	"syscall"
)

type signal = syscall.Signal

const (
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

// setProcAttr puts the server in a process group of its own, so a stop reaches what it
// started (npx runs node, uvx runs python) and a terminal's Ctrl-C reaches only Tollgate,
// which then stops it in order (closing stdin first).
// With run set, the server runs as that user and group, without supplementary groups.
func setProcAttr(cmd *exec.Cmd, run *Credential) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if run != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: run.UID, Gid: run.GID, Groups: []uint32{}}
	}
	setParentDeath(cmd.SysProcAttr)
}

// signalGroup sends sig to the server's process group.
func signalGroup(cmd *exec.Cmd, sig signal) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, sig)
	}
}

// killGroup removes what is left of the group once the server itself has exited.
func killGroup(cmd *exec.Cmd) { signalGroup(cmd, syscall.SIGKILL) }
