package tasks

import "errors"

// ErrInvalidApprover: a decision under a name with invisible code points (identity.Check).
// Configured approver names are checked at load; this guards every other way in.
var ErrInvalidApprover = errors.New("approver name refused")
