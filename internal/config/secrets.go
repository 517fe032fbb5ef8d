package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// SecretEnvVars are the variables holding secrets. Each may instead be given as a file:
// <NAME>_FILE is the path of a file holding the value (a Kubernetes Secret mounted as files),
// so the secret never sits in Tollgate's environment, where every process of the same user
// can read it (/proc/<pid>/environ).
var SecretEnvVars = []string{EnvAdminToken, EnvOwnerHashKey, EnvArgumentHashKey, EnvSlackBotToken, EnvSlackSigningSecret, EnvRedisSentinelPassword}

// FileSuffix names the file variant of a secret variable.
const FileSuffix = "_FILE"

// maxSecretFileBytes bounds a secret file: a token or key, never a large file.
const maxSecretFileBytes = 64 << 10

// ReadSecretFile reads a secret from path: the contents without a trailing newline (or
// carriage return and newline). A missing, unreadable, empty or oversized file is an error
// naming path and what, never the contents; so is a value shorter than minLen.
func ReadSecretFile(path, what string, minLen int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("%s: reading %s: %w", what, path, err)
	}
	if len(b) > maxSecretFileBytes {
		return "", fmt.Errorf("%s: file %s is larger than %d bytes", what, path, maxSecretFileBytes)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if len(bytes.TrimSpace(b)) == 0 {
		return "", fmt.Errorf("%s: file %s is empty", what, path)
	}
	if len(b) < minLen {
		return "", fmt.Errorf("%s: file %s holds %d bytes; at least %d are required (e.g. openssl rand -hex 32)", what, path, len(b), minLen)
	}
	return string(b), nil
}

// minSecretBytes is the shortest value each secret variable accepts from a file.
func minSecretBytes(name string) int {
	switch name {
	case EnvAdminToken:
		return MinTokenBytes
	case EnvArgumentHashKey, EnvOwnerHashKey:
		return 32
	}
	return 1
}

// WithSecretFiles returns lookupEnv with every <NAME>_FILE of SecretEnvVars that is set read
// now and answered for NAME. Setting both NAME and NAME_FILE, or a file that is missing,
// empty or too short, is an error naming the variable and the file.
func WithSecretFiles(lookupEnv func(string) (string, bool)) (func(string) (string, bool), error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	read := map[string]string{}
	var errs []error
	for _, name := range SecretEnvVars {
		path, ok := lookupEnv(name + FileSuffix)
		if !ok || path == "" {
			continue
		}
		if v, ok := lookupEnv(name); ok && v != "" {
			errs = append(errs, fmt.Errorf("$%s and $%s are both set; set one", name, name+FileSuffix))
			continue
		}
		v, err := ReadSecretFile(path, "$"+name+FileSuffix, minSecretBytes(name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		read[name] = v
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(read) == 0 {
		return lookupEnv, nil
	}
	return func(k string) (string, bool) {
		if v, ok := read[k]; ok {
			return v, true
		}
		return lookupEnv(k)
	}, nil
}
