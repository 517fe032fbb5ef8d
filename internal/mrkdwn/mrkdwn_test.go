package mrkdwn

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscapeAndCode(t *testing.T) {
	if got := Escape("<@U123> & <https://evil|click>"); got != "&lt;@U123&gt; &amp; &lt;https://evil|click&gt;" {
		t.Errorf("Escape = %q", got)
	}
	if got := Code("a`b<c"); got != "a'b&lt;c" {
		t.Errorf("Code = %q", got)
	}
}

func TestTruncate(t *testing.T) {
	if got := Truncate("short", 10); got != "short" {
		t.Errorf("Truncate kept %q", got)
	}
	long := strings.Repeat("é", 100) // 2 bytes each: a cut must not split one
	got := Truncate(long, 51)
	if len(got) > 51 || !utf8.ValidString(got) || !strings.HasSuffix(got, "… (truncated)") {
		t.Errorf("Truncate = %q (%d bytes)", got, len(got))
	}
}
