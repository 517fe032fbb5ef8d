package config

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: Parse must never panic, and a config it accepts must validate again.
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"testdata/valid/*.yaml", "testdata/bad/*.yaml", "../../config/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
	env := envMap(map[string]string{"SET": "value", "PAGES": "3", "EMPTY": ""})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "", env)
		if err != nil {
			if c != nil {
				t.Fatal("config returned with an error")
			}
			for _, fe := range FieldErrors(err) {
				_ = fe.Error()
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config fails Validate: %v", err)
		}
		_ = RestartRequired(c, c)
	})
}
