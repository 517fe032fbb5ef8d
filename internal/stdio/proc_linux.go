package stdio

import "syscall"

// setParentDeath has the kernel kill the server if Tollgate dies without stopping it.
func setParentDeath(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
