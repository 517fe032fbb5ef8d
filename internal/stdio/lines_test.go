package stdio

import (
	"io"
	"strings"
	"testing"
)

func TestReadLines(t *testing.T) {
	long := strings.Repeat("a", 100)
	tests := []struct {
		name, in string
		max      int
		want     []string
		tooLong  []int
	}{
		{"lf", "a\nb\n", 10, []string{"a", "b"}, nil},
		{"crlf", "a\r\nb\r\n", 10, []string{"a", "b"}, nil},
		{"no final newline", "a\nb", 10, []string{"a", "b"}, nil},
		{"blank lines", "\n\n a \n\r\n", 10, []string{" a "}, nil},
		{"exactly max", "abcd\n", 4, []string{"abcd"}, nil},
		{"over max", "abcde\nok\n", 4, []string{"ok"}, []int{5}},
		{"over max at eof", "ok\nabcde", 4, []string{"ok"}, []int{5}},
		{"over the reader buffer", long + "\n" + "x\n", 50, []string{"x"}, []int{100}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			var too []int
			err := readLines(strings.NewReader(tc.in), tc.max, func(b []byte) { got = append(got, string(b)) }, func(n int) { too = append(too, n) })
			if err != io.EOF {
				t.Fatalf("err %v", err)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(too) != len(tc.tooLong) {
				t.Fatalf("lines %q too long %v", got, too)
			}
			for i := range too {
				if too[i] != tc.tooLong[i] {
					t.Fatalf("too long %v, want %v", too, tc.tooLong)
				}
			}
		})
	}
}

// A line far past the bufio buffer (64 KiB) is dropped in pieces, never held whole.
func TestReadLinesHugeLine(t *testing.T) {
	in := strings.Repeat("y", 1<<20) + "\nafter\n"
	var got []string
	var too []int
	_ = readLines(strings.NewReader(in), 1000, func(b []byte) { got = append(got, string(b)) }, func(n int) { too = append(too, n) })
	if len(got) != 1 || got[0] != "after" || len(too) != 1 || too[0] != 1<<20 {
		t.Fatalf("got %d lines, too long %v", len(got), too)
	}
}

func FuzzReadLines(f *testing.F) {
	f.Add("a\nb\r\n\n", 3)
	f.Fuzz(func(t *testing.T, in string, max int) {
		if max < 1 || max > 1<<16 {
			return
		}
		_ = readLines(strings.NewReader(in), max, func(b []byte) {
			if len(b) > max || strings.ContainsRune(string(b), '\n') {
				t.Fatalf("line of %d bytes (max %d) or with a newline", len(b), max)
			}
		}, func(int) {})
	})
}
