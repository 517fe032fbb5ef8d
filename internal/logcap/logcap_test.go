package logcap

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	if Clip("short", 128) != "short" {
		t.Error("short strings are kept")
	}
	long := strings.Repeat("é", 100) // 200 bytes
	got := Clip(long, 5)
	if !utf8.ValidString(got) || got != "éé…(200 bytes)" {
		t.Errorf("Clip = %q", got)
	}
}

func TestHandlerClips(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewHandler(slog.NewJSONHandler(&buf, nil)))
	huge := strings.Repeat("x", 1<<20)
	log.With("name", huge).WithGroup("g").Warn(huge, "tool", huge, "error", errors.New(huge),
		slog.Group("inner", "method", huge, "detail", huge), "n", 7, "short", "kept")
	line := buf.String()
	if len(line) > 5*ValueBytes+4*NameBytes+400 {
		t.Fatalf("record of %d bytes", len(line))
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		t.Fatal(err)
	}
	want := func(got any, n int) {
		t.Helper()
		if s, _ := got.(string); s != Clip(huge, n) {
			t.Errorf("value %.40q… of %d bytes, want clipped to %d", s, len(s), n)
		}
	}
	g := rec["g"].(map[string]any)
	want(rec["msg"], ValueBytes)
	want(rec["name"], NameBytes)
	want(g["tool"], NameBytes)
	want(g["error"], ValueBytes)
	want(g["inner"].(map[string]any)["method"], NameBytes)
	want(g["inner"].(map[string]any)["detail"], ValueBytes)
	if g["n"] != 7.0 || g["short"] != "kept" {
		t.Errorf("other attributes changed: %v", g)
	}
}

func TestSampler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewSampler(time.Second, 3)
		for i := range 3 {
			if ok, held := s.Allow(); !ok || held != 0 {
				t.Fatalf("call %d: %v, %d", i, ok, held)
			}
		}
		for range 5 {
			if ok, _ := s.Allow(); ok {
				t.Fatal("allowed beyond the burst")
			}
		}
		time.Sleep(time.Second) // fake clock: one token back
		if ok, held := s.Allow(); !ok || held != 5 {
			t.Errorf("after a second: %v, suppressed %d, want true, 5", ok, held)
		}
		if ok, _ := s.Allow(); ok {
			t.Error("a second token appeared")
		}
	})
}
