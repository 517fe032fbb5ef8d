package store

import (
	"context"
	"sort"
)

func (m *Memory) GetPin(_ context.Context, tool string) (PinRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return PinRecord{}, ErrClosed
	}
	r, ok := m.pins[tool]
	if !ok {
		return PinRecord{}, ErrNotFound
	}
	r.Data = append([]byte(nil), r.Data...)
	return r, nil
}

func (m *Memory) ListPins(_ context.Context) ([]PinRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]PinRecord, 0, len(m.pins))
	for _, r := range m.pins {
		r.Data = append([]byte(nil), r.Data...)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tool < out[j].Tool })
	return out, nil
}

func (m *Memory) PutPin(_ context.Context, rec PinRecord, expect uint64, maxPins int) (PinRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return PinRecord{}, ErrClosed
	}
	cur, ok := m.pins[rec.Tool]
	if cur.Version != expect {
		return PinRecord{}, ErrVersionConflict
	}
	if !ok && maxPins > 0 && len(m.pins) >= maxPins {
		return PinRecord{}, pinQuota(len(m.pins), maxPins)
	}
	if m.pins == nil {
		m.pins = map[string]PinRecord{}
	}
	rec.Version = expect + 1
	rec.Data = append([]byte(nil), rec.Data...)
	m.pins[rec.Tool] = rec
	return rec, nil
}

func (m *Memory) DeletePin(_ context.Context, tool string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	delete(m.pins, tool)
	return nil
}
