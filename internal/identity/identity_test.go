package identity

import (
	"strings"
	"testing"
)

func TestSame(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"alice", "alice", true},
		{"alice", "Alice", true},
		{"alice", " alice ", true},
		{"alice", "ａｌｉｃｅ", true},       // full width (NFKC)
		{"alice", "alice\u200b", true}, // zero width space
		{"alice", "ali\u00adce", true}, // soft hyphen
		{"alice", "al\u2060ice", true}, // word joiner
		{"alice", "\ufeffalice", true}, // byte order mark
		{"alice", "alice\ufe0f", true}, // variation selector
		{"alice", "alıce", true},       // dotless i
		{"alice", "alicе", true},       // Cyrillic ie
		{"alice", "аlice", true},       // Cyrillic a
		{"paypal", "𝔭𝒶ỿ𝕡𝕒ℓ", true},
		{"alice", "alicia", false},
		{"alice", "bob", false},
		{"alice", "", false},
		{"", "", true},
		{"alice@example.com", "alice@example.org", false},
	}
	for _, tt := range tests {
		if got := Same(tt.a, tt.b); got != tt.want {
			t.Errorf("Same(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := Same(tt.b, tt.a); got != tt.want {
			t.Errorf("Same(%q, %q) = %v, want %v", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, ok := range []string{"alice", "Alice Smith", "alice@example.com", "ålice", "алиса", "李雷", "o'brien", ""} {
		if err := Check(ok); err != nil {
			t.Errorf("Check(%q) = %v, want nil", ok, err)
		}
	}
	for name, want := range map[string]string{
		"alice\u200b":     "U+200B",
		"ali\u00adce":     "U+00AD",
		"al\u2060ice":     "U+2060",
		"\ufeffalice":     "U+FEFF",
		"alice\ufe0f":     "U+FE0F",
		"alice\U000E0041": "U+E0041", // tag
		"\u202ealice":     "U+202E",  // right-to-left override
		"alice\u200d":     "U+200D",  // zero width joiner
		"alice\u3164":     "U+3164",  // Hangul filler
		"alice\x00":       "U+0000",
		"alice\n":         "U+000A",
		"ali\xffce":       "UTF-8",
	} {
		err := Check(name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%q) = %v, want an error naming %s", name, err, want)
		}
	}
}

func TestIsDefaultIgnorable(t *testing.T) {
	for _, r := range []rune{0x00AD, 0x034F, 0x061C, 0x115F, 0x180B, 0x180E, 0x200B, 0x200F, 0x202A, 0x2060, 0x2064, 0x2066, 0x3164, 0xFE00, 0xFE0F, 0xFEFF, 0xFFA0, 0x1D173, 0xE0001, 0xE0100, 0xE0FFF} {
		if !IsDefaultIgnorable(r) {
			t.Errorf("%U is default-ignorable", r)
		}
	}
	for _, r := range []rune{'a', ' ', 0x0600, 0xFFF9, 0x13430, 0x110BD, 0x00A0, 0x2028} {
		if IsDefaultIgnorable(r) {
			t.Errorf("%U is not default-ignorable", r)
		}
	}
}

func FuzzSame(f *testing.F) {
	f.Add("alice", "alıce")
	f.Fuzz(func(t *testing.T, a, b string) {
		if Same(a, b) != Same(b, a) {
			t.Errorf("Same(%q, %q) is not symmetric", a, b)
		}
		if !Same(a, a) {
			t.Errorf("Same(%q, itself) = false", a)
		}
	})
}
