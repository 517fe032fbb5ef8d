package store

// SetMaxKnownSessions lowers the known-session bound for a test; call the result to restore it.
func SetMaxKnownSessions(n int) func() {
	old := maxKnownSessions
	maxKnownSessions = n
	return func() { maxKnownSessions = old }
}
