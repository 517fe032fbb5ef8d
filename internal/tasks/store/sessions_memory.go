package store

import (
	"context"
	"time"
)

func (m *Memory) RememberSession(_ context.Context, id string, expires time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	now := time.Now()
	if !now.Before(expires) {
		delete(m.sessions.m, id)
		return nil
	}
	m.sessions.put(id, expires, now)
	return nil
}

func (m *Memory) SessionKnown(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false, ErrClosed
	}
	return m.sessions.has(id, time.Now()), nil
}

func (m *Memory) ForgetSession(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	delete(m.sessions.m, id)
	return nil
}
