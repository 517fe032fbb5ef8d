package storetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TLSRedis is a redis-server of this test's own that speaks only TLS (no plain port), with a
// certificate for 127.0.0.1 and the name "redis.test" issued by a CA made for the test, and
// that requires a client certificate from the same CA (Redis's default tls-auth-clients yes).
type TLSRedis struct {
	Addr     string // 127.0.0.1:port
	CAFile   string // PEM: the test CA
	CertFile string // PEM: a client certificate the server accepts
	KeyFile  string // its key
}

// StartTLSRedis starts a TLSRedis. Skips without redis-server (fails in CI); skips when this
// redis-server was built without TLS (it refuses tls-port), saying so.
func StartTLSRedis(t *testing.T) *TLSRedis {
	t.Helper()
	bin := NeedBinary(t, "redis-server", "redis-server")
	if !tlsBuilt(bin) {
		t.Skip("SKIPPING: this redis-server was built without TLS (it refuses tls-port); install a build with TLS (Debian's redis-server 7 has it)")
	}
	dir := t.TempDir()
	ca, caKey := newCert(t, nil, nil, "tollgate test CA", nil)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", ca.Raw)
	srv, srvKey := newCert(t, ca, caKey, "redis.test", []net.IP{net.IPv4(127, 0, 0, 1)})
	writePEM(t, filepath.Join(dir, "server.pem"), "CERTIFICATE", srv.Raw)
	writeKey(t, filepath.Join(dir, "server.key"), srvKey)
	cli, cliKey := newCert(t, ca, caKey, "tollgate", nil)
	writePEM(t, filepath.Join(dir, "client.pem"), "CERTIFICATE", cli.Raw)
	writeKey(t, filepath.Join(dir, "client.key"), cliKey)
	r := &TLSRedis{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "client.pem"), KeyFile: filepath.Join(dir, "client.key")}

	roots := x509.NewCertPool()
	roots.AddCert(ca)
	pair, err := tls.LoadX509KeyPair(r.CertFile, r.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
		_ = l.Close()
		addr := net.JoinHostPort("127.0.0.1", port)
		conf := filepath.Join(dir, "redis.conf")
		body := fmt.Sprintf("port 0\ntls-port %s\nbind 127.0.0.1\ndir %s\nsave \"\"\nappendonly no\n"+
			"tls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\n",
			port, dir, filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key"), r.CAFile)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		stop, err := startProcess(t, dir, bin, []string{conf}, func(ctx context.Context) error {
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
				TLSConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}})
			defer c.Close()
			return c.Ping(ctx).Err()
		})
		if err == nil {
			t.Cleanup(stop)
			r.Addr = addr
			return r
		}
		lastErr = err
	}
	t.Fatalf("starting redis-server with TLS: %v", lastErr)
	return nil
}

// tlsBuilt reports whether redis-server takes tls-port (a build without TLS stops with a
// FATAL CONFIG error on it; one with TLS says it listens nowhere and exits).
func tlsBuilt(bin string) bool {
	out, _ := exec.Command(bin, "--port", "0", "--tls-port", "0").CombinedOutput()
	return !strings.Contains(string(out), "FATAL CONFIG")
}

func newCert(t testing.TB, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, ips []net.IP) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  ips,
	}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	} else {
		tmpl.DNSNames = []string{cn}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func writeKey(t testing.TB, path string, key *ecdsa.PrivateKey) {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, path, "EC PRIVATE KEY", der)
}
