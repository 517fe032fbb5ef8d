//go:build unix && !linux

package stdio

import "syscall"

func setParentDeath(*syscall.SysProcAttr) {}

// protectSelf: only Linux has /proc/<pid>/environ to guard and PR_SET_DUMPABLE.
func protectSelf() error { return nil }

// closeOnExecAll: descriptors Tollgate opens are close-on-exec everywhere (Go opens them so);
// elsewhere than Linux inherited ones are not swept.
func closeOnExecAll() error { return nil }
