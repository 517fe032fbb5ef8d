package store

// SetMaxKnownSessions lowers the known-session bound for a test; call the result to restore it.
func SetMaxKnownSessions(n int) func() {
	old := maxKnownSessions
	maxKnownSessions = n
	return func() { maxKnownSessions = old }
}

// SetMaxEndedSessions lowers the ended-session bounds for a test; call the result to restore them.
func SetMaxEndedSessions(perSource, total int) func() {
	oldS, oldT := maxEndedPerSource, maxEndedSessions
	maxEndedPerSource, maxEndedSessions = perSource, total
	return func() { maxEndedPerSource, maxEndedSessions = oldS, oldT }
}
