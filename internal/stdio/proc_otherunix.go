//go:build unix && !linux

package stdio

import "syscall"

func setParentDeath(*syscall.SysProcAttr) {}
