package redistest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// PKI is a CA made by the test, with a server certificate for 127.0.0.1 and
// localhost and a client certificate, all PEM files in a temp dir.
type PKI struct {
	CAFile, ServerCert, ServerKey, ClientCert, ClientKey string
}

// NewPKI makes a CA, signs a server and a client certificate with it, and
// writes them to t.TempDir(). Certificates are valid from an hour ago for a
// day, so clock skew never matters.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redistest CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage) (certDER, keyDER []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
			tmpl.DNSNames = []string{"localhost", "redis.test"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kd, _ := x509.MarshalECPrivateKey(key)
		return der, kd
	}
	p := &PKI{CAFile: write("ca.pem", "CERTIFICATE", caDER)}
	sc, sk := leaf(2, "redis.test", x509.ExtKeyUsageServerAuth)
	p.ServerCert, p.ServerKey = write("server.pem", "CERTIFICATE", sc), write("server.key", "EC PRIVATE KEY", sk)
	cc, ck := leaf(3, "sluice", x509.ExtKeyUsageClientAuth)
	p.ClientCert, p.ClientKey = write("client.pem", "CERTIFICATE", cc), write("client.key", "EC PRIVATE KEY", ck)
	return p
}

// ClientTLS is a TLS config that trusts the CA and presents the client
// certificate.
func (p *PKI) ClientTLS(t testing.TB) *tls.Config {
	t.Helper()
	caPEM, err := os.ReadFile(p.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(p.ClientCert, p.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
}

// TLSServer is a redis-server that listens on a TLS port only and requires
// client certificates from pki's CA.
type TLSServer struct {
	Port int
	Addr string // 127.0.0.1:port
	PKI  *PKI

	t testing.TB
}

// StartTLS runs redis-server with `--port 0 --tls-port <free>` and
// `--tls-auth-clients yes`, stopped when the test ends.
func StartTLS(t testing.TB, pki *PKI, extraArgs ...string) *TLSServer {
	t.Helper()
	s := &TLSServer{PKI: pki, t: t}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		s.Port = freePort(t)
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
		dir := t.TempDir()
		args := append([]string{
			"--port", "0", "--tls-port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
			"--tls-cert-file", pki.ServerCert, "--tls-key-file", pki.ServerKey,
			"--tls-ca-cert-file", pki.CAFile, "--tls-auth-clients", "yes",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning",
		}, extraArgs...)
		c := redis.NewClient(&redis.Options{Addr: s.Addr, TLSConfig: pki.ClientTLS(t), DialTimeout: 500 * time.Millisecond, MaxRetries: -1})
		_, err = startProc(t, dir, args, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			return c.Ping(ctx).Err()
		})
		c.Close()
		if err == nil {
			return s
		}
	}
	t.Fatalf("redis-server (TLS) would not start: %v", err)
	return nil
}

// Client returns a client over TLS with the client certificate, closed at
// test cleanup.
func (s *TLSServer) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, TLSConfig: s.PKI.ClientTLS(s.t)})
	s.t.Cleanup(func() { c.Close() })
	return c
}
