package telemetry

import (
	"errors"
	"strings"
	"testing"
)

const (
	validTID = "4bf92f3577b34da6a3ce929d0e0e4736"
	validSID = "00f067aa0ba902b7"
)

func TestParseTraceparent(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		ok      bool
		sampled bool
	}{
		{"sampled", "00-" + validTID + "-" + validSID + "-01", true, true},
		{"not sampled", "00-" + validTID + "-" + validSID + "-00", true, false},
		{"unknown flag bits ignored", "00-" + validTID + "-" + validSID + "-09", true, true},
		{"future version, longer", "01-" + validTID + "-" + validSID + "-01-what-the-future-holds", true, true},
		{"future version, exact", "cc-" + validTID + "-" + validSID + "-00", true, false},
		{"version ff", "ff-" + validTID + "-" + validSID + "-01", false, false},
		{"version 00 too long", "00-" + validTID + "-" + validSID + "-01-x", false, false},
		{"future version, junk after flags", "01-" + validTID + "-" + validSID + "-01x", false, false},
		{"too short", "00-" + validTID + "-" + validSID + "-1", false, false},
		{"empty", "", false, false},
		{"uppercase trace id", "00-" + strings.ToUpper(validTID) + "-" + validSID + "-01", false, false},
		{"uppercase version", "0A-" + validTID + "-" + validSID + "-01", false, false},
		{"zero trace id", "00-" + strings.Repeat("0", 32) + "-" + validSID + "-01", false, false},
		{"zero span id", "00-" + validTID + "-" + strings.Repeat("0", 16) + "-01", false, false},
		{"bad separator", "00_" + validTID + "-" + validSID + "-01", false, false},
		{"non hex", "00-" + strings.Repeat("g", 32) + "-" + validSID + "-01", false, false},
		{"non hex flags", "00-" + validTID + "-" + validSID + "-zz", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseTraceparent(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("ParseTraceparent(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalidTraceparent) {
					t.Errorf("error %v does not wrap ErrInvalidTraceparent", err)
				}
				return
			}
			if p.TraceID.String() != validTID || p.SpanID.String() != validSID {
				t.Errorf("ids = %s %s", p.TraceID, p.SpanID)
			}
			if p.Sampled() != tt.sampled {
				t.Errorf("sampled = %v, want %v", p.Sampled(), tt.sampled)
			}
			flags := "00"
			if tt.sampled {
				flags = "01"
			}
			if want := "00-" + validTID + "-" + validSID + "-" + flags; p.String() != want {
				t.Errorf("String() = %q, want %q", p.String(), want)
			}
		})
	}
}

func TestParseTracestate(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"", true},
		{"rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", true},
		{"tenant@vendor=x", true},
		{"Upper=x", false},
		{"novalue", false},
		{"a=b=c", false},
	}
	for _, tt := range tests {
		if _, err := ParseTracestate(tt.in); (err == nil) != tt.ok {
			t.Errorf("ParseTracestate(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}

// FuzzParseTraceparent: never panics, and whatever parses formats back to a value that parses
// to the same ids.
func FuzzParseTraceparent(f *testing.F) {
	f.Add("00-" + validTID + "-" + validSID + "-01")
	f.Add("01-" + validTID + "-" + validSID + "-01-x")
	f.Add("ff-" + validTID + "-" + validSID + "-01")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseTraceparent(s)
		if err != nil {
			return
		}
		q, err := ParseTraceparent(p.String())
		if err != nil || q.TraceID != p.TraceID || q.SpanID != p.SpanID || q.Flags != p.Flags {
			t.Fatalf("round trip of %q: %+v, %v", s, q, err)
		}
	})
}
