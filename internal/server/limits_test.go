package server

import "testing"

func TestFittingConnections(t *testing.T) {
	tests := []struct {
		nofile uint64
		admin  int
		want   int
	}{
		{1024, 64, (1024 - fdReserve - 64) / 2},
		{1 << 20, 64, (1<<20 - fdReserve - 64) / 2},
		{100, 64, 1}, // never zero: the listener must serve someone
		{1 << 62, 64, (1<<30 - fdReserve - 64) / 2},
	}
	for _, tt := range tests {
		if got := fittingConnections(tt.nofile, tt.admin); got != tt.want {
			t.Errorf("fittingConnections(%d, %d) = %d, want %d", tt.nofile, tt.admin, got, tt.want)
		}
	}
}
