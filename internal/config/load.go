package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Config file locations tried after --config and $TOLLGATE_CONFIG (docs/contract.md §4).
const (
	LocalConfigFile  = "tollgate.yaml"
	SystemConfigFile = "/etc/tollgate/config.yaml"
)

// maxConfigBytes bounds how much Load reads, so pointing --config at a device or a
// huge file fails fast instead of eating memory.
const maxConfigBytes = 16 << 20

// Resolve picks the config file: the --config flag, then $TOLLGATE_CONFIG, then
// ./tollgate.yaml, then /etc/tollgate/config.yaml. A path given explicitly (flag or
// variable) must exist; it is never silently skipped. nil getenv / exists use the
// process environment and file system.
func Resolve(flagPath string, getenv func(string) string, exists func(string) bool) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if exists == nil {
		exists = func(p string) bool { _, err := os.Stat(p); return err == nil }
	}
	if flagPath != "" {
		if !exists(flagPath) {
			return "", fmt.Errorf("config file %s (from --config) does not exist", flagPath)
		}
		return flagPath, nil
	}
	if p := getenv(EnvConfig); p != "" {
		if !exists(p) {
			return "", fmt.Errorf("config file %s (from $%s) does not exist", p, EnvConfig)
		}
		return p, nil
	}
	local := "./" + LocalConfigFile
	for _, p := range []string{local, SystemConfigFile} {
		if exists(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w; tried --config (not given), $%s (not set), %s (not found), %s (not found)",
		ErrNoConfig, EnvConfig, local, SystemConfigFile)
}

// Load reads the file at path and parses it (see Parse). Config.Path is set to
// path so relative policy paths resolve against its directory.
func Load(path string, lookupEnv func(string) (string, bool)) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("read config %s: larger than %d bytes", path, maxConfigBytes)
	}
	return Parse(data, path, lookupEnv)
}

// Parse builds a Config from YAML (docs/contract.md §5.3): strict decode with
// ${VAR} / ${VAR:-default} expansion in scalar values, defaults, TOLLGATE_*
// environment overrides, then Validate. The error joins every problem found, each
// a *FieldError (see FieldErrors). path is only used to resolve relative paths and
// may be "". nil lookupEnv uses the process environment.
func Parse(data []byte, path string, lookupEnv func(string) (string, bool)) (*Config, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	root, err := parseYAML(data)
	if err != nil {
		return nil, err
	}
	m := newMeta()
	var errs []error
	expandNode(root, "", lookupEnv, m, &errs)

	c := &Config{Path: path, meta: m}
	d := &decoder{m: m}
	d.decode(root, reflect.ValueOf(c).Elem(), "", 0)
	errs = append(errs, d.errs...)
	delete(m.lines, "") // the document itself is not a key

	c.applyDefaults(m.lines)
	errs = append(errs, c.applyEnv(lookupEnv, m)...)
	for _, fe := range FieldErrors(c.Validate()) {
		errs = append(errs, fe)
	}
	errs = append(errs, c.shortTokens(lookupEnv)...)
	if len(errs) > 0 {
		sortByLine(errs)
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// parseYAML returns the single document's root node.
func parseYAML(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &FieldError{Msg: "config is empty"}
		}
		return nil, syntaxError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &FieldError{Msg: "config must be a single YAML document", Line: extra.Line}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, &FieldError{Msg: "config is empty"}
	}
	root := doc.Content[0]
	if isNull(root) {
		return nil, &FieldError{Msg: "config is empty"}
	}
	if root.Kind != yaml.MappingNode {
		return nil, &FieldError{Msg: "config must be a YAML mapping", Line: root.Line}
	}
	return root, nil
}

// syntaxError turns yaml.v3's "yaml: line N: msg" into a FieldError with Line set.
func syntaxError(err error) *FieldError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	fe := &FieldError{Msg: msg}
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, after, ok := strings.Cut(rest, ": "); ok {
			if line, err := strconv.Atoi(n); err == nil {
				fe.Line, fe.Msg = line, after
			}
		}
	}
	return fe
}

// ResolvePath resolves a path from the config (cedar policies and schema,
// tasks.store.path, audit.path) against the config file's directory. Absolute
// paths, and every path of a config parsed without a file, are returned as is.
func (c *Config) ResolvePath(p string) string {
	if p == "" || filepath.IsAbs(p) || c.Path == "" {
		return p
	}
	return filepath.Join(filepath.Dir(c.Path), p)
}

// WorkflowFor returns the approval workflow called name ("" means "default").
func (c *Config) WorkflowFor(name string) (Workflow, bool) {
	if name == "" {
		name = DefaultWorkflow
	}
	w, ok := c.Approval[name]
	return w, ok
}
