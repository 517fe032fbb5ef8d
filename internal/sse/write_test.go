package sse

import (
	"bytes"
	"strings"
	"testing"
)

// TestWriteMatchesEncode: Write produces exactly Encode's bytes, on both of its paths.
func TestWriteMatchesEncode(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":1,"result":{"text":"` + strings.Repeat("x", 3*directWrite) + `"}}`
	for _, ev := range []*Event{
		Message([]byte(`{"a":1}`)),
		Message([]byte(big)),
		{ID: "7", HasID: true, Type: "message", Retry: "100", Comments: []string{"c"}, Data: []byte(big), HasData: true},
		{Data: []byte(big + "\r\n" + big), HasData: true},
		Comment("keep-alive"),
	} {
		var w bytes.Buffer
		if _, err := Write(&w, nil, ev); err != nil {
			t.Fatal(err)
		}
		if want := Encode(nil, ev); !bytes.Equal(w.Bytes(), want) {
			t.Errorf("Write differs from Encode for %.60s…", ev.String())
		}
		got, err := NewReader(&w, 0).Next()
		if err != nil || !bytes.Equal(got.Data, ev.Data) && ev.HasData && !bytes.ContainsAny(ev.Data, "\r") {
			t.Errorf("round trip: %v", err)
		}
	}
}
